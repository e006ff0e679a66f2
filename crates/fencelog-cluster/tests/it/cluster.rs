//! In-process multi-node clusters: fencing decided in apply on every
//! replica, the leader's answer is its apply result, restarts never apply
//! twice nor skip, and an isolated old leader cannot commit a stale write.

use crate::support::{append, copy_tree, eventually, fence, TestCluster};
use fencelog_cluster::node::WriteOutcome;
use fencelog_cluster::raft::OpResult;
use fencelog_cluster::shard::shard_of;
use openraft::ServerState;

fn appended_at(o: &WriteOutcome) -> u64 {
    match o {
        WriteOutcome::Decided(OpResult::Appended { first_seq, .. }) => *first_seq,
        other => panic!("expected an accepted append, got {other:?}"),
    }
}

/// Writes through the leader and through followers (forwarded) are decided
/// in apply; the refusal names the committed higher token; every replica
/// ends with the same records, timestamps included, in the stream's shard
/// only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_is_decided_in_apply_and_every_replica_agrees() {
    let c = TestCluster::start(3, 2).await;
    let ids = c.ids();
    let k = shard_of("orders", 2);
    let leader = c.leader(k, &ids).await;
    let follower = *ids.iter().find(|i| **i != leader).unwrap();
    assert_eq!(
        appended_at(&c.write(leader, append("orders", 5, "a")).await),
        0
    );
    assert_eq!(
        appended_at(&c.write(follower, append("orders", 5, "b")).await),
        1
    );
    let fenced = c.write(follower, fence("orders", 7)).await;
    assert!(
        matches!(&fenced, WriteOutcome::Decided(OpResult::Fenced(s)) if s.highest_token == 7 && s.next_seq == 2),
        "{fenced:?}"
    );
    for via in &ids {
        let stale = c.write(*via, append("orders", 6, "late")).await;
        assert_eq!(
            stale,
            WriteOutcome::Decided(OpResult::Stale {
                presented: 6,
                highest: 7,
                next_seq: 2
            })
        );
    }
    // Two owners racing through different nodes: whatever order the log
    // gives them, each replica decides the same.
    let (x, y) = tokio::join!(
        c.write(ids[0], fence("orders", 9)),
        c.write(ids[2], append("orders", 8, "racer"))
    );
    assert!(
        matches!(x, WriteOutcome::Decided(OpResult::Fenced(_))),
        "{x:?}"
    );
    assert!(
        matches!(
            y,
            WriteOutcome::Decided(OpResult::Appended { .. } | OpResult::Stale { .. })
        ),
        "{y:?}"
    );
    c.converged(k, &ids).await;
    let logs: Vec<_> = ids.iter().map(|i| c.records(*i, "orders")).collect();
    assert!(logs.len() == 3 && logs[1] == logs[0] && logs[2] == logs[0]);
    let bodies: Vec<&[u8]> = logs[0].iter().map(|r| r.3.as_slice()).collect();
    let racer_won = matches!(y, WriteOutcome::Decided(OpResult::Appended { .. }));
    let mut expected: Vec<&[u8]> = vec![b"a", b"b"];
    if racer_won {
        expected.push(b"racer");
    }
    assert_eq!(bodies, expected);
    assert!(logs[0]
        .windows(2)
        .all(|w| w[1].0 == w[0].0 + 1 && w[1].2 >= w[0].2));
    let other = 1 - k;
    for i in &ids {
        assert!(c.node(*i).engine(other).state("orders").is_err());
    }
}

