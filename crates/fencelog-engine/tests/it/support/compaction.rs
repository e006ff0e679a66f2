//! What compaction must never copy: a frame that died between
//! the reclaimer reading it and the writer copying it (trimmed in the
//! meantime), and a frame damaged at rest, whose CRC no longer matches.
//! Both run on a real directory; the first holds the writer at a gate so
//! the trim lands exactly between the reclaimer's read and its copy.

use super::gate::{bodies, open_controlled, recs, until_held};
use super::runtime;
use fencelog_engine::testing::{decode_frame, SEGMENT_HEADER_BYTES};
use fencelog_engine::{Config, Engine, OpenError, ReadError};
use std::path::Path;
use std::time::{Duration, Instant};

/// What the two cases saw.
#[derive(Debug, Default)]
pub struct CompactionChecks {
    pub dead_on_arrival: u64,
    pub corrupt_frames: u64,
}

fn config() -> Config {
    Config {
        segment_bytes_max: 4096,
        reclaim_interval_ms: 0,
        ..Config::default()
    }
}

/// A slow stream's one record in segment 0 among fast records trimmed
/// away: segment 0 is under 80% live, so compaction wants to copy it.
async fn slow_among_dead(e: &Engine) -> Result<(), String> {
    let body = "f".repeat(300);
    let err = |e: fencelog_engine::WriteError| e.to_string();
    e.fence("slow", 3).await.map_err(err)?;
    e.append("slow", 3, recs(&["the only record"]), None)
        .await
        .map_err(err)?;
    for i in 0..60 {
        e.append("fast", 1, recs(&[&format!("{i}{body}")]), None)
            .await
            .map_err(err)?;
    }
    e.trim("fast", 1, 58).await.map_err(err)?;
    Ok(())
}

/// (segment file, offset, frame_len, relocated) of every records frame of
/// `stream` in the directory.
fn records_frames(dir: &Path, stream: &str) -> Vec<(String, usize, usize, bool)> {
    let mut out = Vec::new();
    for name in super::segment_files(dir) {
        let bytes = std::fs::read(dir.join(&name)).unwrap();
        let mut off = SEGMENT_HEADER_BYTES;
        while let Ok(f) = decode_frame(&bytes[off..], fencelog_engine::testing::FORMAT_VERSION) {
            if f.name == stream && f.header.record_count > 0 {
                out.push((name.clone(), off, f.frame_len, f.header.relocated()));
            }
            off += f.frame_len;
        }
    }
    out
}

/// Waits (bounded) until `n` requests wait for the held writer.
async fn until_queued(e: &Engine, n: usize) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while e.queue_depth() < n {
        if Instant::now() > deadline {
            return Err(format!("only {} requests ever queued", e.queue_depth()));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
}

/// The writer is held in a group's fsync; a trim of the slow stream past
/// its record queues, then the reclaimer (which saw the record live) asks
/// for its copy. The writer plans the trim first: the copy is dead on
/// arrival and must not be written.
async fn dead_on_arrival(dir: &Path) -> Result<u64, String> {
    let (e, ctl) = open_controlled(dir, config());
    slow_among_dead(&e).await?;
    ctl.hold_next_sync();
    let held = tokio::spawn({
        let e = e.clone();
        async move { e.append("fast", 1, recs(&["held"]), None).await }
    });
    until_held(&ctl).await;
    let trim = tokio::spawn({
        let e = e.clone();
        async move { e.trim("slow", 3, 1).await }
    });
    until_queued(&e, 1).await?;
    let reclaim = tokio::spawn({
        let e = e.clone();
        async move { e.reclaim().await }
    });
    until_queued(&e, 2).await?;
    ctl.release();
    held.await.unwrap().map_err(|e| e.to_string())?;
    trim.await.unwrap().map_err(|e| e.to_string())?;
    let r = reclaim.await.unwrap().map_err(|e| e.to_string())?;
    let copies: Vec<_> = records_frames(dir, "slow")
        .into_iter()
        .filter(|f| f.3)
        .collect();
    if r.dead_on_arrival == 0 || !copies.is_empty() {
        return Err(format!(
            "a record trimmed before its copy was written was copied anyway: {r:?}, copies {copies:?}"
        ));
    }
    e.shutdown().await;
    Ok(r.dead_on_arrival)
}

/// A bit of the slow record's body rots in a sealed segment while the
/// engine runs. Compaction must not copy it forward with a fresh CRC: the
/// segment stays, reads of the record report the damage, and a restart
/// refuses to open naming that segment.
async fn damaged_at_rest(dir: &Path) -> Result<u64, String> {
    let e = Engine::open_with(dir, config()).map_err(|e| e.to_string())?;
    slow_among_dead(&e).await?;
    let (seg, off, len, _) = records_frames(dir, "slow")[0].clone();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join(&seg))
            .unwrap();
        let at = off + len - 1;
        let b = std::fs::read(dir.join(&seg)).unwrap()[at] ^ 0x20;
        f.write_all_at(&[b], at as u64).unwrap();
    }
    let r = e.reclaim().await.map_err(|e| e.to_string())?;
    let still_there = dir.join(&seg).exists();
    let read = e.read("slow", 0, 10, 1 << 20);
    if r.corrupt_frames != 1 || !still_there || !matches!(read, Err(ReadError::Corrupt(_))) {
        return Err(format!(
            "a frame damaged at rest was compacted: {r:?}, {seg} still there: {still_there}, read: {:?}",
            read.map(|b| bodies(&b))
        ));
    }
    e.shutdown().await;
    drop(e);
    match Engine::open_with(dir, config()) {
        Err(OpenError::Corrupt(c)) if c.file == seg => Ok(r.corrupt_frames),
        Err(other) => Err(format!("reopen refused for another reason: {other}")),
        Ok(_) => Err("reopened over a damaged frame".into()),
    }
}

/// Both cases; `Err` names the violation.
pub fn compaction_checks() -> Result<CompactionChecks, String> {
    let rt = runtime();
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    Ok(CompactionChecks {
        dead_on_arrival: rt.block_on(dead_on_arrival(a.path()))?,
        corrupt_frames: rt.block_on(damaged_at_rest(b.path()))?,
    })
}
