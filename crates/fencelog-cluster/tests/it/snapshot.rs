//! Snapshots and log purge: a node that was down while the others built a
//! snapshot and purged their Raft log past its last entry catches up by
//! installing the snapshot (the shard engine's files, switched in
//! atomically), then the entries after it; a restart keeps what it
//! installed.

use crate::support::{append, eventually, TestCluster};
use fencelog_cluster::node::{Timing, WriteOutcome};
use fencelog_cluster::types::OpResult;

const SMALL_SNAPSHOTS: Timing = Timing {
    snapshot_logs: 30,
    keep_logs: 5,
    purge_batch: 1,
    ..Timing::TEST
};

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
        let r = c.write(leader, append("s", 1, &format!("r{i}"))).await;
        assert!(
            matches!(r, WriteOutcome::Decided(OpResult::Appended { .. })),
            "{r:?}"
        );
    }
    let purged = eventually("the leader to purge its log", || async {
        let m = c.node(leader).raft(0).metrics().borrow().clone();
        m.purged.map(|p| p.index).filter(|p| *p > 40)
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
    let expected = c.records(leader, "s");
    assert_eq!(expected.len(), 101);
    assert_eq!(c.records(late, "s"), expected);
    drop(node);
    c.stop(late).await;
    c.boot(late).await;
    c.converged(0, &ids).await;
    assert_eq!(c.records(late, "s"), expected);
}
