//! The last phase of recovery: make the last segment the active one,
//! reseal it, upgrade a version-1 directory (a new version-2 segment to
//! write to), write the MANIFEST if it must change, and hand the rebuilt
//! streams over.

use super::layout::Layout;
use super::scan::Scan;
use super::{build, Recovered, RecoveryReport};
use crate::codec::manifest::Manifest;
use crate::codec::{FORMAT_VERSION, SEGMENT_HEADER_BYTES};
use crate::error::OpenError;
use crate::files::{replace_whole, MANIFEST_NAME, MANIFEST_TMP_NAME};
use crate::segment::{create_segment, segment_name, Segment, Segments};
use crate::storage::{buffer_len, Storage};

/// What the scan left.
pub(super) struct Scanned {
    pub layout: Layout,
    pub scan: Scan,
    /// The kept segments; the last of them `active_len` bytes long with its
    /// last closed group at `last_group_start` (`None` if none was kept).
    pub segments: Segments,
    pub active_len: u64,
    pub last_group_start: Option<Option<u64>>,
    pub checkpoint_bytes: u64,
}

pub(super) fn finish(
    storage: &dyn Storage,
    s: Scanned,
    mut report: RecoveryReport,
) -> Result<Recovered, OpenError> {
    let Scanned {
        layout,
        scan,
        mut segments,
        mut active_len,
        last_group_start,
        checkpoint_bytes,
    } = s;
    let next_group_id = scan.last_closed_group + 1;
    let mut new_segment = false;
    if segments.list.is_empty() {
        segments.list.push(new_active(storage, 0, next_group_id)?);
        active_len = SEGMENT_HEADER_BYTES as u64;
        new_segment = true;
    } else if report.removed_segment.is_some() {
        // The previous segment becomes the active one again.
        let last = segments.list.last_mut().expect("not empty");
        last.sealed = None;
        active_len = last
            .file
            .len()
            .map_err(|e| OpenError::io("reading a segment size", e))?;
    }
    // A fresh segment was just created and synced: nothing to reseal.
    if let Some(last_group_start) = last_group_start {
        reseal(storage, segments.active(), last_group_start, active_len)?;
    }
    if segments.active().version != FORMAT_VERSION {
        // The writer must not put version-2 frames in a version-1 segment:
        // seal it as it is and write to a new one.
        let old = segments.list.last_mut().expect("not empty");
        old.sealed = Some(
            old.file
                .view(active_len)
                .map_err(|e| OpenError::io(format!("mapping {}", old.name), e))?,
        );
        let index = old.index + 1;
        segments
            .list
            .push(new_active(storage, index, next_group_id)?);
        active_len = SEGMENT_HEADER_BYTES as u64;
        new_segment = true;
        report.upgraded_from_v1 = true;
    }
    let mut manifest = layout.manifest.clone().unwrap_or_default();
    let ranges = Manifest::ranges_of(segments.indices());
    if layout.manifest.is_none() || new_segment || layout.pending_roll || manifest.ranges != ranges
    {
        manifest.generation += 1;
        manifest.ranges = ranges;
        let bytes = manifest.encode();
        replace_whole(storage, MANIFEST_TMP_NAME, MANIFEST_NAME, &bytes)
            .map_err(|e| OpenError::io("writing the MANIFEST", e))?;
    }
    let active = segments.active().index;
    let (streams, records) = build::build_streams(scan.streams, scan.last_closed_group, active)?;
    let sealed_bytes = sealed_bytes(&segments)?;
    report.segments = segments.list.len();
    report.streams = streams.len();
    report.records = records;
    report.frames = scan.frames;
    Ok(Recovered {
        segments,
        active_len,
        streams,
        next_group_id,
        manifest,
        checkpoint_bytes,
        sealed_bytes,
        applied: scan.applied,
        report,
    })
}

fn new_active(
    storage: &dyn Storage,
    index: u64,
    first_group_id: u64,
) -> Result<Segment, OpenError> {
    let file = create_segment(storage, index, first_group_id)
        .map_err(|e| OpenError::io(format!("creating {}", segment_name(index)), e))?;
    Ok(Segment {
        index,
        name: segment_name(index),
        file,
        version: FORMAT_VERSION,
        first_group_id,
        sealed: None,
    })
}

/// Bytes of the sealed segments (their views are their whole files).
fn sealed_bytes(segments: &Segments) -> Result<u64, OpenError> {
    Ok(segments
        .list
        .iter()
        .filter_map(|s| s.sealed.as_ref())
        .map(|v| v.len() as u64)
        .sum())
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
        let len = buffer_len(active_len - start).map_err(|e| io("reading", e))?;
        let mut group = vec![0u8; len];
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
