//! Deciding the tail: a last segment that stops decoding is either the
//! unsynced tail of its last group (cut it) or damage in the middle of the
//! log (refuse). At most one group — the last — can be torn by a crash,
//! because the writer syncs each group before it writes the next.
//!
//! In `Durability::OnFlush` many groups of the last segment may be
//! unsynced, and write-back reaches the disk in no particular order: a
//! torn group can be followed by complete later ones. There the last
//! segment is cut at its first bad frame whatever follows, which keeps
//! exactly the prefix of groups that survived whole (the groups cut were
//! never flushed; their Raft entries are applied again). Every segment
//! before the last was synced by its roll, so damage there still refuses.

use super::{corrupt, RecoveryReport, Truncation};
use crate::codec::{decode_frame, FORMAT_VERSION, FORMAT_VERSION_V1, FRAME_MAGIC};
use crate::error::OpenError;
use crate::storage::{Storage, StorageFile};

/// Where the scan stands in a segment that stopped decoding or ended:
/// what deciding its tail looks at.
pub(super) struct Position {
    /// Where the open (not yet closed) group starts, if one is open.
    pub open_group_start: Option<u64>,
    pub open_group_id: u64,
    pub last_closed_group: u64,
    /// The segment's format version.
    pub version: u32,
    /// Unsynced groups of the last segment may have reached the disk in
    /// any order (`Durability::OnFlush`).
    pub unordered_tail: bool,
}

/// Where to cut the last segment, and why.
pub(super) struct Cut {
    pub offset: u64,
    pub reason: String,
    /// The bytes from the first bad offset on are all zero, after a
    /// complete group: the writer's preallocated space, not a torn write.
    pub zero_tail: bool,
}

/// The frame at `off` failed to decode with `reason`. Refuses unless it is
/// in the last segment and no frame of a later group follows it (or the
/// log's tail may be unordered, see the module comment); then the cut
/// starts at the open group (its earlier frames were never acknowledged
/// either) or at `off`.
pub(super) fn decide(
    pos: &Position,
    name: &str,
    view: &[u8],
    off: usize,
    is_last: bool,
    reason: String,
) -> Result<Cut, OpenError> {
    if !is_last && !mutated!(TruncateAnyBadFrame) {
        return Err(corrupt(name, off as u64, reason));
    }
    // The group that may be torn: the open one, or the next.
    let torn_group = if pos.open_group_start.is_some() {
        pos.open_group_id
    } else {
        pos.last_closed_group + 1
    };
    let later = match (pos.unordered_tail && !mutated!(OrderedTailOnFlush))
        || mutated!(TruncateAnyBadFrame)
    {
        true => None,
        false => find_frame_after(view, off + 1, torn_group + 1, pos.version),
    };
    if let Some((at, g)) = later {
        return Err(corrupt(
            name,
            off as u64,
            format!("{reason}; a later complete frame of group {g} at offset {at} shows this is not an unsynced tail"),
        ));
    }
    Ok(Cut {
        offset: pos.open_group_start.unwrap_or(off as u64),
        zero_tail: pos.open_group_start.is_none() && view[off..].iter().all(|&b| b == 0),
        reason,
    })
}

/// Every frame decoded but the segment ends inside a group: in the last
/// segment that group is the torn tail, anywhere else the log is broken.
pub(super) fn unfinished_group(
    pos: &Position,
    name: &str,
    len: u64,
    is_last: bool,
) -> Result<Option<Cut>, OpenError> {
    let Some(start) = pos.open_group_start else {
        return Ok(None);
    };
    if !is_last {
        return Err(corrupt(name, len, "segment ends inside a group"));
    }
    Ok(Some(Cut {
        offset: start,
        reason: "file ends before the group's last frame".to_string(),
        zero_tail: false,
    }))
}

/// Cuts `file` (`len` bytes) at the cut, syncs it, and reports it. Returns
/// the new length.
pub(super) fn cut(
    file: &dyn StorageFile,
    name: &str,
    len: u64,
    cut: Cut,
    report: &mut RecoveryReport,
) -> Result<u64, OpenError> {
    let Cut {
        offset,
        reason,
        zero_tail,
    } = cut;
    file.truncate(offset)
        .and_then(|()| file.sync_data())
        .map_err(|e| OpenError::io(format!("truncating {name}"), e))?;
    if zero_tail {
        tracing::debug!(file = %name, offset, bytes = len - offset, "released preallocated space");
        report.preallocated_bytes_released = len - offset;
    } else {
        tracing::warn!(file = %name, offset, bytes_cut = len - offset, %reason, "truncated the unsynced tail of the last segment");
        report.truncated = Some(Truncation {
            file: name.to_string(),
            offset,
            bytes_cut: len - offset,
            reason,
        });
    }
    Ok(offset)
}

/// Whether a last segment whose header does not decode may be removed: no
/// valid frame follows, so the header never became durable and the writer
/// never put a group there.
pub(super) fn header_never_synced(view: &[u8], is_last: bool) -> bool {
    // A header that does not decode says no version: look for frames of
    // either.
    is_last
        && find_frame_after(view, 0, 0, FORMAT_VERSION).is_none()
        && find_frame_after(view, 0, 0, FORMAT_VERSION_V1).is_none()
}

/// Removes such a segment and makes the removal durable.
pub(super) fn remove_segment(
    storage: &dyn Storage,
    name: &str,
    reason: &str,
) -> Result<(), OpenError> {
    storage
        .remove(name)
        .map_err(|e| OpenError::io(format!("removing {name}"), e))?;
    storage
        .sync_dir()
        .map_err(|e| OpenError::io("syncing the data directory", e))?;
    tracing::warn!(file = %name, %reason, "removed a last segment whose header never became durable");
    Ok(())
}

/// The first offset at or after `from` holding a frame that decodes and
/// belongs to group `min_group` or later, if any. Only run on the tail of
/// the last segment after a decode failure, to tell a torn tail from damage
/// in the middle.
fn find_frame_after(
    view: &[u8],
    from: usize,
    min_group: u64,
    version: u32,
) -> Option<(usize, u64)> {
    let magic = FRAME_MAGIC.to_le_bytes();
    let mut at = from;
    while at + 4 <= view.len() {
        if view[at..at + 4] == magic {
            if let Ok(f) = decode_frame(&view[at..], version) {
                if f.header.group_id >= min_group {
                    return Some((at, f.header.group_id));
                }
            }
        }
        at += 1;
    }
    None
}
