//! Proposal batching for one shard on its leader. This task takes every
//! waiting op (up to the bounds below), proposes them as one entry, and
//! hands each op its own apply result. One entry is in flight per shard:
//! the cost of an entry (a WAL record and fsync on every node, an RPC per
//! follower, an apply round trip on every node) is far above an op's, so
//! the cluster's throughput is its ops per entry.
//!
//! The clients an entry answered usually send again within a millisecond,
//! just after the next entry has left without them. Left alone, a shard's
//! clients split into two cohorts that each wait two rounds per append
//! (measured: ~4 ops per entry for 8 clients per shard). So, like the
//! engine's writer, the proposer lingers: it waits for the ops the last
//! entry answered to come back, on top of those that were already
//! waiting, at most a quarter of the last round and never past
//! [`LINGER_MAX`] (see [`gather`]). Pipelining entries
//! instead (several in flight through `client_write_ff`) was measured
//! and lost: more, smaller entries, each paying the full cost.
//!
//! Outcome rules (the 0.9 pitfall: `ForwardToLeader` may also mean
//! "truncated after it was proposed"): leadership is checked *before*
//! proposing, and a refusal then is definite (nothing proposed). Once
//! `client_write` is called, `Ok` is the apply result and any error — or
//! the timeout — is "outcome unknown", never retried here.

use super::types::{Batch, OpResult, Raft};
use crate::ids::NodeId;
use fencelog_engine::{BatchAction, WriteOp};
use openraft::ServerState;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Most ops in one entry (the engine's group bound).
pub const BATCH_OPS_MAX: usize = 4096;
/// Most record bytes in one entry.
pub const BATCH_BYTES_MAX: usize = 8 << 20;
/// Most ops waiting for the proposer.
pub const QUEUE_OPS_MAX: usize = 16 * 1024;
/// Why an op of an append session was not proposed.
pub const SESSION_BROKEN: &str =
    "not proposed: an earlier append of this session was not applied (see its answer)";
/// Longest the proposer waits for the ops the last entry answered to come
/// back (see the module comment).
pub const LINGER_MAX: Duration = Duration::from_millis(2);

/// What became of a proposed op (also the answer to a forwarded op).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Proposed {
    /// Committed and applied: the leader's own apply result.
    Applied(OpResult),
    /// Not proposed: this node was not the leader (the hint, if known).
    NotLeader(Option<NodeId>),
    /// Proposed, then lost sight of: it may or may not commit.
    Unknown(String),
    /// Not proposed, for the reason given (an append session's earlier
    /// append was not applied; the queue was full).
    NotProposed(String),
}

/// Shared by the ops of one append session: set once one of them was not
/// applied (not proposed, or its outcome unknown), after which none of the
/// session's later ops is proposed — or a leader that lost and regained
/// leadership could apply append n+1 without append n.
pub type SessionGate = Arc<AtomicBool>;

struct Waiting {
    op: WriteOp,
    to: Reply,
}

/// Who hears an op's outcome, and its session's gate.
struct Reply {
    reply: oneshot::Sender<Proposed>,
    gate: Option<SessionGate>,
}

impl Reply {
    /// Answers the op, closing its session's gate unless it was applied
    /// (`ignore_gates`: the deliberate bug `SessionGateIgnored`).
    fn answer(self, result: Proposed, ignore_gates: bool) {
        if let Some(g) = &self.gate {
            if !matches!(result, Proposed::Applied(_)) && !ignore_gates {
                g.store(true, Ordering::Release);
            }
        }
        let _ = self.reply.send(result);
    }

    fn gate_closed(&self) -> bool {
        self.gate
            .as_ref()
            .is_some_and(|g| g.load(Ordering::Acquire))
    }
}

/// The handle to a shard's proposer task.
#[derive(Clone)]
pub struct Proposer {
    tx: mpsc::Sender<Waiting>,
    paused: Pause,
    /// The deliberate bug `SessionGateIgnored` is on.
    ignore_gates: bool,
}

/// Until when the proposer holds new proposals back (a leadership
/// handover: the target catches up with a log that stops growing).
type Pause = Arc<Mutex<Option<Instant>>>;

/// How often a paused proposer looks at the clock and its leadership.
const PAUSE_POLL: Duration = Duration::from_millis(5);
/// The pause is held to set, clear or copy it.
const UNPOISONED: &str = "no thread panics while holding the proposer's pause";

