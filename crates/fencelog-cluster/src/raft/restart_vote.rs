//! A node never resumes leading a shard at a term it led before it
//! stopped. openraft 0.9 restarts a node whose durable vote is its own
//! committed one straight into leadership at that term, with no election.
//! That is unsafe here: a leader's entries are readable, and so sent to
//! followers, before its WAL has synced them (they count towards commit
//! only once synced). A leader that crashes with such an entry unsynced
//! loses it, while a follower may hold it under log id (term, leader,
//! index). Resumed at the same term, the leader would write a new entry at
//! that index under the same log id; the follower would keep its own copy
//! (openraft skips entries whose log id it already holds), and once the
//! index commits the replicas would apply different ops there.
//!
//! So on start the shard's vote, if it is this node's committed vote, is
//! handed to openraft uncommitted: the node starts as a follower and a
//! leader is elected at a higher term, whose entries conflict with, and so
//! cut, any stale tail. The vote file keeps the committed vote until
//! openraft saves the next one; it is demoted on every start. The cost is
//! an election after a leader's restart, as a standard Raft node pays.

use super::types::Vote;
use crate::ids::NodeId;

/// The vote openraft should start from, given the durable one.
pub fn on_start(durable: Option<Vote>, id: NodeId) -> Option<Vote> {
    let mut vote = durable?;
    if vote.committed && vote.leader_id.voted_for() == Some(id) {
        vote.committed = false;
    }
    Some(vote)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_nodes_committed_vote_is_demoted() {
        let own = Vote::new_committed(7, 1);
        assert_eq!(on_start(Some(own), 1), Some(Vote::new(7, 1)));
        let others = Vote::new_committed(7, 2);
        assert_eq!(on_start(Some(others), 1), Some(others));
        let candidate = Vote::new(8, 1);
        assert_eq!(on_start(Some(candidate), 1), Some(candidate));
        assert_eq!(on_start(None, 1), None);
    }
}
