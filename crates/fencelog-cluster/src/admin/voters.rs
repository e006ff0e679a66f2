//! A shard's membership as this node knows it: the voters of its newest
//! config, every member, and the preferred leader among the voters (where
//! the rebalancer moves leadership, and where a removal hands it).

use crate::ids::{NodeId, ShardId};
use crate::node::Node;
use crate::raft::types::StoredMembership;
use std::collections::BTreeSet;

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

/// Shard `k`'s preferred leader among `voters`: the (k mod N)-th voter in
/// id order, node `(k mod N)+1` for voters `1..=N`.
pub fn preferred(k: ShardId, voters: &BTreeSet<NodeId>) -> Option<NodeId> {
    if voters.is_empty() {
        return None;
    }
    voters.iter().nth(k as usize % voters.len()).copied()
}

/// Node ids as `1,2,3` (`-` for none).
pub fn list(ids: &BTreeSet<NodeId>) -> String {
    if ids.is_empty() {
        return "-".into();
    }
    let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    ids.join(",")
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