/// Record bytes an op carries, with their length prefixes (the bound on
/// one entry's ops).
fn op_bytes(op: &WriteOp) -> usize {
    let records = |r: &[bytes::Bytes]| r.iter().map(|r| r.len() + 4).sum::<usize>();
    match op {
        WriteOp::Append {
            records: bodies,
            headers,
            ..
        } => {
            let names_values: usize = headers
                .iter()
                .flatten()
                .map(|h| h.name.len() + h.value.len() + 8)
                .sum();
            records(bodies) + names_values
        }
        WriteOp::Batch { ops, .. } => ops
            .iter()
            .map(|o| match &o.action {
                BatchAction::Append { records: r, .. } => records(r),
                BatchAction::Fence => 0,
            })
            .sum(),
        WriteOp::Fence { .. }
        | WriteOp::Trim { .. }
        | WriteOp::Seal { .. }
        | WriteOp::Delete { .. }
        | WriteOp::Config { .. }
        | WriteOp::Cursor { .. }
        | WriteOp::Retain { .. } => 0,
    }
}

impl Proposer {
    /// Starts the task for `raft` (node `id`).
    pub fn spawn(raft: Raft, id: NodeId, commit_timeout: Duration) -> Proposer {
        let (tx, rx) = mpsc::channel(QUEUE_OPS_MAX);
        let paused = Pause::default();
        // Read here, on the thread that starts the node (the switch is per
        // thread; the task may run anywhere).
        let ignore_gates = mutated!(crate::mutation::current(), SessionGateIgnored);
        let task = run(raft, id, rx, (commit_timeout, ignore_gates), paused.clone());
        tokio::spawn(task);
        Proposer {
            tx,
            paused,
            ignore_gates,
        }
    }

    /// Holds new proposals back for `d` (or until leadership is lost:
    /// then they are answered "not leader" and forwarded, never proposed
    /// here). Waiting ops keep their place.
    pub fn pause(&self, d: Duration) {
        *self.paused.lock().expect(UNPOISONED) = Some(Instant::now() + d);
    }

    /// Lets proposals go again.
    pub fn resume(&self) {
        *self.paused.lock().expect(UNPOISONED) = None;
    }

    /// Queues `op` (already validated) of the session behind `gate`, now,
    /// behind every op queued before it: ops queued by one caller are
    /// proposed in the order queued. The outcome arrives on the receiver.
    pub fn enqueue(
        &self,
        op: WriteOp,
        gate: SessionGate,
    ) -> Result<oneshot::Receiver<Proposed>, Proposed> {
        let (reply, rx) = oneshot::channel();
        let w = Waiting {
            op,
            to: Reply {
                reply,
                gate: Some(gate.clone()),
            },
        };
        match self.tx.try_send(w) {
            Ok(()) => Ok(rx),
            Err(e) => {
                self.close(&gate);
                Err(match e {
                    mpsc::error::TrySendError::Full(_) => Proposed::NotProposed(format!(
                        "the shard's proposal queue is full ({QUEUE_OPS_MAX} ops)"
                    )),
                    mpsc::error::TrySendError::Closed(_) => Proposed::NotLeader(None),
                })
            }
        }
    }

    /// Closes a session's gate: one of its ops was not applied (unless
    /// the deliberate bug `SessionGateIgnored` is on).
    pub fn close(&self, gate: &SessionGate) {
        if !self.ignore_gates {
            gate.store(true, Ordering::Release);
        }
    }

    /// Proposes `op` (already validated) and waits for its outcome.
    pub async fn propose(&self, op: WriteOp) -> Proposed {
        let (reply, rx) = oneshot::channel();
        let w = Waiting {
            op,
            to: Reply { reply, gate: None },
        };
        if self.tx.send(w).await.is_err() {
            return Proposed::NotLeader(None);
        }
        rx.await
            .unwrap_or_else(|_| Proposed::Unknown("the proposer stopped".into()))
    }
}

async fn run(
    raft: Raft,
    id: NodeId,
    mut rx: mpsc::Receiver<Waiting>,
    (timeout, ignore_gates): (Duration, bool),
    paused: Pause,
) {
    // Ops the last entry answered, and how long its round took.
    let mut returning = 0;
    let mut last_round = Duration::ZERO;
    while let Some(first) = rx.recv().await {
        let group = gather(first, &mut rx, returning, last_round).await;
        wait_unpaused(&raft, id, &paused).await;
        let (skipped, ops): (Vec<_>, Vec<_>) =
            group.ops.into_iter().partition(|w| w.to.gate_closed());
        for w in skipped {
            w.to.answer(Proposed::NotProposed(SESSION_BROKEN.into()), ignore_gates);
        }
        if ops.is_empty() {
            continue;
        }
        if let Err(hint) = leadership(&raft, id) {
            for w in ops {
                w.to.answer(Proposed::NotLeader(hint), ignore_gates);
            }
            continue;
        }
        let started = Instant::now();
        returning = ops.len();
        let (ops, replies): (Vec<_>, Vec<_>) = ops.into_iter().map(|w| (w.op, w.to)).unzip();
        let results = propose(&raft, ops, timeout).await;
        last_round = started.elapsed();
        for (to, r) in replies.into_iter().zip(results) {
            to.answer(r, ignore_gates);
        }
    }
}

