//! Durable per-stream state shared between the writer (sole mutator) and
//! readers. Only the writer stores, and only after the group's fdatasync, so
//! whatever a reader loads here is durable.
//!
//! The fields the rejection fast path and the writer's planning read on
//! every append are atomics; the rest — the index, the fence history, the
//! retention settings, the idempotent producers and cursors, and the
//! group that last changed the stream — sit behind the stream's one
//! lock, under which the writer publishes a stream's whole state at once,
//! readers collect frame locations, and the checkpointer captures a
//! consistent copy.

use crate::carried::Carried;
use crate::codec::checkpoint::{StreamEntry, FENCE_HISTORY_MAX};
use crate::config::Config;
use crate::fence::FenceState;
use crate::index::StreamIndex;
use crate::locks;
use fencelog_types::{FenceBy, FenceEvent, StreamConfig, StreamState};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// Every stream by name, ordered so listing by prefix is a range scan.
/// Tombstones stay in it (they keep their token forever).
pub type StreamMap = BTreeMap<Box<str>, Arc<StreamShared>>;

const SEALED: u8 = 1;
const DELETED: u8 = 1 << 1;

/// A stream's durable state: what the writer published after a group's
/// sync, or recovery after the scan.
#[derive(Debug, Default)]
pub struct StreamShared {
    highest_token: AtomicU64,
    /// Stored last when a group is published (Release), after the index has
    /// grown, so a reader that loads it (Acquire) finds every seq below it
    /// in the index.
    next_seq: AtomicU64,
    first_seq: AtomicU64,
    last_timestamp_ms: AtomicU64,
    flags: AtomicU8,
    /// A mutex, not a read-write lock: every holder holds it only to publish
    /// one group's changes, to collect a read's frame locations, or to copy
    /// the state out.
    pub(crate) inner: Mutex<Inner>,
}

/// What sits behind the stream's lock.
#[derive(Debug, Default)]
pub(crate) struct Inner {
    pub index: StreamIndex,
    /// The last group that changed the stream (a checkpoint's `as_of_group`).
    pub as_of_group: u64,
    /// The newest fence history entry; its token is the highest token.
    pub newest: Option<Newest>,
    /// Everything most streams never have: a retention override, older
    /// fence history, producers and cursors.
    pub cold: Option<Box<Cold>>,
}

/// The newest fence history entry but its token (always the highest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Newest {
    pub first_seq: u64,
    pub timestamp_ms: u64,
    pub by: FenceBy,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Cold {
    pub config: StreamConfig,
    /// Fence history before the newest entry, oldest first.
    pub older: Vec<FenceEvent>,
    pub carried: Carried,
}

impl Inner {
    /// The fence history, oldest first, given the highest token.
    pub fn history(&self, highest_token: u64) -> Vec<FenceEvent> {
        let mut out = self
            .cold
            .as_ref()
            .map(|c| c.older.clone())
            .unwrap_or_default();
        if let Some(n) = self.newest {
            out.push(FenceEvent {
                token: highest_token,
                first_seq: n.first_seq,
                timestamp_ms: n.timestamp_ms,
                by: n.by,
            });
        }
        out
    }

    /// Records that `token` took effect (it is the stream's new highest):
    /// the previous newest entry moves to the older ones, at most 63 kept.
    pub fn push_event(&mut self, previous_highest: u64, event: FenceEvent) {
        if let Some(n) = self.newest.take() {
            let cold = self.cold_mut();
            if cold.older.len() + 1 >= FENCE_HISTORY_MAX {
                cold.older.remove(0);
            }
            cold.older.push(FenceEvent {
                token: previous_highest,
                first_seq: n.first_seq,
                timestamp_ms: n.timestamp_ms,
                by: n.by,
            });
        }
        self.newest = Some(Newest {
            first_seq: event.first_seq,
            timestamp_ms: event.timestamp_ms,
            by: event.by,
        });
    }

    pub fn config(&self) -> StreamConfig {
        self.cold.as_ref().map(|c| c.config).unwrap_or_default()
    }

    pub fn carried(&self) -> Option<&Carried> {
        self.cold
            .as_ref()
            .map(|c| &c.carried)
            .filter(|c| !c.is_empty())
    }

    pub fn cold_mut(&mut self) -> &mut Cold {
        self.cold.get_or_insert_with(Box::default)
    }

    /// Drops the cold part once it holds nothing.
    pub fn tidy(&mut self) {
        if self.cold.as_deref().is_some_and(|c| *c == Cold::default()) {
            self.cold = None;
        }
    }
}

