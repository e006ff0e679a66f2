//! Opening a data directory: verify every frame, rebuild every stream, and
//! cut an unsynced tail — only at the end of the last segment.
//!
//! Policy, in one place:
//! - A frame that fails to decode in any segment but the last: refuse to open.
//! - A frame that fails to decode in the last segment: it is the unsynced
//!   tail of the last group only if no complete later group follows it. Then
//!   cut the file at the start of that group (its earlier frames were never
//!   acknowledged either) and log it. Otherwise refuse.
//! - A frame that decodes but contradicts the log (seq gap, token going
//!   down, group ids out of order): refuse, wherever it is. Torn writes do
//!   not produce valid checksums; our bugs or foreign files do.
//! - A last segment whose header never became durable (shorter than a
//!   header, or a bad header with no valid frame after it) is removed: the
//!   writer syncs a new segment's header and directory entry before it puts
//!   any group there, so such a file holds nothing acknowledged.
//!
//! Every step is idempotent, so a crash in the middle of recovery and a
//! second recovery end in the same state.

use crate::codec::{
    decode_frame, decode_segment_header, FrameKind, FRAME_MAGIC, SEGMENT_HEADER_BYTES,
};
use crate::error::{Corruption, OpenError};
use crate::fence::FenceState;
use crate::segment::{create_segment, parse_segment_name, segment_name, Segment, Segments};
use crate::storage::{Storage, LOCK_FILE_NAME};
use crate::stream::{StreamMap, StreamShared};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;

/// The first group id ever written; 0 is never a group.
pub const FIRST_GROUP_ID: u64 = 1;

/// What was found and done, for the startup log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segment files in the log after recovery.
    pub segments: usize,
    /// Streams rebuilt.
    pub streams: usize,
    /// Records indexed.
    pub records: u64,
    /// Frames (batches and fences) replayed.
    pub frames: u64,
    /// The unsynced tail cut from the last segment, if there was one.
    pub truncated: Option<Truncation>,
    /// A last segment whose header never became durable and was removed.
    pub removed_segment: Option<String>,
    /// Zero-filled space after the last group that the writer had
    /// preallocated; cut at open (the writer allocates again) and not
    /// reported as a truncation, because it never held anything.
    pub preallocated_bytes_released: u64,
}

/// An unsynced tail recovery cut: the incomplete last group of the last
/// segment, which nobody was told is durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The segment file.
    pub file: String,
    /// Where the cut group started; the file ends here now.
    pub offset: u64,
    /// Bytes removed.
    pub bytes_cut: u64,
    /// Why the tail did not decode.
    pub reason: String,
}

/// A recovered log, ready for the writer.
pub struct Recovered {
    pub(crate) segments: Segments,
    pub(crate) active_len: u64,
    /// Every stream's durable state and index.
    pub streams: StreamMap,
    pub(crate) next_group_id: u64,
    /// What recovery found and did.
    pub report: RecoveryReport,
}

fn corrupt(file: &str, offset: u64, reason: impl Into<String>) -> OpenError {
    OpenError::Corrupt(Corruption {
        file: file.to_string(),
        offset,
        reason: reason.into(),
    })
}

/// A frame of the group being scanned, applied once its group closes.
struct PendingFrame {
    name: Box<str>,
    kind: FrameKind,
    segment: u64,
    offset: u64,
    first_seq: u64,
    count: u32,
    token: u64,
    timestamp_ms: u64,
}

#[derive(Default, Clone, Copy)]
struct Working {
    fence: FenceState,
    last_timestamp_ms: u64,
}

struct Scan {
    streams: HashMap<Box<str>, (Working, crate::index::StreamIndex)>,
    /// Overlay of the open (not yet closed) group's effect.
    open: Vec<PendingFrame>,
    overlay: HashMap<Box<str>, Working>,
    open_group_start: Option<u64>,
    /// Where the last closed group of the segment being scanned starts.
    last_closed_start: Option<u64>,
    open_group_id: u64,
    last_closed_group: u64,
    records: u64,
    frames: u64,
}

impl Scan {
    fn state(&self, name: &str) -> Working {
        if let Some(w) = self.overlay.get(name) {
            return *w;
        }
        self.streams.get(name).map(|s| s.0).unwrap_or_default()
    }