/// The next entry's ops: `first`, every op already waiting, then — for
/// at most a quarter of `last_round`, never past [`LINGER_MAX`] — the
/// `returning` ops the last entry answered, on top of the request/response
/// ops found waiting: each of those came from a client with one request
/// outstanding that the last entry did not carry, so counting them against
/// `returning` (as a first version of this rule did) kept a shard's
/// clients in two cohorts for good (measured: ~6 ops per entry for 8
/// clients per shard). An append session's waiting ops still count
/// against it: a session keeps a window in flight, so they come from the
/// very client the last entry answered, and waiting for that window again
/// would time out every round (−30% for a session with a window of 512,
/// measured).
async fn gather(
    first: Waiting,
    rx: &mut mpsc::Receiver<Waiting>,
    returning: usize,
    last_round: Duration,
) -> Group {
    let mut group = Group::new(first);
    group.take_waiting(rx);
    let unary = group.ops.iter().filter(|w| w.to.gate.is_none()).count();
    let target = returning.saturating_add(unary);
    let give_up = tokio::time::Instant::now() + (last_round / 4).min(LINGER_MAX);
    while group.ops.len() < target && !group.full() {
        match tokio::time::timeout_at(give_up, rx.recv()).await {
            Ok(Some(w)) => {
                group.push(w);
                group.take_waiting(rx);
            }
            _ => break,
        }
    }
    group
}

/// The ops of the next entry.
struct Group {
    ops: Vec<Waiting>,
    bytes: usize,
}

impl Group {
    fn new(first: Waiting) -> Group {
        let mut g = Group {
            ops: Vec::new(),
            bytes: 0,
        };
        g.push(first);
        g
    }

    fn push(&mut self, w: Waiting) {
        self.bytes += op_bytes(&w.op);
        self.ops.push(w);
    }

    fn full(&self) -> bool {
        self.ops.len() >= BATCH_OPS_MAX || self.bytes >= BATCH_BYTES_MAX
    }

    /// Adds every op already waiting, up to the bounds.
    fn take_waiting(&mut self, rx: &mut mpsc::Receiver<Waiting>) {
        while !self.full() {
            let Ok(w) = rx.try_recv() else { return };
            self.push(w);
        }
    }
}

/// Proposes `ops` as one entry and waits for their results.
async fn propose(raft: &Raft, ops: Vec<WriteOp>, timeout: Duration) -> Vec<Proposed> {
    let n = ops.len();
    let batch = Batch {
        leader_ts_ms: crate::millis::unix_now(),
        ops,
    };
    match tokio::time::timeout(timeout, raft.client_write(batch)).await {
        Ok(Ok(resp)) if resp.data.0.len() == n => {
            resp.data.0.into_iter().map(Proposed::Applied).collect()
        }
        Ok(Ok(resp)) => {
            vec![Proposed::Unknown(format!("{} results for {n} ops", resp.data.0.len())); n]
        }
        Ok(Err(e)) => vec![Proposed::Unknown(e.to_string()); n],
        Err(_) => vec![Proposed::Unknown(format!("not committed within {timeout:?}")); n],
    }
}

/// Whether `raft` is the leader now, and who is if it is not.
pub fn leadership(raft: &Raft, id: NodeId) -> Result<(), Option<NodeId>> {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    if m.state == ServerState::Leader && m.current_leader == Some(id) {
        Ok(())
    } else {
        Err(m.current_leader.filter(|l| *l != id))
    }
}

