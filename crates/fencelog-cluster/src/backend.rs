//! A cluster node behind the server's write seam
//! ([`fencelog_server::backend::Backend`]): the server parses, admits,
//! limits and answers every request of the API; this decides where each
//! goes. A write is checked on the stream's shard engine as a single node
//! checks it ([`fencelog_engine::Engine::check_write`]: the same refusals,
//! including a stale token against the applied state), then proposed on
//! the shard's leader or forwarded to it ([`Node::write`]). A batch must
//! keep its streams in one shard. A read waits for a read index so it
//! sees every write acknowledged before it. Answers carry the shard
//! leader's hint; with `--cluster-redirect` a follower answers writes
//! with 307 to the leader instead of forwarding them.

use crate::ids::{NodeId, ShardId};
use crate::node::{Node, WriteOutcome};
use crate::raft::proposer::{leadership, Proposed, SessionGate};
use fencelog_api::{ErrorCode, Field};
use fencelog_engine::{Applied, Config, Engine, StreamState, WriteOp};
use fencelog_server::backend::{
    Backend, BoxFuture, Elsewhere, Pending, Redirect, Refused, SessionWrites, Soon,
};
use fencelog_server::ApiError;
use std::collections::BTreeSet;
use std::sync::Arc;

/// A cluster node as the API's backend.
pub struct ClusterBackend {
    node: Arc<Node>,
    /// The shard engines' limits (every shard's are the node's).
    config: Config,
}

impl ClusterBackend {
    /// `node` behind the seam.
    pub fn new(node: Arc<Node>) -> Self {
        let config = node.engine(0).config().clone();
        ClusterBackend { node, config }
    }

    /// Where node `leader` (which leads shard `k`) is, as a redirect.
    fn to_leader(&self, k: ShardId, leader: NodeId) -> Option<Redirect> {
        let addr = self.node.addr_of(k, leader)?;
        let scheme = self.node.transport().scheme();
        Some(Redirect {
            origin: format!("{scheme}://{addr}"),
            leader: format!("{leader}={addr}"),
        })
    }

    /// The hint for shard `k`'s leader, as this node knows it.
    fn hint(&self, k: ShardId) -> Option<String> {
        let leader = self.node.leader_of(k)?;
        let addr = self.node.addr_of(k, leader).unwrap_or_default();
        Some(format!("{leader}={addr}"))
    }

    /// The 503 of a shard with no read index now.
    fn no_read_index(&self, k: ShardId, why: &str) -> ApiError {
        ApiError::new(
            ErrorCode::Unavailable,
            format!("no read index for shard {k}: {why}"),
        )
        .with_leader(self.hint(k))
    }
}

impl Backend for ClusterBackend {
    fn config(&self) -> &Config {
        &self.config
    }

    fn write(&self, op: WriteOp) -> Pending {
        let k = self.node.shard_of(op.stream());
        if let Err(e) = self.node.engine(k).check_write(&op) {
            return Pending::now(Err(Refused::Write(e)));
        }
        if let WriteOp::Batch { ops, .. } = &op {
            let streams: Vec<&str> = ops.iter().map(|o| o.stream.as_str()).collect();
            let shards: Vec<ShardId> = streams.iter().map(|s| self.node.shard_of(s)).collect();
            if shards.iter().any(|x| *x != k) {
                return Pending::now(Err(Refused::Api(cross_shard(&streams, &shards))));
            }
        }
        let node = self.node.clone();
        Pending::Later(Box::pin(async move { decided(node.write(op).await) }))
    }

    fn open_session(&self, stream: &str) -> Result<Box<dyn SessionWrites>, Elsewhere> {
        let k = self.node.shard_of(stream);
        match leadership(self.node.raft(k), self.node.id()) {
            Ok(()) => Ok(Box::new(ShardSession {
                node: self.node.clone(),
                k,
                gate: SessionGate::default(),
            })),
            Err(Some(leader)) => match self.to_leader(k, leader) {
                Some(r) => Err(Elsewhere::Redirect(r)),
                None => Err(Elsewhere::Refused(unavailable(
                    format!("shard {k}'s leader, node {leader}, has no known address; try again"),
                    false,
                ))),
            },
            Err(None) => Err(Elsewhere::Refused(unavailable(
                format!("shard {k} has no leader now: no append session can open; try again"),
                false,
            ))),
        }
    }

    fn redirect(&self, stream: &str) -> Option<Redirect> {
        if !self.node.options().redirect {
            return None;
        }
        let k = self.node.shard_of(stream);
        let leader = leadership(self.node.raft(k), self.node.id()).err()??;
        self.to_leader(k, leader)
    }

    fn leader_hint(&self, stream: &str) -> Option<String> {
        self.hint(self.node.shard_of(stream))
    }

