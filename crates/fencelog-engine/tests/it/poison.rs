//! A failed fdatasync poisons the engine: the group's requests fail, nothing
//! is acknowledged after it, reads of durable data go on, and a reopen
//! finds every acknowledged record.

use crate::support::gate::{bodies, open_controlled, poll_once, recs, until_held};
use fencelog_engine::{Config, Engine, ReadError, WriteError};
use std::time::Duration;

#[tokio::test]
async fn failed_sync_poisons_and_reopen_keeps_every_ack() {
    let dir = tempfile::tempdir().unwrap();
    let (e, ctl) = open_controlled(dir.path(), Config::default());
    e.append("s", 1, recs(&["d0", "d1"]), None).await.unwrap();

    // Group 1 ("x") succeeds; group 2 ("b" on s and a fence creating t)
    // gets the failing fdatasync.
    ctl.hold_next_sync();
    let mut x = Box::pin(e.append("x", 1, recs(&["x0"]), None));
    assert!(poll_once(&mut x).is_none());
    until_held(&ctl).await;
    let mut b = Box::pin(e.append("s", 1, recs(&["b"]), None));
    let mut t = Box::pin(e.fence("t", 3));
    assert!(poll_once(&mut b).is_none());
    assert!(poll_once(&mut t).is_none());
    ctl.hold_next_sync();
    ctl.release();
    assert_eq!(x.await.unwrap().first_seq, 0);
    until_held(&ctl).await;
    ctl.fail_syncs(true);
    let syncs_before = ctl.syncs();
    ctl.release();

    let failure = match b.await {
        Err(WriteError::StorageFailed(f)) => f,
        other => panic!("expected StorageFailed, got {other:?}"),
    };
    assert_eq!(failure.op, "fdatasync");
    assert_eq!(failure.file, "00000000000000000000.seg");
    assert_eq!(failure.kind, std::io::ErrorKind::Other);
    assert_eq!(t.await, Err(WriteError::StorageFailed(failure.clone())));
    assert_eq!(e.poisoned(), Some(failure.clone()));
    assert!(!e.is_healthy());

    // The disk is fine again, but an fsync that failed is never retried and
    // then acknowledged: every later write is refused without disk work.
    ctl.fail_syncs(false);
    assert_eq!(
        e.append("s", 1, recs(&["later"]), None).await,
        Err(WriteError::Poisoned(failure.clone()))
    );
    assert_eq!(
        e.append("new", 1, recs(&["later"]), None).await,
        Err(WriteError::Poisoned(failure.clone()))
    );
    assert_eq!(
        e.fence("s", 5).await,
        Err(WriteError::Poisoned(failure.clone()))
    );
    assert_eq!(ctl.syncs(), syncs_before + 1);

    // Durable data stays readable; the failed group never became visible.
    let r = e.read("s", 0, 10, 1 << 20).unwrap();
    assert_eq!((bodies(&r), r.next_seq), (recs(&["d0", "d1"]), 2));
    assert_eq!(bodies(&e.read("x", 0, 10, 1 << 20).unwrap()), recs(&["x0"]));
    assert_eq!(e.state("t"), Err(ReadError::NotFound));
    assert_eq!(e.state("s").unwrap().highest_token, 1);
    // A tail follower is not left hanging on a poisoned engine.
    let next = tokio::time::timeout(
        Duration::from_secs(10),
        e.wait_for("s", 2, Duration::from_secs(3600)),
    )
    .await
    .expect("wait_for returns on a poisoned engine")
    .unwrap();
    assert_eq!(next, 2);

    e.shutdown().await;
    drop(e);
    let e = Engine::open(dir.path()).unwrap();
    let r = e.read("s", 0, 10, 1 << 20).unwrap();
    assert_eq!(&bodies(&r)[..2], &recs(&["d0", "d1"])[..]);
    // The failed group's outcome is unknown to its clients; whatever
    // recovery keeps of it must be whole and in order.
    match r.records.len() {
        2 => assert_eq!(r.next_seq, 2),
        3 => assert_eq!(
            (r.records[2].seq, &r.records[2].body),
            (2, &recs(&["b"])[0])
        ),
        n => panic!("{n} records"),
    }
    assert_eq!(bodies(&e.read("x", 0, 10, 1 << 20).unwrap()), recs(&["x0"]));
    let ack = e.append("s", 1, recs(&["again"]), None).await.unwrap();
    assert_eq!(ack.first_seq, r.next_seq);
    e.shutdown().await;
}

#[tokio::test]
async fn failed_sync_of_a_lone_append_is_reported_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let (e, ctl) = open_controlled(dir.path(), Config::default());
    ctl.fail_syncs(true);
    match e.append("s", 1, recs(&["a"]), None).await {
        Err(WriteError::StorageFailed(f)) => assert_eq!(f.op, "fdatasync"),
        other => panic!("expected StorageFailed, got {other:?}"),
    }
    assert!(matches!(
        e.append("s", 1, recs(&["a"]), None).await,
        Err(WriteError::Poisoned(_))
    ));
    assert_eq!(e.state("s"), Err(ReadError::NotFound));
    e.shutdown().await;
}
