//! Leader spreading: shard k's preferred leader is the (k mod N)-th voter
//! of its newest config in id order — node `(k mod N)+1` for voters
//! `1..=N`. Every node runs this task: every interval, for each shard it
//! prefers but does not lead, it campaigns ([`super::campaign`])
//! when the shard has a leader it can reach, its own log holds that
//! leader's read index, its WAL is healthy and no manual transfer or
//! removal holds the shard. A failed campaign holds the shard for three
//! intervals, so two nodes never fight over it.

use super::campaign::campaign;
use super::voters::{newest_voters, preferred};
use crate::ids::ShardId;
use crate::node::Node;
use crate::rpc::{decode, encode, RpcKind};
use openraft::ServerState;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Starts the node's rebalancer, when its options ask for one. It stops
/// with the node.
pub fn spawn(node: &Arc<Node>) {
    let Some(every) = node.options().rebalance else {
        return;
    };
    crate::node::every_shard_periodically(node, every, move |node, k| async move {
        if should_take(&node, k) {
            take(&node, k, every).await;
        }
    });
}

fn should_take(node: &Node, k: ShardId) -> bool {
    if node.holds().held(k) || node.wal().poisoned().is_some() {
        return false;
    }
    let m = node.raft(k).metrics().borrow().clone();
    let voters = newest_voters(&m.membership_config);
    m.state == ServerState::Follower
        && m.current_leader.is_some_and(|l| l != node.id())
        && preferred(k, &voters) == Some(node.id())
}

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

async fn take(node: &Node, k: ShardId, every: std::time::Duration) {
    if caught_up(node, k).await != Some(true) {
        return;
    }
    // A handover may wait out the leader's lease, and one election may
    // take up to the longest election timeout: leave room for both,
    // twice, so a loaded machine's slow round does not count as a loss.
    let round = std::time::Duration::from_millis(node.options().timing.election_max_ms);
    let deadline = Instant::now() + every * 2 + round * 4;
    match campaign(node, k, deadline, false).await {
        Ok(()) => tracing::info!(
            shard = k,
            node = node.id(),
            "rebalanced: leads its preferred shard"
        ),
        Err(e) => {
            tracing::info!(shard = k, error = %e, "rebalance campaign failed; holding off");
            node.holds().hold(k, every * 3);
        }
    }
}
