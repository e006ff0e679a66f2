//! Engine benchmarks: the frame codec, the stale-token fast path, and
//! durable appends under group commit. BENCHMARKS.md holds today's
//! figures; docs/benchmark-history.md the disk they ran on, the model and
//! the targets they are compared with.
//!
//! The durable benches write to a fresh directory under `FENCELOG_BENCH_DIR`
//! (default: the system temp dir), so the disk measured is the one fio must
//! measure too.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark that hits an error stops loudly: there is no caller to hand it to"
)]

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fencelog_engine::testing::{
    decode_frame, encode_frame, frame_len, FrameKind, FrameSpec, FLAG_LAST_IN_GROUP, FORMAT_VERSION,
};
use fencelog_engine::{Config, Engine, WriteError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RECORD_BYTES: usize = 100;

fn body() -> Bytes {
    Bytes::from(vec![0xA5u8; RECORD_BYTES])
}

fn bench_dir() -> PathBuf {
    std::env::var_os("FENCELOG_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn spec(name: &str) -> FrameSpec<'_> {
    FrameSpec {
        kind: FrameKind::Records,
        flags: FLAG_LAST_IN_GROUP,
        group_id: 7,
        first_seq: 1_000_000,
        fencing_token: 42,
        timestamp_ms: 1_700_000_000_000,
        name,
    }
}

fn codec(c: &mut Criterion) {
    let mut g = c.benchmark_group("codec");
    for records in [1usize, 256] {
        let bodies = vec![body(); records];
        let name = "bench-00";
        g.throughput(Throughput::Elements(records as u64));
        let mut buf = Vec::with_capacity(frame_len(name, &bodies));
        g.bench_function(BenchmarkId::new("encode", records), |b| {
            b.iter(|| {
                buf.clear();
                encode_frame(&mut buf, &spec(black_box(name)), black_box(&bodies));
                black_box(buf.len())
            })
        });
        let mut frame = Vec::new();
        encode_frame(&mut frame, &spec(name), &bodies);
        g.bench_function(BenchmarkId::new("decode", records), |b| {
            b.iter(|| {
                let f = decode_frame(black_box(&frame), FORMAT_VERSION).unwrap();
                // Walk the bodies too: a reader pays for that.
                f.records().map(|r| r.body.len()).sum::<usize>()
            })
        });
    }
    g.finish();
}

/// A stale writer against a stream whose higher token is durable: answered
/// on the caller's side, no queue, no writer, no disk.
fn fast_path(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir_in(bench_dir()).unwrap();
    let engine = Engine::open(dir.path()).unwrap();
    rt.block_on(async {
        engine
            .append("owned", 10, vec![body()], None)
            .await
            .unwrap();
    });
    let record = body();
    let mut g = c.benchmark_group("fast_path");
    g.throughput(Throughput::Elements(1));
    g.bench_function("stale_append", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let engine = engine.clone();
            let record = record.clone();
            async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let r = engine.append("owned", 9, vec![record.clone()], None).await;
                    debug_assert!(matches!(r, Err(WriteError::StaleToken { .. })));
                    black_box(r).ok();
                }
                start.elapsed()
            }
        })
    });
    g.finish();
    rt.block_on(engine.shutdown());
}

