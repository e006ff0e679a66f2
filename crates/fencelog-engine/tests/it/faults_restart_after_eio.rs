//! A failed fsync, then a process restart that keeps the page cache, then
//! power loss. Recovery in the restarted process reads the failed group
//! from the cache; unless it makes those bytes durable before it
//! acknowledges anything after them, the power loss leaves acknowledged
//! records behind a hole and the log refuses to open.

use bytes::Bytes;
use fencelog_engine::sim::{Fault, FaultKind, Resolution, SimStorage};
use fencelog_engine::{Config, Engine, WriteError};
use std::sync::Arc;

fn open(sim: &SimStorage) -> Engine {
    Engine::open_storage(Arc::new(sim.clone()), Config::default()).expect("open")
}

fn body(i: u32) -> Vec<Bytes> {
    vec![Bytes::from(format!("record-{i}"))]
}

async fn scenario(resolution: Resolution, fail_header: bool) {
    let sim = SimStorage::new();
    let e = open(&sim);
    let mut acked = Vec::new();
    for i in 0..3 {
        acked.push((e.append("s", 5, body(i), None).await.unwrap().first_seq, i));
    }
    // The next append writes (one call) then syncs (the next call).
    let sync_call = sim.op_count() + 1;
    sim.inject(Fault {
        at_op: sync_call,
        kind: FaultKind::Eio,
        persistent: false,
    });
    let failed = e.append("s", 5, body(100), None).await;
    assert!(
        matches!(failed, Err(WriteError::StorageFailed(_))),
        "{failed:?}"
    );
    drop(e);

    // The process restarts; the page cache, with the failed group, survives.
    sim.restart();
    let e = open(&sim);
    let state = e.state("s").unwrap();
    for (expected_seq, i) in (state.next_seq..).zip(3..6) {
        let ack = e.append("s", 5, body(i), None).await.unwrap();
        assert_eq!(ack.first_seq, expected_seq);
        acked.push((ack.first_seq, i));
    }
    if fail_header {
        e.fence("other", 9).await.unwrap();
    }
    drop(e);

    sim.crash(resolution);
    let e = open(&sim);
    for (seq, i) in acked {
        let r = e.read("s", seq, 1, 1 << 20).unwrap();
        assert_eq!(
            r.records[0].body,
            body(i)[0],
            "seq {seq} after {resolution:?}"
        );
    }
}

#[tokio::test]
async fn acknowledged_records_after_a_failed_sync_survive_power_loss() {
    scenario(Resolution::DropAll, false).await;
    scenario(Resolution::KeepAll, false).await;
    scenario(Resolution::DropAll, true).await;
    for seed in 0..64 {
        scenario(Resolution::Random(seed), seed % 2 == 0).await;
    }
}
