//! Idempotent producers in a cluster: a producer's retry of its applied
//! append is answered from the replicated producer table in apply, never
//! refused early from a higher token, through every node; and the
//! deliberate bug that refuses it early is caught.

use crate::support::{fails_under_with, fence, producer_append, TestCluster};
use fencelog_cluster::node::WriteOutcome;
use fencelog_cluster::raft::OpResult;
use fencelog_engine::Mutation;

/// A producer appends through the leader, another owner fences through a
/// follower, and once every replica applied the fence (so each one's
/// applied state holds the higher token), the producer's retry with its old
/// token through each node is the original ack with `duplicate` set, and
/// nothing is written twice anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producers_retry_after_a_fence_is_its_original_ack_through_every_node() {
    producer_retry_is_a_duplicate_everywhere().await;
}

async fn producer_retry_is_a_duplicate_everywhere() {
    let c = TestCluster::start(3, 1).await;
    let ids = c.ids();
    let leader = c.leader(0, &ids).await;
    let follower = *ids.iter().find(|i| **i != leader).unwrap();
    let first = c.write(leader, producer_append("p", 3, 0, "a")).await;
    let WriteOutcome::Decided(OpResult::Appended {
        first_seq: 0,
        last_seq,
        next_seq,
        token,
        ts_ms,
        duplicate: false,
    }) = first
    else {
        panic!("expected the first append accepted, got {first:?}")
    };
    let fenced = c.write(follower, fence("p", 4)).await;
    assert!(
        matches!(&fenced, WriteOutcome::Decided(OpResult::Fenced(s)) if s.highest_token == 4),
        "{fenced:?}"
    );
    c.converged(0, &ids).await;
    let dup = WriteOutcome::Decided(OpResult::Appended {
        first_seq: 0,
        last_seq,
        next_seq,
        token,
        ts_ms,
        duplicate: true,
    });
    for via in &ids {
        let retry = c.write(*via, producer_append("p", 3, 0, "a")).await;
        assert_eq!(retry, dup, "the retry through node {via}");
    }
    c.converged(0, &ids).await;
    for id in &ids {
        let bodies: Vec<Vec<u8>> = c.records(*id, "p").into_iter().map(|r| r.3).collect();
        assert_eq!(bodies, vec![b"a".to_vec()], "node {id}");
    }
}

/// The test of the test: nodes that refuse a producer's append early from
/// their applied token answer the retry 409, and the test above fails.
#[test]
fn a_producer_refused_early_is_caught() {
    fails_under_with(
        Mutation::ProducerRefusedEarly,
        producer_retry_is_a_duplicate_everywhere,
        "left: Decided(Stale {",
    );
}
