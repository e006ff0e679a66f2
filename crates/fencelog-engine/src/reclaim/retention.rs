//! Retention: trimming whole records from the front of a stream once they
//! are older than its `retention_age_s` or while it holds more than its
//! `retention_bytes` — the stream's own settings, or the server's
//! defaults. The trims go through the writer (kind Trim, flag RETENTION,
//! the stream's own token), so the token and `next_seq` are untouched.

use super::Writer;
use crate::codec::decode_frame;
use crate::error::WriteError;
use crate::index::FrameLoc;
use crate::locks;
use crate::reclaim_signal::ReclaimReport;
use crate::shared::Shared;
use crate::stream::StreamShared;
use crate::writer::{now_ms, Op};

/// Frames whose timestamps one look at a stream reads at most; a stream
/// with more expired ones is trimmed further at the next pass.
const AGE_PROBE_FRAMES: usize = 4096;

/// The server-wide retention for streams that set none: (age in s, bytes).
pub(crate) type Defaults = (Option<u64>, Option<u64>);

pub(super) fn run(
    shared: &Shared,
    writer: &Writer<'_>,
    report: &mut ReclaimReport,
) -> Result<(), WriteError> {
    if !shared.config.retention_in_reclaim {
        return Ok(());
    }
    let now_ms = now_ms();
    let defaults = (shared.config.retention_age_s, shared.config.retention_bytes);
    for (stream, first_seq) in due(shared, now_ms, defaults) {
        writer.request(&stream, |reply| Op::Retain { first_seq, reply })?;
        report.retention_trims += 1;
    }
    Ok(())
}

/// Every stream whose retention, judged at `now_ms`, wants its first
/// readable seq moved forward, and where to. Reads frame timestamps from
/// the segments: never called from the writer's planning step.
pub(crate) fn due(shared: &Shared, now_ms: u64, defaults: Defaults) -> Vec<(Box<str>, u64)> {
    let mut trims: Vec<(Box<str>, u64)> = Vec::new();
    shared.each_stream(|name, s| {
        if let Some(first_seq) = target(shared, s, now_ms, defaults) {
            trims.push((name.into(), first_seq));
        }
    });
    trims
}

/// Where retention wants the stream's first readable seq, if past where it
/// is now.
fn target(shared: &Shared, s: &StreamShared, now_ms: u64, defaults: Defaults) -> Option<u64> {
    let (age_s, bytes, floor, locs, total) = {
        let inner = locks::lock(&s.inner);
        let f = s.fence_state();
        if f.deleted || inner.index.len() == 0 {
            return None;
        }
        let c = inner.config();
        let age_s = c.retention_age_s.effective(defaults.0);
        let bytes = c.retention_bytes.effective(defaults.1);
        if age_s.is_none() && bytes.is_none() {
            return None;
        }
        let floor = inner
            .carried()
            .filter(|_| c.respect_cursors)
            .and_then(|c| c.min_cursor());
        let locs: Vec<FrameLoc> = inner.index.iter().take(AGE_PROBE_FRAMES).collect();
        (age_s, bytes, floor, locs, inner.index.bytes())
    };
    let mut first = locs[0].first_seq;
    if let Some(limit) = bytes {
        // Whole frames from the front while the stream holds more.
        let mut held = total;
        for l in &locs {
            if held <= limit {
                break;
            }
            held -= l.len as u64;
            first = first.max(l.end_seq());
        }
    }
    if let Some(age_s) = age_s {
        let cutoff = now_ms.saturating_sub(age_s.saturating_mul(1000));
        for l in &locs {
            match timestamp(shared, l) {
                Some(ts) if ts < cutoff => first = first.max(l.end_seq()),
                _ => break,
            }
        }
    }
    let first = floor.map_or(first, |f| first.min(f));
    (first > s.fence_state().first_seq).then_some(first)
}

/// The frame's timestamp, read from its segment and its CRC verified (a
/// damaged timestamp must not make retention drop records early); `None`
/// if it cannot be read or is damaged (reads of it will report why).
fn timestamp(shared: &Shared, loc: &FrameLoc) -> Option<u64> {
    let seg = locks::read(&shared.segments).get(loc.segment)?.clone();
    let owned;
    let bytes: &[u8] = match &seg.sealed {
        Some(view) => view.get(usize::try_from(loc.offset).ok()?..)?,
        None => {
            let mut buf = vec![0u8; loc.len as usize];
            seg.file.read_exact_at(&mut buf, loc.offset).ok()?;
            owned = buf;
            &owned
        }
    };
    let frame = decode_frame(bytes, seg.version).ok()?;
    (frame.header.first_seq == loc.first_seq).then_some(frame.header.timestamp_ms)
}
