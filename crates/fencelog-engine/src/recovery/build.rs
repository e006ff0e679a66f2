//! Building each stream's index from the records frames the scan found —
//! originals and relocated copies, the later copy of a batch winning — and
//! proving it covers the stream's readable seqs: a hole means a segment
//! that held live records is gone.

use super::corrupt;
use super::scan::Building;
use super::state::Found;
use crate::error::OpenError;
use crate::index::StreamIndex;
use crate::segment::segment_name;
use crate::stream::{Cold, Inner, Newest, StreamMap, StreamShared};
use std::collections::HashMap;
use std::sync::Arc;

/// The live copy of each batch, in seq order: frames wholly below the trim
/// point go; of several copies of one batch (an original and the copies
/// compaction wrote, or copies of copies) the last written wins.
fn live_copies(mut found: Vec<Found>, first_seq: u64) -> Result<Vec<Found>, (Found, &'static str)> {
    found.retain(|f| f.end_seq() > first_seq);
    found.sort_by_key(|f| (f.first_seq, f.group));
    let mut out: Vec<Found> = Vec::with_capacity(found.len());
    for f in found {
        match out.last_mut() {
            Some(last) if last.first_seq == f.first_seq => {
                if (last.count, last.len) != (f.count, f.len) {
                    return Err((f, "a copy of a batch that differs from it"));
                }
                *last = f;
            }
            _ => out.push(f),
        }
    }
    Ok(out)
}

/// Checks `live` covers `[first_seq, next_seq)` exactly, batch after batch.
fn check_cover(
    live: &[Found],
    first_seq: u64,
    next_seq: u64,
) -> Result<(), (Option<Found>, String)> {
    let mut expect = live
        .first()
        .map_or(first_seq, |f| f.first_seq.min(first_seq));
    if live.first().is_some_and(|f| f.first_seq > first_seq) {
        return Err((
            live.first().copied(),
            format!("records from {first_seq} have no frame"),
        ));
    }
    for f in live {
        if f.first_seq != expect {
            return Err((
                Some(*f),
                format!("records {expect}..{} have no frame", f.first_seq),
            ));
        }
        expect = f.end_seq();
    }
    if expect != next_seq {
        return Err((
            live.last().copied(),
            format!("records {expect}..{next_seq} have no frame"),
        ));
    }
    Ok(())
}

/// One stream's shared state from what the scan rebuilt. `last_group` is
/// the last group of the log: every one up to it is reflected.
fn build_one(
    name: &str,
    b: Building,
    last_group: u64,
    active: u64,
) -> Result<StreamShared, OpenError> {
    let f = b.core.fence;
    let mut index = StreamIndex::default();
    if !f.deleted {
        let live = live_copies(b.found, f.first_seq).map_err(|(at, why)| {
            corrupt(
                &segment_name(at.segment),
                at.offset,
                format!("stream {name}: {why}"),
            )
        })?;
        check_cover(&live, f.first_seq, f.next_seq).map_err(|(at, why)| {
            let (file, offset) = at.map_or((segment_name(active), 0), |a| {
                (segment_name(a.segment), a.offset)
            });
            corrupt(
                &file,
                offset,
                format!("stream {name}: {why}: a segment that held them is missing"),
            )
        })?;
        for l in live {
            index.push(l.first_seq, l.segment, l.offset, l.count, l.len);
        }
        index.trim_to(f.first_seq);
        index.shrink_to_fit();
    }
    let mut history = b.core.history;
    let newest = history.pop().map(|e| {
        debug_assert_eq!(e.token, f.highest_token);
        Newest {
            first_seq: e.first_seq,
            timestamp_ms: e.timestamp_ms,
            by: e.by,
        }
    });
    let cold = Cold {
        config: b.core.config,
        older: history,
        carried: b.core.carried,
    };
    let mut inner = Inner {
        index,
        as_of_group: b.as_of_group.max(last_group),
        newest,
        cold: Some(Box::new(cold)),
    };
    inner.tidy();
    Ok(StreamShared::recovered(f, b.core.last_timestamp_ms, inner))
}

/// Every stream, ready for readers and the writer. Returns them and the
/// number of readable records.
pub(super) fn build_streams(
    scanned: HashMap<Box<str>, Building>,
    last_group: u64,
    active: u64,
) -> Result<(StreamMap, u64), OpenError> {
    let mut streams = StreamMap::new();
    let mut records = 0;
    for (name, b) in scanned {
        if !b.core.fence.exists {
            // Only frames that are no state (copies) and no stream: the
            // scan refuses those, so nothing reaches here but a bug.
            return Err(corrupt(
                &segment_name(active),
                0,
                format!("stream {name} has frames but no state"),
            ));
        }
        let s = build_one(&name, b, last_group, active)?;
        let f = s.fence_state();
        records += f.next_seq - f.first_seq;
        streams.insert(name, Arc::new(s));
    }
    Ok((streams, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(first_seq: u64, count: u32, segment: u64, group: u64) -> Found {
        Found {
            first_seq,
            count,
            segment,
            offset: 40,
            len: 100,
            group,
        }
    }

    #[test]
    fn the_later_copy_wins_and_trimmed_frames_go() {
        let live = live_copies(
            vec![
                found(0, 2, 0, 1),
                found(2, 3, 0, 2),
                found(2, 3, 5, 9),
                found(5, 1, 1, 3),
            ],
            1,
        )
        .unwrap();
        assert_eq!(
            live,
            vec![found(0, 2, 0, 1), found(2, 3, 5, 9), found(5, 1, 1, 3)]
        );
        assert!(check_cover(&live, 1, 6).is_ok());
        let trimmed = live_copies(vec![found(0, 2, 0, 1), found(2, 3, 0, 2)], 2).unwrap();
        assert_eq!(trimmed, vec![found(2, 3, 0, 2)]);
        assert!(live_copies(vec![found(0, 2, 0, 1), found(0, 3, 4, 5)], 0).is_err());
    }

    #[test]
    fn holes_are_found_wherever_they_are() {
        let f = |a, n| found(a, n, 0, a);
        assert!(check_cover(&[], 4, 4).is_ok());
        assert!(
            check_cover(&[], 4, 5).is_err(),
            "records with no frame at all"
        );
        assert!(
            check_cover(&[f(2, 2)], 1, 4).is_err(),
            "the front is missing"
        );
        assert!(
            check_cover(&[f(0, 2), f(3, 1)], 0, 4).is_err(),
            "a hole in the middle"
        );
        assert!(check_cover(&[f(0, 2)], 0, 3).is_err(), "the end is missing");
        assert!(check_cover(&[f(0, 2), f(2, 2)], 1, 4).is_ok());
    }
}
