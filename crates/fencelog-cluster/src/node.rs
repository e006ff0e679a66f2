//! A cluster node: S Raft groups (one per shard) over one WAL, each with
//! its shard engine and proposer, and the write path every request takes:
//! early rejection from applied state, propose on the leader, or forward
//! to it.

use crate::holds::Holds;
use crate::ids::{NodeId, ShardId};
use crate::mutation::Switch;
use crate::raft::network::{NetFactory, SnapshotRpc};
use crate::raft::op_codec::WireOp;
use crate::raft::proposer::{leadership, Proposed, Proposer};
use crate::raft::state_machine::{shard_engine_config, ShardSm};
use crate::raft::types::{streams_of, OpResult, Raft, Snapshot, TypeConfig};
use crate::rpc::{decode, encode, RpcKind, Transport, TransportError};
use crate::shard::shard_of;
use crate::snapshot::dir::Chunk;
use crate::wal::log_store::LogStore;
use crate::wal::shard_log::locked;
use crate::wal::writer::Wal;
use fencelog_engine::{Config, DirStorage, Engine, WriteOp};
use openraft::error::{CheckIsLeaderError, InitializeError, RaftError};
use openraft::raft::{AppendEntriesRequest, VoteRequest};
use openraft::{BasicNode, SnapshotPolicy};
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Most tries of one write that found no leader ([`Node::write`]): each
/// waits for a new term or leader, so this bounds a flapping group.
pub const WRITE_TRIES_MAX: u32 = 8;

/// Why a read barrier's try failed.
enum Barrier {
    /// Nobody to ask, or the one asked no longer leads: ask again once
    /// there is a new leader.
    NoLeader(String),
    /// Asked and timed out, or the answer was unreadable.
    Failed(String),
}

/// The pause before a leader asks a quorum to confirm it again.
const READ_INDEX_RETRY: Duration = Duration::from_millis(20);

/// The leader's read index (and its applied id), asked again while a
/// quorum's heartbeats did not all answer in time (openraft waits one
/// heartbeat interval for them): on two cores busy with large reads that
/// is a slow follower, not a lost leadership, and waiting for a new leader
/// instead (as for a leader that stepped down) failed reads for 14 s with
/// a healthy cluster (measured). Bounded by `budget`; any other error is
/// returned at once. Safe to repeat: a read index changes nothing.
async fn read_index(
    raft: &Raft,
    budget: Duration,
) -> Result<ReadIndex, RaftError<NodeId, CheckIsLeaderError<NodeId, BasicNode>>> {
    let until = tokio::time::Instant::now() + budget;
    loop {
        match raft.get_read_log_id().await {
            Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_)))
                if tokio::time::Instant::now() + READ_INDEX_RETRY < until =>
            {
                tokio::time::sleep(READ_INDEX_RETRY).await;
            }
            r => return r,
        }
    }
}

/// A read index and the applied id at the time.
type ReadIndex = (
    Option<openraft::LogId<NodeId>>,
    Option<openraft::LogId<NodeId>>,
);

/// How long one snapshot RPC (send and install) may take.
pub const SNAPSHOT_TIMEOUT_MS: u64 = 60_000;

/// Raft timing and log retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Leader heartbeat; in openraft 0.9 also the AppendEntries timeout.
    pub heartbeat_ms: u64,
    /// Election timeout range.
    pub election_min_ms: u64,
    /// Election timeout range.
    pub election_max_ms: u64,
    /// A snapshot every this many applied entries.
    pub snapshot_logs: u64,
    /// Entries kept behind a snapshot for lagging followers.
    pub keep_logs: u64,
    /// Purge the log only once this many entries can go at once.
    pub purge_batch: u64,
    /// While a follower catches up by a snapshot this node sent, the
    /// shard's next snapshot waits at most until this many entries are
    /// past the last one ([`crate::raft::SnapshotPolicy`]) ...
    pub snapshot_hold_logs: u64,
    /// ... or until the shard's in-memory Raft log holds this many bytes
    /// of records.
    pub snapshot_hold_bytes: u64,
    /// Most bytes of records in one AppendEntries
    /// ([`crate::wal::APPEND_RPC_BYTES_MAX`]).
    pub append_rpc_bytes_max: u64,
}