    fn close_group(&mut self) {
        for f in self.open.drain(..) {
            if f.kind == FrameKind::Fence && mutated!(FenceOnlyInMemory) {
                continue;
            }
            let entry = self.streams.entry(f.name).or_default();
            entry.0.fence.highest_token = f.token;
            if f.kind == FrameKind::Records {
                entry.1.push(f.first_seq, f.segment, f.offset, f.count);
                entry.0.fence.next_seq = f.first_seq + f.count as u64;
                entry.0.last_timestamp_ms = f.timestamp_ms;
                self.records += f.count as u64;
            }
            self.frames += 1;
        }
        self.overlay.clear();
        self.last_closed_group = self.open_group_id;
        self.last_closed_start = self.open_group_start;
        self.open_group_start = None;
    }
}

/// Opens the log in `storage`: verifies, rebuilds, cuts an unsynced tail,
/// reseals, or refuses (see the module comment for the policy).
pub fn recover(storage: &dyn Storage) -> Result<Recovered, OpenError> {
    let mut report = RecoveryReport::default();
    let mut indices = Vec::new();
    for name in storage
        .list()
        .map_err(|e| OpenError::io("listing the data directory", e))?
    {
        if name == LOCK_FILE_NAME || name == "lost+found/" {
            continue;
        }
        match parse_segment_name(&name) {
            Some(i) => indices.push(i),
            None => {
                return Err(corrupt(
                    &name,
                    0,
                    "foreign file in the data directory; fencelog refuses to guess what it is",
                ))
            }
        }
    }
    indices.sort_unstable();
    for (pos, &i) in indices.iter().enumerate() {
        if i != pos as u64 {
            return Err(corrupt(
                &segment_name(pos as u64),
                0,
                format!("segment {pos} is missing (next present is {i})"),
            ));
        }
    }

    let mut scan = Scan {
        streams: HashMap::new(),
        open: Vec::new(),
        overlay: HashMap::new(),
        open_group_start: None,
        last_closed_start: None,
        open_group_id: 0,
        last_closed_group: FIRST_GROUP_ID - 1,
        records: 0,
        frames: 0,
    };
    let mut segments = Segments::default();
    let mut active_len = 0;
    let mut last_group_starts: Vec<Option<u64>> = Vec::new();
    let count = indices.len();

    for (pos, &index) in indices.iter().enumerate() {
        let is_last = pos + 1 == count;
        let name = segment_name(index);
        let file = storage
            .open(&name)
            .map_err(|e| OpenError::io(format!("opening {name}"), e))?;
        let len = file
            .len()
            .map_err(|e| OpenError::io(format!("reading the size of {name}"), e))?;
        let view = file
            .view(len)
            .map_err(|e| OpenError::io(format!("mapping {name}"), e))?;
        let header = decode_segment_header(&view);
        let header = match header {
            Ok(h) => h,
            Err(e) => {
                if is_last && find_frame_after(&view, 0, 0).is_none() {
                    drop(view);
                    storage
                        .remove(&name)
                        .map_err(|e| OpenError::io(format!("removing {name}"), e))?;
                    storage
                        .sync_dir()
                        .map_err(|e| OpenError::io("syncing the data directory", e))?;
                    tracing::warn!(file = %name, reason = %e, "removed a last segment whose header never became durable");
                    report.removed_segment = Some(name);
                    break;
                }
                return Err(corrupt(&name, 0, format!("segment header: {e}")));
            }
        };
        if header.segment_index != index {
            return Err(corrupt(
                &name,
                16,
                format!("header says segment {}", header.segment_index),
            ));
        }
        if scan.open_group_start.is_some() {
            return Err(corrupt(
                &segment_name(index - 1),
                0,
                "segment ends inside a group",
            ));
        }
        if header.first_group_id != scan.last_closed_group + 1 {
            return Err(corrupt(
                &name,
                24,
                format!(
                    "header starts at group {}, expected {}",
                    header.first_group_id,
                    scan.last_closed_group + 1
                ),
            ));
        }

        let mut off = SEGMENT_HEADER_BYTES;
        scan.last_closed_start = None;
        let mut cut: Option<(u64, String)> = None;
        // The bytes from the first bad offset on are all zero, after a
        // complete group: the writer's preallocated space.
        let mut zero_tail = false;
        while off < view.len() {
            let frame = match decode_frame(&view[off..]) {
                Ok(f) => f,
                Err(e) => {
                    let reason = e.to_string();
                    if !is_last && !mutated!(TruncateAnyBadFrame) {
                        return Err(corrupt(&name, off as u64, reason));
                    }
                    // The group that may be torn: the open one, or the next.
                    let torn_group = if scan.open_group_start.is_some() {
                        scan.open_group_id
                    } else {
                        scan.last_closed_group + 1
                    };
                    let later = find_frame_after(&view, off + 1, torn_group + 1)
                        .filter(|_| !mutated!(TruncateAnyBadFrame));
                    if let Some((at, g)) = later {
                        return Err(corrupt(
                            &name,
                            off as u64,
                            format!("{reason}; a later complete frame of group {g} at offset {at} shows this is not an unsynced tail"),
                        ));
                    }
                    zero_tail =
                        scan.open_group_start.is_none() && view[off..].iter().all(|&b| b == 0);
                    cut = Some((scan.open_group_start.unwrap_or(off as u64), reason));
                    break;
                }
            };
            let h = frame.header;
            let at = off as u64;
            // Group ids: frames of one group are adjacent; groups count up by one.
            match scan.open_group_start {
                Some(_) if h.group_id != scan.open_group_id => {
                    return Err(corrupt(
                        &name,
                        at,
                        format!(
                            "frame of group {} inside group {}",
                            h.group_id, scan.open_group_id
                        ),
                    ))
                }
                None if h.group_id != scan.last_closed_group + 1 => {
                    return Err(corrupt(
                        &name,
                        at,
                        format!(
                            "group {} follows group {}",
                            h.group_id, scan.last_closed_group
                        ),
                    ))
                }
                None => {
                    scan.open_group_start = Some(at);
                    scan.open_group_id = h.group_id;
                }
                Some(_) => {}
            }
            let st = scan.state(frame.name);
            if h.fencing_token < st.fence.highest_token {
                return Err(corrupt(
                    &name,
                    at,
                    format!(
                        "stream {} token {} below accepted {}",
                        frame.name, h.fencing_token, st.fence.highest_token
                    ),
                ));
            }
            if h.first_seq != st.fence.next_seq {
                return Err(corrupt(
                    &name,
                    at,
                    format!(
                        "stream {} frame starts at seq {}, expected {}",
                        frame.name, h.first_seq, st.fence.next_seq
                    ),
                ));
            }
            let mut next = st;
            next.fence.highest_token = h.fencing_token;
            if h.kind == FrameKind::Records {
                next.fence.next_seq += h.record_count as u64;
                next.last_timestamp_ms = h.timestamp_ms;
            }
            scan.overlay.insert(frame.name.into(), next);
            scan.open.push(PendingFrame {
                name: frame.name.into(),
                kind: h.kind,
                segment: index,
                offset: at,
                first_seq: h.first_seq,
                count: h.record_count,
                token: h.fencing_token,
                timestamp_ms: h.timestamp_ms,
            });
            off += frame.frame_len;
            if h.last_in_group {
                scan.close_group();
            }
        }
        if let (None, Some(start)) = (&cut, scan.open_group_start) {
            if !is_last {
                return Err(corrupt(
                    &name,
                    view.len() as u64,
                    "segment ends inside a group",
                ));
            }
            cut = Some((start, "file ends before the group's last frame".to_string()));
        }
        let mut seg_len = view.len() as u64;
        drop(view);
        if let Some((offset, reason)) = cut {
            file.truncate(offset)
                .and_then(|()| file.sync_data())
                .map_err(|e| OpenError::io(format!("truncating {name}"), e))?;
            if zero_tail {
                tracing::debug!(file = %name, offset, bytes = seg_len - offset, "released preallocated space");
                report.preallocated_bytes_released = seg_len - offset;
            } else {
                tracing::warn!(file = %name, offset, bytes_cut = seg_len - offset, %reason, "truncated the unsynced tail of the last segment");
                report.truncated = Some(Truncation {
                    file: name.clone(),
                    offset,
                    bytes_cut: seg_len - offset,
                    reason,
                });
            }
            seg_len = offset;
            scan.open.clear();
            scan.overlay.clear();
            scan.open_group_start = None;
        }
        let sealed = if is_last {
            None
        } else {
            Some(
                file.view(seg_len)
                    .map_err(|e| OpenError::io(format!("mapping {name}"), e))?,
            )
        };
        active_len = seg_len;
        last_group_starts.push(scan.last_closed_start);
        segments.list.push(Segment {
            index,
            name,
            file,
            sealed,
        });
    }

    if segments.list.is_empty() {
        let file = create_segment(storage, 0, FIRST_GROUP_ID)
            .map_err(|e| OpenError::io("creating the first segment", e))?;
        segments.list.push(Segment {
            index: 0,
            name: segment_name(0),
            file,
            sealed: None,
        });
        active_len = SEGMENT_HEADER_BYTES as u64;
    } else if report.removed_segment.is_some() {
        // The previous segment becomes the active one again.
        let last = segments.list.last_mut().unwrap();
        last.sealed = None;
        active_len = last
            .file
            .len()
            .map_err(|e| OpenError::io("reading a segment size", e))?;
    }

    // A fresh segment 0 was just created and synced: nothing to reseal.
    if let Some(&last_group_start) = last_group_starts.get(segments.list.len() - 1) {
        reseal(storage, segments.active(), last_group_start, active_len)?;
    }

    let mut streams = StreamMap::new();
    for (name, (w, mut index)) in scan.streams {
        index.shrink_to_fit();
        let shared = StreamShared::with_index(index);
        shared.publish(w.fence.highest_token, w.fence.next_seq, w.last_timestamp_ms);
        streams.insert(name, Arc::new(shared));
    }
    report.segments = segments.list.len();
    report.streams = streams.len();
    report.records = scan.records;
    report.frames = scan.frames;
    Ok(Recovered {
        segments,
        active_len,
        streams,
        next_group_id: scan.last_closed_group + 1,
        report,
    })
}

