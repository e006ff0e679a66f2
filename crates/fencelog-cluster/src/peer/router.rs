//! The in-process transport for tests and `dev` use: nodes in one process
//! answer each other's RPCs ([`answer`]) with the same bytes HTTP would
//! carry. Links can be cut in both directions (a partition, or a paused
//! process as its peers see it).

use super::answer::answer;
use crate::ids::{NodeId, ShardId};
use crate::node::Node;
use crate::raft::network::SnapshotRpc;
use crate::rpc::{decode, RpcFuture, RpcKind, Transport, TransportError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The nodes of one process and the links between them.
#[derive(Default)]
pub struct Router {
    nodes: RwLock<BTreeMap<NodeId, Arc<Node>>>,
    /// Cut links, as (lower id, higher id).
    cut: Mutex<BTreeSet<(NodeId, NodeId)>>,
    /// Added before each snapshot chunk is delivered (a slow link).
    chunk_delay: Mutex<Duration>,
    /// Snapshot manifests (installs) delivered, by target: how many, and
    /// the last one's index.
    installs: Mutex<BTreeMap<NodeId, (u64, Option<u64>)>>,
    /// Snapshot chunks delivered, by target.
    chunks: Mutex<BTreeMap<NodeId, u64>>,
    /// The chunk, counted from when it was set, whose answer is lost
    /// (it is delivered and written; its sender hears nothing).
    lose_chunk_answer: Mutex<Option<u64>>,
    /// Resume questions are not answered (a node that predates them).
    resume_unknown: std::sync::atomic::AtomicBool,
    /// Added before each AppendEntries to a node (a slow follower).
    append_delay: Mutex<BTreeMap<NodeId, Duration>>,
    /// The largest AppendEntries body delivered, by target.
    largest_append: Mutex<BTreeMap<NodeId, usize>>,
}

/// The router's tables are held for one lookup or update, none of which
/// panics.
const UNPOISONED: &str = "no thread panics while holding a router table";

fn link(a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    (a.min(b), a.max(b))
}

impl Router {
    /// A new, empty router.
    pub fn new() -> Arc<Router> {
        Arc::new(Router::default())
    }

    /// The transport node `from` uses.
    pub fn port(self: &Arc<Self>, from: NodeId) -> Arc<dyn Transport> {
        Arc::new(Port {
            router: self.clone(),
            from,
        })
    }

    /// Makes a started node reachable.
    pub fn register(&self, node: Arc<Node>) {
        self.nodes
            .write()
            .expect(UNPOISONED)
            .insert(node.id(), node);
    }

    /// Takes a node away (it is down); returns it.
    pub fn unregister(&self, id: NodeId) -> Option<Arc<Node>> {
        self.nodes.write().expect(UNPOISONED).remove(&id)
    }

    /// A registered node.
    pub fn node(&self, id: NodeId) -> Option<Arc<Node>> {
        self.nodes.read().expect(UNPOISONED).get(&id).cloned()
    }

    /// Cuts every link of `id`.
    pub fn isolate(&self, id: NodeId, all: impl IntoIterator<Item = NodeId>) {
        let mut cut = self.cut.lock().expect(UNPOISONED);
        for other in all.into_iter().filter(|o| *o != id) {
            cut.insert(link(id, other));
        }
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.cut.lock().expect(UNPOISONED).clear();
    }

    /// Delays every snapshot chunk by `d` from now on (a snapshot transfer
    /// slower than the writes).
    pub fn slow_snapshot_chunks(&self, d: Duration) {
        *self.chunk_delay.lock().expect(UNPOISONED) = d;
    }

    /// Snapshot manifests delivered to `id` so far (the installs it was
    /// asked for), and the last one's index.
    pub fn snapshots_sent_to(&self, id: NodeId) -> (u64, Option<u64>) {
        self.installs
            .lock()
            .expect(UNPOISONED)
            .get(&id)
            .copied()
            .unwrap_or_default()
    }

    /// Delays every AppendEntries to `id` by `d` from now on (a follower
    /// that replays the log slowly).
    pub fn slow_appends_to(&self, id: NodeId, d: Duration) {
        self.append_delay.lock().expect(UNPOISONED).insert(id, d);
    }

    /// The largest AppendEntries body, in bytes, delivered to `id` so far.
    pub fn largest_append_to(&self, id: NodeId) -> usize {
        self.largest_append
            .lock()
            .expect(UNPOISONED)
            .get(&id)
            .copied()
            .unwrap_or(0)
    }

    /// Snapshot chunks delivered to `id` so far.
    pub fn snapshot_chunks_to(&self, id: NodeId) -> u64 {
        self.chunks
            .lock()
            .expect(UNPOISONED)
            .get(&id)
            .copied()
            .unwrap_or(0)
    }

    /// Loses the answer to the `nth` snapshot chunk from now (1 = the
    /// next): a transfer cut short after the receiver wrote it.
    pub fn lose_snapshot_chunk_answer(&self, nth: u64) {
        *self.lose_chunk_answer.lock().expect(UNPOISONED) = Some(nth);
    }

    /// Answers resume questions as a node that predates them does (an
    /// unknown RPC), or normally again.
    pub fn answer_snapshot_resume(&self, answer: bool) {
        self.resume_unknown
            .store(!answer, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether this chunk's answer is the one to lose (counts it down).
    fn loses_chunk_answer(&self) -> bool {
        let mut n = self.lose_chunk_answer.lock().expect(UNPOISONED);
        match *n {
            Some(1) => {
                *n = None;
                true
            }
            Some(k) => {
                *n = Some(k - 1);
                false
            }
            None => false,
        }
    }

    fn is_cut(&self, a: NodeId, b: NodeId) -> bool {
        self.cut.lock().expect(UNPOISONED).contains(&link(a, b))
    }
}

struct Port {
    router: Arc<Router>,
    from: NodeId,
}

impl Transport for Port {
    fn call(
        &self,
        target: NodeId,
        _addr: &str,
        shard: ShardId,
        kind: RpcKind,
        body: Vec<u8>,
        timeout: Duration,
    ) -> RpcFuture {
        let (router, from) = (self.router.clone(), self.from);
        Box::pin(async move {
            if router.is_cut(from, target) {
                return Err(TransportError::Unreachable(format!(
                    "link {from}-{target} is cut"
                )));
            }
            let node = router
                .node(target)
                .ok_or_else(|| TransportError::Unreachable(format!("node {target} is down")))?;
            let mut lose_answer = false;
            match kind {
                RpcKind::SnapshotChunk => {
                    let delay = *router.chunk_delay.lock().expect(UNPOISONED);
                    tokio::time::sleep(delay).await;
                    *router
                        .chunks
                        .lock()
                        .expect(UNPOISONED)
                        .entry(target)
                        .or_default() += 1;
                    lose_answer = router.loses_chunk_answer();
                }
                RpcKind::Append => {
                    let delay = router
                        .append_delay
                        .lock()
                        .expect(UNPOISONED)
                        .get(&target)
                        .copied();
                    if let Some(d) = delay {
                        tokio::time::sleep(d).await;
                    }
                    let mut largest = router.largest_append.lock().expect(UNPOISONED);
                    let seen = largest.entry(target).or_default();
                    *seen = (*seen).max(body.len());
                }
                RpcKind::SnapshotResume
                    if router
                        .resume_unknown
                        .load(std::sync::atomic::Ordering::SeqCst) =>
                {
                    return Err(TransportError::Lost("404: no such RPC".into()));
                }
                RpcKind::Snapshot => {
                    let rpc: Option<SnapshotRpc> = decode(&body).ok();
                    let index = rpc.and_then(|(_, meta, _)| meta.last_log_id.map(|l| l.index));
                    let mut installs = router.installs.lock().expect(UNPOISONED);
                    let seen = installs.entry(target).or_default();
                    *seen = (seen.0 + 1, index);
                }
                _ => {}
            }
            let answer = tokio::time::timeout(timeout, answer(&node, shard, kind, &body)).await;
            if router.is_cut(from, target) {
                return Err(TransportError::Lost(format!(
                    "link {from}-{target} cut mid-call"
                )));
            }
            match answer {
                Ok(Ok(_)) if lose_answer => Err(TransportError::Lost(format!(
                    "the answer from {target} was lost"
                ))),
                Ok(Ok(bytes)) => Ok(bytes),
                Ok(Err(m)) => Err(TransportError::Lost(m)),
                Err(_) => Err(TransportError::Lost(format!(
                    "no answer within {timeout:?}"
                ))),
            }
        })
    }
}
