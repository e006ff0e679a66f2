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
//! entries past the last one, as before, but it waits while this node is
//! sending a snapshot of the shard, and while a follower it sent one to in
//! the last [`HOLD_AFTER_SEND`] has not caught up to within `keep_logs` of
//! the applied index (its retries and its catch-up from the log: openraft
//! protects only the log range of an AppendEntries in flight, so a
//! snapshot built the moment the transfer ended would purge the entries
//! the follower is about to ask for, and send it another snapshot). It
//! waits at most until `snapshot_hold_logs` entries are past the last
//! snapshot, or the shard's in-memory log holds `snapshot_hold_bytes` of
//! records (the bounds on the log's memory and disk).
//!
//! A snapshot whose build began just before a transfer of the previous
//! one costs that follower one more transfer, not a livelock: the next
//! one is of the newest snapshot, held.

use super::types::Raft;
use crate::ids::NodeId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the task looks at a shard's applied and snapshot positions.
/// A snapshot is at most this late, which nothing depends on.
pub const CHECK_MS: u64 = 50;

/// How long after a transfer to a follower ended (installed or failed)
/// the next snapshot still waits for that follower to catch up: its
/// retries, then its replay of the log from the snapshot. A follower that
/// died meanwhile holds it no longer than this.
pub const HOLD_AFTER_SEND: Duration = Duration::from_secs(60);
/// The transfers' end times are held for one insert or one scan.
const UNPOISONED: &str = "no thread panics while holding the snapshot transfers' end times";

/// Snapshot transfers this node is making for one shard, and when its
/// last one to each follower ended.
#[derive(Debug, Default)]
pub struct Sends {
    in_flight: AtomicUsize,
    ended: Mutex<HashMap<NodeId, Instant>>,
}

impl Sends {
    /// Counts one transfer to `target` until the guard goes.
    pub fn start(self: &Arc<Self>, target: NodeId) -> SendGuard {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        SendGuard {
            sends: self.clone(),
            target,
            reached: false,
        }
    }

    /// Transfers under way now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The followers whose last transfer ended within `within`.
    pub fn recent(&self, within: Duration) -> Vec<NodeId> {
        let ended = self.ended.lock().expect(UNPOISONED);
        ended
            .iter()
            .filter(|(_, at)| at.elapsed() < within)
            .map(|(id, _)| *id)
            .collect()
    }
}

/// One transfer under way (see [`Sends::start`]).
pub struct SendGuard {
    sends: Arc<Sends>,
    target: NodeId,
    reached: bool,
}

impl SendGuard {
    /// The target answered (a chunk was written): only then does the end
    /// of the transfer hold the next snapshot for it. A follower that is
    /// down, which openraft keeps trying, must not hold it.
    pub fn reached(&mut self) {
        self.reached = true;
    }
}

impl Drop for SendGuard {
    fn drop(&mut self) {
        if self.reached {
            let mut ended = self.sends.ended.lock().expect(UNPOISONED);
            ended.insert(self.target, Instant::now());
        }
        self.sends.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// When a snapshot is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Entries past the last snapshot that make the next one due.
    pub logs: u64,
    /// Entries kept in the log behind a snapshot (openraft's
    /// `max_in_snapshot_log_to_keep`).
    pub keep_logs: u64,
    /// Entries past the last snapshot at which the next one is built even
    /// while it is held.
    pub hold_logs: u64,
    /// Record bytes in the shard's in-memory Raft log at which the next
    /// snapshot is built even while it is held (the log's entries carry
    /// the records: large records reach memory limits before entry
    /// counts do).
    pub hold_bytes: u64,
}

impl Policy {
    /// Whether to build a snapshot now: `applied` and `snapshot` are the
    /// shard's indexes (`None` before the first), `held` whether a
    /// follower's catch-up holds it ([`Policy::holds`]). Pure, so it is
    /// unit-tested.
    pub fn due(&self, applied: Option<u64>, snapshot: Option<u64>, held: bool) -> bool {
        let Some(applied) = applied else {
            return false;
        };
        // Entries past the snapshot; openraft's own rule counts from the
        // entry after it (`next_index`), which is the same count.
        let past = match snapshot {
            Some(s) => applied.saturating_sub(s),
            None => applied + 1,
        };
        past >= self.logs && (!held || past >= self.hold_logs)
    }