impl Timing {
    /// Production defaults.
    pub const DEFAULT: Timing = Timing {
        heartbeat_ms: 100,
        election_min_ms: 1000,
        election_max_ms: 2000,
        snapshot_logs: 20_000,
        keep_logs: 1_000,
        purge_batch: 256,
        snapshot_hold_logs: 80_000,
        snapshot_hold_bytes: 128 << 20,
        append_rpc_bytes_max: crate::wal::log_store::APPEND_RPC_BYTES_MAX,
    };
    /// Tests: faster elections, still safe on two busy cores.
    pub const TEST: Timing = Timing {
        heartbeat_ms: 100,
        election_min_ms: 500,
        election_max_ms: 1000,
        snapshot_logs: 20_000,
        keep_logs: 1_000,
        purge_batch: 256,
        snapshot_hold_logs: 80_000,
        snapshot_hold_bytes: 128 << 20,
        append_rpc_bytes_max: crate::wal::log_store::APPEND_RPC_BYTES_MAX,
    };

    /// When a shard snapshots.
    pub fn snapshot_policy(&self) -> crate::raft::snapshot_trigger::Policy {
        crate::raft::snapshot_trigger::Policy {
            logs: self.snapshot_logs,
            keep_logs: self.keep_logs,
            hold_logs: self.snapshot_hold_logs.max(self.snapshot_logs),
            hold_bytes: self.snapshot_hold_bytes,
        }
    }

    fn raft_config(&self) -> io::Result<openraft::Config> {
        openraft::Config {
            cluster_name: "fencelog".into(),
            heartbeat_interval: self.heartbeat_ms,
            election_timeout_min: self.election_min_ms,
            election_timeout_max: self.election_max_ms,
            // `crate::raft::snapshot_trigger` builds them: it holds the next one
            // back while the last is being sent.
            snapshot_policy: SnapshotPolicy::Never,
            max_in_snapshot_log_to_keep: self.keep_logs,
            purge_batch_size: self.purge_batch,
            // A whole snapshot travels and is installed (engine stopped,
            // files synced, engine reopened) within one call: openraft's
            // 200 ms default would time it out and resend it forever.
            install_snapshot_timeout: SNAPSHOT_TIMEOUT_MS,
            ..Default::default()
        }
        .validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
    }
}

/// How to start a node.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// This node.
    pub id: NodeId,
    /// Every initial member and its address (`host:port`): the
    /// bootstrap membership of a new cluster, used only while a shard's
    /// group was never initialized (afterwards the membership is what the
    /// Raft log and the shard engine's applied marker hold). Empty for a
    /// node that joins a running cluster (`--join`): it waits, without
    /// initializing anything, to be added as a learner.
    pub members: BTreeMap<NodeId, String>,
    /// Shards (fixed at cluster creation).
    pub shards: u32,
    /// The node's data directory.
    pub data_dir: PathBuf,
    /// Raft timing.
    pub timing: Timing,
    /// The shard engines' limits (reclamation and the disk budget are
    /// off in apply: see [`crate::raft::state_machine::shard_engine_config`]).
    pub engine: Config,
    /// How long a proposal may take before its outcome is unknown.
    pub commit_timeout: Duration,
    /// Answer a write for a shard this node does not lead with 307 and the
    /// leader's address instead of forwarding it.
    pub redirect: bool,
    /// How often the rebalancer checks whether this node should lead a
    /// shard it prefers ([`crate::admin::spawn_rebalancer`]); `None` turns
    /// it off.
    pub rebalance: Option<Duration>,
    /// How often the node proposes retention trims for the shards it
    /// leads ([`crate::retention`]); `None` turns retention off.
    pub retention: Option<Duration>,
}

/// The outcome of a write at the node's door.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Decided: applied (accepted or refused by the fencing rule), or
    /// refused early from applied state.
    Decided(OpResult),
    /// Nothing was proposed (no leader, leader unreachable): 503
    /// `unavailable`, safe to retry.
    Unavailable(String),
    /// Proposed, then lost sight of: 503 `outcome_unknown`.
    Unknown(String),
}

struct Shard {
    raft: Raft,
    sm: ShardSm,
    proposer: Proposer,
    vote_clock: crate::raft::vote_clock::VoteClock,
    /// Builds the shard's snapshots; ends with the shard.
    _snapshots: crate::raft::snapshot_trigger::Trigger,
    /// The shard's snapshot transfers under way from this node.
    sends: Arc<crate::raft::snapshot_trigger::Sends>,
}

