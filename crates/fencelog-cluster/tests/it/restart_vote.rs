//! A shard leader that stops and comes back never leads again at the term
//! it led before (`restart_vote.rs`): an election at a higher term follows,
//! even when it is back long before its followers' election timeouts, and
//! writes go on with every replica alike.

use crate::support::{append, fails_under_with, TestCluster};
use fencelog_cluster::node::WriteOutcome;
use fencelog_cluster::Mutation;

/// Shard 0's term as node `id` sees it.
fn term(c: &TestCluster, id: u64) -> u64 {
    c.node(id).raft(0).metrics().borrow().current_term
}

async fn a_restarted_leader_is_elected_again_first() {
    let c = TestCluster::start(3, 1).await;
    let ids = c.ids();
    let leader = c.leader(0, &ids).await;
    let term_before = term(&c, leader);
    for i in 0..5 {
        let o = c.write(leader, append("s", 1, &format!("a{i}"))).await;
        assert!(matches!(o, WriteOutcome::Decided(_)), "{o:?}");
    }
    // Back at once: an in-process restart takes milliseconds, the
    // followers' election timeout at least 500 ms.
    c.stop(leader).await;
    c.boot(leader).await;
    let now = c.leader(0, &ids).await;
    assert!(
        term(&c, now) > term_before,
        "node {leader} led at term {term_before} and node {now} leads at term {}",
        term(&c, now)
    );
    for i in 0..5 {
        let o = c.write(ids[i % 3], append("s", 1, &format!("b{i}"))).await;
        assert!(matches!(o, WriteOutcome::Decided(_)), "{o:?}");
    }
    c.converged(0, &ids).await;
    let want: Vec<Vec<u8>> = (0..5)
        .map(|i| format!("a{i}"))
        .chain((0..5).map(|i| format!("b{i}")))
        .map(String::into_bytes)
        .collect();
    for id in ids {
        let bodies: Vec<Vec<u8>> = c.records(id, "s").into_iter().map(|r| r.3).collect();
        assert_eq!(bodies, want, "node {id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_leader_never_resumes_its_term() {
    a_restarted_leader_is_elected_again_first().await;
}

#[test]
fn a_leader_resuming_its_own_vote_is_caught() {
    fails_under_with(
        Mutation::LeaderResumesOwnVote,
        a_restarted_leader_is_elected_again_first,
        "leads at term",
    );
}
