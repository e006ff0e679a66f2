//! Reclamation in a cluster's shard engines: a trim applied on every
//! replica lets each shard engine delete the segments it killed (the
//! pass runs under the apply gate, after the entry), and the checkpoint
//! that pass writes keeps the fence: a stale token stays refused on every
//! replica, before and after every node restarts from its reclaimed
//! directory.

use crate::support::{append, eventually, fence, TestCluster};
use fencelog_cluster::node::{Timing, WriteOutcome};
use fencelog_cluster::raft::OpResult;
use fencelog_engine::WriteOp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trim_reclaims_segments_on_every_replica_and_keeps_the_fence() {
    let engine = fencelog_engine::Config {
        segment_bytes_max: 4096,
        ..fencelog_engine::Config::default()
    };
    let c = TestCluster::start_with_engine(3, 1, Timing::TEST, engine).await;
    let ids = c.ids();
    let leader = c.leader(0, &ids).await;
    let body = "x".repeat(300);
    for i in 0..60 {
        let r = c.write(leader, append("s", 2, &format!("{i}{body}"))).await;
        assert!(
            matches!(r, WriteOutcome::Decided(OpResult::Appended { .. })),
            "{r:?}"
        );
    }
    let r = c.write(leader, fence("s", 5)).await;
    assert!(
        matches!(r, WriteOutcome::Decided(OpResult::Fenced(_))),
        "{r:?}"
    );
    let trim = WriteOp::Trim {
        stream: "s".into(),
        token: 5,
        trim_seq: 58,
        not_after_ms: None,
    };
    let r = c.write(leader, trim).await;
    assert!(
        matches!(r, WriteOutcome::Decided(OpResult::Fenced(_))),
        "{r:?}"
    );
    c.converged(0, &ids).await;
    for id in &ids {
        let deleted = eventually(&format!("node {id} to delete trimmed segments"), || async {
            let n = c.node(*id).engine(0).metrics().segments_deleted.get();
            (n >= 3).then_some(n)
        })
        .await;
        assert!(deleted >= 3, "node {id}: {deleted}");
    }
    let expected = c.records(leader, "s");
    assert_eq!(expected.len(), 2, "seqs 58 and 59 stay");
    let stale = OpResult::Stale {
        presented: 2,
        highest: 5,
        next_seq: 60,
    };
    for round in ["before", "after"] {
        for id in &ids {
            assert_eq!(
                c.records(*id, "s"),
                expected,
                "node {id} {round} the restart"
            );
            let r = c.write(*id, append("s", 2, "stale")).await;
            assert_eq!(r, WriteOutcome::Decided(stale.clone()), "node {id} {round}");
        }
        if round == "before" {
            for id in &ids {
                c.stop(*id).await;
            }
            for id in &ids {
                c.boot(*id).await;
            }
            c.leader(0, &ids).await;
            c.converged(0, &ids).await;
        }
    }
}