    /// Whether a snapshot now would purge entries a recent recipient still
    /// needs: a transfer is under way (`sending`), or one of `matched`
    /// (the log index each recent recipient holds, as this leader last
    /// heard; `None` nothing yet) is below what a snapshot at `applied`
    /// lets openraft purge (up to `applied - keep_logs`).
    /// `log_bytes` is what the shard's log holds in memory: at
    /// `hold_bytes` nothing holds any more.
    pub fn holds(
        &self,
        applied: u64,
        sending: usize,
        matched: &[Option<u64>],
        log_bytes: u64,
    ) -> bool {
        let purge_to = applied.saturating_sub(self.keep_logs);
        let waiting = sending > 0 || matched.iter().any(|m| m.is_none_or(|m| m < purge_to));
        waiting && log_bytes < self.hold_bytes
    }
}

/// Ends the shard's task when dropped.
pub struct Trigger {
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Starts the task for one shard's group. `log_bytes` answers what the
/// shard's in-memory Raft log holds of record bytes now (the WAL's
/// [`crate::wal::shard_log::ShardLog::bytes`]). `ignore_sends` is the
/// `SnapshotHoldIgnored` mutation (tests): every due snapshot is built.
pub fn spawn(
    raft: Raft,
    log_bytes: impl Fn() -> u64 + Send + 'static,
    sends: Arc<Sends>,
    policy: Policy,
    ignore_sends: bool,
) -> Trigger {
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(CHECK_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stopped => return,
                _ = tick.tick() => {}
            }
            let recent = sends.recent(HOLD_AFTER_SEND);
            let (applied, snapshot, matched) = {
                let m = raft.metrics();
                let m = m.borrow();
                if m.state == openraft::ServerState::Shutdown {
                    return;
                }
                // Only a leader replicates; a recipient since removed from
                // the group holds nothing.
                let matched: Vec<Option<u64>> = match &m.replication {
                    Some(r) => recent
                        .iter()
                        .filter_map(|id| r.get(id).map(|l| l.map(|l| l.index)))
                        .collect(),
                    None => Vec::new(),
                };
                (
                    m.last_applied.map(|a| a.index),
                    m.snapshot.map(|s| s.index),
                    matched,
                )
            };
            let log_bytes = log_bytes();
            let held = !ignore_sends
                && applied.is_some_and(|a| policy.holds(a, sends.in_flight(), &matched, log_bytes));
            // openraft ignores a trigger while it is building one.
            if policy.due(applied, snapshot, held) && raft.trigger().snapshot().await.is_err() {
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
        keep_logs: 5,
        hold_logs: 40,
        hold_bytes: 1000,
    };

    #[test]
    fn due_at_logs_past_the_last_snapshot() {
        assert!(!P.due(None, None, false));
        assert!(!P.due(Some(8), None, false), "9 entries, 0..=8");
        assert!(P.due(Some(9), None, false), "10 entries, 0..=9");
        assert!(!P.due(Some(19), Some(10), false));
        assert!(P.due(Some(20), Some(10), false));
        assert!(
            !P.due(Some(5), Some(10), false),
            "a snapshot installed past applied"
        );
    }

    #[test]
    fn a_hold_lasts_until_hold_logs() {
        assert!(!P.due(Some(20), Some(10), true));
        assert!(!P.due(Some(49), Some(10), true));
        assert!(P.due(Some(50), Some(10), true));
    }

    #[test]
    fn a_transfer_or_a_recipient_behind_the_purge_point_holds() {
        assert!(P.holds(100, 1, &[], 0), "a transfer under way");
        assert!(!P.holds(100, 0, &[], 0));
        assert!(P.holds(100, 0, &[None], 0), "nothing heard from it yet");
        assert!(
            P.holds(100, 0, &[Some(94)], 0),
            "a snapshot at 100 purges up to 95"
        );
        assert!(!P.holds(100, 0, &[Some(95)], 0));
        assert!(P.holds(100, 0, &[Some(99), Some(3)], 0));
    }

    #[test]
    fn nothing_holds_once_the_log_holds_hold_bytes() {
        assert!(P.holds(100, 1, &[None], 999));
        assert!(!P.holds(100, 1, &[None], 1000));
    }

    #[test]
    fn the_guard_counts_one_transfer_and_notes_when_it_ended() {
        let s = Arc::new(Sends::default());
        let mut a = s.start(2);
        let b = s.start(3);
        assert_eq!(s.in_flight(), 2);
        assert!(s.recent(HOLD_AFTER_SEND).is_empty());
        a.reached();
        drop(a);
        assert_eq!(s.in_flight(), 1);
        assert_eq!(s.recent(HOLD_AFTER_SEND), vec![2]);
        assert!(s.recent(Duration::ZERO).is_empty());
        drop(b);
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.recent(HOLD_AFTER_SEND), vec![2], "3 never answered");
    }
}
