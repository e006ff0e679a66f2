//! The lifecycle's reclamation figures, in one run on one engine
//! (BENCHMARKS.md, the "Lifecycle" rows; the runs in
//! docs/benchmark-history.md): append p50/p99 with and without compaction running,
//! compaction throughput, restart time of a directory compacted many times,
//! and bytes on disk against live bytes over the run.
//!
//! Workload: 4 appenders (100-byte records, one stream each, acks awaited)
//! are measured while a filler stream with 8 MiB retention streams 4 KiB
//! batches and 16 slow streams get one record now and then, so every sealed
//! segment ends up holding a few live slow records among trimmed filler:
//! exactly what compaction must carry forward. Phase "without" runs no
//! reclamation; phase "with" runs passes back to back; the two alternate,
//! twice each. Plain `main` (not criterion): the figures are percentiles
//! of one long sample, not means.
//!
//! `cargo bench --bench lifecycle` (FENCELOG_BENCH_DIR picks the disk,
//! FENCELOG_BENCH_SECS the length of each phase, default 20).

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark that hits an error stops loudly: there is no caller to hand it to"
)]
#![allow(
    clippy::cast_possible_truncation,
    reason = "sample counts of one run fit in u32, and a percentile's index is within the sample"
)]

use bytes::Bytes;
use fencelog_engine::{Config, Engine, Retention, StreamConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SEGMENT_BYTES: u64 = 4 << 20;
const FILLER_RETENTION_BYTES: u64 = 8 << 20;
const APPENDERS: usize = 4;
const SLOW_STREAMS: usize = 16;

fn config() -> Config {
    Config {
        segment_bytes_max: SEGMENT_BYTES,
        reclaim_interval_ms: 0,
        ..Config::default()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// Appender latencies while `stop` is unset.
async fn appenders(e: &Engine, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let tasks: Vec<_> = (0..APPENDERS)
        .map(|i| {
            let (e, stop) = (e.clone(), stop.clone());
            tokio::spawn(async move {
                let name = format!("appender-{i}");
                let mut lat = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    e.append(&name, 1, vec![Bytes::from(vec![0xA5u8; 100])], None)
                        .await
                        .unwrap();
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    all
}

/// The filler and the slow streams, until `stop`.
async fn background_writes(e: Engine, stop: Arc<AtomicBool>) {
    let batch: Vec<Bytes> = (0..4).map(|_| Bytes::from(vec![0x5Au8; 1024])).collect();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        e.append("filler", 1, batch.clone(), None).await.unwrap();
        if n.is_multiple_of(64) {
            let slow = format!("slow-{}", (n / 64) % SLOW_STREAMS as u64);
            e.append(&slow, 1, vec![Bytes::from_static(b"slow")], None)
                .await
                .unwrap();
        }
        n += 1;
    }
}

struct Reclaimed {
    passes: u64,
    bytes_copied: u64,
    compacting: Duration,
    series: Vec<(Duration, u64, u64)>,
}

/// Reclamation passes back to back until `stop`, with the disk and live
/// bytes after each.
async fn reclaim_loop(e: Engine, stop: Arc<AtomicBool>, start: Instant) -> Reclaimed {
    let mut r = Reclaimed {
        passes: 0,
        bytes_copied: 0,
        compacting: Duration::ZERO,
        series: Vec::new(),
    };
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let report = e.reclaim().await.unwrap();
        if report.bytes_copied > 0 {
            r.bytes_copied += report.bytes_copied;
            r.compacting += t.elapsed();
        }
        r.passes += 1;
        let live: u64 = e
            .list_streams("", None, usize::MAX)
            .iter()
            .map(|s| s.bytes)
            .sum();
        r.series.push((start.elapsed(), e.disk_bytes(), live));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    r
}

fn main() {
    let secs: u64 = std::env::var("FENCELOG_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let base = std::env::var_os("FENCELOG_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let e = Engine::open_with(dir.path(), config()).unwrap();
    rt.block_on(async {
        e.fence("filler", 1).await.unwrap();
        let retention = StreamConfig {
            retention_bytes: Retention::Limit(FILLER_RETENTION_BYTES),
            ..StreamConfig::default()
        };
        e.set_config("filler", Some(1), retention).await.unwrap();
        let bg_stop = Arc::new(AtomicBool::new(false));
        let bg = tokio::spawn(background_writes(e.clone(), bg_stop.clone()));
        let start = Instant::now();
        // Fill past the retention first, so there is something to compact.
        tokio::time::sleep(Duration::from_secs(secs / 2)).await;
        // Alternating phases, so neither gets the quieter half of the run.
        let phases = [false, true, false, true];
        let mut p99 = [Vec::new(), Vec::new()];
        for reclaim in phases {
            p99[reclaim as usize].push(phase(&e, reclaim, secs, start).await);
        }
        let mean = |v: &[Duration]| v.iter().sum::<Duration>() / v.len() as u32;
        println!(
            "p99 with / without compaction: {:.2} (means of {} phases each)",
            mean(&p99[1]).as_secs_f64() / mean(&p99[0]).as_secs_f64(),
            p99[0].len()
        );
        bg_stop.store(true, Ordering::Relaxed);
        bg.await.unwrap();
        let m = e.metrics();
        println!(
            "compactions {}, segments deleted {}, frames copied {}",
            m.compactions.get(),
            m.segments_deleted.get(),
            m.compaction_frames_copied.get()
        );
        e.shutdown().await;
    });
    drop(e);
    print_restart(dir.path());
}

/// One phase of `secs` seconds, with reclamation passes running or not:
/// prints the appenders' latencies (and the passes' figures) and returns
/// the p99.
async fn phase(e: &Engine, reclaim: bool, secs: u64, start: Instant) -> Duration {
    let label = if reclaim {
        "with compaction"
    } else {
        "without compaction"
    };
    let stop = Arc::new(AtomicBool::new(false));
    let rec = reclaim.then(|| tokio::spawn(reclaim_loop(e.clone(), stop.clone(), start)));
    let timer = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(secs)).await;
            stop.store(true, Ordering::Relaxed);
        })
    };
    let lat = appenders(e, stop).await;
    timer.await.unwrap();
    println!(
        "{label}: {} appends, p50 {:?}, p99 {:?}, p99.9 {:?}",
        lat.len(),
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        percentile(&lat, 0.999)
    );
    if let Some(rec) = rec {
        print_reclaimed(&rec.await.unwrap());
    }
    percentile(&lat, 0.99)
}

/// One "with compaction" phase's passes, throughput and disk against live
/// bytes over the phase.
fn print_reclaimed(r: &Reclaimed) {
    let mb = r.bytes_copied as f64 / (1 << 20) as f64;
    println!(
        "  {} passes, {mb:.1} MiB copied, {:.1} MiB/s while compacting (limit {} MiB/s)",
        r.passes,
        mb / r.compacting.as_secs_f64().max(1e-9),
        config().compaction_bytes_per_second >> 20
    );
    let step = (r.series.len() / 12).max(1);
    for (t, disk, live) in r.series.iter().step_by(step) {
        println!(
            "  t={:>5.1}s disk {:>6.2} MiB live {:>6.2} MiB ratio {:.2}",
            t.as_secs_f64(),
            *disk as f64 / (1 << 20) as f64,
            *live as f64 / (1 << 20) as f64,
            *disk as f64 / (*live).max(1) as f64
        );
    }
    let worst = r
        .series
        .iter()
        .map(|(_, d, l)| *d as f64 - (1.25 * *l as f64 + 2.0 * SEGMENT_BYTES as f64))
        .fold(f64::MIN, f64::max);
    println!(
        "  worst disk - (1.25 x live + 2 segments): {:.2} MiB",
        worst / (1 << 20) as f64
    );
}

/// The restart time of the directory the run compacted many times.
fn print_restart(dir: &std::path::Path) {
    let t = Instant::now();
    let e = Engine::open_with(dir, config()).unwrap();
    let streams = e.list_streams("", None, usize::MAX).len();
    println!(
        "restart after the run: {:?} ({streams} streams, {:.1} MiB on disk)",
        t.elapsed(),
        e.disk_bytes() as f64 / (1 << 20) as f64
    );
}
