//! Membership changes and leadership transfer, for every shard's Raft
//! group at once.
//!
//! Any node runs an admin operation: it sends per-shard commands
//! ([`MemberCmd`]) to each shard's leader — itself or a peer, over the
//! `member` RPC — and retries while leadership moves. Every command is
//! idempotent, so a retry after a lost answer is safe.
//!
//! - **Add** node N at ADDR: N was started with `--join` (no bootstrap; it
//!   waits to be added). Check that ADDR answers as node N with the same
//!   shard count; on every shard's leader `add_learner(N)` (non-blocking);
//!   wait until the leader's replication metrics show N matched at least
//!   the leader's last log index as it was once N was a learner (a learner
//!   behind the purge point gets the shard's snapshot first); then promote
//!   N to voter (`AddVoterIds`, joint consensus inside openraft).
//! - **Remove** node N: if N leads a shard, move that leadership away
//!   first (a leader never removes itself); then on every shard's leader
//!   drop N from the voters and the nodes (`RemoveVoters`, retain false).
//! - **Transfer** shard K to node T: openraft 0.9 has no transfer_leader.
//!   T campaigns: `trigger().elect()` once its log holds the leader's
//!   read index, repeated every election_min until T leads or the budget
//!   is spent. Safety is Raft's own: a candidate wins only with a quorum of
//!   votes and a log at least as up to date as each voter's, so nothing
//!   committed is lost; the deposed leader's uncommitted proposals end 503
//!   `outcome_unknown`, and the fencing rule still decides every entry in
//!   apply, in log order, on every replica. Every member holds off its
//!   rebalancer for that shard for [`super::transfer::MANUAL_HOLD`].
//!
//! Membership is persisted by openraft itself: membership entries live in
//! the WAL and, once applied, in the shard engine's applied marker, so a
//! restarted node knows the current membership; `--cluster` only seeds a
//! group that was never initialized.

use super::call::{call_at, on_leader, AdminError};
use super::cmd::{MemberAnswer, MemberCmd, POLL};
use super::transfer::{campaign_elsewhere, hold_everywhere, MANUAL_HOLD};
use super::voters::{members, preferred, voters};
use crate::ids::{NodeId, ShardId};
use crate::node::Node;
use serde::Serialize;
use std::collections::BTreeSet;
use std::time::Duration;
use std::time::Instant;

/// A who-are-you probe: one short RPC.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What `add_node` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Added {
    /// The node.
    pub node_id: NodeId,
    /// Its address.
    pub addr: String,
    /// The shards it is a voter of now (all of them).
    pub voter_of: Vec<ShardId>,
}

/// Checks that `addr` answers as node `n` of a cluster with our shard count.
async fn probe(node: &Node, n: NodeId, addr: &str) -> Result<(), AdminError> {
    let answer = call_at(node, n, addr, 0, &MemberCmd::Whoami, PROBE_TIMEOUT).await;
    match answer {
        Ok(MemberAnswer::Whoami { node: id, shards })
            if id == n && shards == node.shard_count() =>
        {
            Ok(())
        }
        Ok(MemberAnswer::Whoami { node: id, shards }) => Err(AdminError::BadRequest(format!(
            "{addr} answers as node {id} with {shards} shards, not as node {n} with {}",
            node.shard_count()
        ))),
        Ok(other) => Err(AdminError::BadRequest(format!(
            "{addr} answered {other:?} to a who-are-you"
        ))),
        Err(m) => Err(AdminError::Unavailable(format!(
            "cannot reach node {n} at {addr} (start it with --join first): {m}"
        ))),
    }
}

/// Adds node `n` at `addr` to every shard: learner, caught up, voter.
pub async fn add_node(
    node: &Node,
    n: NodeId,
    addr: &str,
    deadline: Instant,
) -> Result<Added, AdminError> {
    if n == 0 || addr.is_empty() {
        return Err(AdminError::BadRequest(
            "a node id is at least 1 and an address is HOST:PORT".into(),
        ));
    }
    let mut known = true;
    for k in 0..node.shard_count() {
        match node.addr_of(k, n) {
            Some(a) if a != addr => {
                return Err(AdminError::BadRequest(format!(
                    "node {n} is already a member of shard {k} at {a}"
                )))
            }
            Some(_) => {}
            None => known = false,
        }
    }
    if !known {
        probe(node, n, addr).await?;
    }
    let shards: Vec<ShardId> = (0..node.shard_count()).collect();
    let learner = MemberCmd::AddLearner {
        node: n,
        addr: addr.to_string(),
    };
    for k in &shards {
        on_leader(node, *k, &learner, deadline).await?;
    }
    for k in &shards {
        caught_up_on_leader(node, *k, n, deadline).await?;
    }
    for k in &shards {
        on_leader(node, *k, &MemberCmd::Promote { node: n }, deadline).await?;
    }
    Ok(Added {
        node_id: n,
        addr: addr.to_string(),
        voter_of: shards,
    })
}

/// Waits until shard `k`'s leader has replicated to `n` at least the last
/// log index it had when this wait began (`add_learner(blocking)` returns
/// early: once the lag is below openraft's threshold).
async fn caught_up_on_leader(
    node: &Node,
    k: ShardId,
    n: NodeId,
    deadline: Instant,
) -> Result<(), AdminError> {
    let cmd = MemberCmd::Progress { node: n };
    let mut target = None;
    loop {
        if let MemberAnswer::Progress { matched, last } = on_leader(node, k, &cmd, deadline).await?
        {
            let want = *target.get_or_insert(last.unwrap_or(0));
            if matched.is_some_and(|m| m >= want) {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Err(AdminError::Unavailable(format!(
                "shard {k}: node {n} did not catch up in time"
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// What `remove_node` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Removed {
    /// The node.
    pub node_id: NodeId,
    /// The shards it was a member of.
    pub removed_from: Vec<ShardId>,
}

/// Removes node `n` from every shard it is a member of, moving away any
/// leadership it holds first.
pub async fn remove_node(node: &Node, n: NodeId, deadline: Instant) -> Result<Removed, AdminError> {
    let shards: Vec<ShardId> = (0..node.shard_count())
        .filter(|k| members(node, *k).contains(&n))
        .collect();
    if shards.is_empty() {
        return Err(AdminError::BadRequest(format!(
            "node {n} is not a member of any shard"
        )));
    }
    for k in &shards {
        if voters(node, *k) == BTreeSet::from([n]) {
            return Err(AdminError::BadRequest(format!(
                "node {n} is the last voter of shard {k}"
            )));
        }
    }
    // The removed node's own rebalancer must not take leadership back.
    for k in &shards {
        hold_everywhere(node, *k, MANUAL_HOLD).await;
    }
    for k in &shards {
        loop {
            let cmd = MemberCmd::Remove { node: n };
            match on_leader(node, *k, &cmd, deadline).await? {
                MemberAnswer::LeaderIsTarget => {
                    let rest: BTreeSet<NodeId> = &voters(node, *k) - &BTreeSet::from([n]);
                    let to = preferred(*k, &rest).expect("another voter remains");
                    campaign_elsewhere(node, *k, to, deadline).await;
                }
                _ => break,
            }
        }
    }
    Ok(Removed {
        node_id: n,
        removed_from: shards,
    })
}
