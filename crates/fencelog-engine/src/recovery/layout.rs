//! The first phase of recovery: what is in the directory, against what the
//! MANIFEST says must be there. Leftovers of interrupted steps are removed
//! (temp files, checkpoints no MANIFEST names, segments whose deletion did
//! not finish); anything missing or foreign refuses to open.

use super::corrupt;
use crate::codec::manifest::Manifest;
use crate::error::OpenError;
use crate::files::{
    checkpoint_name, parse_checkpoint_name, read_whole, MANIFEST_NAME, MANIFEST_TMP_NAME,
};
use crate::segment::{parse_segment_name, segment_name};
use crate::storage::{Storage, LOCK_FILE_NAME};

/// What recovery will scan.
#[derive(Debug, Default)]
pub(super) struct Layout {
    /// The MANIFEST, if the directory has one (none: version 1, or new).
    pub manifest: Option<Manifest>,
    /// Segment indices to scan, ascending.
    pub segments: Vec<u64>,
    /// The last of them is a roll whose MANIFEST update never became
    /// durable: the MANIFEST must be rewritten to list it.
    pub pending_roll: bool,
    /// Files removed as leftovers of interrupted steps.
    pub removed: Vec<String>,
}

struct Listing {
    segments: Vec<u64>,
    checkpoints: Vec<(u64, bool)>,
    manifest: bool,
    manifest_tmp: bool,
}

fn list(storage: &dyn Storage) -> Result<Listing, OpenError> {
    let mut l = Listing {
        segments: Vec::new(),
        checkpoints: Vec::new(),
        manifest: false,
        manifest_tmp: false,
    };
    for name in storage
        .list()
        .map_err(|e| OpenError::io("listing the data directory", e))?
    {
        if let Some(i) = parse_segment_name(&name) {
            l.segments.push(i);
        } else if let Some(c) = parse_checkpoint_name(&name) {
            l.checkpoints.push(c);
        } else if name == MANIFEST_NAME {
            l.manifest = true;
        } else if name == MANIFEST_TMP_NAME {
            l.manifest_tmp = true;
        } else if name != LOCK_FILE_NAME && name != "lost+found/" {
            return Err(corrupt(
                &name,
                0,
                "foreign file in the data directory; fencelog refuses to guess what it is",
            ));
        }
    }
    l.segments.sort_unstable();
    Ok(l)
}

fn remove(storage: &dyn Storage, name: &str, removed: &mut Vec<String>) -> Result<(), OpenError> {
    storage
        .remove(name)
        .map_err(|e| OpenError::io(format!("removing {name}"), e))?;
    removed.push(name.to_string());
    Ok(())
}

/// Reads the directory and decides what to scan.
pub(super) fn read(storage: &dyn Storage) -> Result<Layout, OpenError> {
    let l = list(storage)?;
    let mut layout = Layout::default();
    if l.manifest_tmp {
        // Never renamed into place, so never the MANIFEST.
        remove(storage, MANIFEST_TMP_NAME, &mut layout.removed)?;
    }
    if l.manifest {
        let bytes = read_whole(storage, MANIFEST_NAME)
            .map_err(|e| OpenError::io("reading the MANIFEST", e))?;
        let m = Manifest::decode(&bytes)
            .map_err(|(at, e)| corrupt(MANIFEST_NAME, at, e.to_string()))?;
        layout.segments = listed_segments(storage, &m, &l.segments, &mut layout)?;
        layout.manifest = Some(m);
    } else {
        layout.segments = contiguous(&l.segments)?;
    }
    let current = layout
        .manifest
        .as_ref()
        .map_or(0, |m| m.checkpoint_generation);
    for &(generation, tmp) in &l.checkpoints {
        if tmp || generation != current {
            // Not the checkpoint the MANIFEST names: written but never
            // made current, or superseded and not yet removed.
            let name = if tmp {
                crate::files::checkpoint_tmp_name(generation)
            } else {
                checkpoint_name(generation)
            };
            remove(storage, &name, &mut layout.removed)?;
        }
    }
    if current != 0 && !l.checkpoints.contains(&(current, false)) {
        return Err(corrupt(
            &checkpoint_name(current),
            0,
            "the checkpoint the MANIFEST names is missing",
        ));
    }
    if !layout.removed.is_empty() {
        storage
            .sync_dir()
            .map_err(|e| OpenError::io("syncing the data directory", e))?;
    }
    Ok(layout)
}

/// Without a MANIFEST (version 1, or a directory never finished): the
/// segments must run from 0 without a gap.
fn contiguous(present: &[u64]) -> Result<Vec<u64>, OpenError> {
    for (pos, &i) in present.iter().enumerate() {
        if i != pos as u64 {
            return Err(corrupt(
                &segment_name(pos as u64),
                0,
                format!("segment {pos} is missing (next present is {i})"),
            ));
        }
    }
    Ok(present.to_vec())
}

/// With a MANIFEST: every listed segment must exist; an unlisted one right
/// after the last listed is a roll whose MANIFEST update did not become
/// durable; one below the last listed is a deletion that did not finish.
fn listed_segments(
    storage: &dyn Storage,
    m: &Manifest,
    present: &[u64],
    layout: &mut Layout,
) -> Result<Vec<u64>, OpenError> {
    if m.ranges.is_empty() {
        return Err(corrupt(MANIFEST_NAME, 72, "the MANIFEST lists no segment"));
    }
    let mut out: Vec<u64> = Vec::new();
    for i in m.indices() {
        if present.binary_search(&i).is_ok() {
            out.push(i);
        } else if !(mutated!(IgnoreMissingLastSegment) && Some(i) == m.last_index()) {
            // The last one too: the MANIFEST named it only after its header
            // and directory entry were durable, so it cannot be a roll that
            // never finished. Its records were acknowledged.
            return Err(corrupt(
                &segment_name(i),
                0,
                "segment listed in the MANIFEST is missing",
            ));
        }
    }
    let last = m.last_index().expect("not empty");
    for &i in present {
        if m.contains(i) {
            continue;
        }
        if i == last + 1 {
            out.push(i);
            layout.pending_roll = true;
        } else if i < last {
            remove(storage, &segment_name(i), &mut layout.removed)?;
        } else {
            return Err(corrupt(
                &segment_name(i),
                0,
                format!("segment {i} is not in the MANIFEST, which ends at {last}"),
            ));
        }
    }
    Ok(out)
}