/// A node restarted with its WAL ahead of its shard engine (the engine's
/// last applies lost, as in a crash between log append and apply) re-applies
/// exactly the missing entries: the same records as every other replica,
/// seqs dense, no duplicate, none skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_never_applies_twice_nor_skips() {
    let c = TestCluster::start(3, 1).await;
    let ids = c.ids();
    let leader = c.leader(0, &ids).await;
    let lagger = *ids.iter().find(|i| **i != leader).unwrap();
    for i in 0..10 {
        c.write(leader, append("s", 1, &format!("r{i}"))).await;
    }
    c.converged(0, &ids).await;
    c.stop(lagger).await;
    let shards = c.data_dir(lagger).join("shards");
    let saved = c.dir.path().join("saved-shards");
    copy_tree(&shards, &saved);
    c.boot(lagger).await;
    for i in 10..25 {
        let via = ids[i % 3];
        assert_eq!(
            appended_at(&c.write(via, append("s", 1, &format!("r{i}"))).await),
            i as u64
        );
    }
    let applied = c.converged(0, &ids).await;
    c.stop(lagger).await;
    std::fs::remove_dir_all(&shards).unwrap();
    copy_tree(&saved, &shards);
    let before = applied_on_disk(&shards.join("shard-000")).await;
    assert!(
        before + 15 <= applied,
        "the restored engine is behind: {before} vs {applied}"
    );
    c.boot(lagger).await;
    assert_eq!(c.converged(0, &ids).await, applied);
    let expected: Vec<Vec<u8>> = (0..25).map(|i| format!("r{i}").into_bytes()).collect();
    for i in &ids {
        let recs = c.records(*i, "s");
        let bodies: Vec<Vec<u8>> = recs.iter().map(|r| r.3.clone()).collect();
        assert_eq!(bodies, expected, "node {i}");
        assert!(recs.iter().enumerate().all(|(n, r)| r.0 == n as u64));
        assert_eq!(recs, c.records(leader, "s"));
    }
}

/// A node whose shard engine is ahead of its Raft WAL starts and goes on
/// from its state. A follower applies the committed entries it has
/// accepted before its own WAL syncs them, and the engine may make them
/// durable first (a roll or checkpoint syncs it), so a power cut can
/// leave the state holding entries the log lost (those entries were
/// committed by the others: this node had not acknowledged them). Built
/// here from a copy of the follower's live WAL taken before 15 more
/// appends, restored under its engine: openraft purges the log up to what
/// was applied, the WAL keeps that purge, and every replica ends with
/// each record once, before and after another restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_state_is_ahead_of_its_wal_goes_on_from_its_state() {
    let c = TestCluster::start(3, 1).await;
    let ids = c.ids();
    let leader = c.leader(0, &ids).await;
    let ahead = *ids.iter().find(|i| **i != leader).unwrap();
    let put = |i: usize| append("s", 1, &format!("r{i}"));
    for i in 0..10 {
        assert_eq!(appended_at(&c.write(leader, put(i)).await), i as u64);
    }
    c.converged(0, &ids).await;
    let vote = c.node(ahead).raft(0).metrics().borrow().vote;
    let raft_dir = c.data_dir(ahead).join("raft");
    let saved = c.dir.path().join("saved-raft");
    copy_tree(&raft_dir, &saved);
    for i in 10..25 {
        assert_eq!(appended_at(&c.write(leader, put(i)).await), i as u64);
    }
    let applied = c.converged(0, &ids).await;
    // The saved WAL must differ from the node's only by entries: a vote
    // changed since (an election) would make the restored one a state no
    // crash leaves.
    assert_eq!(c.node(ahead).raft(0).metrics().borrow().vote, vote);
    c.stop(ahead).await;
    std::fs::remove_dir_all(&raft_dir).unwrap();
    copy_tree(&saved, &raft_dir);
    let (wal_last, purged) = wal_tail(&raft_dir);
    let state = applied_on_disk(&c.data_dir(ahead).join("shards/shard-000")).await;
    assert!(
        wal_last + 15 <= state && state == applied,
        "WAL ends at {wal_last}, state at {state}, the shard at {applied}"
    );
    assert!(purged.is_none_or(|p| p < wal_last), "purged to {purged:?}");
    c.boot(ahead).await;
    let expected: Vec<Vec<u8>> = (0..30).map(|i| format!("r{i}").into_bytes()).collect();
    for i in 25..30 {
        let via = [ahead, leader][i % 2];
        assert_eq!(appended_at(&c.write(via, put(i)).await), i as u64);
    }
    for restart in [false, true] {
        if restart {
            c.stop(ahead).await;
            c.boot(ahead).await;
        }
        c.converged(0, &ids).await;
        for i in &ids {
            let recs = c.records(*i, "s");
            let bodies: Vec<Vec<u8>> = recs.iter().map(|r| r.3.clone()).collect();
            assert_eq!(bodies, expected, "node {i}, restarted {restart}");
            assert!(recs.iter().enumerate().all(|(n, r)| r.0 == n as u64));
        }
    }
    // The hole was purged, durably: the WAL starts after the state's
    // point, not at the index the copy ended.
    c.stop(ahead).await;
    let (_, purged) = wal_tail(&raft_dir);
    assert!(
        purged.is_some_and(|p| p >= state),
        "purged to {purged:?}, state was at {state}"
    );
}

