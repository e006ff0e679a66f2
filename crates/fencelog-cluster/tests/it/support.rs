//! An in-process cluster: real nodes (WAL, shard engines, openraft) in
//! temp directories, joined by the in-process router. Every wait polls
//! with a deadline.

use fencelog_cluster::node::{Node, NodeOptions, Timing, WriteOutcome};
use fencelog_cluster::peer::Router;
use fencelog_cluster::raft::OpResult;
use fencelog_cluster::{NodeId, ShardId};
use fencelog_engine::{ProducerSeq, WriteOp};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// How long any wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(30);

pub struct TestCluster {
    pub router: Arc<Router>,
    pub dir: TempDir,
    pub members: BTreeMap<NodeId, String>,
    pub shards: u32,
    pub timing: Timing,
    /// The nodes' engine limits (small segments for reclamation tests).
    pub engine: fencelog_engine::Config,
}

/// Polls `check` until it answers `Some`, or panics naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(t) = check().await {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn append(stream: &str, token: u64, body: &str) -> WriteOp {
    WriteOp::Append {
        stream: stream.into(),
        token,
        records: vec![bytes::Bytes::copy_from_slice(body.as_bytes())],
        headers: vec![],
        options: Default::default(),
    }
}

/// An idempotent producer's append: producer `w-1`, seq `seq`.
pub fn producer_append(stream: &str, token: u64, seq: u64, body: &str) -> WriteOp {
    let mut op = append(stream, token, body);
    if let WriteOp::Append { options, .. } = &mut op {
        options.producer = Some(ProducerSeq {
            id: "w-1".into(),
            seq,
        });
    }
    op
}

pub fn fence(stream: &str, token: u64) -> WriteOp {
    WriteOp::Fence {
        stream: stream.into(),
        token,
        not_after_ms: None,
    }
}

/// A record as every replica must hold it: (seq, token, timestamp, body).
pub type Rec = (u64, u64, u64, Vec<u8>);

impl TestCluster {
    pub async fn start(n: u64, shards: u32) -> TestCluster {
        Self::start_with(n, shards, Timing::TEST).await
    }

    pub async fn start_with(n: u64, shards: u32, timing: Timing) -> TestCluster {
        Self::start_with_engine(n, shards, timing, fencelog_engine::Config::default()).await
    }

    pub async fn start_with_engine(
        n: u64,
        shards: u32,
        timing: Timing,
        engine: fencelog_engine::Config,
    ) -> TestCluster {
        Self::start_in(TempDir::new().unwrap(), n, shards, timing, engine).await
    }

    /// Starts nodes 1..=n on the data directories `dir/node-{id}` already
    /// holds (empty ones are created).
    pub async fn start_in(
        dir: TempDir,
        n: u64,
        shards: u32,
        timing: Timing,
        engine: fencelog_engine::Config,
    ) -> TestCluster {
        let members = (1..=n).map(|i| (i, format!("node-{i}"))).collect();
        let c = TestCluster {
            router: Router::new(),
            dir,
            members,
            shards,
            timing,
            engine,
        };
        for id in 1..=n {
            c.boot(id).await;
        }
        c
    }

    pub fn data_dir(&self, id: NodeId) -> PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    pub async fn boot(&self, id: NodeId) -> Arc<Node> {
        self.try_boot(id).await.unwrap()
    }

    /// Starts node `id` on its data directory, or says why it would not.
    pub async fn try_boot(&self, id: NodeId) -> std::io::Result<Arc<Node>> {
        let options = NodeOptions {
            id,
            members: self.members.clone(),
            shards: self.shards,
            data_dir: self.data_dir(id),
            timing: self.timing,
            engine: self.engine.clone(),
            commit_timeout: Duration::from_secs(10),
            redirect: false,
            rebalance: None,
            retention: None,
        };
        let node = Arc::new(Node::start(options, self.router.port(id)).await?);
        self.router.register(node.clone());
        Ok(node)
    }

    /// Stops node `id`; a shutdown that does not finish within [`WAIT`]
    /// fails the test with every shard's Raft metrics, rather than hang
    /// it (seen once in ~25 runs of the snapshot tests under three times
    /// CI's load, while a leader was sending a snapshot).
    pub async fn stop(&self, id: NodeId) {
        let node = self.router.unregister(id).expect("node is up");
        let shards = |node: &Node| {
            (0..self.shards)
                .map(|k| format!("{:?}", node.raft(k).metrics().borrow()))
                .collect::<Vec<String>>()
        };
        let before = shards(&node);
        if tokio::time::timeout(WAIT, node.shutdown()).await.is_err() {
            panic!(
                "node {id} did not shut down in {WAIT:?}\nbefore: {before:#?}\nnow: {:#?}",
                shards(&node)
            );
        }
    }

    pub fn node(&self, id: NodeId) -> Arc<Node> {
        self.router.node(id).expect("node is up")
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.members.keys().copied().collect()
    }

