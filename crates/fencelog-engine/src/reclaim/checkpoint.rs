//! Writing a checkpoint without stopping the writer: `covered` is the last
//! published group when the capture starts; each stream is captured under
//! its own lock with the group that last changed it (`as_of_group`). The
//! file is streamed out in bounded chunks, synced, renamed into place, and
//! only then named by the MANIFEST; the previous one goes after that. In
//! `Durability::OnFlush` the writer flushes before the file is synced, so
//! no checkpoint covers a group a crash can lose.

use super::{failed, Writer};
use crate::codec::checkpoint::{CheckpointEncoder, CheckpointHeader, CHECKPOINT_HEADER_BYTES};
use crate::error::{StorageFailure, WriteError};
use crate::files::{checkpoint_name, checkpoint_tmp_name};
use crate::locks;
use crate::reclaim_signal::ReclaimReport;
use crate::shared::Shared;
use crate::storage::StorageFile;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Bytes of encoded entries buffered before they are written out.
const CHUNK_BYTES: usize = 1 << 20;

/// Writes and names a checkpoint. `writer` flushes before it is synced:
/// in `Durability::OnFlush` the captured state may include groups written
/// but not synced yet, and a checkpoint must never cover a group a crash
/// can lose.
pub(super) fn write(
    shared: &Shared,
    writer: &Writer,
    report: &mut ReclaimReport,
) -> Result<(), WriteError> {
    let written = write_file(shared, writer)?;
    name(shared, written, report).map_err(|f| failed(shared, f))
}

/// A written, synced checkpoint file not yet renamed into place.
struct Written {
    started: Instant,
    generation: u64,
    covered: u64,
    bytes: u64,
}

fn write_file(shared: &Shared, writer: &Writer) -> Result<Written, WriteError> {
    let started = Instant::now();
    let covered = shared.published_group.load(Ordering::Acquire);
    let previous = shared.manifest.get().checkpoint_generation;
    let generation = previous + 1;
    let tmp = checkpoint_tmp_name(generation);
    let tmp_ref = tmp.as_str();
    let fail = |op: &'static str| {
        move |e: std::io::Error| failed(shared, StorageFailure::new(op, tmp_ref, &e))
    };
    let file = crate::files::create_replacing(&*shared.storage, &tmp)
        .map_err(fail("create checkpoint"))?;
    let applied = locks::lock(&shared.applied).clone();
    let (mut enc, mut buf) = CheckpointEncoder::new(applied.as_ref());
    let mut at = CHECKPOINT_HEADER_BYTES as u64;
    let mut newest = covered;
    let mut io: Result<(), std::io::Error> = Ok(());
    shared.each_stream(|stream, s| {
        let e = s.capture(stream);
        let omit = match e.deleted {
            true => mutated!(ForgetTombstoneAtCheckpoint),
            false => mutated!(CheckpointOmitsStreams),
        };
        if omit || io.is_err() {
            return;
        }
        newest = newest.max(e.as_of_group);
        enc.entry(&e, &mut buf);
        if buf.len() >= CHUNK_BYTES {
            io = flush(&*file, &mut buf, &mut at);
        }
    });
    io.map_err(fail("write checkpoint"))?;
    let next_group_id = shared.published_group.load(Ordering::Acquire).max(newest) + 1;
    let header = CheckpointHeader {
        generation,
        covered_group_id: covered,
        stream_count: 0,
        next_group_id,
    };
    let (trailer, head) = enc.finish(header);
    buf.extend_from_slice(&trailer);
    flush(&*file, &mut buf, &mut at).map_err(fail("write checkpoint"))?;
    file.write_all_at(&head, 0)
        .map_err(fail("write checkpoint"))?;
    // Everything captured above was published before this point.
    writer.flush(shared)?;
    file.sync_data().map_err(fail("fdatasync checkpoint"))?;
    Ok(Written {
        started,
        generation,
        covered,
        bytes: at,
    })
}

/// Renames the synced file into place, names it in the MANIFEST, and
/// removes the previous one.
fn name(shared: &Shared, w: Written, report: &mut ReclaimReport) -> Result<(), StorageFailure> {
    let Written {
        started,
        generation,
        covered,
        bytes,
    } = w;
    let previous = generation - 1;
    let tmp = checkpoint_tmp_name(generation);
    let name = checkpoint_name(generation);
    let tmp_ref = tmp.as_str();
    let fail = |op: &'static str| move |e: std::io::Error| StorageFailure::new(op, tmp_ref, &e);
    shared
        .storage
        .rename(&tmp, &name)
        .map_err(fail("rename checkpoint"))?;
    shared
        .storage
        .sync_dir()
        .map_err(fail("sync directory after a checkpoint"))?;
    shared.manifest.rewrite(&*shared.storage, |m| {
        m.checkpoint_generation = generation;
        m.checkpoint_covered_group = covered;
    })?;
    shared.set_checkpoint_bytes(bytes);
    if previous != 0 {
        let old = checkpoint_name(previous);
        shared
            .storage
            .remove(&old)
            .map_err(|e| StorageFailure::new("remove checkpoint", &old, &e))?;
        shared
            .storage
            .sync_dir()
            .map_err(|e| StorageFailure::new("sync directory after a checkpoint", &old, &e))?;
    }
    shared.metrics.checkpoints.inc();
    shared
        .metrics
        .checkpoint_seconds
        .observe(started.elapsed().as_secs_f64());
    report.checkpoint = Some(generation);
    tracing::debug!(generation, covered, bytes, "checkpoint written");
    Ok(())
}

fn flush(file: &dyn StorageFile, buf: &mut Vec<u8>, at: &mut u64) -> std::io::Result<()> {
    file.write_all_at(buf, *at)?;
    *at += buf.len() as u64;
    buf.clear();
    Ok(())
}
