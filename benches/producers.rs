//! The idempotent producers' performance claim: appends with a producer id
//! keep at least 90% of the throughput of plain appends, measured in the
//! same run. Plain and producer rounds are interleaved (this disk's sync
//! latency drifts by 10x between minutes, so two runs minutes apart could
//! not tell 10% from the weather); per round and per mode the throughput
//! of `APPENDERS` tasks each appending one 100-byte record at a time to
//! its own stream (group commit shares each fdatasync); reported: the
//! median over rounds of each mode and of their ratio. BENCHMARKS.md holds
//! the figures.
//!
//! The same again on the simulated disk (no fsync latency), where the
//! comparison is of CPU alone — what the producer path adds (its trailer,
//! the per-stream producer table) with the disk's 10x drift taken out.
//!
//! `cargo bench --bench producers` (FENCELOG_BENCH_DIR picks the disk;
//! FENCELOG_BENCH_ROUNDS, FENCELOG_BENCH_APPENDS the sizes).

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark that hits an error stops loudly: there is no caller to hand it to"
)]

use bytes::Bytes;
use fencelog_engine::sim::SimStorage;
use fencelog_engine::{AppendOptions, Config, Engine, ProducerSeq};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

const APPENDERS: usize = 64;
const RECORD_BYTES: usize = 100;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn bench_dir() -> PathBuf {
    std::env::var_os("FENCELOG_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// One round: `APPENDERS` tasks × `appends` appends; records per second.
/// `seq_base` keeps each producer's seqs continuing across rounds.
async fn round(engine: &Engine, producer: bool, appends: usize, seq_base: u64) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..APPENDERS)
        .map(|k| {
            let engine = engine.clone();
            tokio::spawn(async move {
                let stream = format!("bench-{k:02}");
                let body = Bytes::from(vec![0xA5u8; RECORD_BYTES]);
                let id = format!("producer-{k:02}");
                for i in 0..appends {
                    let options = AppendOptions {
                        producer: producer.then(|| ProducerSeq {
                            id: id.clone(),
                            seq: seq_base + i as u64,
                        }),
                        ..Default::default()
                    };
                    let ack = engine
                        .append_with(&stream, 1, vec![body.clone()], options)
                        .await
                        .unwrap();
                    assert!(!ack.duplicate);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (APPENDERS * appends) as f64 / start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Interleaved rounds of `plain` and `idempotent`; prints the medians
/// (plain, producer, and of the per-round ratio).
async fn compare(what: &str, plain: &Engine, idempotent: &Engine, rounds: usize, appends: usize) {
    let (mut a, mut b, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let seq_base = (r * appends) as u64;
        // Alternate which goes first, so a drift inside a round evens out.
        let (x, y) = if r.is_multiple_of(2) {
            let x = round(plain, false, appends, 0).await;
            (x, round(idempotent, true, appends, seq_base).await)
        } else {
            let y = round(idempotent, true, appends, seq_base).await;
            (round(plain, false, appends, 0).await, y)
        };
        eprintln!(
            "{what} round {r}: plain {x:.0} rec/s, producer {y:.0} rec/s, ratio {:.3}",
            y / x
        );
        a.push(x);
        b.push(y);
        ratio.push(y / x);
    }
    println!(
        "producers ({what}): {APPENDERS} appenders x {appends} appends x {rounds} rounds: median plain {:.0} rec/s, median producer {:.0} rec/s, median ratio {:.3} (target >= 0.90)",
        median(a),
        median(b),
        median(ratio)
    );
}

fn sim_engine() -> Engine {
    Engine::open_storage(Arc::new(SimStorage::new()), Config::default()).unwrap()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes
    // nothing: run one tiny round then, so the target is checked to work.
    let quick = !std::env::args().any(|a| a == "--bench");
    let rounds = if quick {
        1
    } else {
        env_or("FENCELOG_BENCH_ROUNDS", 15)
    };
    let appends = if quick {
        5
    } else {
        env_or("FENCELOG_BENCH_APPENDS", 100)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (plain_dir, producer_dir) = (
        tempfile::tempdir_in(bench_dir()).unwrap(),
        tempfile::tempdir_in(bench_dir()).unwrap(),
    );
    let plain = Engine::open(plain_dir.path()).unwrap();
    let idempotent = Engine::open(producer_dir.path()).unwrap();
    rt.block_on(async {
        compare("disk", &plain, &idempotent, rounds, appends).await;
        plain.shutdown().await;
        idempotent.shutdown().await;
        let (plain, idempotent) = (sim_engine(), sim_engine());
        compare("simulated disk", &plain, &idempotent, rounds, appends * 4).await;
        plain.shutdown().await;
        idempotent.shutdown().await;
    });
}
