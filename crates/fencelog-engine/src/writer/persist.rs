//! Persisting a planned group: roll to a new segment if it would not fit,
//! keep zero-filled space ahead of where it goes, write it at the end of
//! the active segment, and `sync_data` once. This module is the only
//! caller of the write-path `sync_data`; on failure it is never retried
//! (see ARCHITECTURE.md, "Poisoned, never retried").
//!
//! Everything that can fail *before* the group's first byte is written —
//! creating the next segment (EMFILE, ENFILE, ENOSPC), zero-filling ahead
//! (ENOSPC, EFBIG) — is undone and reported as [`PersistError::NotWritten`]:
//! the group is refused, nothing durable changed, and the engine keeps
//! going. Only a failure of the data write or of the sync poisons.

use crate::codec::manifest::Manifest;
use crate::codec::SEGMENT_HEADER_BYTES;
use crate::config::Durability;
use crate::error::StorageFailure;
use crate::index::SEGMENT_INDEX_MAX;
use crate::locks;
use crate::segment::{create_segment, segment_name, Segment};
use crate::shared::Shared;

/// Where a group landed: segment index and offset of its first byte.
pub(super) type Placed = (u64, u64);

/// Why a group did not become durable.
pub(super) enum PersistError {
    /// Nothing of the group was written, and what the attempt changed was
    /// undone (a half-created segment removed, zeros cut back): the log is
    /// exactly as before. Safe to refuse the group and go on.
    NotWritten(StorageFailure),
    /// The data write or the sync failed: the group's outcome is unknown
    /// and the engine must be poisoned.
    Failed(StorageFailure),
}

/// The writer's end of the log: how far the active segment holds data, and
/// how far it is allocated.
pub(super) struct Tail {
    active_len: u64,
    /// Length of the active segment file: `active_len` plus zero-filled
    /// space written ahead (see [`crate::config::PREALLOC_BYTES_DEFAULT`]).
    allocated_len: u64,
    /// A roll began (the active segment was cut to its last group) but the
    /// next segment could not be created: every group goes to a new
    /// segment from now on, even one that would fit, because a segment
    /// that may have a successor (a half-created file whose removal was
    /// not durable) must end exactly at its last group.
    roll_pending: bool,
    /// The active segment holds groups written but not synced yet
    /// ([`Durability::OnFlush`] only).
    unsynced: bool,
}

impl Tail {
    /// Recovery leaves the active segment exactly as long as its data.
    pub(super) fn new(active_len: u64) -> Self {
        Tail {
            active_len,
            allocated_len: active_len,
            roll_pending: false,
            unsynced: false,
        }
    }

    /// Writes the encoded group `group_id`, rolling first if it would not
    /// fit, and syncs it unless the engine syncs only on flush.
    pub(super) fn write_group(
        &mut self,
        shared: &Shared,
        buf: &[u8],
        group_id: u64,
    ) -> Result<Placed, PersistError> {
        let header = SEGMENT_HEADER_BYTES as u64;
        if self.roll_pending
            || (self.active_len > header
                && self.active_len + buf.len() as u64 > shared.config.segment_bytes_max)
        {
            self.roll_pending = true;
            self.roll(shared, group_id)?;
            self.roll_pending = false;
        }
        let seg = locks::read(&shared.segments).active().clone();
        let at = self.active_len;
        let end = at + buf.len() as u64;
        if end > self.allocated_len && shared.config.prealloc_bytes > 0 {
            self.preallocate(shared, &seg, end)?;
        }
        seg.file
            .write_all_at(buf, at)
            .map_err(|e| PersistError::Failed(StorageFailure::new("write", &seg.name, &e)))?;
        self.active_len = end;
        self.allocated_len = self.allocated_len.max(end);
        if shared.config.durability == Durability::OnFlush {
            self.unsynced = true;
        } else if !(mutated!(AckBeforeSync) || mutated!(ServeUnsynced)) {
            sync_active(shared).map_err(PersistError::Failed)?;
        }
        Ok((seg.index, at))
    }

    /// Syncs the groups written since the last sync, if any
    /// ([`Durability::OnFlush`]'s flush). Never retried by the caller.
    pub(super) fn sync_unsynced(&mut self, shared: &Shared) -> Result<(), StorageFailure> {
        if !self.unsynced || mutated!(FlushSkipsSync) {
            return Ok(());
        }
        sync_active(shared)?;
        self.unsynced = false;
        Ok(())
    }

    /// Bytes of the active segment's file (data and preallocated zeros).
    pub(super) fn allocated_len(&self) -> u64 {
        self.allocated_len
    }

    /// Bytes of the active segment's data.
    pub(super) fn active_len(&self) -> u64 {
        self.active_len
    }

