//! Persisting a planned group: roll to a new segment if it would not fit,
//! write it at the end of the active segment, keep zero-filled space ahead
//! of it, and `sync_data` once. This module is the only caller of the
//! write-path `sync_data`; on failure it is never retried (see
//! ARCHITECTURE.md, "Poisoned, never retried").

use crate::codec::manifest::Manifest;
use crate::codec::SEGMENT_HEADER_BYTES;
use crate::error::StorageFailure;
use crate::index::SEGMENT_INDEX_MAX;
use crate::locks;
use crate::segment::{create_segment, segment_name, Segment};
use crate::shared::Shared;

/// Where a group landed: segment index and offset of its first byte.
pub(super) type Placed = (u64, u64);

/// The writer's end of the log: how far the active segment holds data, and
/// how far it is allocated.
pub(super) struct Tail {
    active_len: u64,
    /// Length of the active segment file: `active_len` plus zero-filled
    /// space written ahead (see [`crate::config::PREALLOC_BYTES_DEFAULT`]).
    allocated_len: u64,
}

impl Tail {
    /// Recovery leaves the active segment exactly as long as its data.
    pub(super) fn new(active_len: u64) -> Self {
        Tail {
            active_len,
            allocated_len: active_len,
        }
    }

    /// Writes and syncs the encoded group `group_id`, rolling first if it
    /// would not fit.
    pub(super) fn write_group(
        &mut self,
        shared: &Shared,
        buf: &[u8],
        group_id: u64,
    ) -> Result<Placed, StorageFailure> {
        let header = SEGMENT_HEADER_BYTES as u64;
        if self.active_len > header
            && self.active_len + buf.len() as u64 > shared.config.segment_bytes_max
        {
            self.roll(shared, group_id)?;
        }
        let seg = locks::read(&shared.segments).active().clone();
        let at = self.active_len;
        seg.file
            .write_all_at(buf, at)
            .map_err(|e| StorageFailure::new("write", &seg.name, &e))?;
        self.active_len = at + buf.len() as u64;
        if self.active_len > self.allocated_len {
            self.preallocate(shared, &seg)?;
        }
        if !(mutated!(AckBeforeSync) || mutated!(ServeUnsynced)) {
            sync_active(shared)?;
        }
        Ok((seg.index, at))
    }

    /// Bytes of the active segment's file (data and preallocated zeros).
    pub(super) fn allocated_len(&self) -> u64 {
        self.allocated_len
    }

    /// Bytes of the active segment's data.
    pub(super) fn active_len(&self) -> u64 {
        self.active_len
    }

    /// Zero-fills the active segment ahead of the data, inside the same
    /// sync as the group that needed it. Real zeros, not `fallocate`: on
    /// ext4 an fallocated extent is "unwritten" and the first write into it
    /// is again a metadata change the sync must commit. Under a disk
    /// budget the zeros count as used, so they stop at the budget.
    fn preallocate(&mut self, shared: &Shared, seg: &Segment) -> Result<(), StorageFailure> {
        /// Zeros written per call, so the buffer stays small.
        const ZEROS_BYTES: usize = 64 << 10;
        static ZEROS: [u8; ZEROS_BYTES] = [0; ZEROS_BYTES];
        let mut cap = shared.config.segment_bytes_max.max(self.active_len);
        if let Some(max) = shared.config.data_bytes_max {
            let others = shared.disk_bytes_sealed();
            cap = cap.min(max.saturating_sub(others).max(self.active_len));
        }
        let target = (self.active_len + shared.config.prealloc_bytes).min(cap);
        let mut at = self.active_len;
        while at < target {
            let n = ((target - at) as usize).min(ZEROS_BYTES);
            seg.file
                .write_all_at(&ZEROS[..n], at)
                .map_err(|e| StorageFailure::new("preallocate", &seg.name, &e))?;
            at += n as u64;
        }
        self.allocated_len = target.max(self.active_len);
        Ok(())
    }

    /// Seals the active segment and creates the next, whose header says its
    /// first group is `next_group_id`.
    fn roll(&mut self, shared: &Shared, next_group_id: u64) -> Result<(), StorageFailure> {
        let old = locks::read(&shared.segments).active().clone();
        // A sealed segment ends exactly at its last group: recovery refuses
        // anything after that in any segment but the last. Cut the zeros
        // before the next segment exists.
        if self.allocated_len > self.active_len {
            old.file
                .truncate(self.active_len)
                .and_then(|()| old.file.sync_data())
                .map_err(|e| StorageFailure::new("truncate preallocation", &old.name, &e))?;
            self.allocated_len = self.active_len;
        }
        let index = old.index + 1;
        if index > SEGMENT_INDEX_MAX {
            return Err(StorageFailure {
                op: "roll",
                file: segment_name(index),
                kind: std::io::ErrorKind::StorageFull,
                message: "segment index space exhausted".into(),
            });
        }
        let name = segment_name(index);
        let file = create_segment(&*shared.storage, index, next_group_id)
            .map_err(|e| StorageFailure::new("create segment", &name, &e))?;
        // The MANIFEST lists it before any group goes there, so recovery
        // can tell a missing segment from one never finished. Relative to
        // what the MANIFEST lists (not the segment list), so a deletion the
        // reclaimer makes at the same time is kept.
        shared.manifest.rewrite(&*shared.storage, |m| {
            m.ranges = Manifest::ranges_of(m.indices().chain([index]))
        })?;
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

/// The only fsync on the write path. On failure we never retry it: the
/// kernel may have dropped the pages (see ARCHITECTURE.md).
pub(super) fn sync_active(shared: &Shared) -> Result<(), StorageFailure> {
    let seg = locks::read(&shared.segments).active().clone();
    match seg.file.sync_data() {
        Err(_) if mutated!(IgnoreSyncError) => Ok(()),
        r => r.map_err(|e| StorageFailure::new("fdatasync", &seg.name, &e)),
    }
}
