//! Membership changes and leadership transfer (issue 14), for every shard's
//! Raft group at once.
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

use super::rebalance::preferred;
use super::transfer::{campaign_elsewhere, hold_everywhere, MANUAL_HOLD};
use crate::ids::{NodeId, ShardId};
use crate::node::Node;
use crate::raft::proposer::leadership;
use crate::raft::types::StoredMembership;
use crate::rpc::{decode, encode, RpcKind};
use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How long an admin operation may take when the request does not say.
pub const ADMIN_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);
/// The longest an admin request may ask for.
pub const ADMIN_TIMEOUT_MAX: Duration = Duration::from_secs(600);
/// Between two polls of a condition.
const POLL: Duration = Duration::from_millis(50);
/// A who-are-you probe: one short RPC.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

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

/// Why an admin operation failed, as its HTTP answer classes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminError {
    /// The request is wrong (400).
    BadRequest(String),
    /// Not done in time, or a peer could not be reached (503): the change
    /// may be partly done; every step is idempotent, so run it again.
    Unavailable(String),
}

/// The voters of a membership's newest config (the one a joint change
/// moves to).
pub fn newest_voters(m: &StoredMembership) -> BTreeSet<NodeId> {
    let configs = m.membership().get_joint_config();
    configs.last().cloned().unwrap_or_default()
}

/// Shard `k`'s voters (newest config) as node `node` knows them.
pub fn voters(node: &Node, k: ShardId) -> BTreeSet<NodeId> {
    newest_voters(&node.raft(k).metrics().borrow().membership_config)
}

/// Every node of shard `k`'s membership (voters and learners).
pub fn members(node: &Node, k: ShardId) -> BTreeSet<NodeId> {
    let m = node.raft(k).metrics().borrow().membership_config.clone();
    m.membership().nodes().map(|(id, _)| *id).collect()
}

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
            let budget = Duration::from_millis(budget_ms).min(super::transfer::CAMPAIGN_BUDGET_MAX);
            match super::transfer::campaign(node, k, Instant::now() + budget, true).await {
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
            return super::transfer::handover(node, k, to, budget).await;
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

/// Sends `cmd` for shard `k` to node `to` at `addr` (itself: at once).
async fn call_at(
    node: &Node,
    to: NodeId,
    addr: &str,
    k: ShardId,
    cmd: &MemberCmd,
    timeout: Duration,
) -> Result<MemberAnswer, String> {
    if to == node.id() {
        return Ok(Box::pin(handle(node, k, cmd.clone())).await);
    }
    let call = node
        .transport()
        .call(to, addr, k, RpcKind::Member, encode(cmd), timeout);
    let bytes = call.await.map_err(|e| e.to_string())?;
    decode(&bytes)
}

/// Sends `cmd` for shard `k` to node `to`, whose address shard `k`'s
/// membership holds.
pub(crate) async fn call(
    node: &Node,
    to: NodeId,
    k: ShardId,
    cmd: &MemberCmd,
    timeout: Duration,
) -> Result<MemberAnswer, String> {
    let addr = node
        .addr_of(k, to)
        .ok_or(format!("node {to} is not a member of shard {k}"))?;
    call_at(node, to, &addr, k, cmd, timeout).await
}

pub(crate) fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// Runs `cmd` on shard `k`'s leader, following leadership, until it is
/// answered (anything but "not leader" or "retry") or `deadline` passes.
async fn on_leader(
    node: &Node,
    k: ShardId,
    cmd: &MemberCmd,
    deadline: Instant,
) -> Result<MemberAnswer, AdminError> {
    let mut why = format!("shard {k} has no leader");
    loop {
        if let Some(l) = node.leader_of(k) {
            match call(node, l, k, cmd, left(deadline).max(POLL)).await {
                Ok(MemberAnswer::Refused(m)) => return Err(AdminError::BadRequest(m)),
                Ok(MemberAnswer::NotLeader(_)) => {
                    why = format!("node {l} no longer leads shard {k}")
                }
                Ok(MemberAnswer::Retry(m)) => why = m,
                Ok(a) => return Ok(a),
                Err(m) => why = m,
            }
        }
        if Instant::now() >= deadline {
            return Err(AdminError::Unavailable(format!(
                "shard {k}: not done in time: {why}"
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

pub(crate) fn check_shard(node: &Node, k: ShardId) -> Result<(), AdminError> {
    if k >= node.shard_count() {
        return Err(AdminError::BadRequest(format!(
            "shard {k} does not exist: the cluster has {} shards",
            node.shard_count()
        )));
    }
    Ok(())
}

/// Node ids as `1,2,3` (`-` for none).
pub fn list(ids: &BTreeSet<NodeId>) -> String {
    if ids.is_empty() {
        return "-".into();
    }
    let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    ids.join(",")
}

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