    /// Zero-fills the active segment past `data_end` (where the group about
    /// to be written ends), before the group is written and inside the same
    /// sync. Real zeros, not `fallocate`: on ext4 an fallocated extent is
    /// "unwritten" and the first write into it is again a metadata change
    /// the sync must commit. Fails only before any of the group is written:
    /// the zeros already written are cut back off, so the file is as it was.
    /// Under a disk budget the zeros count as used, so they stop at the
    /// budget.
    fn preallocate(
        &mut self,
        shared: &Shared,
        seg: &Segment,
        data_end: u64,
    ) -> Result<(), PersistError> {
        /// Zeros written per call, so the buffer stays small.
        const ZEROS_BYTES: usize = 64 << 10;
        static ZEROS: [u8; ZEROS_BYTES] = [0; ZEROS_BYTES];
        let mut cap = shared.config.segment_bytes_max.max(data_end);
        if let Some(max) = shared.config.data_bytes_max {
            let others = shared.disk_bytes_sealed();
            cap = cap.min(max.saturating_sub(others).max(data_end));
        }
        let target = (data_end + shared.config.prealloc_bytes).min(cap);
        // Bytes below `allocated_len` are zeros already; the group's own
        // range is zero-filled too, so its write overwrites allocated
        // blocks and cannot run out of space halfway.
        let mut at = self.allocated_len;
        while at < target {
            let n = usize::try_from(target - at).map_or(ZEROS_BYTES, |n| n.min(ZEROS_BYTES));
            if let Err(e) = seg.file.write_all_at(&ZEROS[..n], at) {
                let failure = StorageFailure::new("preallocate", &seg.name, &e);
                // Undo: the zeros past the old end may be partly there. The
                // cut is synced: a later roll may not cut this segment again
                // (its length looks right), and a sealed segment must not
                // come back from a crash with zeros after its last group.
                let undo = seg
                    .file
                    .truncate(self.allocated_len)
                    .and_then(|()| seg.file.sync_data());
                return match undo {
                    Ok(()) => Err(PersistError::NotWritten(failure)),
                    Err(e) => Err(PersistError::Failed(StorageFailure::new(
                        "undo preallocation",
                        &seg.name,
                        &e,
                    ))),
                };
            }
            at += n as u64;
        }
        self.allocated_len = target.max(self.allocated_len);
        Ok(())
    }

    /// Seals the active segment and creates the next, whose header says its
    /// first group is `next_group_id`. A failure to create the next one is
    /// [`PersistError::NotWritten`] once the half-created file is removed:
    /// the old segment, cut to its last group, is a valid end of the log,
    /// and the next group tries the roll again.
    fn roll(&mut self, shared: &Shared, next_group_id: u64) -> Result<(), PersistError> {
        let old = locks::read(&shared.segments).active().clone();
        // A sealed segment ends exactly at its last group: recovery refuses
        // anything after that in any segment but the last. Cut the zeros
        // before the next segment exists. The cut's sync also makes the
        // groups `OnFlush` left unsynced durable: a hole may only ever be
        // in the last segment, where recovery can cut it.
        let keep_unsynced = self.unsynced && mutated!(RollLeavesUnsynced);
        if self.allocated_len > self.active_len {
            old.file
                .truncate(self.active_len)
                .and_then(|()| match keep_unsynced {
                    true => Ok(()),
                    false => old.file.sync_data(),
                })
                .map_err(|e| {
                    PersistError::Failed(StorageFailure::new(
                        "truncate preallocation",
                        &old.name,
                        &e,
                    ))
                })?;
            self.allocated_len = self.active_len;
            self.unsynced = keep_unsynced;
        }
        if self.unsynced && !keep_unsynced {
            old.file.sync_data().map_err(|e| {
                PersistError::Failed(StorageFailure::new("fdatasync", &old.name, &e))
            })?;
            self.unsynced = false;
        }
        let index = old.index + 1;
        if index > SEGMENT_INDEX_MAX {
            return Err(PersistError::NotWritten(StorageFailure {
                op: "roll",
                file: segment_name(index),
                kind: std::io::ErrorKind::StorageFull,
                message: "segment index space exhausted".into(),
            }));
        }
        let name = segment_name(index);
        let file = create_segment(&*shared.storage, index, next_group_id).map_err(|e| {
            let failure = StorageFailure::new("create segment", &name, &e);
            match remove_half_created(shared, &name) {
                Ok(()) => PersistError::NotWritten(failure),
                Err(_) => PersistError::Failed(failure),
            }
        })?;
        // The MANIFEST lists it before any group goes there, so recovery
        // can tell a missing segment from one never finished. Relative to
        // what the MANIFEST lists (not the segment list), so a deletion the
        // reclaimer makes at the same time is kept. A failure here poisons:
        // the rewrite may have half happened.
        shared
            .manifest
            .rewrite(&*shared.storage, |m| {
                m.ranges = Manifest::ranges_of(m.indices().chain([index]))
            })
            .map_err(PersistError::Failed)?;
        // Sealing is for read speed only; if the map fails, readers keep
        // using positional reads.
        let sealed = old.file.view(self.active_len).ok();
        let mut segs = locks::write(&shared.segments);
        let last = segs
            .list
            .last_mut()
            .expect("there is always an active segment");
        last.sealed = sealed;
        segs.list.push(Segment {
            index,
            name,
            file,
            version: crate::codec::FORMAT_VERSION,
            first_group_id: next_group_id,
            sealed: None,
        });
        drop(segs);
        shared.add_sealed_bytes(self.active_len);
        tracing::debug!(segment = index, "rolled to a new segment");
        self.active_len = SEGMENT_HEADER_BYTES as u64;
        self.allocated_len = self.active_len;
        Ok(())
    }
}

/// Removes a segment whose creation failed part way, so the next roll can
/// create it again. Its removal need not be durable: a crash that brings it
/// back leaves either no valid header (recovery removes it) or a valid empty
/// last segment after a sealed one, both fine.
fn remove_half_created(shared: &Shared, name: &str) -> std::io::Result<()> {
    match shared.storage.remove(name) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The only fsync on the write path. On failure we never retry it: the
/// kernel may have dropped the pages (see ARCHITECTURE.md).
pub(super) fn sync_active(shared: &Shared) -> Result<(), StorageFailure> {
    let seg = locks::read(&shared.segments).active().clone();
    match seg.file.sync_data() {
        Err(_) if mutated!(IgnoreSyncError) => Ok(()),
        r => r.map_err(|e| StorageFailure::new("fdatasync", &seg.name, &e)),
    }
}
