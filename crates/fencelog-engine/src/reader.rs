//! The read path: index lookups under the stream's lock, frame bytes from
//! a memory map (sealed segments) or positional reads (the active one), and
//! a checksum verified again before anything is served. Readers only ever
//! see published state, which the writer publishes after the sync, so
//! nothing here can show a record before it is durable.

use crate::codec::{decode_frame, frame_bodies, peek_frame_len, Frame};
use crate::error::{Corruption, ReadError};
use crate::index::FrameLoc;
use crate::locks;
use crate::name::validate_stream_name;
use crate::record::Record;
use crate::shared::Shared;
use crate::stream::StreamShared;
use bytes::Bytes;

/// The answer to a read: durable records from `start_seq` on, and the
/// stream's durable `next_seq` at the time of the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBatch {
    /// In seq order, contiguous from the requested `start_seq`.
    pub records: Vec<Record>,
    /// The stream's durable `next_seq` when the read started.
    pub next_seq: u64,
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
    let next_seq = s.next_seq();
    if start_seq > next_seq {
        return Err(ReadError::OutOfRange {
            start_seq,
            next_seq,
        });
    }
    let mut records = Vec::new();
    if start_seq == next_seq || max_records == 0 {
        return Ok(ReadBatch { records, next_seq });
    }
    let until = until_timestamp_ms.unwrap_or(u64::MAX);
    let locs = frame_locs(&s, start_seq, next_seq, max_records);
    let mut bytes = 0usize;
    for loc in locs {
        let full = with_frame(shared, stream, &loc, |buf, start, frame| {
            // Timestamps never decrease within a stream, so no later frame
            // can be inside the range either.
            if frame.header.timestamp_ms >= until {
                return true;
            }
            for (k, body) in frame_bodies(buf, frame, start).into_iter().enumerate() {
                let seq = loc.first_seq + k as u64;
                if seq < start_seq {
                    continue;
                }
                if seq >= next_seq
                    || records.len() >= max_records
                    || (!records.is_empty() && bytes + body.len() > max_bytes)
                {
                    return true;
                }
                bytes += body.len();
                records.push(Record {
                    seq,
                    fencing_token: frame.header.fencing_token,
                    timestamp_ms: frame.header.timestamp_ms,
                    headers: Vec::new(),
                    body,
                });
            }
            false
        })?;
        if full {
            break;
        }
    }
    Ok(ReadBatch { records, next_seq })
}

/// Reads the frame the index of `stream` places at `loc`, verifies its
/// checksum and that it is the frame the index means, and hands it to `f`
/// with the buffer holding it and its start there.
pub(crate) fn with_frame<T>(
    shared: &Shared,
    stream: &str,
    loc: &FrameLoc,
    f: impl FnOnce(&Bytes, usize, &Frame<'_>) -> T,
) -> Result<T, ReadError> {
    let (buf, start, file) = frame_bytes(shared, loc)?;
    let frame = decode_frame(&buf[start..]).map_err(|e| {
        ReadError::Corrupt(Corruption {
            file: file.clone(),
            offset: loc.offset,
            reason: e.to_string(),
        })
    })?;
    if frame.name != stream
        || frame.header.first_seq != loc.first_seq
        || frame.header.record_count != loc.record_count
    {
        return Err(ReadError::Corrupt(Corruption {
            file,
            offset: loc.offset,
            reason: format!(
                "index points at a frame of {} seq {}, wanted {stream} seq {}",
                frame.name, frame.header.first_seq, loc.first_seq
            ),
        }));
    }
    Ok(f(&buf, start, &frame))
}

/// The frames holding seqs `start_seq..` below `next_seq`, enough for
/// `max_records`: collected under the index lock, read without it.
fn frame_locs(
    s: &StreamShared,
    start_seq: u64,
    next_seq: u64,
    max_records: usize,
) -> Vec<FrameLoc> {
    let mut locs: Vec<FrameLoc> = Vec::new();
    let idx = locks::lock(&s.index);
    let mut cur = idx.find(start_seq);
    let mut covered = 0usize;
    while let Some((i, loc)) = cur {
        if loc.first_seq >= next_seq || covered >= max_records {
            break;
        }
        covered += (loc.first_seq + loc.record_count as u64)
            .saturating_sub(start_seq.max(loc.first_seq)) as usize;
        locs.push(loc);
        cur = idx.next_after(i, &loc);
    }
    locs
}

/// The bytes holding the frame at `loc`: a buffer, the frame's start in it,
/// and the segment's name.
fn frame_bytes(shared: &Shared, loc: &FrameLoc) -> Result<(Bytes, usize, String), ReadError> {
    let seg = locks::read(&shared.segments)
        .get(loc.segment)
        .cloned()
        .ok_or_else(|| ReadError::Io(format!("segment {} is not open", loc.segment)))?;
    let corrupt = |reason: String| {
        ReadError::Corrupt(Corruption {
            file: seg.name.clone(),
            offset: loc.offset,
            reason,
        })
    };
    if let Some(map) = &seg.sealed {
        let at = loc.offset as usize;
        if at >= map.len() {
            return Err(corrupt("offset past the end of the segment".into()));
        }
        return Ok((map.clone(), at, seg.name.clone()));
    }
    let read = || {
        let mut head = [0u8; 12];
        seg.file
            .read_exact_at(&mut head, loc.offset)
            .map_err(|e| ReadError::Io(format!("reading {}: {e}", seg.name)))?;
        let len = peek_frame_len(&head).map_err(|e| corrupt(e.to_string()))?;
        let mut buf = vec![0u8; len];
        seg.file
            .read_exact_at(&mut buf, loc.offset)
            .map_err(|e| ReadError::Io(format!("reading {}: {e}", seg.name)))?;
        Ok(buf)
    };
    let bytes = locks::lock(&shared.active_frames).get_or_read((loc.segment, loc.offset), read)?;
    Ok((bytes, 0, seg.name.clone()))
}

/// Most frames the cache tracks; past it, new frames are read privately.
const FRAME_CACHE_ENTRIES_MAX: usize = 4096;

/// Frames of the active segment by (segment, offset), held weakly: an
/// entry lives exactly as long as some reader holds the frame's bytes, so
/// the cache shares copies without keeping any. Frames never change once
/// published (segments are append-only, indices never reused), so a copy
/// read once is right for every later reader.
#[derive(Default)]
pub(crate) struct FrameCache {
    frames: std::collections::HashMap<(u64, u64), std::sync::Weak<Vec<u8>>>,
}

/// A frame's bytes shared by its readers.
struct SharedFrame(std::sync::Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedFrame {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl FrameCache {
    /// The frame at `key`: a live copy if a reader holds one, else `read`
    /// (under the cache's lock, so concurrent readers of a new frame wait
    /// for one read instead of each making their own copy).
    fn get_or_read<E>(
        &mut self,
        key: (u64, u64),
        read: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Bytes, E> {
        if let Some(live) = self.frames.get(&key).and_then(|w| w.upgrade()) {
            return Ok(Bytes::from_owner(SharedFrame(live)));
        }
        let frame = std::sync::Arc::new(read()?);
        if self.frames.len() >= FRAME_CACHE_ENTRIES_MAX {
            self.frames.retain(|_, w| w.strong_count() > 0);
        }
        if self.frames.len() < FRAME_CACHE_ENTRIES_MAX {
            self.frames.insert(key, std::sync::Arc::downgrade(&frame));
        }
        Ok(Bytes::from_owner(SharedFrame(frame)))
    }
}