    /// The leader of shard `k` that every running node in `among` agrees on.
    pub async fn leader(&self, k: ShardId, among: &[NodeId]) -> NodeId {
        eventually(
            &format!("a leader of shard {k} among {among:?}"),
            || async {
                let seen: Vec<Option<NodeId>> =
                    among.iter().map(|i| self.node(*i).leader_of(k)).collect();
                let l = seen[0]?;
                let leads = among.contains(&l)
                    && self.node(l).raft(k).metrics().borrow().state
                        == openraft::ServerState::Leader;
                (leads && seen.iter().all(|s| *s == Some(l))).then_some(l)
            },
        )
        .await
    }

    pub async fn write(&self, via: NodeId, op: WriteOp) -> WriteOutcome {
        self.node(via).write(op).await
    }

    /// Every record of `stream` in node `id`'s applied state.
    pub fn records(&self, id: NodeId, stream: &str) -> Vec<Rec> {
        let node = self.node(id);
        let engine = node.engine(node.shard_of(stream));
        // From the first readable seq: a trimmed stream's start is gone.
        let first_seq = engine.state(stream).map_or(0, |s| s.first_seq);
        let Ok(batch) = engine.read(stream, first_seq, 100_000, 1 << 30) else {
            return Vec::new();
        };
        batch
            .records
            .iter()
            .map(|r| (r.seq, r.fencing_token, r.timestamp_ms, r.body.to_vec()))
            .collect()
    }

    /// Waits until every node in `among` has applied the same entry of
    /// shard `k`, at least the leader's last log index.
    pub async fn converged(&self, k: ShardId, among: &[NodeId]) -> u64 {
        let leader = self.leader(k, among).await;
        let last = self.node(leader).raft(k).metrics().borrow().last_log_index;
        eventually(&format!("shard {k} applied alike on {among:?}"), || async {
            let applied: Vec<Option<u64>> = among
                .iter()
                .map(|i| self.node(*i).engine(k).applied().map(|a| a.index))
                .collect();
            let first = applied[0]?;
            (first >= last.unwrap_or(0) && applied.iter().all(|a| *a == Some(first)))
                .then_some(first)
        })
        .await
    }
}

/// Appends `body` to `stream` as producer seq `seq` through any node of `via`
/// until it is decided. With one node down, a starved heartbeat can cost
/// the leader its term mid-loop (this was the flake: a write answered
/// "unavailable" or "unknown" failed the test); a retry of an append that
/// did land is answered as the producer's duplicate, so nothing is
/// written twice.
pub async fn append_surely(c: &TestCluster, via: &[NodeId], stream: &str, seq: u64, body: &str) {
    eventually(&format!("append {seq} decided"), || async {
        for id in via {
            match c.write(*id, producer_append(stream, 1, seq, body)).await {
                WriteOutcome::Decided(OpResult::Appended { .. }) => return Some(()),
                WriteOutcome::Decided(r) => panic!("append {seq}: {r:?}"),
                WriteOutcome::Unavailable(_) | WriteOutcome::Unknown(_) => {}
            }
        }
        None
    })
    .await
}

/// A deliberate bug: the engine's (a shard engine's) or the cluster's own.
#[derive(Debug, Clone, Copy)]
pub enum Deliberate {
    Engine(fencelog_engine::Mutation),
    Cluster(fencelog_cluster::Mutation),
}

impl From<fencelog_engine::Mutation> for Deliberate {
    fn from(m: fencelog_engine::Mutation) -> Self {
        Deliberate::Engine(m)
    }
}

impl From<fencelog_cluster::Mutation> for Deliberate {
    fn from(m: fencelog_cluster::Mutation) -> Self {
        Deliberate::Cluster(m)
    }
}

impl Deliberate {
    /// Switches it on for the calling thread.
    fn switch_on(self) {
        match self {
            Deliberate::Engine(m) => fencelog_engine::set_mutation(m),
            Deliberate::Cluster(m) => fencelog_cluster::set_mutation(m),
        }
    }
}

/// Runs `test` with the deliberate bug `m` on, on a thread and runtime of
/// its own (the switch is per thread, and nodes read it when they start).
fn run_under<F: std::future::Future<Output = ()> + 'static>(
    m: Deliberate,
    test: fn() -> F,
) -> std::thread::Result<()> {
    std::thread::spawn(move || {
        m.switch_on();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(test());
    })
    .join()
}

/// Runs `test` with the deliberate bug `m` on ([`run_under`]): the test
/// must fail under it, with a message that holds `expected`, so the bug
/// is caught for the reason the test states and not by another panic.
pub fn fails_under_with<F: std::future::Future<Output = ()> + 'static>(
    m: impl Into<Deliberate>,
    test: fn() -> F,
    expected: &'static str,
) {
    let m = m.into();
    let Err(payload) = run_under(m, test) else {
        panic!("{m:?} was not caught");
    };
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        message.contains(expected),
        "{m:?} failed, but with {message:?}"
    );
}

/// Copies the directory tree `from` to `to`.
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
