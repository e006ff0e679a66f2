//! Leader spreading: shard k's preferred leader is the (k mod N)-th voter
//! of its newest config in id order — node `(k mod N)+1` for voters
//! `1..=N`. Every node runs this task: every interval, for each shard it
//! prefers but does not lead, it campaigns ([`super::transfer::campaign`])
//! when the shard has a leader it can reach, its own log holds that
//! leader's read index, its WAL is healthy and no manual transfer or
//! removal holds the shard. A failed campaign holds the shard for three
//! intervals, so two nodes never fight over it.

use crate::ids::{NodeId, ShardId};
use crate::node::Node;
use openraft::ServerState;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// Shard `k`'s preferred leader among `voters`.
pub fn preferred(k: ShardId, voters: &BTreeSet<NodeId>) -> Option<NodeId> {
    if voters.is_empty() {
        return None;
    }
    voters.iter().nth(k as usize % voters.len()).copied()
}

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
    let voters = super::membership::newest_voters(&m.membership_config);
    m.state == ServerState::Follower
        && m.current_leader.is_some_and(|l| l != node.id())
        && preferred(k, &voters) == Some(node.id())
}

async fn take(node: &Node, k: ShardId, every: std::time::Duration) {
    if super::transfer::caught_up(node, k).await != Some(true) {
        return;
    }
    // A handover may wait out the leader's lease, and one election may
    // take up to the longest election timeout: leave room for both,
    // twice, so a loaded machine's slow round does not count as a loss.
    let round = std::time::Duration::from_millis(node.options().timing.election_max_ms);
    let deadline = Instant::now() + every * 2 + round * 4;
    match super::transfer::campaign(node, k, deadline, false).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preferred_leader_is_the_k_mod_n_th_voter() {
        let three = BTreeSet::from([1, 2, 3]);
        let leaders: Vec<_> = (0..6).map(|k| preferred(k, &three)).collect();
        assert_eq!(leaders, [1, 2, 3, 1, 2, 3].map(Some));
        let after_a_removal = BTreeSet::from([2, 3, 4]);
        assert_eq!(preferred(0, &after_a_removal), Some(2));
        assert_eq!(preferred(2, &after_a_removal), Some(4));
        assert_eq!(preferred(0, &BTreeSet::new()), None);
    }
}