impl StreamShared {
    /// A stream whose state recovery has rebuilt.
    pub(crate) fn recovered(fence: FenceState, last_timestamp_ms: u64, inner: Inner) -> Self {
        let s = StreamShared {
            inner: Mutex::new(inner),
            ..Default::default()
        };
        s.store(fence, last_timestamp_ms);
        s
    }

    /// The durable state the fencing rule looks at.
    pub(crate) fn fence_state(&self) -> FenceState {
        let flags = self.flags.load(Ordering::Acquire);
        FenceState {
            exists: true,
            highest_token: self.highest_token.load(Ordering::Acquire),
            next_seq: self.next_seq.load(Ordering::Acquire),
            first_seq: self.first_seq.load(Ordering::Acquire),
            sealed: flags & SEALED != 0,
            deleted: flags & DELETED != 0,
        }
    }

    /// The highest fencing token ever accepted.
    pub fn highest_token(&self) -> u64 {
        self.highest_token.load(Ordering::Acquire)
    }

    /// The seq the next record will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq.load(Ordering::Acquire)
    }

    /// The timestamp of the last record; 0 when there is none.
    pub fn last_timestamp_ms(&self) -> u64 {
        self.last_timestamp_ms.load(Ordering::Acquire)
    }

    /// Whether the stream is a tombstone.
    pub fn is_deleted(&self) -> bool {
        self.flags.load(Ordering::Acquire) & DELETED != 0
    }

    /// Whether the stream is sealed.
    pub fn is_sealed(&self) -> bool {
        self.flags.load(Ordering::Acquire) & SEALED != 0
    }

    /// All of it at once, named `name`, with `config`'s retention defaults.
    pub fn snapshot(&self, name: &str, config: &Config) -> StreamState {
        let inner = locks::lock(&self.inner);
        let f = self.fence_state();
        let c = inner.config();
        StreamState {
            stream: name.to_string(),
            first_seq: f.first_seq,
            next_seq: f.next_seq,
            highest_token: f.highest_token,
            last_timestamp_ms: self.last_timestamp_ms(),
            sealed: f.sealed,
            deleted: f.deleted,
            retention_age_s: c.retention_age_s.effective(config.retention_age_s),
            retention_bytes: c.retention_bytes.effective(config.retention_bytes),
            retention_respect_cursors: c.respect_cursors,
            bytes: inner.index.bytes(),
        }
    }

    /// A consistent copy of everything a checkpoint keeps of the stream,
    /// taken under its lock (the writer publishes a group's changes to a
    /// stream under the same lock).
    pub(crate) fn capture(&self, name: &str) -> StreamEntry {
        let inner = locks::lock(&self.inner);
        let f = self.fence_state();
        let c = inner.config();
        let carried = inner.carried().cloned().unwrap_or_default();
        StreamEntry {
            name: name.to_string(),
            sealed: f.sealed,
            deleted: f.deleted,
            retention_age_s: c.retention_age_s,
            retention_bytes: c.retention_bytes,
            respect_cursors: c.respect_cursors,
            as_of_group: inner.as_of_group,
            highest_token: f.highest_token,
            next_seq: f.next_seq,
            first_seq: f.first_seq,
            last_timestamp_ms: self.last_timestamp_ms(),
            producer_token_floor: carried.producer_token_floor,
            producers: carried.producers,
            history: inner.history(f.highest_token),
            cursors: carried.cursors,
        }
    }

    /// Publishes the durable state; the caller holds the stream's lock.
    /// Writer thread (or recovery) only. `next_seq` is stored last.
    pub(crate) fn store(&self, f: FenceState, last_timestamp_ms: u64) {
        debug_assert!(f.highest_token >= self.highest_token.load(Ordering::Relaxed));
        debug_assert!(f.next_seq >= self.next_seq.load(Ordering::Relaxed));
        debug_assert!(f.first_seq >= self.first_seq.load(Ordering::Relaxed));
        let flags = (f.sealed as u8 * SEALED) | (f.deleted as u8 * DELETED);
        self.highest_token.store(f.highest_token, Ordering::Release);
        self.first_seq.store(f.first_seq, Ordering::Release);
        self.flags.store(flags, Ordering::Release);
        self.last_timestamp_ms
            .store(last_timestamp_ms, Ordering::Release);
        self.next_seq.store(f.next_seq, Ordering::Release);
    }
}
