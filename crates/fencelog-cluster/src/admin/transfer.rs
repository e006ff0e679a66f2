//! Leadership transfer in openraft 0.9, which has no transfer_leader: the
//! target campaigns (`trigger().elect()`) once its log holds the leader's
//! read index, again every election_min until it leads or its budget is
//! spent. See [`super::membership`] for why this is safe.

use super::membership::{
    call, check_shard, left, list, members, voters, AdminError, MemberAnswer, MemberCmd,
};
use crate::ids::{NodeId, ShardId};
use crate::node::Node;
use crate::raft::proposer::leadership;
use crate::rpc::{decode, encode, RpcKind};
use openraft::ServerState;
use serde::Serialize;
use std::time::{Duration, Instant};

/// How long a manual transfer (or a removal) keeps the rebalancers off.
pub const MANUAL_HOLD: Duration = Duration::from_secs(60);
/// The longest one campaign may run on request of a peer.
pub const CAMPAIGN_BUDGET_MAX: Duration = Duration::from_secs(60);
/// Between two polls of a condition.
const POLL: Duration = Duration::from_millis(50);
/// A hold notice: one short RPC.
const NOTICE_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether this node's log holds everything shard `k`'s leader has
/// committed (its read index); `None` when the leader cannot say.
pub(crate) async fn caught_up(node: &Node, k: ShardId) -> Option<bool> {
    let leader = node.leader_of(k)?;
    if leader == node.id() {
        return Some(true);
    }
    let addr = node.addr_of(k, leader)?;
    let timeout = Duration::from_millis(node.options().timing.election_min_ms);
    let call = node
        .transport()
        .call(leader, &addr, k, RpcKind::ReadIndex, encode(&()), timeout);
    let index: Result<Option<u64>, String> = decode(&call.await.ok()?).ok()?;
    let last = node.raft(k).metrics().borrow().last_log_index;
    Some(last >= index.ok()?)
}

/// Campaigns for shard `k` until this node leads it or `deadline` passes.
/// Each round asks the leader for a handover first (it pauses proposing
/// until this node's log matches its own), then triggers an election: a
/// voter grants its vote only to a log at least as long as its own, and a
/// leader whose log stopped growing can grant it. `eager`: also campaign
/// when the leader cannot be reached (a manual transfer; the rebalancer
/// does not).
pub(crate) async fn campaign(
    node: &Node,
    k: ShardId,
    deadline: Instant,
    eager: bool,
) -> Result<(), String> {
    let (raft, id) = (node.raft(k), node.id());
    let timing = node.options().timing;
    // One election may take up to the longest election timeout: a round
    // never cuts its own candidacy short by starting the next term.
    let round = Duration::from_millis(timing.election_max_ms);
    let handover = MemberCmd::Handover {
        to: id,
        budget_ms: timing.election_max_ms,
    };
    loop {
        if leadership(raft, id).is_ok() {
            return Ok(());
        }
        if !voters(node, k).contains(&id) {
            return Err(format!("node {id} is not a voter of shard {k}"));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "node {id} did not win shard {k}'s election in time"
            ));
        }
        let candidate = raft.metrics().borrow().state == ServerState::Candidate;
        let ready = match node.leader_of(k).filter(|l| *l != id) {
            _ if candidate => false,
            None => true,
            Some(l) => match call(node, l, k, &handover, HANDOVER_MAX + NOTICE_TIMEOUT).await {
                Ok(MemberAnswer::Done) => true,
                Ok(_) => false,
                Err(_) => eager,
            },
        };
        if ready {
            raft.trigger().elect().await.map_err(|e| e.to_string())?;
        }
        let wait = round.min(left(deadline)).max(POLL);
        // A timeout only ends this round.
        let _ = raft
            .wait(Some(wait))
            .metrics(|m| m.state == ServerState::Leader, "campaign")
            .await;
    }
}

/// The longest a leader pauses proposing for one handover request.
pub const HANDOVER_MAX: Duration = Duration::from_secs(10);

/// On shard `k`'s leader: pauses proposing (for twice `budget` plus the
/// leader lease, or until leadership is lost), waits up to `budget` until
/// node `to` matched its whole log, then until this node's lease ran out
/// so that it grants `to` its vote ([`crate::raft::vote_clock`]). A paused op is proposed after the pause or, once this
/// node no longer leads, forwarded to the new leader: never both.
pub(crate) async fn handover(
    node: &Node,
    k: ShardId,
    to: NodeId,
    budget: Duration,
) -> MemberAnswer {
    if !voters(node, k).contains(&to) {
        return MemberAnswer::Refused(format!("node {to} is not a voter of shard {k}"));
    }
    let budget = budget.min(HANDOVER_MAX / 2);
    let lease = Duration::from_millis(node.options().timing.election_max_ms);
    let proposer = node.proposer(k);
    proposer.pause(budget * 2 + lease);
    let matched = node
        .raft(k)
        .wait(Some(budget))
        .metrics(
            |m| {
                let r = m.replication.as_ref().and_then(|r| r.get(&to).copied());
                let matched = r.flatten().map(|l| l.index);
                matched.is_some() && matched >= m.last_log_index
            },
            "handover",
        )
        .await;
    match matched {
        Ok(_) => {
            // Paused, the log stays matched while the lease runs out.
            let grants = node.vote_clock(k).grants_from(lease);
            tokio::time::sleep_until(grants.into()).await;
            MemberAnswer::Done
        }
        Err(_) => {
            proposer.resume();
            MemberAnswer::Retry(format!(
                "node {to} did not catch up with shard {k}'s leader in time"
            ))
        }
    }
}

/// Tells every member of shard `k` to hold its rebalancer off it for `d`
/// (best effort: a member that misses it may move leadership back).
pub(crate) async fn hold_everywhere(node: &Node, k: ShardId, d: Duration) {
    let cmd = MemberCmd::Hold {
        ms: d.as_millis() as u64,
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
        budget_ms: budget.as_millis() as u64,
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
        budget_ms: budget.as_millis() as u64,
    };
    let _ = call(node, to, k, &cmd, budget + NOTICE_TIMEOUT).await;
}
