//! Compaction: a sealed segment under 80% live has its live records frames
//! copied forward through the writer — byte for byte but for the RELOCATED
//! flag, the group id and the CRC — so a stream that gets one record a day
//! cannot keep gigabytes alive. The frames come from the indexes (what is
//! live), are read from the file (what the media holds now) and verified
//! before they are copied: a frame whose CRC fails is never copied, its
//! segment is kept, and reads of it report the damage. Copies go in writer
//! requests of at most 1 MiB, at a limited rate, so appends keep their
//! latency; the writer copies only what is still live when it gets there.

use super::live::{Live, Sealed};
use super::Writer;
use crate::codec::decode_frame;
use crate::config::{COMPACTION_LIVE_PERCENT, RELOCATE_REQUEST_BYTES_MAX};
use crate::error::WriteError;
use crate::index::FrameLoc;
use crate::locks;
use crate::reclaim_signal::ReclaimReport;
use crate::shared::Shared;
use crate::writer::{Op, Relocation};
use bytes::Bytes;
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub(super) fn run(
    shared: &Shared,
    writer: &Writer<'_>,
    live: &Live,
    report: &mut ReclaimReport,
) -> Result<(), WriteError> {
    let candidates: Vec<&Sealed> = live
        .sealed
        .iter()
        .filter(|s| s.live > 0 && s.live * 100 < s.len * COMPACTION_LIVE_PERCENT)
        .collect();
    if candidates.is_empty() {
        return Ok(());
    }
    let mut frames = live_frames(shared, &candidates);
    let mut pace = Pace::new(shared.config.compaction_bytes_per_second);
    for seg in candidates {
        let started = Instant::now();
        let mut locs = frames.remove(&seg.segment.index).unwrap_or_default();
        locs.sort_by_key(|(_, l)| l.offset);
        if !compact_one(shared, writer, seg, &locs, &mut pace, report)? {
            continue;
        }
        report.compacted += 1;
        shared.metrics.compactions.inc();
        shared
            .metrics
            .compaction_seconds
            .observe(started.elapsed().as_secs_f64());
        if writer.stopping() {
            break;
        }
    }
    Ok(())
}

/// The live frames of each candidate segment, from one walk of the indexes.
fn live_frames(shared: &Shared, candidates: &[&Sealed]) -> HashMap<u64, Vec<(Box<str>, FrameLoc)>> {
    let mut out: HashMap<u64, Vec<(Box<str>, FrameLoc)>> = candidates
        .iter()
        .map(|s| (s.segment.index, Vec::new()))
        .collect();
    shared.each_stream(|name, s| {
        let inner = locks::lock(&s.inner);
        for loc in inner.index.iter() {
            if let Some(v) = out.get_mut(&loc.segment) {
                v.push((name.into(), loc));
            }
        }
    });
    out
}

/// Copies the live frames `locs` of `seg` forward. Returns whether the
/// segment was compacted (false: a frame could not be read or verified,
/// and the segment stays).
fn compact_one(
    shared: &Shared,
    writer: &Writer<'_>,
    seg: &Sealed,
    locs: &[(Box<str>, FrameLoc)],
    pace: &mut Pace,
    report: &mut ReclaimReport,
) -> Result<bool, WriteError> {
    let mut batch: Vec<Relocation> = Vec::new();
    let mut batch_bytes = 0usize;
    for (stream, loc) in locs {
        let Some(bytes) = read_verified(shared, seg, stream, loc, report) else {
            return Ok(false);
        };
        if batch_bytes + bytes.len() > RELOCATE_REQUEST_BYTES_MAX && !batch.is_empty() {
            send(writer, std::mem::take(&mut batch), pace, report)?;
            batch_bytes = 0;
        }
        batch_bytes += bytes.len();
        batch.push(Relocation {
            stream: stream.clone(),
            bytes,
            first_seq: loc.first_seq,
            count: loc.record_count,
            from: (loc.segment, loc.offset),
        });
    }
    if !batch.is_empty() {
        send(writer, batch, pace, report)?;
    }
    Ok(true)
}

/// The frame at `loc`, read from the file and verified: the CRC and that
/// it is the frame the index means.
fn read_verified(
    shared: &Shared,
    seg: &Sealed,
    stream: &str,
    loc: &FrameLoc,
    report: &mut ReclaimReport,
) -> Option<Bytes> {
    let name = &seg.segment.name;
    let mut buf = vec![0u8; loc.len as usize];
    if let Err(e) = seg.segment.file.read_exact_at(&mut buf, loc.offset) {
        tracing::warn!(file = %name, offset = loc.offset, error = %e, "compaction could not read a frame; the segment stays");
        return None;
    }
    if !mutated!(CompactWithoutCrc) {
        let ok = match decode_frame(&buf, seg.segment.version) {
            Ok(f) => {
                f.name == stream && f.header.first_seq == loc.first_seq && f.frame_len == buf.len()
            }
            Err(_) => false,
        };
        if !ok {
            tracing::error!(file = %name, offset = loc.offset, stream, "compaction found a damaged frame; the segment stays and reads of it will fail");
            shared.metrics.compaction_corrupt_frames.inc();
            report.corrupt_frames += 1;
            return None;
        }
    }
    Some(Bytes::from(buf))
}

fn send(
    writer: &Writer<'_>,
    frames: Vec<Relocation>,
    pace: &mut Pace,
    report: &mut ReclaimReport,
) -> Result<(), WriteError> {
    let bytes: usize = frames.iter().map(|f| f.bytes.len()).sum();
    let done = writer.request("", |reply| Op::Relocate { frames, reply })?;
    report.frames_copied += done.copied;
    report.bytes_copied += done.bytes;
    report.dead_on_arrival += done.dead;
    pace.after(bytes as u64, writer);
    Ok(())
}

/// The copy rate limit: sleeps after each request so the bytes sent so far
/// never run ahead of `bytes_per_second`.
struct Pace {
    started: Instant,
    bytes: u64,
    bytes_per_second: u64,
}

impl Pace {
    fn new(bytes_per_second: u64) -> Self {
        Pace {
            started: Instant::now(),
            bytes: 0,
            bytes_per_second,
        }
    }

    fn after(&mut self, bytes: u64, writer: &Writer<'_>) {
        self.bytes += bytes;
        let due = Duration::from_secs_f64(self.bytes as f64 / self.bytes_per_second as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            writer.sleep(due - elapsed);
        }
    }
}