/// The last index a stopped node's shard engine in `shard_dir` applied
/// (opened offline, then shut down).
async fn applied_on_disk(shard_dir: &std::path::Path) -> u64 {
    let dir = fencelog_cluster::snapshot::ShardDir::open(shard_dir).unwrap();
    let e = fencelog_engine::Engine::open(dir.engine_dir()).unwrap();
    let at = e.applied().map(|a| a.index).unwrap();
    e.shutdown().await;
    at
}

/// The last entry index and the purge point of shard 0 in the WAL in
/// `dir` (opened offline, then closed).
fn wal_tail(dir: &std::path::Path) -> (u64, Option<u64>) {
    let storage = fencelog_engine::DirStorage::new(dir).unwrap();
    let wal = fencelog_cluster::wal::Wal::open(std::sync::Arc::new(storage)).unwrap();
    let log = wal.shard(0);
    let out = {
        let log = log.lock().unwrap();
        let last = log.entries.keys().next_back().copied();
        let purged = log.last_purged.map(|p| p.index);
        (last.or(purged).unwrap_or(0), purged)
    };
    wal.close();
    out
}

/// A leader cut off from its followers still takes itself for the leader
/// (openraft 0.9 steps down only on a higher vote), while the age of its
/// last majority acknowledgement climbs: `fencelog_raft_leader` stays 1,
/// `fencelog_raft_quorum_ack_age_seconds` (what the
/// `FencelogShardLeaderless` alert reads) passes the seconds it was cut
/// off, while the two others elect a leader whose age is fresh. Healed,
/// the old leader hears the higher vote and exports no age at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_leaders_quorum_ack_age_climbs() {
    let c = TestCluster::start(3, 1).await;
    let ids = c.ids();
    let old = c.leader(0, &ids).await;
    let rest: Vec<_> = ids.iter().copied().filter(|i| *i != old).collect();
    let sample = |id, name: &str| {
        let text = fencelog_cluster::node_metrics::raft_families(&c.node(id));
        let prefix = format!("{name}{{shard=\"0\"}} ");
        let line = text.lines().find_map(|l| l.strip_prefix(&prefix));
        line.map(|v| v.parse::<f64>().unwrap())
    };
    let age = "fencelog_raft_quorum_ack_age_seconds";
    let fresh = |among: &[u64]| {
        among
            .iter()
            .filter_map(|i| sample(*i, age))
            .find(|a| *a < 1.0)
    };
    eventually("a fresh acknowledgement", || async { fresh(&[old]) }).await;
    c.router.isolate(old, ids.clone());
    let cut = std::time::Instant::now();
    let seen = eventually("a stale old leader beside a fresh new one", || async {
        let stale = sample(old, age).filter(|a| *a > 2.0)?;
        fresh(&rest).map(|_| stale)
    })
    .await;
    assert!(seen <= cut.elapsed().as_secs_f64() + 1.0, "age {seen}");
    assert_eq!(sample(old, "fencelog_raft_leader"), Some(1.0));
    c.router.heal();
    eventually(
        "the old leader to step down, and one fresh leader",
        || async {
            let gone =
                sample(old, age).is_none() && sample(old, "fencelog_raft_leader") == Some(0.0);
            (gone && fresh(&rest).is_some()).then_some(())
        },
    )
    .await;
}