/// A running node.
pub struct Node {
    id: NodeId,
    options: NodeOptions,
    wal: Arc<Wal>,
    shards: Vec<Shard>,
    transport: Arc<dyn Transport>,
    /// A deliberate bug of the write path, read when the node starts
    /// (tests only; always `None` without the engine's `mutations`).
    mutation: Switch,
    /// Rebalancing holds ([`crate::holds`]).
    holds: Holds,
    /// Set by [`Node::shutdown`]: the periodic tasks end.
    stopping: AtomicBool,
}

fn is_not_allowed(e: &RaftError<NodeId, InitializeError<NodeId, BasicNode>>) -> bool {
    matches!(e, RaftError::APIError(InitializeError::NotAllowed(_)))
}

impl Node {
    /// Opens the WAL and every shard, starts their Raft groups, and
    /// initializes each group with `members` if it never was (the entry is
    /// identical on every initial member, so any of them may do it).
    pub async fn start(options: NodeOptions, transport: Arc<dyn Transport>) -> io::Result<Node> {
        let mutation = crate::mutation::current();
        assert!(
            options.members.is_empty() || options.members.contains_key(&options.id),
            "a node is one of the initial members, or joins"
        );
        let config = Arc::new(options.timing.raft_config()?);
        check_meta(&options)?;
        let wal = Wal::open(Arc::new(DirStorage::new(options.data_dir.join("raft"))?))?;
        let nodes: BTreeMap<NodeId, BasicNode> = options
            .members
            .iter()
            .map(|(id, addr)| (*id, BasicNode::new(addr)))
            .collect();
        let start = ShardStart {
            options: &options,
            config,
            wal: &wal,
            transport: &transport,
            nodes: &nodes,
            mutation,
        };
        let mut shards = Vec::new();
        for k in 0..options.shards {
            match start.start(k).await {
                Ok(shard) => shards.push(shard),
                Err(e) => {
                    // In a process that goes on (tests, a supervisor that
                    // retries in process), the shards already started must
                    // not keep their engines' locks and threads.
                    stop_shards(&shards).await;
                    wal.close();
                    return Err(e);
                }
            }
        }
        Ok(Node {
            id: options.id,
            mutation,
            holds: Holds::new(options.shards),
            stopping: AtomicBool::new(false),
            options,
            wal,
            shards,
            transport,
        })
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// How many shards.
    pub fn shard_count(&self) -> u32 {
        self.options.shards
    }

    /// The shard of a stream.
    pub fn shard_of(&self, stream: &str) -> ShardId {
        shard_of(stream, self.options.shards)
    }

    /// Shard `k`'s Raft group.
    pub fn raft(&self, k: ShardId) -> &Raft {
        &self.shards[k as usize].raft
    }

    /// When shard `k`'s vote last changed here.
    pub fn vote_clock(&self, k: ShardId) -> &crate::raft::vote_clock::VoteClock {
        &self.shards[k as usize].vote_clock
    }

    /// Shard `k`'s engine (its applied state).
    pub fn engine(&self, k: ShardId) -> Engine {
        self.shards[k as usize].sm.engine()
    }

    /// Snapshot transfers of shard `k` this node is making now.
    pub fn snapshot_sends(&self, k: ShardId) -> usize {
        self.shards[k as usize].sends.in_flight()
    }

    /// The node's WAL.
    pub fn wal(&self) -> &Arc<Wal> {
        &self.wal
    }

    /// How the node was started.
    pub fn options(&self) -> &NodeOptions {
        &self.options
    }

    /// The transport to the other nodes.
    pub(crate) fn transport(&self) -> &Arc<dyn Transport> {
        &self.transport
    }

    /// Shard `k`'s proposer.
    pub(crate) fn proposer(&self, k: ShardId) -> &Proposer {
        &self.shards[k as usize].proposer
    }

    /// Rebalancing holds.
    pub(crate) fn holds(&self) -> &Holds {
        &self.holds
    }

    /// Whether the node is shutting down.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Who leads shard `k`, as this node knows it.
    pub fn leader_of(&self, k: ShardId) -> Option<NodeId> {
        self.raft(k).metrics().borrow().current_leader
    }

    /// The address of a member, as shard `k`'s membership has it.
    pub fn addr_of(&self, k: ShardId, node: NodeId) -> Option<String> {
        let m = self.raft(k).metrics().borrow().membership_config.clone();
        m.membership().get_node(&node).map(|n| n.addr.clone())
    }

    /// A refusal any replica may answer at once: its applied state already
    /// holds a higher token (applied is committed, tokens never fall). The
    /// engine's own fast path on the shard engine's applied state
    /// ([`Engine::check_stale`]), so never for an idempotent producer's
    /// append: a retry of its last applied append is answered as a
    /// duplicate whatever its token, and only apply knows the producer
    /// table at the entry's place.
    fn early_refusal(&self, k: ShardId, op: &WriteOp) -> Option<OpResult> {
        let refused = self.engine(k).check_stale(op).err()?;
        OpResult::of(&Err(refused))
    }

    /// One validated op, from any client, answered as the design says:
    /// early refusal, the leader's own apply result, or forwarded.
    ///
    /// A write that was not proposed anywhere (no leader yet, the leader
    /// it was sent to had just stepped down, the leader could not be
    /// reached) waits for this node to see a new leader and goes again, for
    /// at most a commit's time plus [`Node::leader_wait`] in all and
    /// [`WRITE_TRIES_MAX`] tries: a leadership transfer or an election is
    /// then a pause, not a 503.
    /// Safe because nothing was proposed; a write that was proposed is
    /// never sent again (its outcome is unknown, and said so).
    pub async fn write(&self, op: WriteOp) -> WriteOutcome {
        let k = self.shard_of(op.stream());
        let op = &op;
        let tried = self
            .until_led(k, || async move {
                match self.write_once(k, op).await {
                    WriteOutcome::Unavailable(why) => Err(why),
                    outcome => Ok(outcome),
                }
            })
            .await;
        tried.unwrap_or_else(WriteOutcome::Unavailable)
    }

    /// Runs `once` — one try that answers `Err(why)` when it found no
    /// leader and did nothing — again each time this node sees a new
    /// leader, up to [`WRITE_TRIES_MAX`] tries. A try may itself wait (a
    /// paused proposer on a leader handing over), so the whole call is
    /// bounded: no wait lasts and no try starts past a commit's time plus
    /// one [`Node::leader_wait`]. A wait is not cut at one `leader_wait`
    /// of its own: a transfer whose first election round was lost leaves
    /// the shard leaderless for longer than that (seen: 4.85 s with
    /// `leader_wait` 2 s on a loaded host). `Err` says how often and how
    /// long.
    async fn until_led<T, Fut>(
        &self,
        k: ShardId,
        mut once: impl FnMut() -> Fut,
    ) -> Result<T, String>
    where
        Fut: std::future::Future<Output = Result<T, String>>,
    {
        let start = tokio::time::Instant::now();
        let last_try = start + self.options.commit_timeout + self.leader_wait();
        let mut tries = 1;
        loop {
            let seen = self.leader_view(k);
            let why = match once().await {
                Ok(done) => return Ok(done),
                Err(why) => why,
            };
            if tries == WRITE_TRIES_MAX || !self.new_leader_seen(k, seen, last_try).await {
                return Err(format!(
                    "{why} (tried {tries} times in {} ms, waiting for a leader in between)",
                    start.elapsed().as_millis()
                ));
            }
            tries += 1;
        }
    }

    /// How long a write that found no leader waits for one: an election
    /// (or a transfer's handover, which waits out the old leader's vote
    /// lease) takes up to about two election timeouts; never longer than
    /// a commit may take.
    pub fn leader_wait(&self) -> Duration {
        let election = Duration::from_millis(2 * self.options.timing.election_max_ms);
        election.min(self.options.commit_timeout)
    }

    /// Shard `k`'s term and leader, as this node knows them.
    fn leader_view(&self, k: ShardId) -> (u64, Option<NodeId>) {
        let m = self.raft(k).metrics();
        let m = m.borrow();
        (m.current_term, m.current_leader)
    }

    /// Waits until this node knows a leader of shard `k` other than in
    /// `seen` (a new term or a new leader); false at `deadline`.
    async fn new_leader_seen(
        &self,
        k: ShardId,
        seen: (u64, Option<NodeId>),
        deadline: tokio::time::Instant,
    ) -> bool {
        let mut metrics = self.raft(k).metrics();
        loop {
            let now = {
                let m = metrics.borrow_and_update();
                (m.current_term, m.current_leader)
            };
            if now.1.is_some() && now != seen {
                return true;
            }
            match tokio::time::timeout_at(deadline, metrics.changed()).await {
                Ok(Ok(())) => continue,
                // The deadline, or the Raft group shut down.
                Ok(Err(_)) | Err(_) => return false,
            }
        }
    }

    /// One try of [`Node::write`].
    async fn write_once(&self, k: ShardId, op: &WriteOp) -> WriteOutcome {
        if let Some(r) = self.early_refusal(k, op) {
            return WriteOutcome::Decided(r);
        }
        let leader = match leadership(self.raft(k), self.id) {
            Ok(()) => {
                if let Some(r) = self.over_budget(op) {
                    return WriteOutcome::Decided(r);
                }
                match self.shards[k as usize].proposer.propose(op.clone()).await {
                    Proposed::NotLeader(hint) => hint,
                    p => return outcome_of(p),
                }
            }
            Err(hint) => hint,
        };
        match leader {
            Some(l) => self.forward(k, l, op).await,
            None => WriteOutcome::Unavailable(format!("shard {k} has no leader")),
        }
    }

    async fn forward(&self, k: ShardId, leader: NodeId, op: &WriteOp) -> WriteOutcome {
        let Some(addr) = self.addr_of(k, leader) else {
            return WriteOutcome::Unavailable(format!("no address for node {leader}"));
        };
        let timeout = self.options.commit_timeout + Duration::from_secs(1);
        let call = self.transport.call(
            leader,
            &addr,
            k,
            RpcKind::Forward,
            encode(&crate::raft::op_codec::wire(op)),
            timeout,
        );
        match call.await {
            Ok(bytes) => match decode::<Proposed>(&bytes) {
                Ok(Proposed::NotLeader(_)) => {
                    WriteOutcome::Unavailable(format!("node {leader} no longer leads shard {k}"))
                }
                Ok(p) => outcome_of(p),
                Err(e) => WriteOutcome::Unknown(format!("forwarded to node {leader}: {e}")),
            },
            Err(TransportError::Unreachable(m)) => WriteOutcome::Unavailable(m),
            Err(TransportError::Lost(m)) => {
                WriteOutcome::Unknown(format!("forwarded to node {leader}: {m}"))
            }
        }
    }

    /// Waits until this node's shard `k` has applied everything committed
    /// before the call (a read-index through the leader, never a lease).
    ///
    /// Like a write, a barrier that found no leader to ask (none known,
    /// the one asked no longer leads, it could not be reached) waits for
    /// a new one and asks again (the same bounds as a write's, at most
    /// [`WRITE_TRIES_MAX`] tries): a read index changes nothing, so asking
    /// again is always safe. One that timed out is not asked again.
    pub async fn read_barrier(&self, k: ShardId) -> Result<(), String> {
        let tried = self
            .until_led(k, || async move {
                match self.read_barrier_once(k).await {
                    Ok(()) => Ok(Ok(())),
                    Err(Barrier::Failed(m)) => Ok(Err(m)),
                    Err(Barrier::NoLeader(why)) => Err(why),
                }
            })
            .await;
        tried.and_then(|r| r)
    }

    /// One try of [`Node::read_barrier`].
    async fn read_barrier_once(&self, k: ShardId) -> Result<(), Barrier> {
        let raft = self.raft(k);
        if leadership(raft, self.id).is_ok() {
            // A leader deposed meanwhile is answered ForwardToLeader: ask
            // the new one.
            let timeout = self.options.commit_timeout;
            let (read, applied) = read_index(raft, timeout)
                .await
                .map_err(|e| Barrier::NoLeader(e.to_string()))?;
            if read.map(|l| l.index) > applied.map(|l| l.index) {
                let at = read.map(|l| l.index);
                raft.wait(Some(timeout))
                    .applied_index_at_least(at, "read barrier")
                    .await
                    .map_err(|e| Barrier::Failed(e.to_string()))?;
            }
            return Ok(());
        }
        let no_leader = || Barrier::NoLeader(format!("shard {k} has no leader"));
        let leader = self.leader_of(k).ok_or_else(no_leader)?;
        let addr = self
            .addr_of(k, leader)
            .ok_or_else(|| Barrier::NoLeader(format!("no address for node {leader}")))?;
        let timeout = self.options.commit_timeout;
        let call = self
            .transport
            .call(leader, &addr, k, RpcKind::ReadIndex, encode(&()), timeout);
        let bytes = call.await.map_err(|e| match e {
            TransportError::Unreachable(m) => Barrier::NoLeader(m),
            TransportError::Lost(m) => Barrier::Failed(m),
        })?;
        let index: Result<Option<u64>, String> = decode(&bytes).map_err(Barrier::Failed)?;
        // The node asked answers Err when it no longer leads.
        let index = index.map_err(|m| Barrier::NoLeader(format!("node {leader}: {m}")))?;
        if let Some(i) = index {
            raft.wait(Some(timeout))
                .applied_index_at_least(Some(i), "read barrier")
                .await
                .map_err(|e| Barrier::Failed(e.to_string()))?;
        }
        Ok(())
    }

    /// `Err` for a shard this node does not have (a peer's RPC names it).
    pub(crate) fn shard_in_range(&self, k: ShardId) -> Result<(), String> {
        if k >= self.options.shards {
            return Err(format!("shard {k} out of range"));
        }
        Ok(())
    }

    /// Answers a peer's Raft RPC for shard `k` (the bytes of
    /// [`crate::rpc`]): every kind but `member`, which the admin side
    /// answers ([`crate::peer::answer`] hands each kind to its side).
    pub(crate) async fn handle_rpc(
        &self,
        k: ShardId,
        kind: RpcKind,
        body: &[u8],
    ) -> Result<Vec<u8>, String> {
        self.shard_in_range(k)?;
        let raft = self.raft(k);
        Ok(match kind {
            RpcKind::Append => {
                let req: AppendEntriesRequest<TypeConfig> = decode(body)?;
                encode(&raft.append_entries(req).await)
            }
            RpcKind::Vote => {
                let req: VoteRequest<NodeId> = decode(body)?;
                encode(&raft.vote(req).await)
            }
            RpcKind::SnapshotChunk => {
                let chunk = Chunk::from_wire(body)?;
                let sm = self.shards[k as usize].sm.clone();
                let written = tokio::task::spawn_blocking(move || sm.receive_chunk(&chunk))
                    .await
                    .map_err(|e| e.to_string())?;
                encode(&written.map_err(|e| e.to_string()))
            }
            RpcKind::SnapshotResume => {
                let ask: crate::raft::network::ResumeAsk = decode(body)?;
                let sm = self.shards[k as usize].sm.clone();
                let files = tokio::task::spawn_blocking(move || {
                    sm.received_so_far(ask.from, &ask.snapshot_id)
                })
                .await
                .map_err(|e| e.to_string())?;
                encode(&files.map_err(|e| e.to_string()))
            }
            RpcKind::Snapshot => {
                let (vote, meta, manifest): SnapshotRpc = decode(body)?;
                let data = self.shards[k as usize]
                    .sm
                    .received(&meta.snapshot_id, &manifest)
                    .map_err(|e| e.to_string())?;
                let snapshot = Snapshot {
                    meta,
                    snapshot: Box::new(data),
                };
                encode(&raft.install_full_snapshot(vote, snapshot).await)
            }
            RpcKind::Forward => {
                let WireOp(op) = decode(body)?;
                encode(&self.handle_forward(k, op).await)
            }
            RpcKind::Member => return Err("the member RPC is the admin side's".into()),
            RpcKind::ReadIndex => {
                let r = match leadership(raft, self.id) {
                    // Within half the asker's budget (its call times out
                    // after a commit's time), so a late index still helps.
                    Ok(()) => read_index(raft, self.options.commit_timeout / 2)
                        .await
                        .map(|(read, _)| read.map(|l| l.index)),
                    Err(_) => {
                        return Ok(encode(&Err::<Option<u64>, _>("not the leader".to_string())))
                    }
                };
                encode(&r.map_err(|e| e.to_string()))
            }
        })
    }

    /// Queues `op` (validated, of shard `k`) of the append session behind
    /// `gate` on this node's proposer, in the order of the calls: only on
    /// the shard's leader (an append session is served there; forwarded
    /// ops on separate connections would have no order). No early refusal:
    /// a session's every op is decided in apply, in its order.
    pub fn enqueue_session_op(
        &self,
        k: ShardId,
        op: WriteOp,
        gate: crate::raft::proposer::SessionGate,
    ) -> Result<tokio::sync::oneshot::Receiver<Proposed>, Proposed> {
        let proposer = &self.shards[k as usize].proposer;
        if let Err(hint) = leadership(self.raft(k), self.id) {
            proposer.close(&gate);
            return Err(Proposed::NotLeader(hint));
        }
        // Decided, as a stale token is: the session goes on (a single
        // node's session answers the budget the same way).
        if let Some(r) = self.over_budget(&op) {
            return Err(Proposed::Applied(r));
        }
        proposer.enqueue(op, gate)
    }

    async fn handle_forward(&self, k: ShardId, op: WriteOp) -> Proposed {
        if let Some(s) = streams_of(&op).into_iter().find(|s| self.shard_of(s) != k) {
            return Proposed::Applied(OpResult::Invalid(format!("{s} is not in shard {k}")));
        }
        if let Some(r) = self.early_refusal(k, &op) {
            return Proposed::Applied(r);
        }
        match leadership(self.raft(k), self.id) {
            Ok(()) => match self.over_budget(&op) {
                Some(r) => Proposed::Applied(r),
                None => self.shards[k as usize].proposer.propose(op).await,
            },
            Err(hint) => Proposed::NotLeader(hint),
        }
    }

    /// The refusal of an append past the node's disk budget, checked by
    /// the leader before it proposes ([`crate::disk_budget`]).
    fn over_budget(&self, op: &WriteOp) -> Option<OpResult> {
        if mutated!(self.mutation, ClusterBudgetIgnored) {
            return None;
        }
        let limit = self.options.engine.data_bytes_max;
        let refused =
            crate::disk_budget::refusal(limit, || self.data_bytes(), || self.writes(op), op);
        if refused.is_some() {
            // Counted where the single node counts it, by shard.
            let m = self.engine(self.shard_of(op.stream()));
            m.metrics().budget_rejections.inc();
        }
        refused
    }

    /// Whether the fencing rule would let `op` write records under the
    /// shard's applied state now (a batch: always, it is refused whole).
    fn writes(&self, op: &WriteOp) -> bool {
        match op {
            WriteOp::Append {
                stream,
                token,
                options,
                ..
            } => {
                let producer = options.producer.as_ref().map(|p| (p.id.as_str(), p.seq));
                let engine = self.engine(self.shard_of(stream));
                engine.append_would_write(stream, *token, options.match_seq_num, producer)
            }
            _ => true,
        }
    }

    /// Bytes of this node's shard engines' files, as the disk budget
    /// counts them ([`crate::disk_budget`]).
    pub fn data_bytes(&self) -> u64 {
        (0..self.shard_count())
            .map(|k| self.engine(k).disk_bytes())
            .sum()
    }

    /// Stops every group, then every engine, then the WAL.
    pub async fn shutdown(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        stop_shards(&self.shards).await;
        self.wal.close();
    }
}

/// Stops every group, then every engine.
async fn stop_shards(shards: &[Shard]) {
    for s in shards {
        let _ = s.raft.shutdown().await;
    }
    for s in shards {
        s.sm.shutdown().await;
    }
}

/// What starting each shard of a node shares.
struct ShardStart<'a> {
    options: &'a NodeOptions,
    config: Arc<openraft::Config>,
    wal: &'a Arc<Wal>,
    transport: &'a Arc<dyn Transport>,
    nodes: &'a BTreeMap<NodeId, BasicNode>,
    mutation: Switch,
}

