//! Deliberate bugs the crash, fault and corruption suites must catch
//! (issue 4, section 8). Off unless a test switches one on; each is a
//! one-line check at the spot it breaks. A process-wide switch rather than a
//! config field because recovery and segment creation run before and
//! outside any engine; so only one test binary (`crash_mutations`) ever sets
//! it, and it runs its tests one at a time.

use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mutation {
    None = 0,
    /// The writer answers a group before its `sync_data` (and syncs after).
    AckBeforeSync,
    /// A new segment's directory entry is never synced.
    SkipDirSync,
    /// A failed `sync_data` is treated as success.
    IgnoreSyncError,
    /// Recovery cuts the log at any frame that fails to decode, wherever it is.
    TruncateAnyBadFrame,
    /// Fence frames do not count when the log is replayed, so a data-less
    /// fence lives only in the memory of the engine that accepted it.
    FenceOnlyInMemory,
    /// The writer publishes a group to readers before its `sync_data`.
    ServeUnsynced,
}

static ACTIVE: AtomicU8 = AtomicU8::new(Mutation::None as u8);

pub fn set(m: Mutation) {
    ACTIVE.store(m as u8, Ordering::SeqCst);
}

#[inline]
pub fn active(m: Mutation) -> bool {
    ACTIVE.load(Ordering::Relaxed) == m as u8
}
