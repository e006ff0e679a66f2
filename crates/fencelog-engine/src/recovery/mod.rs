//! Opening a data directory: check it against its MANIFEST, load the
//! checkpoint, verify every frame, rebuild every stream, and cut an
//! unsynced tail — only at the end of the last segment. The rules are in
//! docs/design.md ("Recovery"); in one place:
//!
//! - Every segment the MANIFEST lists must exist. An unlisted one right
//!   after the last listed is a roll whose MANIFEST update did not become
//!   durable; one below it a deletion that did not finish (removed).
//!   Anything else is refused. Without a MANIFEST the directory is version 1
//!   (or was never finished): segments from 0 without a gap.
//! - A frame that fails to decode in any segment but the last: refuse.
//! - A frame that fails to decode in the last segment: it is the unsynced
//!   tail of the last group only if no complete later group follows it.
//!   Then cut the file at the start of that group and log it. Otherwise
//!   refuse.
//! - A frame that decodes but contradicts the log (a rule the writer would
//!   have refused, group ids out of order, a gap the checkpoint does not
//!   cover, a stream whose readable records have no frame): refuse,
//!   wherever it is. Torn writes do not produce valid checksums; our bugs
//!   or foreign files do.
//! - A last segment whose header never became durable (shorter than a
//!   header, or a bad header with no valid frame after it) is removed, if
//!   it is one the MANIFEST does not list yet: the writer syncs a new
//!   segment's header and directory entry before it lists it, and lists it
//!   before any group goes there.
//!
//! Every step is idempotent, so a crash in the middle of recovery and a
//! second recovery end in the same state.
//!
//! The phases, each a module: [`layout`] (the directory against the
//! MANIFEST), [`restore`] (the checkpoint), [`scan`] (replays frames through
//! [`state`], and decides the tail in [`tail`]), [`build`] (indexes), and
//! [`finish`] (activate, reseal, upgrade, write the MANIFEST, hand over).

mod build;
mod finish;
mod layout;
mod restore;
mod scan;
mod state;
mod tail;

use crate::codec::checkpoint::AppliedState;
use crate::codec::{decode_segment_header, FORMAT_VERSION, SEGMENT_HEADER_BYTES};
use crate::config::Config;
use crate::error::{Corruption, OpenError};
use crate::segment::{segment_name, Segment, Segments};
use crate::shared::Start;
use crate::storage::Storage;
use crate::stream::StreamMap;
use scan::Scan;
use std::sync::Arc;

/// The first group id ever written; 0 is never a group.
pub const FIRST_GROUP_ID: u64 = 1;

/// What was found and done, for the startup log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segment files in the log after recovery.
    pub segments: usize,
    /// Streams rebuilt (tombstones included).
    pub streams: usize,
    /// Readable records indexed.
    pub records: u64,
    /// Frames replayed.
    pub frames: u64,
    /// The checkpoint generation recovery started from, if any.
    pub checkpoint: Option<u64>,
    /// A version-1 directory was upgraded: a version-2 segment and the
    /// first MANIFEST were written; the version-1 segments are untouched.
    pub upgraded_from_v1: bool,
    /// The unsynced tail cut from the last segment, if there was one.
    pub truncated: Option<Truncation>,
    /// A last segment whose header never became durable and was removed.
    pub removed_segment: Option<String>,
    /// A last segment the MANIFEST did not list yet: a roll cut between
    /// the new segment becoming durable and the MANIFEST naming it. Nothing
    /// was ever written to it after its header (its first group waits for
    /// the MANIFEST), so it is adopted as the active segment and the
    /// MANIFEST rewritten to list it.
    pub adopted_roll: Option<String>,
    /// Leftovers of interrupted steps that were removed: temp files,
    /// checkpoints no MANIFEST names, segments whose deletion did not finish.
    pub removed_files: Vec<String>,
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
    pub(crate) manifest: crate::codec::manifest::Manifest,
    /// Bytes of the checkpoint.
    pub(crate) checkpoint_bytes: u64,
    /// Bytes of the sealed segments.
    pub(crate) sealed_bytes: u64,
    /// The last Applied marker's position (a shard engine's, cluster mode).
    pub applied: Option<AppliedState>,
    /// What recovery found and did.
    pub report: RecoveryReport,
}

impl Recovered {
    /// What the engine's shared state starts from.
    pub(crate) fn into_start(self, config: Config, storage: Arc<dyn Storage>) -> Start {
        Start {
            config,
            storage,
            streams: self.streams,
            segments: self.segments,
            manifest: self.manifest,
            published_group: self.next_group_id - 1,
            active_len: self.active_len,
            sealed_bytes: self.sealed_bytes,
            checkpoint_bytes: self.checkpoint_bytes,
            applied: self.applied,
        }
    }
}