/// Waits while the proposer is paused and this node still leads.
async fn wait_unpaused(raft: &Raft, id: NodeId, paused: &Pause) {
    loop {
        let until = *paused.lock().expect(UNPOISONED);
        match until {
            Some(u) if Instant::now() < u && leadership(raft, id).is_ok() => {
                tokio::time::sleep(PAUSE_POLL).await
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An op whose answer nobody waits for (`gather` answers none).
    fn op(token: u64) -> Waiting {
        let (reply, _) = oneshot::channel();
        let op = WriteOp::Fence {
            stream: format!("s{token}"),
            token,
            not_after_ms: None,
        };
        let to = Reply { reply, gate: None };
        Waiting { op, to }
    }

    /// An op of an append session (it carries the session's gate).
    fn session_op(token: u64) -> Waiting {
        let mut w = op(token);
        w.to.gate = Some(SessionGate::default());
        w
    }

    fn tokens(g: &Group) -> Vec<u64> {
        g.ops
            .iter()
            .map(|w| match &w.op {
                WriteOp::Fence { token, .. } => *token,
                other => panic!("not a fence: {other:?}"),
            })
            .collect()
    }

    /// Sends `tokens` one at a time (the proposer looks after each) once
    /// 1 ms has passed — tokio's timers tick in whole milliseconds.
    fn come_back(tx: &mpsc::Sender<Waiting>, tokens: std::ops::RangeInclusive<u64>) {
        let tx = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            for t in tokens {
                tx.send(op(t)).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
    }

    /// Takes the first op and gathers the entry; also how long it took.
    async fn next_entry(
        rx: &mut mpsc::Receiver<Waiting>,
        returning: usize,
        last_round: Duration,
    ) -> (Vec<u64>, Duration) {
        let started = tokio::time::Instant::now();
        let first = rx.recv().await.unwrap();
        let g = gather(first, rx, returning, last_round).await;
        (tokens(&g), started.elapsed())
    }

    /// Two cohorts merge: 3 ops waited through the last round, the 5 it
    /// answered come back within the linger, and all 8 share the entry.
    #[tokio::test(start_paused = true)]
    async fn waits_for_the_answered_ops_on_top_of_the_waiting_ones() {
        let (tx, mut rx) = mpsc::channel(64);
        for t in 1..=3 {
            tx.try_send(op(t)).unwrap();
        }
        come_back(&tx, 4..=8);
        let (entry, took) = next_entry(&mut rx, 5, Duration::from_millis(8)).await;
        assert_eq!(entry, (1..=8).collect::<Vec<_>>());
        assert_eq!(took, Duration::from_millis(1));
    }

    /// A session's waiting ops came from the client the last entry
    /// answered: they count against its ops, and nothing waits for more.
    #[tokio::test(start_paused = true)]
    async fn a_sessions_waiting_window_is_not_waited_for_again() {
        let (tx, mut rx) = mpsc::channel(64);
        for t in 1..=5 {
            tx.try_send(session_op(t)).unwrap();
        }
        let (entry, took) = next_entry(&mut rx, 5, Duration::from_millis(8)).await;
        assert_eq!(entry, (1..=5).collect::<Vec<_>>());
        assert_eq!(took, Duration::ZERO);
        // Mixed: 3 answered, one of them the session's (its next op is
        // waiting), so 2 more come back on top of the 2 waiting clients.
        tx.try_send(session_op(6)).unwrap();
        tx.try_send(op(7)).unwrap();
        tx.try_send(op(8)).unwrap();
        come_back(&tx, 9..=10);
        let (entry, took) = next_entry(&mut rx, 3, Duration::from_millis(8)).await;
        assert_eq!(entry, (6..=10).collect::<Vec<_>>());
        assert_eq!(took, Duration::from_millis(1));
    }

    /// A client that does not come back costs one linger, a quarter of
    /// the last round and never past LINGER_MAX.
    #[tokio::test(start_paused = true)]
    async fn gives_up_after_a_quarter_of_the_last_round() {
        let (tx, mut rx) = mpsc::channel(64);
        tx.try_send(op(1)).unwrap();
        let entry = next_entry(&mut rx, 4, Duration::from_millis(4)).await;
        assert_eq!(entry, (vec![1], Duration::from_millis(1)));
        tx.try_send(op(2)).unwrap();
        let entry = next_entry(&mut rx, 4, Duration::from_secs(1)).await;
        assert_eq!(entry, (vec![2], LINGER_MAX));
    }

    /// A lone client never waits; one answered op is waited for alone.
    #[tokio::test(start_paused = true)]
    async fn a_lone_op_leaves_at_once() {
        let (tx, mut rx) = mpsc::channel(64);
        tx.try_send(op(1)).unwrap();
        let entry = next_entry(&mut rx, 0, Duration::from_millis(4)).await;
        assert_eq!(entry, (vec![1], Duration::ZERO));
        tx.try_send(op(2)).unwrap();
        come_back(&tx, 3..=3);
        let entry = next_entry(&mut rx, 1, Duration::from_millis(8)).await;
        assert_eq!(entry, (vec![2, 3], Duration::from_millis(1)));
    }
}
