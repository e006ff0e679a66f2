//! When a leader can give its vote away. openraft 0.9 makes every voter,
//! the leader included, refuse vote requests until its own vote has gone
//! unchanged for the leader lease (its `election_timeout_max`). A
//! handover that lets the target campaign earlier makes the campaign
//! fail *and* unseats the leader (the candidate's higher term reaches it
//! in the next heartbeat answer), so a freshly elected leader, and then
//! whoever wins the election that follows, is unseated again and again.
//! The leader's own vote is the one the target needs (with it, the target
//! holds two votes of three), so [`crate::admin::transfer::handover`] waits until
//! this clock says the leader's lease has run out.

use super::types::Raft;
use crate::ids::NodeId;
use openraft::Vote;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Added to the lease: this clock notes a change when it sees the
/// metrics, a little after openraft stamped its vote; a margin covers the
/// scheduling between the two under load.
const LEASE_MARGIN: Duration = Duration::from_millis(50);
/// The clock is held to compare and stamp the vote, or to read it.
const UNPOISONED: &str = "no thread panics while holding the vote clock";

/// When shard's vote last changed, as this node saw it.
#[derive(Clone)]
pub struct VoteClock {
    seen: Arc<Mutex<(Option<Vote<NodeId>>, Instant)>>,
}

impl VoteClock {
    /// Watches `raft`'s vote until the group shuts down. The clock starts
    /// at now: before the first change it is seen, it errs late, never
    /// early.
    pub fn watch(raft: &Raft) -> VoteClock {
        let clock = VoteClock {
            seen: Arc::new(Mutex::new((None, Instant::now()))),
        };
        // The server metrics (vote, state, leader, membership) change only
        // with them; the full metrics change with every entry, and this
        // task would wake for each.
        let mut rx = raft.server_metrics();
        let seen = clock.seen.clone();
        tokio::spawn(async move {
            loop {
                let vote = rx.borrow_and_update().vote;
                {
                    let mut s = seen.lock().expect(UNPOISONED);
                    if s.0 != Some(vote) {
                        *s = (Some(vote), Instant::now());
                    }
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        });
        clock
    }

    /// The earliest instant at which this node, holding the vote it holds
    /// now, grants a vote to another candidate (given `lease`).
    pub fn grants_from(&self, lease: Duration) -> Instant {
        self.seen.lock().expect(UNPOISONED).1 + lease + LEASE_MARGIN
    }
}