/// Rewrites the active segment's header and its last group with the bytes
/// recovery just verified, then syncs the file and the directory.
///
/// Why: recovery reads through the page cache. If the previous process's
/// last `sync_data` failed, Linux may have marked those pages clean without
/// writing them, and no later fsync will ever write them. Trusting them and
/// then acknowledging new groups after them would leave acknowledged data
/// behind a hole once power fails. Only the last group (and a just-created
/// segment's header) can be in that state: the writer never writes a group
/// before the previous one synced. Rewriting identical bytes makes the pages
/// dirty again, so this sync really puts them on the media; a crash in the
/// middle leaves each sector old or new, which are the same bytes.
fn reseal(
    storage: &dyn Storage,
    segment: &Segment,
    last_group_start: Option<u64>,
    active_len: u64,
) -> Result<(), OpenError> {
    let name = &segment.name;
    let file = &segment.file;
    let io = |what: &str, e| OpenError::io(format!("{what} {name} while resealing"), e);
    let mut header = [0u8; SEGMENT_HEADER_BYTES];
    file.read_exact_at(&mut header, 0)
        .map_err(|e| io("reading", e))?;
    file.write_all_at(&header, 0)
        .map_err(|e| io("writing", e))?;
    if let Some(start) = last_group_start {
        let mut group = vec![0u8; (active_len - start) as usize];
        file.read_exact_at(&mut group, start)
            .map_err(|e| io("reading", e))?;
        file.write_all_at(&group, start)
            .map_err(|e| io("writing", e))?;
    }
    file.sync_data().map_err(|e| io("syncing", e))?;
    storage
        .sync_dir()
        .map_err(|e| OpenError::io("syncing the data directory while resealing", e))
}

/// The first offset at or after `from` holding a frame that decodes and
/// belongs to group `min_group` or later, if any. Only run on the tail of
/// the last segment after a decode failure, to tell a torn tail from damage
/// in the middle.
fn find_frame_after(view: &Bytes, from: usize, min_group: u64) -> Option<(usize, u64)> {
    let magic = FRAME_MAGIC.to_le_bytes();
    let mut at = from;
    while at + 4 <= view.len() {
        if view[at..at + 4] == magic {
            if let Ok(f) = decode_frame(&view[at..]) {
                if f.header.group_id >= min_group {
                    return Some((at, f.header.group_id));
                }
            }
        }
        at += 1;
    }
    None
}
