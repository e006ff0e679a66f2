//! The lifecycle's long run: small (64 KiB) segments, one stream with a steady
//! flow and retention of a few hundred KiB, another with one record per
//! thousand of the first. After many segment rolls the bytes on disk stay
//! within 1.25 × live bytes + 2 segments at every reclamation pass; the
//! slow stream's records and token are all there after a restart and its
//! stale owner is still refused.

use crate::support::gate::{bodies, recs};
use fencelog_engine::{Config, Engine, Retention, StreamConfig, WriteError};

const SEGMENT_BYTES: u64 = 64 << 10;
const RETENTION_BYTES: u64 = 256 << 10;
/// Steady records written in all: about 100 segments' worth.
const STEADY_RECORDS: u64 = 16_000;
const BATCH_RECORDS: u64 = 16;
const RECORD_BYTES: usize = 400;
/// A reclamation pass after this many steady batches (about 100 KiB).
const RECLAIM_EVERY_BATCHES: u64 = 16;

fn config() -> Config {
    Config {
        segment_bytes_max: SEGMENT_BYTES,
        // Passes when the test says, so every pass is checked.
        reclaim_interval_ms: 0,
        ..Config::default()
    }
}

fn live_bytes(e: &Engine) -> u64 {
    ["steady", "slow"]
        .iter()
        .map(|s| e.state(s).map_or(0, |st| st.bytes))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_usage_stays_bounded_and_the_slow_stream_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open_with(dir.path(), config()).unwrap();
    e.fence("steady", 1).await.unwrap();
    let retention = StreamConfig {
        retention_bytes: Retention::Limit(RETENTION_BYTES),
        ..StreamConfig::default()
    };
    e.set_config("steady", Some(1), retention).await.unwrap();
    // The slow stream's owner took over from a stale one at token 7.
    e.fence("slow", 7).await.unwrap();
    e.fence("slow", 8).await.unwrap();
    let body = "s".repeat(RECORD_BYTES);
    let (mut slow, mut passes, mut worst) = (Vec::new(), 0u64, 0f64);
    let batches = STEADY_RECORDS / BATCH_RECORDS;
    for b in 0..batches {
        let batch: Vec<&str> = (0..BATCH_RECORDS).map(|_| body.as_str()).collect();
        e.append("steady", 1, recs(&batch), None).await.unwrap();
        if (b * BATCH_RECORDS) % 1000 < BATCH_RECORDS {
            let r = format!("slow record {}", slow.len());
            e.append("slow", 8, recs(&[&r]), None).await.unwrap();
            slow.push(r);
        }
        if b % RECLAIM_EVERY_BATCHES == RECLAIM_EVERY_BATCHES - 1 {
            e.reclaim().await.unwrap();
            passes += 1;
            let (disk, live) = (e.disk_bytes(), live_bytes(&e));
            let bound = live as f64 * 1.25 + 2.0 * SEGMENT_BYTES as f64;
            assert!(
                disk as f64 <= bound,
                "pass {passes}: {disk} bytes on disk > 1.25 × {live} live + 2 segments"
            );
            worst = worst.max(disk as f64 / bound);
            if passes % 10 == 0 {
                println!("pass {passes}: disk {disk} B, live {live} B");
            }
        }
    }
    // One last pass: retention has caught up with the final appends.
    e.reclaim().await.unwrap();
    let m = e.metrics();
    let (deleted, copied) = (m.segments_deleted.get(), m.compaction_frames_copied.get());
    println!(
        "{passes} passes, {deleted} segments deleted, {copied} frames compacted, worst disk/bound {worst:.3}"
    );
    // The run proves something only if it rolled, deleted and compacted a lot.
    assert!(
        deleted >= 50 && copied >= slow.len() as u64,
        "{deleted} {copied}"
    );
    e.shutdown().await;
    drop(e);

    let e = Engine::open_with(dir.path(), config()).unwrap();
    let st = e.state("slow").unwrap();
    assert_eq!(
        (st.first_seq, st.next_seq, st.highest_token),
        (0, slow.len() as u64, 8)
    );
    let r = e.read("slow", 0, 1000, 1 << 20).unwrap();
    let want: Vec<&str> = slow.iter().map(String::as_str).collect();
    assert_eq!(bodies(&r), recs(&want));
    assert!(r.records.iter().all(|r| r.fencing_token == 8));
    assert_eq!(
        e.append("slow", 7, recs(&["stale"]), None).await,
        Err(WriteError::StaleToken {
            presented: 7,
            highest: 8,
            next_seq: slow.len() as u64
        })
    );
    let steady = e.state("steady").unwrap();
    assert_eq!(steady.next_seq, STEADY_RECORDS);
    assert!(
        steady.bytes <= RETENTION_BYTES && steady.first_seq > 0,
        "{steady:?}"
    );
    e.shutdown().await;
}
