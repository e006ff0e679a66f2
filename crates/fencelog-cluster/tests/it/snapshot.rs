//! Snapshots and log purge: a node that was down while the others built a
//! snapshot and purged their Raft log past its last entry catches up by
//! installing the snapshot (the shard engine's files, switched in
//! atomically), then the entries after it; a restart keeps what it
//! installed.

use crate::support::{append, eventually, producer_append, TestCluster};
use fencelog_cluster::node::{Timing, WriteOutcome};
use fencelog_cluster::types::{NodeId, OpResult};

const SMALL_SNAPSHOTS: Timing = Timing {
    snapshot_logs: 30,
    keep_logs: 5,
    purge_batch: 1,
    ..Timing::TEST
};

/// Appends `body` to `s` as producer seq `seq` through any node of `via`
/// until it is decided. With one node down, a starved heartbeat can cost
/// the leader its term mid-loop (this was the flake: a write answered
/// "unavailable" or "unknown" failed the test); a retry of an append that
/// did land is answered as the producer's duplicate, so nothing is
/// written twice.
async fn append_surely(c: &TestCluster, via: &[NodeId], seq: u64, body: &str) {
    eventually(&format!("append {seq} decided"), || async {
        for id in via {
            match c.write(*id, producer_append("s", 1, seq, body)).await {
                WriteOutcome::Decided(OpResult::Appended { .. }) => return Some(()),
                WriteOutcome::Decided(r) => panic!("append {seq}: {r:?}"),
                WriteOutcome::Unavailable(_) | WriteOutcome::Unknown(_) => {}
            }
        }
        None
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_behind_the_purge_point_catches_up_by_snapshot() {
    let c = TestCluster::start_with(3, 1, SMALL_SNAPSHOTS).await;
    let ids = c.ids();
    let leader = c.leader(0, &ids).await;
    let late = *ids.iter().find(|i| **i != leader).unwrap();
    c.write(leader, append("s", 1, "before")).await;
    c.converged(0, &ids).await;
    c.stop(late).await;
    let rest: Vec<_> = ids.iter().copied().filter(|i| *i != late).collect();
    for i in 0..100 {
        append_surely(&c, &rest, i, &format!("r{i}")).await;
    }
    // Every running node purged past the late node's log, so whichever
    // leads when it comes back can only send it a snapshot.
    let purged = eventually("both running nodes to purge their log", || async {
        let purged = rest.iter().map(|id| {
            let m = c.node(*id).raft(0).metrics().borrow().clone();
            m.purged.map(|p| p.index).filter(|p| *p > 40)
        });
        purged.collect::<Option<Vec<u64>>>()?.into_iter().min()
    })
    .await;
    c.converged(0, &rest).await;
    let node = c.boot(late).await;
    c.converged(0, &ids).await;
    let snapshot = node.raft(0).metrics().borrow().snapshot;
    assert!(
        snapshot.is_some_and(|s| s.index >= purged),
        "installed {snapshot:?}, purged {purged}"
    );
    let expected = c.records(rest[0], "s");
    assert_eq!(expected.len(), 101);
    assert_eq!(c.records(late, "s"), expected);
    drop(node);
    c.stop(late).await;
    c.boot(late).await;
    c.converged(0, &ids).await;
    assert_eq!(c.records(late, "s"), expected);
}