impl ShardStart<'_> {
    /// Opens shard `k`'s engine and starts its group; a failure stops
    /// what it had started.
    async fn start(&self, k: ShardId) -> io::Result<Shard> {
        let root = self
            .options
            .data_dir
            .join("shards")
            .join(format!("shard-{k:03}"));
        let sm = ShardSm::open(&root, shard_engine_config(&self.options.engine))?;
        if let Err(e) = check_applied_reaches_log(k, &sm, self.wal) {
            sm.shutdown().await;
            return Err(e);
        }
        if !mutated!(self.mutation, LeaderResumesOwnVote) {
            let shard_log = self.wal.shard(k);
            let mut shard_log = locked(&shard_log);
            shard_log.vote = crate::raft::restart_vote::on_start(shard_log.vote, self.options.id);
        }
        let append_bytes_max = if mutated!(self.mutation, AppendRpcUnbounded) {
            u64::MAX
        } else {
            self.options.timing.append_rpc_bytes_max
        };
        let log = LogStore::new(self.wal.clone(), k).with_append_bytes_max(append_bytes_max);
        let sends = Arc::new(crate::raft::snapshot_trigger::Sends::default());
        let net = NetFactory {
            transport: self.transport.clone(),
            shard: k,
            from: self.options.id,
            sends: sends.clone(),
        };
        let raft = match Raft::new(self.options.id, self.config.clone(), net, log, sm.clone()).await
        {
            Ok(raft) => raft,
            Err(e) => {
                sm.shutdown().await;
                return Err(io::Error::other(e.to_string()));
            }
        };
        if let Err(e) = self.initialize(&raft).await {
            let _ = raft.shutdown().await;
            sm.shutdown().await;
            return Err(e);
        }
        let proposer = Proposer::spawn(raft.clone(), self.options.id, self.options.commit_timeout);
        let vote_clock = crate::raft::vote_clock::VoteClock::watch(&raft);
        let shard_log = self.wal.shard(k);
        let snapshots = crate::raft::snapshot_trigger::spawn(
            raft.clone(),
            move || locked(&shard_log).bytes(),
            sends.clone(),
            self.options.timing.snapshot_policy(),
            mutated!(self.mutation, SnapshotHoldIgnored),
        );
        Ok(Shard {
            raft,
            sm,
            proposer,
            vote_clock,
            _snapshots: snapshots,
            sends,
        })
    }

    /// Initializes the group with the initial members if it never was (a
    /// joining node has none and waits to be added).
    async fn initialize(&self, raft: &Raft) -> io::Result<()> {
        if self.nodes.is_empty() || raft.is_initialized().await.map_err(io::Error::other)? {
            return Ok(());
        }
        match raft.initialize(self.nodes.clone()).await {
            Err(e) if !is_not_allowed(&e) => Err(io::Error::other(e.to_string())),
            _ => Ok(()),
        }
    }
}

