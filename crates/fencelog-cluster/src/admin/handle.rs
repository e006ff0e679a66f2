//! What a node does with a member command for one shard: any node says
//! who it is, holds its rebalancer off the shard, or campaigns for it; the
//! shard's leader adds a learner, reports a node's progress, promotes,
//! removes, or pauses for a handover.

use super::campaign::campaign;
use super::cmd::{MemberAnswer, MemberCmd, CAMPAIGN_BUDGET_MAX, HANDOVER_MAX};
use super::voters::{newest_voters, voters};
use crate::ids::{NodeId, ShardId};
use crate::node::Node;
use crate::raft::proposer::leadership;
use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers};
use std::time::{Duration, Instant};

/// Answers one command for shard `k` on this node.
pub(crate) async fn handle(node: &Node, k: ShardId, cmd: MemberCmd) -> MemberAnswer {
    match cmd {
        MemberCmd::Whoami => MemberAnswer::Whoami {
            node: node.id(),
            shards: node.shard_count(),
        },
        MemberCmd::Hold { ms } => {
            node.holds().hold(k, Duration::from_millis(ms));
            MemberAnswer::Done
        }
        MemberCmd::Campaign { budget_ms } => {
            let budget = Duration::from_millis(budget_ms).min(CAMPAIGN_BUDGET_MAX);
            match campaign(node, k, Instant::now() + budget, true).await {
                Ok(()) => MemberAnswer::Done,
                Err(m) => MemberAnswer::Retry(m),
            }
        }
        cmd => match leadership(node.raft(k), node.id()) {
            Ok(()) => as_leader(node, k, cmd).await,
            Err(hint) => MemberAnswer::NotLeader(hint),
        },
    }
}

/// A membership command on shard `k`'s leader (this node).
async fn as_leader(node: &Node, k: ShardId, cmd: MemberCmd) -> MemberAnswer {
    let raft = node.raft(k);
    let m = raft.metrics().borrow().clone();
    let membership = m.membership_config.membership().clone();
    let voters = newest_voters(&m.membership_config);
    let changed = match cmd {
        MemberCmd::AddLearner { node: n, addr } => {
            if membership.get_node(&n).is_some() {
                return MemberAnswer::Done;
            }
            raft.add_learner(n, BasicNode::new(addr), false).await
        }
        MemberCmd::Handover { to, budget_ms } => {
            let budget = Duration::from_millis(budget_ms);
            return handover(node, k, to, budget).await;
        }
        MemberCmd::Progress { node: n } => {
            let matched = m.replication.as_ref().and_then(|r| r.get(&n).copied());
            return MemberAnswer::Progress {
                matched: matched.flatten().map(|l| l.index),
                last: m.last_log_index,
            };
        }
        MemberCmd::Promote { node: n } => {
            if voters.contains(&n) && membership.get_joint_config().len() == 1 {
                return MemberAnswer::Done;
            }
            if membership.get_node(&n).is_none() {
                return MemberAnswer::Refused(format!("node {n} is not a learner of shard {k}"));
            }
            raft.change_membership(ChangeMembers::AddVoterIds([n].into()), true)
                .await
        }
        MemberCmd::Remove { node: n } => {
            if n == node.id() {
                return MemberAnswer::LeaderIsTarget;
            }
            let change = if voters.contains(&n) {
                if voters.len() == 1 {
                    return MemberAnswer::Refused(format!(
                        "node {n} is the last voter of shard {k}"
                    ));
                }
                ChangeMembers::RemoveVoters([n].into())
            } else if membership.get_node(&n).is_some() {
                ChangeMembers::RemoveNodes([n].into())
            } else {
                return MemberAnswer::Done;
            };
            raft.change_membership(change, false).await
        }
        MemberCmd::Whoami | MemberCmd::Campaign { .. } | MemberCmd::Hold { .. } => {
            unreachable!("answered by any node")
        }
    };
    match changed {
        Ok(_) => MemberAnswer::Done,
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
            MemberAnswer::NotLeader(f.leader_id)
        }
        Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
            ChangeMembershipError::InProgress(p),
        ))) => MemberAnswer::Retry(p.to_string()),
        Err(e) => MemberAnswer::Refused(e.to_string()),
    }
}

/// On shard `k`'s leader: pauses proposing (for twice `budget` plus the
/// leader lease, or until leadership is lost), waits up to `budget` until
/// node `to` matched its whole log, then until this node's lease ran out
/// so that it grants `to` its vote ([`crate::raft::vote_clock`]). A paused
/// op is proposed after the pause or, once this node no longer leads,
/// forwarded to the new leader: never both.
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
