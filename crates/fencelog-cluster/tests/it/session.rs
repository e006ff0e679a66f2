//! An append session's gate in cluster mode: once one of a
//! session's appends was not applied, none of its later appends is
//! proposed, even by the leader — or a later append could be applied
//! without an earlier one. The deliberate bug that ignores the gate is
//! caught.

use crate::support::{append, fails_under_with, TestCluster};
use fencelog_cluster::raft::{OpResult, Proposed, SessionGate, SESSION_BROKEN};
use fencelog_cluster::Mutation;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_proposes_nothing_after_an_append_that_was_not_applied() {
    nothing_after_an_unapplied_append().await;
}

async fn nothing_after_an_unapplied_append() {
    let c = TestCluster::start(3, 1).await;
    let ids = c.ids();
    let leader = c.leader(0, &ids).await;
    let follower = *ids.iter().find(|i| **i != leader).unwrap();
    let queue = |id, body: &str, gate: &SessionGate| {
        c.node(id)
            .enqueue_session_op(0, append("s", 1, body), gate.clone())
    };
    let gate = SessionGate::default();
    let first = queue(leader, "a", &gate).expect("the leader queues it");
    let first = first.await.unwrap();
    assert!(
        matches!(
            first,
            Proposed::Applied(OpResult::Appended { first_seq: 0, .. })
        ),
        "{first:?}"
    );
    // Not applied: queued on a node that does not lead the shard.
    let r = queue(follower, "b", &gate);
    assert!(matches!(r, Err(Proposed::NotLeader(_))), "{r:?}");
    // Every later append of the session: taken by the leader, not proposed.
    for body in ["c", "d"] {
        let rx = queue(leader, body, &gate).expect("queued");
        assert_eq!(
            rx.await.unwrap(),
            Proposed::NotProposed(SESSION_BROKEN.into()),
            "{body}"
        );
    }
    // Another session is not held back.
    let rx = queue(leader, "e", &SessionGate::default()).expect("queued");
    let e = rx.await.unwrap();
    assert!(
        matches!(
            e,
            Proposed::Applied(OpResult::Appended { first_seq: 1, .. })
        ),
        "{e:?}"
    );
    c.converged(0, &ids).await;
    for id in ids {
        let bodies: Vec<Vec<u8>> = c.records(id, "s").into_iter().map(|r| r.3).collect();
        assert_eq!(bodies, vec![b"a".to_vec(), b"e".to_vec()], "node {id}");
    }
}

#[test]
fn a_session_gate_ignored_is_caught() {
    fails_under_with(
        Mutation::SessionGateIgnored,
        nothing_after_an_unapplied_append,
        "an earlier append of this session was not applied",
    );
}