/// `cluster.meta`: written once at the first start (node id and S), and
/// checked at every later one — S must never change, since streams would
/// move between shards.
fn check_meta(options: &NodeOptions) -> io::Result<()> {
    let want = format!(
        "fencelog-cluster 1\nnode_id {}\nshards {}\n",
        options.id, options.shards
    );
    std::fs::create_dir_all(&options.data_dir)?;
    match std::fs::read_to_string(options.data_dir.join(META_FILE)) {
        Ok(have) if have == want => Ok(()),
        Ok(have) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{META_FILE} says {have:?}, this start says {want:?}: node id and shards are fixed at cluster creation"),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            crate::snapshot::shard_dir::write_durably(&options.data_dir, META_FILE, want.as_bytes())
        }
        Err(e) => Err(e),
    }
}

/// The node's identity file in its data directory.
pub const META_FILE: &str = "cluster.meta";

fn outcome_of(p: Proposed) -> WriteOutcome {
    match p {
        Proposed::Applied(r) => WriteOutcome::Decided(r),
        Proposed::NotLeader(_) => WriteOutcome::Unavailable("not the leader".into()),
        Proposed::Unknown(m) => WriteOutcome::Unknown(m),
        Proposed::NotProposed(m) => WriteOutcome::Unavailable(m),
    }
}

