//! Deleting segments that hold nothing live, once the checkpoint covers
//! their groups: the MANIFEST without them first, then the unlink, then the
//! directory fsync. A crash in between leaves them listed (still valid) or
//! unlisted but present (removed at the next open).

use super::live::Sealed;
use crate::codec::manifest::Manifest;
use crate::error::StorageFailure;
use crate::locks;
use crate::reclaim_signal::ReclaimReport;
use crate::shared::Shared;

pub(super) fn run(
    shared: &Shared,
    dead: &[&Sealed],
    report: &mut ReclaimReport,
) -> Result<(), StorageFailure> {
    let covered = shared.manifest.get().checkpoint_covered_group;
    let dead: Vec<&Sealed> = dead
        .iter()
        .copied()
        .filter(|d| d.last_group <= covered || mutated!(DeleteBeforeCheckpoint))
        .collect();
    if dead.is_empty() {
        return Ok(());
    }
    let gone: Vec<u64> = dead.iter().map(|d| d.segment.index).collect();
    shared.manifest.rewrite(&*shared.storage, |m| {
        m.ranges = Manifest::ranges_of(m.indices().filter(|i| !gone.contains(i)))
    })?;
    // Readers pair entries with segments under the read lock; none points
    // here any more, and the handles they hold stay valid.
    locks::write(&shared.segments)
        .list
        .retain(|s| !gone.contains(&s.index));
    for d in &dead {
        shared
            .storage
            .remove(&d.segment.name)
            .map_err(|e| StorageFailure::new("delete segment", &d.segment.name, &e))?;
        shared.sub_sealed_bytes(d.len);
        report.deleted.push(d.segment.index);
        report.reclaimed_bytes += d.len;
    }
    shared.storage.sync_dir().map_err(|e| {
        StorageFailure::new("sync directory after deleting", &dead[0].segment.name, &e)
    })?;
    shared.metrics.segments_deleted.inc_by(dead.len() as u64);
    shared
        .metrics
        .reclaimed_bytes
        .inc_by(dead.iter().map(|d| d.len).sum());
    tracing::debug!(segments = ?gone, "deleted segments holding nothing live");
    Ok(())
}
