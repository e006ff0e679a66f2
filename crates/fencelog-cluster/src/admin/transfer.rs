//! A manual leadership transfer: every member holds its rebalancer off
//! the shard for [`MANUAL_HOLD`], then the target campaigns
//! ([`super::campaign`]). See [`super::membership`] for why this is safe.

use super::call::{call, AdminError};
use super::cmd::{left, MemberAnswer, MemberCmd, CAMPAIGN_BUDGET_MAX, NOTICE_TIMEOUT};
use super::voters::{list, members, voters};
use crate::ids::{NodeId, ShardId};
use crate::node::Node;
use serde::Serialize;
use std::time::{Duration, Instant};

/// How long a manual transfer (or a removal) keeps the rebalancers off.
pub const MANUAL_HOLD: Duration = Duration::from_secs(60);

pub(crate) fn check_shard(node: &Node, k: ShardId) -> Result<(), AdminError> {
    if k >= node.shard_count() {
        return Err(AdminError::BadRequest(format!(
            "shard {k} does not exist: the cluster has {} shards",
            node.shard_count()
        )));
    }
    Ok(())
}

/// Tells every member of shard `k` to hold its rebalancer off it for `d`
/// (best effort: a member that misses it may move leadership back).
pub(crate) async fn hold_everywhere(node: &Node, k: ShardId, d: Duration) {
    let cmd = MemberCmd::Hold {
        ms: crate::millis::of(d),
    };
    for m in members(node, k) {
        let _ = call(node, m, k, &cmd, NOTICE_TIMEOUT).await;
    }
}

/// What `transfer` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Transferred {
    /// The shard.
    pub shard: ShardId,
    /// Its leader now.
    pub leader: NodeId,
}

/// Moves shard `k`'s leadership to voter `to`.
pub async fn transfer(
    node: &Node,
    k: ShardId,
    to: NodeId,
    deadline: Instant,
) -> Result<Transferred, AdminError> {
    check_shard(node, k)?;
    let voters = voters(node, k);
    if !voters.contains(&to) {
        return Err(AdminError::BadRequest(format!(
            "node {to} is not a voter of shard {k} (voters: {})",
            list(&voters)
        )));
    }
    hold_everywhere(node, k, MANUAL_HOLD).await;
    let budget = left(deadline).min(CAMPAIGN_BUDGET_MAX);
    let cmd = MemberCmd::Campaign {
        budget_ms: crate::millis::of(budget),
    };
    match call(node, to, k, &cmd, budget + NOTICE_TIMEOUT).await {
        Ok(MemberAnswer::Done) => Ok(Transferred {
            shard: k,
            leader: to,
        }),
        Ok(other) => Err(AdminError::Unavailable(format!(
            "shard {k}: node {to}: {other:?}"
        ))),
        Err(m) => Err(AdminError::Unavailable(format!(
            "shard {k}: node {to}: {m}"
        ))),
    }
}

/// Asks node `to` to campaign for shard `k` (a removal moving leadership
/// off the node it removes); whatever the outcome, the caller looks again.
pub(crate) async fn campaign_elsewhere(node: &Node, k: ShardId, to: NodeId, deadline: Instant) {
    let budget = left(deadline).min(CAMPAIGN_BUDGET_MAX);
    let cmd = MemberCmd::Campaign {
        budget_ms: crate::millis::of(budget),
    };
    let _ = call(node, to, k, &cmd, budget + NOTICE_TIMEOUT).await;
}
