//! The read path: index lookups under the stream's lock, frame bytes from
//! a memory map (sealed segments) or positional reads (the active one), and
//! a checksum verified again before anything is served. Readers only ever
//! see published state, which the writer publishes after the sync, so
//! nothing here can show a record before it is durable.
//!
//! A reader pairs each index entry with its segment while holding the
//! segment list's read lock and the stream's lock: relocation repoints an
//! entry under the stream's lock and deletion drops a segment under the
//! list's write lock (only once no entry points into it), so a reader never
//! pairs a new offset with an old file or an offset with a segment that is
//! gone. The segment handles it keeps stay valid after a deletion.

use crate::codec::{decode_frame, frame_slice, peek_frame_len, Frame, FrameKind};
use crate::error::{Corruption, ReadError};
use crate::index::FrameLoc;
use crate::locks;
use crate::name::validate_stream_name;
use crate::record::header_bytes;
use crate::segment::{Segment, Segments};
use crate::shared::Shared;
use crate::stream::StreamShared;
use bytes::Bytes;
use fencelog_types::{Header, Record};

/// The answer to a read: durable records from `start_seq` on, and the
/// stream's durable `next_seq` at the time of the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBatch {
    /// In seq order, contiguous from the requested `start_seq`.
    pub records: Vec<Record>,
    /// The stream's durable `next_seq` when the read started.
    pub next_seq: u64,
    /// The stream is sealed: nothing will ever follow `next_seq`.
    pub sealed: bool,
}

/// See [`crate::Engine::read`] and [`crate::Engine::read_until`]:
/// `until_timestamp_ms` ends the read before the first record whose
/// timestamp is at or past it.
pub(crate) fn read(
    shared: &Shared,
    stream: &str,
    start_seq: u64,
    max_records: usize,
    max_bytes: usize,
    until_timestamp_ms: Option<u64>,
) -> Result<ReadBatch, ReadError> {
    validate_stream_name(stream).map_err(ReadError::InvalidStreamName)?;
    let s = shared.stream(stream).ok_or(ReadError::NotFound)?;
    let View {
        next_seq,
        sealed,
        locs,
    } = collect(shared, &s, start_seq, max_records)?;
    let until = until_timestamp_ms.unwrap_or(u64::MAX);
    let mut records = Vec::new();
    let mut bytes = 0usize;
    for (loc, seg) in locs {
        let full = with_frame(shared, stream, &loc, &seg, |buf, start, frame| {
            // Timestamps never decrease within a stream, so no later frame
            // can be inside the range either.
            if frame.header.timestamp_ms >= until {
                return true;
            }
            for (k, (headers, body)) in frame_records(buf, frame, start).enumerate() {
                let seq = loc.first_seq + k as u64;
                if seq < start_seq {
                    continue;
                }
                let len = body.len() + header_bytes(&headers);
                if seq >= next_seq
                    || records.len() >= max_records
                    || (!records.is_empty() && bytes + len > max_bytes)
                {
                    return true;
                }
                bytes += len;
                records.push(Record {
                    seq,
                    fencing_token: frame.header.fencing_token,
                    timestamp_ms: frame.header.timestamp_ms,
                    headers,
                    body,
                });
            }
            false
        })?;
        if full {
            break;
        }
    }
    Ok(ReadBatch {
        records,
        next_seq,
        sealed,
    })
}

/// The records of `frame` (held by `buf` at `start`) as (headers, body),
/// every name, value and body a zero-copy slice of `buf`; no headers (and
/// no allocation for them) in a frame without flag HEADERS.
fn frame_records<'a>(
    buf: &'a Bytes,
    frame: &'a Frame<'_>,
    start: usize,
) -> impl Iterator<Item = (Vec<Header>, Bytes)> + 'a {
    frame.records().map(move |r| {
        let mut headers: Vec<Header> = r
            .headers()
            .map(|(name, value)| Header {
                name: frame_slice(buf, frame, start, name),
                value: frame_slice(buf, frame, start, value),
            })
            .collect();
        if mutated!(HeadersReversed) {
            headers.reverse();
        }
        (headers, frame_slice(buf, frame, start, r.body))
    })
}

/// What a read saw of the stream: its tail, whether it is sealed, and the
/// frames to read with their segments.
struct View {
    next_seq: u64,
    sealed: bool,
    locs: Vec<(FrameLoc, Segment)>,
}