/// A leader whose followers answer its heartbeats late for a moment (cut
/// for 300 ms, well inside the election timeout, as a follower busy with
/// large reads on two cores is) still answers a linearizable read once
/// they answer again: the read index is asked again, not treated as a
/// lost leadership that waits for a new leader (which, with none coming,
/// failed the read after commit timeout plus leader wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_barrier_waits_out_a_brief_quorum_silence() {
    let timing = fencelog_cluster::node::Timing {
        election_min_ms: 4_000,
        election_max_ms: 5_000,
        ..fencelog_cluster::node::Timing::TEST
    };
    let c = TestCluster::start_with(3, 1, timing).await;
    let ids = c.ids();
    let leader = c.leader(0, &ids).await;
    assert_eq!(appended_at(&c.write(leader, append("r", 1, "x")).await), 0);
    let term = c.node(leader).raft(0).metrics().borrow().current_term;
    c.router.isolate(leader, ids.clone());
    let router = c.router.clone();
    let heal = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        router.heal();
    });
    let read = c.node(leader).read_barrier(0).await;
    heal.await.unwrap();
    assert_eq!(read, Ok(()));
    let m = c.node(leader).raft(0).metrics().borrow().clone();
    assert_eq!(
        (m.current_term, m.current_leader),
        (term, Some(leader)),
        "no election"
    );
}

/// The seeds' paused owner, in process: the old leader is cut off (as a
/// SIGSTOPped process is to its peers) with a write in flight; a new leader
/// is elected, a new owner fences and appends through another node; after
/// the heal the old leader's write ends unknown (never accepted), it steps
/// down, and the old owner's retry through it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_old_leader_cannot_commit_a_stale_write() {
    let c = TestCluster::start(3, 1).await;
    let ids = c.ids();
    let old = c.leader(0, &ids).await;
    assert_eq!(appended_at(&c.write(old, append("lock", 1, "A1")).await), 0);
    c.converged(0, &ids).await;
    c.router.isolate(old, ids.clone());
    let old_node = c.node(old);
    let in_flight = tokio::spawn({
        let n = old_node.clone();
        async move { n.write(append("lock", 1, "A2")).await }
    });
    let rest: Vec<_> = ids.iter().copied().filter(|i| *i != old).collect();
    let new = c.leader(0, &rest).await;
    assert_ne!(new, old);
    let other = *rest.iter().find(|i| **i != new).unwrap();
    let b = c.write(other, fence("lock", 2)).await;
    assert!(
        matches!(b, WriteOutcome::Decided(OpResult::Fenced(_))),
        "{b:?}"
    );
    assert_eq!(
        appended_at(&c.write(other, append("lock", 2, "B1")).await),
        1
    );
    // The isolated leader cannot answer a linearizable read from stale state.
    assert!(old_node.read_barrier(0).await.is_err());
    c.router.heal();
    let a2 = in_flight.await.unwrap();
    assert!(
        matches!(
            a2,
            WriteOutcome::Unknown(_) | WriteOutcome::Decided(OpResult::Stale { .. })
        ),
        "the stale in-flight write was {a2:?}"
    );
    eventually("the old leader to step down", || async {
        (old_node.raft(0).metrics().borrow().state != ServerState::Leader).then_some(())
    })
    .await;
    let retry = c.write(old, append("lock", 1, "A3")).await;
    assert!(
        matches!(
            retry,
            WriteOutcome::Decided(OpResult::Stale {
                presented: 1,
                highest: 2,
                ..
            })
        ),
        "{retry:?}"
    );
    c.converged(0, &ids).await;
    for i in &ids {
        let bodies: Vec<Vec<u8>> = c.records(*i, "lock").into_iter().map(|r| r.3).collect();
        assert_eq!(bodies, vec![b"A1".to_vec(), b"B1".to_vec()], "node {i}");
    }
}