/// Opens `name` and maps it whole.
fn open_view(
    storage: &dyn Storage,
    name: &str,
) -> Result<
    (
        std::sync::Arc<dyn crate::storage::StorageFile>,
        bytes::Bytes,
    ),
    OpenError,
> {
    let file = storage
        .open(name)
        .map_err(|e| OpenError::io(format!("opening {name}"), e))?;
    let len = file
        .len()
        .map_err(|e| OpenError::io(format!("reading the size of {name}"), e))?;
    let view = file
        .view(len)
        .map_err(|e| OpenError::io(format!("mapping {name}"), e))?;
    Ok((file, view))
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
pub fn recover(storage: &dyn Storage, config: &Config) -> Result<Recovered, OpenError> {
    let layout = layout::read(storage)?;
    let covered = layout
        .manifest
        .as_ref()
        .map_or(0, |m| m.checkpoint_covered_group);
    let unordered_tail = config.durability == crate::config::Durability::OnFlush;
    let mut scan = Scan::new(covered, config.producers_per_stream_max, unordered_tail);
    let loaded = restore::load(storage, layout.manifest.as_ref(), &mut scan)?;
    let mut report = RecoveryReport {
        checkpoint: (loaded.generation != 0).then_some(loaded.generation),
        removed_files: layout.removed.clone(),
        ..Default::default()
    };
    let mut segments = Segments::default();
    let mut active_len = 0;
    // Where the last closed group of the last kept segment starts: what the
    // reseal rewrites. `None` while no segment is kept.
    let mut last_group_start = None;
    for (pos, &index) in layout.segments.iter().enumerate() {
        let is_last = pos + 1 == layout.segments.len();
        let removable = is_last && (layout.manifest.is_none() || layout.pending_roll);
        let frames_before = scan.frames;
        let Some(kept) =
            scan_segment(storage, &mut scan, index, (is_last, removable), &mut report)?
        else {
            break;
        };
        let has_frames = scan.frames > frames_before;
        check_listed(&layout, &kept.segment, is_last, has_frames, &mut report)?;
        active_len = kept.len;
        last_group_start = Some(scan.last_closed_start);
        segments.list.push(kept.segment);
    }
    if loaded.next_group_hint > scan.last_closed_group + 1 {
        let last = segments
            .list
            .last()
            .map_or(segment_name(0), |s| s.name.clone());
        return Err(corrupt(&last, 0, format!(
            "the log ends at group {}, but the checkpoint saw groups up to {}: segments are missing",
            scan.last_closed_group,
            loaded.next_group_hint - 1
        )));
    }
    finish::finish(
        storage,
        finish::Scanned {
            layout,
            scan,
            segments,
            active_len,
            last_group_start,
            checkpoint_bytes: loaded.bytes,
        },
        report,
    )
}

/// What the MANIFEST (or its absence) says about a kept segment: a
/// version-2 segment with frames needs a MANIFEST, and a roll the MANIFEST
/// does not list yet must be empty (it is then adopted).
fn check_listed(
    layout: &layout::Layout,
    segment: &Segment,
    is_last: bool,
    has_frames: bool,
    report: &mut RecoveryReport,
) -> Result<(), OpenError> {
    if layout.manifest.is_none() && segment.version == FORMAT_VERSION && (!is_last || has_frames) {
        return Err(corrupt(
            &segment.name,
            0,
            "a version-2 segment with frames and no MANIFEST: the MANIFEST was lost",
        ));
    }
    if is_last && layout.pending_roll {
        if has_frames {
            // Its first group is written only once the MANIFEST lists it:
            // frames here mean the MANIFEST is older than the log.
            return Err(corrupt(
                &segment.name,
                SEGMENT_HEADER_BYTES as u64,
                "segment holds frames but is not in the MANIFEST (is the MANIFEST an old copy?)",
            ));
        }
        report.adopted_roll = Some(segment.name.clone());
    }
    Ok(())
}

/// A segment recovery keeps, and its data length.
struct Kept {
    segment: Segment,
    len: u64,
}

/// Scans segment `index`: its header, then its frames, then cuts its tail
/// if that is where the scan stopped. `None` when it was the last segment,
/// `removable`, and its header never became durable, so it was removed.
fn scan_segment(
    storage: &dyn Storage,
    scan: &mut Scan,
    index: u64,
    (is_last, removable): (bool, bool),
    report: &mut RecoveryReport,
) -> Result<Option<Kept>, OpenError> {
    let name = segment_name(index);
    let (file, view) = open_view(storage, &name)?;
    let header = match decode_segment_header(&view) {
        Ok(h) => h,
        Err(e) if removable && tail::header_never_synced(&view, is_last) => {
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
        first_group_id: header.first_group_id,
        sealed,
    };
    Ok(Some(Kept { segment, len }))
}