/// Reads the frame the index of `stream` places at `loc` in `seg` (paired
/// under the locks, see [`collect`] and [`locate`]), verifies its checksum
/// and that it is the records frame the index means, and hands it to `f`
/// with the buffer holding it and its start there.
pub(crate) fn with_frame<T>(
    shared: &Shared,
    stream: &str,
    loc: &FrameLoc,
    seg: &Segment,
    f: impl FnOnce(&Bytes, usize, &Frame<'_>) -> T,
) -> Result<T, ReadError> {
    let (buf, start) = frame_bytes(shared, seg, loc)?;
    let corrupt = |reason: String| {
        ReadError::Corrupt(Corruption {
            file: seg.name.clone(),
            offset: loc.offset,
            reason,
        })
    };
    let frame = decode_frame(&buf[start..], seg.version).map_err(|e| corrupt(e.to_string()))?;
    if frame.name != stream
        || frame.header.kind != FrameKind::Records
        || frame.header.first_seq != loc.first_seq
        || frame.header.record_count != loc.record_count
    {
        return Err(corrupt(format!(
            "index points at a frame of {} seq {}, wanted {stream} seq {}",
            frame.name, frame.header.first_seq, loc.first_seq
        )));
    }
    Ok(f(&buf, start, &frame))
}

/// The frame holding `seq` with its segment, paired under the same locks
/// as [`collect`]. `None` when `seq` is below the stream's `first_seq`
/// (trimmed) or not indexed; a tombstone is [`ReadError::NotFound`].
pub(crate) fn locate(
    shared: &Shared,
    s: &StreamShared,
    seq: u64,
) -> Result<Option<(FrameLoc, Segment)>, ReadError> {
    let segments = locks::read(&shared.segments);
    let inner = locks::lock(&s.inner);
    let f = s.fence_state();
    if f.deleted {
        return Err(ReadError::NotFound);
    }
    if seq < f.first_seq {
        return Ok(None);
    }
    let Some((_, loc)) = inner.index.find(seq) else {
        return Ok(None);
    };
    Ok(Some((loc, segment_of(&segments, &loc)?)))
}

/// The frames holding seqs `start_seq..` below `next_seq`, enough for
/// `max_records`, each with its segment: collected under the segment
/// list's and the stream's locks, read without them. The checks against
/// the trim point and the tombstone are made under the same locks, so the
/// frames collected are the ones the checks allowed.
fn collect(
    shared: &Shared,
    s: &StreamShared,
    start_seq: u64,
    max_records: usize,
) -> Result<View, ReadError> {
    let segments = locks::read(&shared.segments);
    let inner = locks::lock(&s.inner);
    let f = s.fence_state();
    if f.deleted {
        return Err(ReadError::NotFound);
    }
    if start_seq > f.next_seq || start_seq < f.first_seq {
        return Err(ReadError::OutOfRange {
            start_seq,
            first_seq: f.first_seq,
            next_seq: f.next_seq,
        });
    }
    let mut view = View {
        next_seq: f.next_seq,
        sealed: f.sealed,
        locs: Vec::new(),
    };
    if start_seq == f.next_seq || max_records == 0 {
        return Ok(view);
    }
    let mut cur = inner.index.find(start_seq);
    let mut covered = 0usize;
    while let Some((i, loc)) = cur {
        if loc.first_seq >= f.next_seq || covered >= max_records {
            break;
        }
        let from_loc = loc.end_seq().saturating_sub(start_seq.max(loc.first_seq));
        covered += usize::try_from(from_loc).expect("at most the frame's record count, a u32");
        view.locs.push((loc, segment_of(&segments, &loc)?));
        cur = inner.index.next_after(i, &loc);
    }
    Ok(view)
}

/// The segment `loc` points into; the caller holds the list's lock and
/// the stream's, so the entry cannot be repointed or its segment dropped.
fn segment_of(segments: &Segments, loc: &FrameLoc) -> Result<Segment, ReadError> {
    segments
        .get(loc.segment)
        .cloned()
        .ok_or_else(|| ReadError::Io(format!("segment {} is not open", loc.segment)))
}

/// The bytes holding the frame at `loc` of `seg`: a buffer and the frame's
/// start in it. The index knows the frame's length, so the active segment
/// is read with one positional read, shared by concurrent readers.
fn frame_bytes(
    shared: &Shared,
    seg: &Segment,
    loc: &FrameLoc,
) -> Result<(Bytes, usize), ReadError> {
    let corrupt = |reason: String| {
        ReadError::Corrupt(Corruption {
            file: seg.name.clone(),
            offset: loc.offset,
            reason,
        })
    };
    if let Some(map) = &seg.sealed {
        // An offset past `usize` is past the end of any map.
        let at = usize::try_from(loc.offset).unwrap_or(usize::MAX);
        if at >= map.len() {
            return Err(corrupt("offset past the end of the segment".into()));
        }
        return Ok((map.clone(), at));
    }
    let read = || {
        let mut buf = vec![0u8; loc.len as usize];
        seg.file
            .read_exact_at(&mut buf, loc.offset)
            .map_err(|e| ReadError::Io(format!("reading {}: {e}", seg.name)))?;
        let len = peek_frame_len(&buf).map_err(|e| corrupt(e.to_string()))?;
        if len != buf.len() {
            return Err(corrupt(format!(
                "frame of {len} bytes, the index says {}",
                buf.len()
            )));
        }
        Ok(buf)
    };
    let bytes = locks::lock(&shared.active_frames).get_or_read((loc.segment, loc.offset), read)?;
    Ok((bytes, 0))
}
