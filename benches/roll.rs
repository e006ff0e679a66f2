//! What a segment roll costs now that it also rewrites the MANIFEST
//! (durable knowledge of the last segment outside that segment, so that a
//! deleted last segment is refused; docs/benchmark-history.md, "The roll's
//! MANIFEST rewrite").
//!
//! Three samples on one disk, one writer each, every append awaited:
//! appends that each roll a segment (4 KiB segments, 3000-byte records),
//! appends that never roll (default 128 MiB segments), and the MANIFEST
//! rewrite's own I/O done by hand the way `files::replace_whole` does it
//! (write a 92-byte temp file, fdatasync, rename, fsync the directory). A
//! roll's extra cost is the first minus the second; the MANIFEST's share of
//! it is the third.
//!
//! `cargo bench --bench roll` (FENCELOG_BENCH_DIR picks the disk,
//! FENCELOG_BENCH_ROLLS the sample size, default 500).

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark that hits an error stops loudly: there is no caller to hand it to"
)]
#![allow(
    clippy::cast_possible_truncation,
    reason = "sample counts of one run fit in u32, and a percentile's index is within the sample"
)]

use bytes::Bytes;
use fencelog_engine::{Config, Engine};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

fn stats(mut d: Vec<Duration>) -> (Duration, Duration, Duration) {
    d.sort();
    let mean = d.iter().sum::<Duration>() / d.len() as u32;
    let p = |q: f64| d[((d.len() as f64 * q) as usize).min(d.len() - 1)];
    (mean, p(0.5), p(0.99))
}

fn appends(dir: &Path, segment_bytes: u64, n: usize) -> (Vec<Duration>, u64) {
    let cfg = Config {
        segment_bytes_max: segment_bytes,
        reclaim_interval_ms: 0,
        ..Config::default()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let e = Engine::open_with(dir, cfg).unwrap();
        let rec = Bytes::from(vec![0x5Au8; 3000]);
        let mut lat = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            e.append("s", 1, vec![rec.clone()], None).await.unwrap();
            lat.push(t.elapsed());
        }
        e.shutdown().await;
        let on_disk = std::fs::read_dir(dir)
            .unwrap()
            .filter(|f| {
                f.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".seg")
            })
            .count() as u64;
        (lat, on_disk)
    })
}

fn manifest_rewrites(dir: &Path, n: usize) -> Vec<Duration> {
    let bytes = [0x4Du8; 92];
    let d = std::fs::File::open(dir).unwrap();
    (0..n)
        .map(|_| {
            let t = Instant::now();
            let mut f = std::fs::File::create(dir.join("MANIFEST.tmp")).unwrap();
            f.write_all(&bytes).unwrap();
            f.sync_data().unwrap();
            std::fs::rename(dir.join("MANIFEST.tmp"), dir.join("MANIFEST")).unwrap();
            d.sync_all().unwrap();
            t.elapsed()
        })
        .collect()
}

fn main() {
    let base = std::env::var_os("FENCELOG_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let n: usize = std::env::var("FENCELOG_BENCH_ROLLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let rolling = tempfile::tempdir_in(&base).unwrap();
    let (lat_roll, segs) = appends(rolling.path(), 4096, n);
    let flat = tempfile::tempdir_in(&base).unwrap();
    let (lat_flat, flat_segs) = appends(flat.path(), 128 << 20, n);
    let by_hand = tempfile::tempdir_in(&base).unwrap();
    let lat_manifest = manifest_rewrites(by_hand.path(), n);
    let show = |what: &str, s: (Duration, Duration, Duration)| {
        println!(
            "{what:<34} mean {:>9.3?}  p50 {:>9.3?}  p99 {:>9.3?}",
            s.0, s.1, s.2
        )
    };
    println!(
        "{n} appends of one 3000-byte record each, awaited, in {}",
        base.display()
    );
    show(
        &format!("append + roll ({segs} segments)"),
        stats(lat_roll.clone()),
    );
    show(
        &format!("append, no roll ({flat_segs} segment)"),
        stats(lat_flat.clone()),
    );
    show("MANIFEST rewrite by hand", stats(lat_manifest.clone()));
    let roll = stats(lat_roll).0.saturating_sub(stats(lat_flat).0);
    let manifest = stats(lat_manifest).0;
    println!(
        "a roll adds {roll:.3?} to its append; the MANIFEST rewrite is {manifest:.3?} of it; \
         at the default 128 MiB segments that is one roll per 128 MiB written"
    );
}
