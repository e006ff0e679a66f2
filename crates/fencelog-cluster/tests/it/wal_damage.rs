//! A node whose Raft WAL was damaged after it was synced refuses to start,
//! naming the byte and what to do, and changes nothing on disk; the rest
//! of the cluster goes on. (Every byte of a WAL is flipped in turn in
//! `wal_crash.rs`; this is the node-level answer.)

use crate::support::{append, fails_under_with, TestCluster};
use fencelog_cluster::node::WriteOutcome;
use fencelog_cluster::wal::WAL_FILE_NAME;
use fencelog_cluster::Mutation;

async fn damaged_wal_refused() {
    let c = TestCluster::start(3, 1).await;
    let ids = c.ids();
    let leader = c.leader(0, &ids).await;
    for i in 0..3 {
        let o = c.write(leader, append("s", 1, &format!("r{i}"))).await;
        assert!(matches!(o, WriteOutcome::Decided(_)), "{o:?}");
    }
    c.converged(0, &ids).await;
    let victim = *ids.iter().find(|i| **i != leader).unwrap();
    c.stop(victim).await;
    let path = c.data_dir(victim).join("raft").join(WAL_FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    // Inside the first group (the file header is 32 bytes, a group's 28).
    bytes[32 + 28 + 1] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let err = match c.try_boot(victim).await {
        Ok(_) => panic!("node {victim} started on a damaged WAL"),
        Err(e) => e,
    };
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "raft WAL damaged at byte 32: group 0 does not read whole, and group 1 at byte "
        ),
        "{msg}"
    );
    assert!(
        msg.ends_with("the node will not start on it (restore the node from its peers: remove it from the cluster, empty its data directory, add it again)"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the refused open changed the WAL"
    );
    let rest: Vec<_> = ids.iter().copied().filter(|i| *i != victim).collect();
    let leader = c.leader(0, &rest).await;
    let o = c.write(leader, append("s", 1, "after")).await;
    assert!(matches!(o, WriteOutcome::Decided(_)), "{o:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_damaged_wal_refuses_to_start_and_the_others_go_on() {
    damaged_wal_refused().await;
}

#[test]
fn a_wal_replay_that_cuts_damage_is_caught() {
    fails_under_with(
        Mutation::WalCutsDamage,
        damaged_wal_refused,
        "started on a damaged WAL",
    );
}
