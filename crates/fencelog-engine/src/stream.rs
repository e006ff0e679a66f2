//! Durable per-stream state shared between the writer (sole mutator) and
//! readers. Only the writer stores, and only after the group's fdatasync, so
//! whatever a reader loads here is durable.

use crate::fence::FenceState;
use crate::index::StreamIndex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Every stream by name, ordered so listing by prefix is a range scan.
pub type StreamMap = BTreeMap<Box<str>, Arc<StreamShared>>;

/// A stream's durable state: what the writer published after a group's
/// sync, or recovery after the scan.
#[derive(Debug, Default)]
pub struct StreamShared {
    highest_token: AtomicU64,
    /// Stored last when a group is published (Release), after the index has
    /// grown, so a reader that loads it (Acquire) finds every seq below it
    /// in the index.
    next_seq: AtomicU64,
    last_timestamp_ms: AtomicU64,
    /// A mutex, not a read-write lock: both sides hold it only to push one
    /// entry or to collect a read's frame locations, and it is 8 bytes
    /// smaller on a struct there is one of per stream.
    pub(crate) index: Mutex<StreamIndex>,
}

/// A snapshot of a stream's durable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamState {
    /// The stream's name.
    pub stream: String,
    /// 0 until trimming exists.
    pub first_seq: u64,
    /// The seq the next record will get: every seq below it is durable.
    pub next_seq: u64,
    /// The highest fencing token ever accepted, durably.
    pub highest_token: u64,
    /// Timestamp of the last record; 0 when the stream has none.
    pub last_timestamp_ms: u64,
}

impl StreamShared {
    /// A stream whose index recovery has built; nothing published yet.
    pub(crate) fn with_index(index: StreamIndex) -> Self {
        StreamShared {
            index: Mutex::new(index),
            ..Default::default()
        }
    }

    /// The durable state the fencing rule looks at.
    pub(crate) fn fence_state(&self) -> FenceState {
        FenceState {
            exists: true,
            highest_token: self.highest_token.load(Ordering::Acquire),
            next_seq: self.next_seq.load(Ordering::Acquire),
            ..FenceState::default()
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

    /// All of it at once, named `name`.
    pub fn snapshot(&self, name: &str) -> StreamState {
        StreamState {
            stream: name.to_string(),
            first_seq: 0,
            next_seq: self.next_seq(),
            highest_token: self.highest_token(),
            last_timestamp_ms: self.last_timestamp_ms(),
        }
    }

    /// Publishes durable state. Writer thread (or recovery) only.
    pub(crate) fn publish(&self, highest_token: u64, next_seq: u64, last_timestamp_ms: u64) {
        debug_assert!(highest_token >= self.highest_token.load(Ordering::Relaxed));
        debug_assert!(next_seq >= self.next_seq.load(Ordering::Relaxed));
        self.highest_token.store(highest_token, Ordering::Release);
        self.last_timestamp_ms
            .store(last_timestamp_ms, Ordering::Release);
        self.next_seq.store(next_seq, Ordering::Release);
    }
}
