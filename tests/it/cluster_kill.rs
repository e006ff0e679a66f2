//! Issue 14's leader kill loop against real processes: three
//! `fencelog serve --cluster` nodes (S = 2), four clients writing through
//! random nodes — per stream an owner that fences with ever higher tokens
//! and a deliberately stale writer — while the leader of a random shard is
//! SIGKILLed at a seeded moment and restarted after a seeded delay, and a
//! reader reads through random nodes. Every answer is recorded, and the
//! shared history checker (`fencelog_testkit::history`) judges it against
//! every replica's final log: identical, seqs dense, no acknowledged
//! append lost, no stale token accepted, every 409 explained, every read a
//! contiguous slice with a linearizable tail.
//!
//! `FENCELOG_CLUSTER_KILL_CYCLES` (default 30) and
//! `FENCELOG_CLUSTER_KILL_SEED` size it.

use crate::cluster_history;
use crate::cluster_support::ProcCluster;
use crate::support::env_or;
use fencelog_engine::sim::Rng;
use fencelog_testkit::history::{self, History, Outcome};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const STREAMS: [&str; 2] = ["kill.a", "kill.b"];

/// One writer until `stop`: the owner fences with a fresh token every few
/// appends; the stale writer always uses token 1.
async fn writer(
    urls: Vec<String>,
    (stream, owner, seed): (usize, bool, u64),
    tokens: Arc<AtomicU64>,
    h: Arc<History>,
    stop: Arc<AtomicBool>,
) {
    let http = reqwest::Client::new();
    let mut rng = Rng::new(seed);
    let name = STREAMS[stream];
    let mut token = 1;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let url = &urls[rng.below(urls.len() as u64) as usize];
        if owner && n.is_multiple_of(8) {
            let t = tokens.fetch_add(1, Ordering::Relaxed);
            if let Outcome::Fenced { .. } = cluster_history::fence(&h, &http, url, name, t).await {
                token = t;
            }
        }
        n += 1;
        let body = format!("{}-{seed}-{n}", if owner { "own" } else { "stale" });
        cluster_history::append(&h, &http, url, name, token, &[body]).await;
    }
}

/// One reader until `stop`: reads both streams from a random seq through
/// random nodes (a slice of the applied prefix, with a linearizable tail).
async fn reader(urls: Vec<String>, seed: u64, h: Arc<History>, stop: Arc<AtomicBool>) {
    let http = reqwest::Client::new();
    let mut rng = Rng::new(seed);
    while !stop.load(Ordering::Relaxed) {
        let url = &urls[rng.below(urls.len() as u64) as usize];
        let name = STREAMS[rng.below(2) as usize];
        cluster_history::read(&h, &http, url, name, rng.below(64)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_shard_leaders_loses_nothing_and_accepts_nothing_stale() {
    let cycles = env_or("FENCELOG_CLUSTER_KILL_CYCLES", 30);
    let seed = env_or("FENCELOG_CLUSTER_KILL_SEED", 0x14c1_u64);
    eprintln!("cluster kill loop: {cycles} cycles, seed {seed:#x}");
    let mut c = ProcCluster::start(3, 2, &["--commit-timeout-ms", "3000"]);
    let ids = [1, 2, 3];
    let urls: Vec<String> = ids.iter().map(|i| c.url(*i)).collect();
    let h = Arc::new(History::default());
    let stop = Arc::new(AtomicBool::new(false));
    let tokens = Arc::new(AtomicU64::new(2));
    let mut clients: Vec<_> = (0..4)
        .map(|i| {
            let who = (i % 2, i < 2, seed + i as u64);
            let (t, h, stop) = (tokens.clone(), h.clone(), stop.clone());
            tokio::spawn(writer(urls.clone(), who, t, h, stop))
        })
        .collect();
    clients.push(tokio::spawn(reader(
        urls.clone(),
        seed + 10,
        h.clone(),
        stop.clone(),
    )));
    let mut rng = Rng::new(seed);
    for cycle in 0..cycles {
        let k = rng.below(2) as u32;
        let leader = c.leader(k, &ids).await;
        tokio::time::sleep(Duration::from_millis(rng.range(50, 400))).await;
        c.kill9(leader);
        tokio::time::sleep(Duration::from_millis(rng.below(300))).await;
        c.restart(leader, &["--commit-timeout-ms", "3000"]);
        for k in 0..2 {
            c.converged(k, &ids).await;
        }
        eprintln!("cycle {cycle}: killed node {leader} (leader of shard {k})");
    }
    stop.store(true, Ordering::Relaxed);
    for cl in clients {
        cl.await.unwrap();
    }
    for k in 0..2 {
        c.converged(k, &ids).await;
    }
    let mut replicas = Vec::new();
    for url in &urls {
        replicas.push(cluster_history::replica(&c.http, url, &STREAMS).await);
    }
    let report =
        history::check(&h.ops(), &replicas).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
    eprintln!("{report:?}");
    assert!(report.acked > cycles, "the clients made progress");
    assert!(report.stale > 0, "the stale writers were refused");
    assert!(report.read_records > 0, "the reader saw records");
}
