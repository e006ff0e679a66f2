//! When a shard builds a snapshot. openraft's own policy builds one every
//! `snapshot_logs` entries and then purges the log up to `keep_logs`
//! behind it. A leader that is sending a follower the previous snapshot
//! meanwhile has, by the time the follower has installed it, purged the
//! entries that follow it, so the follower is sent another snapshot, and
//! another: a livelock whenever a transfer takes longer than the shard
//! takes to write `snapshot_logs` entries (a shard of several GB under
//! heavy writes).
//!
//! So the policy is off (`SnapshotPolicy::Never`) and this task decides
//! instead, every [`CHECK_MS`]: a snapshot is due at `snapshot_logs`
//! entries past the last one, as before, but while this node is sending a
//! snapshot of the shard it waits, until `snapshot_hold_logs` entries are
//! past the last one (the bound on the log's memory and disk). The
//! snapshot being sent stays the newest, so nothing after it is purged
//! and the follower goes on from its log once installed.
//!
//! A snapshot whose build began just before a transfer of the previous
//! one costs that follower one more transfer, not a livelock: the next
//! one is of the newest snapshot, held.

use crate::types::Raft;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the task looks at a shard's applied and snapshot positions.
/// A snapshot is at most this late, which nothing depends on.
pub const CHECK_MS: u64 = 50;

/// Snapshot transfers this node is making for one shard.
#[derive(Debug, Default)]
pub struct Sends(AtomicUsize);

impl Sends {
    /// Counts one transfer until the guard goes.
    pub fn start(self: &Arc<Self>) -> SendGuard {
        self.0.fetch_add(1, Ordering::SeqCst);
        SendGuard(self.clone())
    }

    /// Transfers under way now.
    pub fn in_flight(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// One transfer under way (see [`Sends::start`]).
pub struct SendGuard(Arc<Sends>);

impl Drop for SendGuard {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// When a snapshot is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Entries past the last snapshot that make the next one due.
    pub logs: u64,
    /// Entries past the last snapshot at which the next one is built even
    /// while one is being sent.
    pub hold_logs: u64,
}

impl Policy {
    /// Whether to build a snapshot now: `applied` and `snapshot` are the
    /// shard's indexes (`None` before the first), `sending` the transfers
    /// under way. Pure, so it is unit-tested.
    pub fn due(&self, applied: Option<u64>, snapshot: Option<u64>, sending: usize) -> bool {
        let Some(applied) = applied else {
            return false;
        };
        // Entries past the snapshot; openraft's own rule counts from the
        // entry after it (`next_index`), which is the same count.
        let past = match snapshot {
            Some(s) => applied.saturating_sub(s),
            None => applied + 1,
        };
        past >= self.logs && (sending == 0 || past >= self.hold_logs)
    }
}

/// Ends the shard's task when dropped.
pub struct Trigger {
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Starts the task for one shard's group. `ignore_sends` is the
/// `SnapshotHoldIgnored` mutation (tests): every due snapshot is built.
pub fn spawn(raft: Raft, sends: Arc<Sends>, policy: Policy, ignore_sends: bool) -> Trigger {
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(CHECK_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stopped => return,
                _ = tick.tick() => {}
            }
            let (applied, snapshot) = {
                let m = raft.metrics();
                let m = m.borrow();
                if m.state == openraft::ServerState::Shutdown {
                    return;
                }
                (m.last_applied.map(|a| a.index), m.snapshot.map(|s| s.index))
            };
            let sending = if ignore_sends { 0 } else { sends.in_flight() };
            // openraft ignores a trigger while it is building one.
            if policy.due(applied, snapshot, sending) && raft.trigger().snapshot().await.is_err() {
                return;
            }
        }
    });
    Trigger { _stop: stop }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Policy = Policy {
        logs: 10,
        hold_logs: 40,
    };

    #[test]
    fn due_at_logs_past_the_last_snapshot() {
        assert!(!P.due(None, None, 0));
        assert!(!P.due(Some(8), None, 0), "9 entries, 0..=8");
        assert!(P.due(Some(9), None, 0), "10 entries, 0..=9");
        assert!(!P.due(Some(19), Some(10), 0));
        assert!(P.due(Some(20), Some(10), 0));
        assert!(
            !P.due(Some(5), Some(10), 0),
            "a snapshot installed past applied"
        );
    }

    #[test]
    fn a_transfer_holds_it_until_hold_logs() {
        assert!(!P.due(Some(20), Some(10), 1));
        assert!(!P.due(Some(49), Some(10), 2));
        assert!(P.due(Some(50), Some(10), 1));
        assert!(P.due(Some(50), Some(10), 0));
    }

    #[test]
    fn the_guard_counts_one_transfer() {
        let s = Arc::new(Sends::default());
        let a = s.start();
        let b = s.start();
        assert_eq!(s.in_flight(), 2);
        drop(a);
        assert_eq!(s.in_flight(), 1);
        drop(b);
        assert_eq!(s.in_flight(), 0);
    }
}
