//! A cluster whose Raft WALs were written by the version-1 code (commit
//! 56b663d; how, in tests/fixtures/wal-v1/README.md) starts on today's
//! code: every replica serves exactly the records it held, every token
//! still fences, each WAL is rewritten as version 2 at its first open, and
//! all of it holds across another restart.

use crate::support::{append, copy_tree, fence, Rec, TestCluster};
use fencelog_cluster::node::{Timing, WriteOutcome};
use fencelog_cluster::raft::OpResult;
use fencelog_cluster::wal::{FILE_MAGIC, WAL_FILE_NAME};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const STREAMS: [&str; 4] = ["orders", "fenced-only", "late", "bin.1:x-y"];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wal-v1")
}

/// The records the version-1 cluster held: `stream seq token ts hex`.
fn v1_records() -> BTreeMap<String, Vec<Rec>> {
    let text = std::fs::read_to_string(fixture().join("records.txt")).unwrap();
    let mut out: BTreeMap<String, Vec<Rec>> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let body = (0..f[4].len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&f[4][i..i + 2], 16).unwrap())
            .collect();
        let n = |i: usize| f[i].parse::<u64>().unwrap();
        out.entry(f[0].into())
            .or_default()
            .push((n(1), n(2), n(3), body));
    }
    out
}

fn wal_version_2(c: &TestCluster, id: u64) -> bool {
    let bytes = std::fs::read(c.data_dir(id).join("raft").join(WAL_FILE_NAME)).unwrap();
    bytes.starts_with(&FILE_MAGIC)
}

async fn assert_holds(c: &TestCluster, want: &BTreeMap<String, Vec<Rec>>) {
    let ids = c.ids();
    for k in 0..c.shards {
        c.converged(k, &ids).await;
    }
    for id in ids {
        for s in STREAMS {
            let want = want.get(s).cloned().unwrap_or_default();
            assert_eq!(c.records(id, s), want, "node {id}, stream {s}");
        }
        assert!(wal_version_2(c, id), "node {id}'s WAL is not version 2");
    }
}

async fn assert_stale(c: &TestCluster, via: u64, op: fencelog_engine::WriteOp, highest: u64) {
    match c.write(via, op).await {
        WriteOutcome::Decided(OpResult::Stale { highest: h, .. }) if h == highest => {}
        o => panic!("want stale below {highest}, got {o:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_written_by_the_version_1_wal_code_opens_and_serves_the_same() {
    let dir = tempfile::TempDir::new().unwrap();
    copy_tree(&fixture().join("cluster"), dir.path());
    for id in 1..=3 {
        let wal = dir.path().join(format!("node-{id}/raft/{WAL_FILE_NAME}"));
        assert!(
            !std::fs::read(wal).unwrap().starts_with(&FILE_MAGIC),
            "the fixture is version 1"
        );
    }
    let engine = fencelog_engine::Config {
        segment_bytes_max: 4096,
        ..Default::default()
    };
    let c = TestCluster::start_in(dir, 3, 2, Timing::TEST, engine).await;
    let mut want = v1_records();
    assert_eq!(
        want.values().map(Vec::len).sum::<usize>(),
        6,
        "the fixture's records"
    );
    assert_holds(&c, &want).await;
    assert_stale(&c, 1, append("orders", 42, "B again"), 43).await;
    assert_stale(&c, 2, fence("fenced-only", 6), 7).await;
    assert_stale(&c, 3, append("late", 2, "stale"), 3).await;
    let ts = match c
        .write(2, append("orders", 43, "C after the upgrade"))
        .await
    {
        WriteOutcome::Decided(OpResult::Appended {
            first_seq: 3,
            ts_ms,
            ..
        }) => ts_ms,
        o => panic!("{o:?}"),
    };
    want.get_mut("orders")
        .unwrap()
        .push((3, 43, ts, b"C after the upgrade".to_vec()));
    assert_holds(&c, &want).await;
    for id in c.ids() {
        c.stop(id).await;
    }
    for id in c.ids() {
        c.boot(id).await;
    }
    assert_holds(&c, &want).await;
    assert_stale(&c, 3, append("orders", 42, "B once more"), 43).await;
}
