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

//!
//! The phases, each a function: [`list_segments`], [`scan_segment`] (which
//! replays frames in [`scan`] and decides the tail in [`tail`]), and
//! [`finish::finish`] (activate, reseal, hand over).

mod finish;
mod scan;
mod tail;

use crate::codec::decode_segment_header;
use crate::error::{Corruption, OpenError};
use crate::segment::{parse_segment_name, segment_name, Segment, Segments};
use crate::storage::{Storage, LOCK_FILE_NAME};
use crate::stream::StreamMap;
use scan::Scan;

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

/// Opens the log in `storage`: verifies, rebuilds, cuts an unsynced tail,
/// reseals, or refuses (see the module comment for the policy).
pub fn recover(storage: &dyn Storage) -> Result<Recovered, OpenError> {
    let indices = list_segments(storage)?;
    let mut scan = Scan::new();
    let mut report = RecoveryReport::default();
    let mut segments = Segments::default();
    let mut active_len = 0;
    // Where the last closed group of the last kept segment starts: what the
    // reseal rewrites. `None` while no segment is kept.
    let mut last_group_start = None;
    for (pos, &index) in indices.iter().enumerate() {
        let is_last = pos + 1 == indices.len();
        let Some(kept) = scan_segment(storage, &mut scan, index, is_last, &mut report)? else {
            break;
        };
        active_len = kept.len;
        last_group_start = Some(scan.last_closed_start);
        segments.list.push(kept.segment);
    }
    finish::finish(
        storage,
        scan,
        segments,
        active_len,
        last_group_start,
        report,
    )
}

/// The segment indices in the directory, in order: refuses foreign files
/// and gaps.
fn list_segments(storage: &dyn Storage) -> Result<Vec<u64>, OpenError> {
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
    Ok(indices)
}

/// A segment recovery keeps, and its data length.
struct Kept {
    segment: Segment,
    len: u64,
}

/// Scans segment `index`: its header, then its frames, then cuts its tail
/// if that is where the scan stopped. `None` when it was the last segment
/// and its header never became durable, so it was removed.
fn scan_segment(
    storage: &dyn Storage,
    scan: &mut Scan,
    index: u64,
    is_last: bool,
    report: &mut RecoveryReport,
) -> Result<Option<Kept>, OpenError> {
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
    let header = match decode_segment_header(&view) {
        Ok(h) => h,
        Err(e) if tail::header_never_synced(&view, is_last) => {
            drop(view);
            tail::remove_segment(storage, &name, &e.to_string())?;
            report.removed_segment = Some(name);
            return Ok(None);
        }
        Err(e) => return Err(corrupt(&name, 0, format!("segment header: {e}"))),
    };
    scan.check_header(&name, index, &header)?;
    let cut = scan.scan_frames(&name, index, is_last, &view)?;
    let mut len = view.len() as u64;
    drop(view);
    if let Some(cut) = cut {
        len = tail::cut(&*file, &name, len, cut, report)?;
        scan.abandon_open_group();
    }
    let sealed = if is_last {
        None
    } else {
        Some(
            file.view(len)
                .map_err(|e| OpenError::io(format!("mapping {name}"), e))?,
        )
    };
    let segment = Segment {
        index,
        name,
        file,
        version: header.version,
        sealed,
    };
    Ok(Some(Kept { segment, len }))
}