    fn read(&self, stream: &str) -> Soon<'_, Result<Engine, ApiError>> {
        let k = self.node.shard_of(stream);
        Soon::Later(Box::pin(async move {
            match self.node.read_barrier(k).await {
                Ok(()) => Ok(self.node.engine(k)),
                Err(why) => Err(self.no_read_index(k, &why)),
            }
        }))
    }

    fn list_streams<'a>(
        &'a self,
        prefix: &'a str,
        start_after: Option<&'a str>,
        limit: usize,
    ) -> Soon<'a, Result<Vec<StreamState>, ApiError>> {
        Soon::Later(Box::pin(self.list(prefix, start_after, limit)))
    }

    fn highest_token(&self, stream: &str) -> u64 {
        self.node
            .engine(self.node.shard_of(stream))
            .highest_token(stream)
    }

    fn health(&self) -> Result<(), ApiError> {
        fencelog_server::backend::engine_health(&self.node.engine(0))
    }

    fn metrics(&self, http_families: String) -> String {
        crate::node_metrics::encode(&self.node, http_families)
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.node.shutdown())
    }
}

impl ClusterBackend {
    /// Every shard's applied state after a read index on each, merged in
    /// name order (each shard gives at most `limit` names after
    /// `start_after`, so the first `limit` of the merge are the node's).
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StreamState>, ApiError> {
        let shards = self.node.shard_count();
        for k in 0..shards {
            if let Err(why) = self.node.read_barrier(k).await {
                return Err(self.no_read_index(k, &why));
            }
        }
        let mut all: Vec<StreamState> = (0..shards)
            .flat_map(|k| self.node.engine(k).list_streams(prefix, start_after, limit))
            .collect();
        all.sort_by(|a, b| a.stream.cmp(&b.stream));
        all.truncate(limit);
        Ok(all)
    }
}

/// A write's outcome as the seam answers it: the applied result (accepted
/// or refused, as the engine answers), or a 503 whose outcome is none
/// (`unavailable`, nothing proposed) or unknown.
fn decided(outcome: WriteOutcome) -> Result<Applied, Refused> {
    match outcome {
        WriteOutcome::Decided(r) => r.to_engine().map_err(Refused::Write),
        WriteOutcome::Unavailable(m) => Err(Refused::Api(unavailable(m, false))),
        WriteOutcome::Unknown(m) => Err(Refused::Api(unavailable(m, true))),
    }
}

/// 503 `unavailable`, saying whether the outcome is unknown.
fn unavailable(message: String, outcome_unknown: bool) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, message).with(Field::OutcomeUnknown, outcome_unknown)
}

/// The 400 of a batch whose streams are in more than one shard: atomic
/// across shards would take a two-phase commit over their Raft groups,
/// which the cluster does not do.
fn cross_shard(streams: &[&str], shards: &[ShardId]) -> ApiError {
    let mut seen = BTreeSet::new();
    let placed: Vec<String> = streams
        .iter()
        .zip(shards)
        .filter(|(st, _)| seen.insert(**st))
        .map(|(st, k)| format!("{st} is in shard {k}"))
        .collect();
    ApiError::new(
        ErrorCode::BadRequest,
        format!(
            "a batch in cluster mode must keep all its streams in one shard: atomicity across shards would need a two-phase commit, which fencelog does not do ({}); nothing was changed",
            placed.join(", ")
        ),
    )
}

/// An append session on the leader of its stream's shard: each append,
/// its input checked, goes to the shard's proposer the moment it is read
/// (a synchronous enqueue, so the session's appends enter the log in the
/// order sent), and its answer is its own apply result: no early refusal,
/// so a stale append is answered against the state the earlier appends of
/// the session leave.
///
/// Once one of a session's appends is not applied (this node stopped
/// leading, the outcome is unknown), the session's gate closes: every
/// later append of it is answered 503 `unavailable` "not proposed" instead
/// of being proposed, so no later append of a session is ever applied
/// without an earlier one (a leader that lost and regained leadership
/// would otherwise propose n+1 after refusing n). The client learns each
/// append's fate and opens a new session on the new leader. A follower
/// answers the upgrade with 307 to the leader: appends forwarded one by
/// one on separate connections would have no order.
struct ShardSession {
    node: Arc<Node>,
    k: ShardId,
    gate: SessionGate,
}

impl SessionWrites for ShardSession {
    fn append(&self, op: WriteOp) -> Pending {
        if let Err(e) = self.node.engine(self.k).check_input(&op) {
            return Pending::now(Err(Refused::Write(e)));
        }
        let k = self.k;
        match self.node.enqueue_session_op(k, op, self.gate.clone()) {
            Err(p) => Pending::now(session_answer(k, p)),
            Ok(rx) => Pending::Later(Box::pin(async move {
                match rx.await {
                    Ok(p) => session_answer(k, p),
                    Err(_) => Err(Refused::Api(unavailable(
                        "the shard's proposer stopped".into(),
                        true,
                    ))),
                }
            })),
        }
    }
}

/// A session append's proposal outcome as the session answers it.
fn session_answer(k: ShardId, p: Proposed) -> Result<Applied, Refused> {
    match p {
        Proposed::Applied(r) => r.to_engine().map_err(Refused::Write),
        Proposed::NotLeader(_) => Err(Refused::Api(unavailable(
            format!("this node no longer leads shard {k}: not proposed; open a new session"),
            false,
        ))),
        Proposed::NotProposed(m) => Err(Refused::Api(unavailable(m, false))),
        Proposed::Unknown(m) => Err(Refused::Api(unavailable(m, true))),
    }
}
