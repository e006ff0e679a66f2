//! Finding where a stream reaches a point in time: the first record whose
//! timestamp is at or after `T`.
//!
//! Timestamps never decrease within a stream (the writer assigns
//! `max(now, last)`), and every record of a frame carries its frame's, so
//! the answer is the first record of the first frame at or after `T`. It is
//! found by a binary search over seqs through the in-memory index. Each
//! probe reads one frame and verifies its checksum, exactly like a read (a
//! slice of the memory map for a sealed segment, one `pread` for the active
//! one); a probe that lands in frame `[a, b)` narrows the range to below `a`
//! or to `b` and above, so a search over `n` records costs at most
//! `⌈log2(n + 1)⌉` frame reads — 20 for a million single-record appends,
//! fewer when appends carry many records. The stream's lock is held only to
//! look one seq up (with the segment list's, so the entry and its segment
//! are paired consistently), never while a frame is read.

use crate::error::ReadError;
use crate::name::validate_stream_name;
use crate::reader::{locate, with_frame};
use crate::shared::Shared;

/// See [`crate::Engine::seq_at_timestamp`].
pub(crate) fn seq_at_timestamp(
    shared: &Shared,
    stream: &str,
    timestamp_ms: u64,
) -> Result<u64, ReadError> {
    validate_stream_name(stream).map_err(ReadError::InvalidStreamName)?;
    let s = shared.stream(stream).ok_or(ReadError::NotFound)?;
    let f = s.fence_state();
    if f.deleted {
        return Err(ReadError::NotFound);
    }
    // Every seq below `lo` is older than `timestamp_ms` (or trimmed); `hi`
    // is the tail or the first seq of a frame at or after it. Both only
    // ever move inward.
    let (mut lo, mut hi) = (f.first_seq, f.next_seq);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let Some((loc, seg)) = locate(shared, &s, mid)? else {
            // Not readable although below the tail: only records trimmed
            // or reclaimed from the front since the search began, which
            // are older.
            lo = mid + 1;
            continue;
        };
        let ts = with_frame(shared, stream, &loc, &seg, |_, _, frame| {
            frame.header.timestamp_ms
        })?;
        if ts >= timestamp_ms {
            hi = loc.first_seq.max(lo);
        } else {
            lo = loc.end_seq().min(hi);
        }
    }
    Ok(lo)
}
