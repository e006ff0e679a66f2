//! The disk budget in a cluster (`--data-bytes-max`): the shard leader
//! refuses an append that would take its shard engines past the budget
//! before proposing it, so nothing changes on any replica; fences and
//! trims go on, and once a trim's reclamation gives segments back,
//! appends are accepted again. Through the leader and through a follower
//! (which forwards).

use crate::support::{append, eventually, fence, producer_append, TestCluster};
use fencelog_cluster::node::{Timing, WriteOutcome};
use fencelog_cluster::raft::OpResult;
use fencelog_engine::WriteOp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_budget_refuses_appends_at_the_leader_until_a_trim_frees_space() {
    full_budget().await;
}

#[test]
fn a_leader_that_ignores_the_budget_is_caught() {
    crate::support::fails_under_with(
        fencelog_cluster::Mutation::ClusterBudgetIgnored,
        full_budget,
        "the budget never filled",
    );
}

async fn full_budget() {
    let engine = fencelog_engine::Config {
        segment_bytes_max: 4096,
        ..fencelog_engine::Config::default()
    };
    let mut c = TestCluster::start_with_engine(3, 1, Timing::TEST, engine).await;
    let ids = c.ids();
    // The budget: what the emptiest shard engines hold, plus room for
    // ~40 records of 500 bytes (each node's own engines).
    let empty = ids.iter().map(|id| c.node(*id).data_bytes()).max().unwrap();
    let budget = empty + (20 << 10);
    c.engine.data_bytes_max = Some(budget);
    for id in &ids {
        c.stop(*id).await;
    }
    for id in &ids {
        c.boot(*id).await;
    }
    let leader = c.leader(0, &ids).await;
    let follower = *ids.iter().find(|i| **i != leader).unwrap();
    let body = "f".repeat(500);
    let mut appended = 0u64;
    let refused = loop {
        let via = [leader, follower][(appended % 2) as usize];
        match c
            .write(via, producer_append("fill", 5, appended, &body))
            .await
        {
            WriteOutcome::Decided(OpResult::Appended { first_seq, .. }) => {
                assert_eq!(first_seq, appended);
                appended += 1;
            }
            WriteOutcome::Decided(r @ OpResult::InsufficientStorage { .. }) => break r,
            other => panic!("append {appended}: {other:?}"),
        }
        assert!(appended < 1000, "the budget never filled");
    };
    let OpResult::InsufficientStorage { limit, used } = refused else {
        unreachable!()
    };
    assert_eq!(limit, budget);
    assert!(
        used + 504 > budget && used <= budget + 4096,
        "used {used}, budget {budget}"
    );
    assert!(
        appended >= 10,
        "{appended} appends before the budget filled"
    );
    // Through the follower too (it forwards; the leader refuses), and
    // nothing of either refusal was proposed.
    for via in [follower, leader] {
        let r = c
            .write(via, producer_append("fill", 5, appended, &body))
            .await;
        assert!(
            matches!(r, WriteOutcome::Decided(OpResult::InsufficientStorage { limit, .. }) if limit == budget),
            "via {via}: {r:?}"
        );
    }
    // The fencing rule answers first, as on a single node: a producer's
    // retry of its last applied append is its original ack, a stale token
    // and a `match_seq` mismatch their own refusals, never 507.
    let last = appended - 1;
    let r = c
        .write(follower, producer_append("fill", 5, last, &body))
        .await;
    assert!(
        matches!(r, WriteOutcome::Decided(OpResult::Appended { first_seq, duplicate: true, .. }) if first_seq == last),
        "{r:?}"
    );
    let r = c
        .write(leader, producer_append("fill", 4, appended, &body))
        .await;
    assert!(
        matches!(r, WriteOutcome::Decided(OpResult::Stale { .. })),
        "{r:?}"
    );
    let mut op = append("fill", 5, &body);
    if let WriteOp::Append { options, .. } = &mut op {
        options.match_seq_num = Some(0);
    }
    let r = c.write(leader, op).await;
    assert!(
        matches!(r, WriteOutcome::Decided(OpResult::SeqMismatch { .. })),
        "{r:?}"
    );
    c.converged(0, &ids).await;
    for id in &ids {
        assert_eq!(c.records(*id, "fill").len() as u64, appended, "node {id}");
    }
    // State ops are never refused by the budget: they free space.
    let r = c.write(follower, fence("fill", 6)).await;
    assert!(
        matches!(r, WriteOutcome::Decided(OpResult::Fenced(_))),
        "{r:?}"
    );
    let trim = WriteOp::Trim {
        stream: "fill".into(),
        token: 6,
        trim_seq: appended - 1,
        not_after_ms: None,
    };
    let r = c.write(leader, trim).await;
    assert!(
        matches!(r, WriteOutcome::Decided(OpResult::Fenced(_))),
        "{r:?}"
    );
    // The trim's reclamation pass deletes the dead segments; then an
    // append fits again, at the next seq.
    let again = eventually("an append to fit after the trim", || async {
        match c
            .write(leader, producer_append("fill", 6, appended, &body))
            .await
        {
            WriteOutcome::Decided(OpResult::Appended { first_seq, .. }) => Some(first_seq),
            WriteOutcome::Decided(OpResult::InsufficientStorage { .. }) => None,
            other => panic!("{other:?}"),
        }
    })
    .await;
    assert_eq!(again, appended);
    c.converged(0, &ids).await;
    for id in &ids {
        let recs = c.records(*id, "fill");
        assert_eq!(
            recs.iter().map(|r| r.0).collect::<Vec<_>>(),
            vec![appended - 1, appended],
            "node {id}"
        );
    }
}
