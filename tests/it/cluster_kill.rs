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

use crate::cluster_load::Load;
use crate::cluster_support::ProcCluster;
use crate::support::env_or;
use fencelog_engine::sim::Rng;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_shard_leaders_loses_nothing_and_accepts_nothing_stale() {
    let cycles = env_or("FENCELOG_CLUSTER_KILL_CYCLES", 30);
    let seed = env_or("FENCELOG_CLUSTER_KILL_SEED", 0x14c1_u64);
    eprintln!("cluster kill loop: {cycles} cycles, seed {seed:#x}");
    let mut c = ProcCluster::start(3, 2, &["--commit-timeout-ms", "3000"]);
    let ids = [1, 2, 3];
    let urls: Vec<String> = ids.iter().map(|i| c.url(*i)).collect();
    let load = Load::start(&urls, seed);
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
    let report = load.finish(&c, &ids).await;
    eprintln!("{report:?}");
    assert!(report.acked > cycles, "the clients made progress");
    assert!(report.stale > 0, "the stale writers were refused");
    assert!(report.read_records > 0, "the reader saw records");
}
