//! The `member` RPC, one shard's part of an admin operation: its commands
//! and answers, the bounds a node puts on what a command asks, and sending
//! one to a peer over the node's transport. Every command is idempotent,
//! so an operation retries one after a lost answer, at [`POLL`]'s pace.

use crate::ids::{NodeId, ShardId};
use crate::node::Node;
use crate::rpc::{decode, encode, RpcKind};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// The longest one campaign may run on request of a peer.
pub const CAMPAIGN_BUDGET_MAX: Duration = Duration::from_secs(60);
/// The longest a leader pauses proposing for one handover request.
pub const HANDOVER_MAX: Duration = Duration::from_secs(10);
/// A notice (a hold, a campaign's handover request): one short RPC.
pub(crate) const NOTICE_TIMEOUT: Duration = Duration::from_secs(2);
/// Between two polls of a condition.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// One shard's part of an admin operation, as the `member` RPC carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberCmd {
    /// Any node: its id and shard count (probes an address before adding).
    Whoami,
    /// The leader: add `node` at `addr` as a learner.
    AddLearner {
        /// The new node.
        node: NodeId,
        /// Its address.
        addr: String,
    },
    /// The leader: how far `node`'s log matches its own.
    Progress {
        /// The node.
        node: NodeId,
    },
    /// The leader: make learner `node` a voter.
    Promote {
        /// The node.
        node: NodeId,
    },
    /// The leader: drop `node` from the voters and the nodes.
    Remove {
        /// The node.
        node: NodeId,
    },
    /// The target: campaign until it leads the shard, for at most `budget_ms`.
    Campaign {
        /// The budget.
        budget_ms: u64,
    },
    /// The leader: pause proposing until `to` matched its whole log, for
    /// a handover ([`super::transfer::handover`]).
    Handover {
        /// The node taking over.
        to: NodeId,
        /// How long to wait for it.
        budget_ms: u64,
    },
    /// Any node: no rebalancing of the shard for `ms`.
    Hold {
        /// How long.
        ms: u64,
    },
}

/// The answer to a [`MemberCmd`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberAnswer {
    /// Done (or there was nothing to do).
    Done,
    /// The answer to `Whoami`.
    Whoami {
        /// The node's id.
        node: NodeId,
        /// Its shard count.
        shards: u32,
    },
    /// The answer to `Progress`: the node's matched index and the leader's
    /// last log index.
    Progress {
        /// The node's matched log index, if any.
        matched: Option<u64>,
        /// The leader's last log index.
        last: Option<u64>,
    },
    /// Not the leader (the hint, if known): ask again there.
    NotLeader(Option<NodeId>),
    /// The leader is the node to remove: move its leadership first.
    LeaderIsTarget,
    /// Not now (a membership change in progress, a lost election): retry.
    Retry(String),
    /// Refused for good: the request is wrong.
    Refused(String),
}

/// Node `to`'s address, as shard `k`'s membership holds it.
pub(crate) fn addr(node: &Node, to: NodeId, k: ShardId) -> Result<String, String> {
    node.addr_of(k, to)
        .ok_or(format!("node {to} is not a member of shard {k}"))
}

/// Sends `cmd` for shard `k` to peer `to` at `addr`, over the node's
/// transport.
pub(crate) async fn send_at(
    node: &Node,
    to: NodeId,
    addr: &str,
    k: ShardId,
    cmd: &MemberCmd,
    timeout: Duration,
) -> Result<MemberAnswer, String> {
    let call = node
        .transport()
        .call(to, addr, k, RpcKind::Member, encode(cmd), timeout);
    let bytes = call.await.map_err(|e| e.to_string())?;
    decode(&bytes)
}

/// Sends `cmd` for shard `k` to peer `to`, at the address shard `k`'s
/// membership holds.
pub(crate) async fn send(
    node: &Node,
    to: NodeId,
    k: ShardId,
    cmd: &MemberCmd,
    timeout: Duration,
) -> Result<MemberAnswer, String> {
    send_at(node, to, &addr(node, to, k)?, k, cmd, timeout).await
}

/// The time from now until `deadline` (zero once it passed).
pub(crate) fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