/// `appenders` tasks, each appending batches of `batch` 100-byte records to
/// its own stream and awaiting each ack before the next: `appenders × batch`
/// records in flight. One criterion iteration is one batch per appender.
fn durable(c: &mut Criterion, rt: &tokio::runtime::Runtime, appenders: usize, batch: usize) {
    let dir = tempfile::tempdir_in(bench_dir()).unwrap();
    let engine = Engine::open(dir.path()).unwrap();
    let streams: Arc<Vec<String>> =
        Arc::new((0..appenders).map(|k| format!("bench-{k:02}")).collect());
    let records = vec![body(); batch];
    let mut g = c.benchmark_group("durable_append");
    g.throughput(Throughput::Elements((appenders * batch) as u64));
    let id = format!("appenders={appenders}/batch={batch}");
    g.bench_function(id.as_str(), |b| {
        b.to_async(rt).iter_custom(|iters| {
            let engine = engine.clone();
            let streams = streams.clone();
            let records = records.clone();
            async move {
                let start = Instant::now();
                let tasks: Vec<_> = (0..appenders)
                    .map(|k| {
                        let engine = engine.clone();
                        let streams = streams.clone();
                        let records = records.clone();
                        tokio::spawn(async move {
                            for _ in 0..iters {
                                engine
                                    .append(&streams[k], 1, records.clone(), None)
                                    .await
                                    .unwrap();
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
                start.elapsed()
            }
        })
    });
    g.finish();
    let m = engine.metrics();
    let groups = m.groups_committed.get().max(1);
    // The writer's write + fdatasync per group against the time per
    // group: the rest is the turnaround (answers, callers woken, their
    // next appends collected and planned), the turnaround T of
    // docs/benchmark-history.md.
    let text = m.encode();
    let sum = |name: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(name));
        line.and_then(|l| l.split(' ').nth(1)?.parse().ok())
            .unwrap_or(0.0)
    };
    let sync_us =
        1e6 * sum("fencelog_fsync_seconds_sum") / sum("fencelog_fsync_seconds_count").max(1.0);
    eprintln!(
        "  {id}: {} groups, {:.1} appends and {:.0} frame bytes per fdatasync, {sync_us:.0} us write + fdatasync per group",
        groups,
        m.appends_accepted.get() as f64 / groups as f64,
        m.bytes_written.get() as f64 / groups as f64,
    );
    rt.block_on(engine.shutdown());
}

/// fio's sync test in miniature, in the same run and directory as the
/// durable benches: append 4 KiB, fdatasync, repeat. Its mean is the L the
/// targets are computed from when the disk's latency drifts between runs.
fn disk(c: &mut Criterion) {
    use std::io::Write;
    let dir = tempfile::tempdir_in(bench_dir()).unwrap();
    let mut f = std::fs::File::create(dir.path().join("probe")).unwrap();
    let block = vec![0x5Au8; 4096];
    let mut g = c.benchmark_group("disk");
    g.throughput(Throughput::Elements(1));
    g.bench_function("write4k_fdatasync", |b| {
        b.iter(|| {
            f.write_all(&block).unwrap();
            f.sync_data().unwrap();
        })
    });
    g.finish();
}

fn durable_appends(c: &mut Criterion) {
    let rt = runtime();
    for appenders in [1, 16, 64] {
        durable(c, &rt, appenders, 1);
    }
    for batch in [16, 256] {
        durable(c, &rt, 1, batch);
    }
}

/// Preallocation on and off, interleaved in rounds within one run, because
/// this disk's sync latency drifts by 10x between minutes: two criterion
/// runs minutes apart cannot tell a 20% change from the weather. One
/// appender, one 100-byte record per append; per round and per engine the
/// mean append latency; reported: the median over rounds.
fn prealloc_ab(_: &mut Criterion) {
    const ROUNDS: usize = 20;
    const APPENDS_PER_ROUND: u32 = 200;
    let rt = runtime();
    let open = |prealloc_bytes: u64| {
        let dir = tempfile::tempdir_in(bench_dir()).unwrap();
        let config = Config {
            prealloc_bytes,
            ..Config::default()
        };
        let engine = Engine::open_with(dir.path(), config).unwrap();
        (dir, engine)
    };
    let engines = [
        open(fencelog_engine::config::PREALLOC_BYTES_DEFAULT),
        open(0),
    ];
    let mut means = [Vec::new(), Vec::new()];
    let mut all = [Vec::new(), Vec::new()];
    rt.block_on(async {
        for _ in 0..ROUNDS {
            for (k, (_, engine)) in engines.iter().enumerate() {
                let start = Instant::now();
                for _ in 0..APPENDS_PER_ROUND {
                    let t = Instant::now();
                    engine.append("ab", 1, vec![body()], None).await.unwrap();
                    all[k].push(t.elapsed());
                }
                means[k].push(start.elapsed() / APPENDS_PER_ROUND);
            }
        }
    });
    for (k, name) in ["prealloc on ", "prealloc off"].iter().enumerate() {
        means[k].sort();
        all[k].sort();
        let n = all[k].len();
        eprintln!(
            "prealloc_ab {name}: median round mean {:?}, p50 {:?}, p99 {:?} ({} appends)",
            means[k][ROUNDS / 2],
            all[k][n / 2],
            all[k][n * 99 / 100],
            n
        );
    }
    for (_, engine) in &engines {
        rt.block_on(engine.shutdown());
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = codec, fast_path, disk, durable_appends, prealloc_ab
}
criterion_main!(benches);