/// Runs `pass` for every shard, every `every`, while `node` lives and is
/// not stopping (the rebalancer's and the retention proposer's loop).
pub(crate) fn every_shard_periodically<F, Fut>(node: &Arc<Node>, every: Duration, pass: F)
where
    F: Fn(Arc<Node>, ShardId) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let weak = Arc::downgrade(node);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(node) = weak.upgrade() else { return };
            if node.stopping() {
                return;
            }
            for k in 0..node.shard_count() {
                pass(node.clone(), k).await;
            }
        }
    });
}

/// Refuses to start a shard whose recovered applied position is below the
/// last entry its Raft log purged: the entries between are gone from both,
/// so the shard cannot catch up by applying them again. A flush precedes
/// every snapshot, and openraft purges only what a snapshot covers, so
/// this means the disk lost synced data (or files were mixed by hand).
fn check_applied_reaches_log(shard: ShardId, sm: &ShardSm, wal: &Wal) -> io::Result<()> {
    let applied = sm.engine().applied().map_or(0, |a| a.index);
    let purged = locked(&wal.shard(shard)).last_purged;
    match purged {
        Some(p) if p.index > applied => Err(io::Error::other(format!(
            "shard {shard}: its state holds entries up to index {applied}, but its Raft log \
             starts after index {}: the entries between are gone; remove this node's data \
             directory and add it to the cluster again",
            p.index
        ))),
        _ => Ok(()),
    }
}
