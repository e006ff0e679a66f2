//! The last phase of recovery: make the last segment the active one,
//! reseal it, and hand the rebuilt streams over.

use super::scan::{Scan, Working};
use super::{Recovered, RecoveryReport, FIRST_GROUP_ID};
use crate::codec::SEGMENT_HEADER_BYTES;
use crate::error::OpenError;
use crate::index::StreamIndex;
use crate::segment::{create_segment, segment_name, Segment, Segments};
use crate::storage::Storage;
use crate::stream::{StreamMap, StreamShared};
use std::collections::HashMap;
use std::sync::Arc;

/// The scan is over: `segments` are the kept segments, the last of them
/// `active_len` bytes long with its last closed group at
/// `last_group_start` (`None` if no segment was kept).
pub(super) fn finish(
    storage: &dyn Storage,
    scan: Scan,
    mut segments: Segments,
    mut active_len: u64,
    last_group_start: Option<Option<u64>>,
    mut report: RecoveryReport,
) -> Result<Recovered, OpenError> {
    if segments.list.is_empty() {
        let file = create_segment(storage, 0, FIRST_GROUP_ID)
            .map_err(|e| OpenError::io("creating the first segment", e))?;
        segments.list.push(Segment {
            index: 0,
            name: segment_name(0),
            file,
            version: crate::codec::FORMAT_VERSION,
            sealed: None,
        });
        active_len = SEGMENT_HEADER_BYTES as u64;
    } else if report.removed_segment.is_some() {
        // The previous segment becomes the active one again.
        let last = segments.list.last_mut().expect("not empty");
        last.sealed = None;
        active_len = last
            .file
            .len()
            .map_err(|e| OpenError::io("reading a segment size", e))?;
    }
    // A fresh segment 0 was just created and synced: nothing to reseal.
    if let Some(last_group_start) = last_group_start {
        reseal(storage, segments.active(), last_group_start, active_len)?;
    }
    let streams = publish_streams(scan.streams);
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

/// The streams as readers and the writer will see them.
fn publish_streams(scanned: HashMap<Box<str>, (Working, StreamIndex)>) -> StreamMap {
    let mut streams = StreamMap::new();
    for (name, (w, mut index)) in scanned {
        index.shrink_to_fit();
        let shared = StreamShared::with_index(index);
        shared.publish(w.fence.highest_token, w.fence.next_seq, w.last_timestamp_ms);
        streams.insert(name, Arc::new(shared));
    }
    streams
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
