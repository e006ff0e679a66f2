//! The API's edges: limits and invalid input refused with nothing written,
//! read limits, listing, and waiting for a stream's tail.

use crate::support::gate::{bodies, open_controlled, poll_once, recs};
use bytes::Bytes;
use fencelog_engine::NameError;
use fencelog_engine::{Config, Engine, ReadError, WriteError};
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes of log on disk; refused requests must not change it.
fn log_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[tokio::test]
async fn batches_over_the_limits_are_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        batch_records_max: 4,
        batch_bytes_max: 64,
        ..Config::default()
    };
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    e.append("s", 1, recs(&["keep"]), None).await.unwrap();
    let before = log_bytes(dir.path());
    let groups = e.metrics().groups_committed.get();

    assert_eq!(
        e.append("s", 1, recs(&["1", "2", "3", "4", "5"]), None)
            .await,
        Err(WriteError::TooLarge {
            what: "records in the batch",
            limit: 4,
            actual: 5
        })
    );
    let big = vec![Bytes::from(vec![b'x'; 40]), Bytes::from(vec![b'y'; 25])];
    assert_eq!(
        e.append("s", 1, big, None).await,
        Err(WriteError::TooLarge {
            what: "bytes in the batch",
            limit: 64,
            actual: 65
        })
    );
    assert_eq!(
        e.append("fresh", 1, vec![Bytes::from(vec![0u8; 65])], None)
            .await,
        Err(WriteError::TooLarge {
            what: "bytes in the batch",
            limit: 64,
            actual: 65
        })
    );
    assert_eq!(log_bytes(dir.path()), before);
    assert_eq!(e.metrics().groups_committed.get(), groups);
    assert_eq!(e.state("fresh"), Err(ReadError::NotFound));
    let r = e.read("s", 0, 100, 1 << 20).unwrap();
    assert_eq!((bodies(&r), r.next_seq), (recs(&["keep"]), 1));

    // Exactly at both limits is fine.
    let at_limit = vec![Bytes::from(vec![b'z'; 16]); 4];
    let ack = e.append("s", 1, at_limit.clone(), None).await.unwrap();
    assert_eq!((ack.first_seq, ack.last_seq), (1, 4));
    assert_eq!(bodies(&e.read("s", 1, 100, 1 << 20).unwrap()), at_limit);
    e.shutdown().await;
}

#[tokio::test]
async fn zero_token_empty_batch_and_bad_names_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    let before = log_bytes(dir.path());

    assert_eq!(
        e.append("s", 0, recs(&["a"]), None).await,
        Err(WriteError::ZeroToken)
    );
    assert_eq!(e.fence("s", 0).await, Err(WriteError::ZeroToken));
    assert_eq!(
        e.append("s", 1, vec![], None).await,
        Err(WriteError::EmptyBatch)
    );
    let long = "n".repeat(256);
    let cases: [(&str, NameError); 6] = [
        ("", NameError::Empty),
        (".", NameError::DotName),
        ("..", NameError::DotName),
        (
            "a/b",
            NameError::BadChar {
                index: 1,
                byte: b'/',
            },
        ),
        (
            "caf\u{e9}",
            NameError::BadChar {
                index: 3,
                byte: 0xc3,
            },
        ),
        (&long, NameError::TooLong { len: 256 }),
    ];
    for (name, err) in cases {
        assert_eq!(
            e.append(name, 1, recs(&["a"]), None).await,
            Err(WriteError::InvalidStreamName(err.clone())),
            "{name:?}"
        );
        assert_eq!(
            e.fence(name, 1).await,
            Err(WriteError::InvalidStreamName(err.clone()))
        );
        assert_eq!(
            e.read(name, 0, 1, 1),
            Err(ReadError::InvalidStreamName(err.clone()))
        );
        assert_eq!(e.state(name), Err(ReadError::InvalidStreamName(err)));
    }
    assert_eq!(log_bytes(dir.path()), before);
    assert_eq!(e.list_streams("", None, 100), Vec::new());
    assert_eq!(e.metrics().groups_committed.get(), 0);

    // The longest valid name and every allowed character work.
    let max = "m".repeat(255);
    e.append(&max, 1, recs(&["ok"]), None).await.unwrap();
    e.append("AZaz09._:-", 1, recs(&["ok"]), None)
        .await
        .unwrap();
    assert_eq!(e.list_streams("", None, 100).len(), 2);
    e.shutdown().await;
}

#[tokio::test]
async fn reads_honour_record_and_byte_limits() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    let body = |i: usize| Bytes::from(format!("record-{i:03}")); // 10 bytes
    e.append("s", 1, (0..5).map(body).collect(), None)
        .await
        .unwrap();
    e.append("s", 1, (5..10).map(body).collect(), None)
        .await
        .unwrap();
    let want = |from: usize, to: usize| (from..to).map(body).collect::<Vec<_>>();

    assert_eq!(bodies(&e.read("s", 0, 3, 1 << 20).unwrap()), want(0, 3));
    // Spanning two batches, starting inside the first.
    assert_eq!(bodies(&e.read("s", 3, 4, 1 << 20).unwrap()), want(3, 7));
    assert_eq!(bodies(&e.read("s", 0, 100, 25).unwrap()), want(0, 2));
    assert_eq!(bodies(&e.read("s", 0, 100, 30).unwrap()), want(0, 3));
    // The first record comes back whole even when it alone is over the limit.
    assert_eq!(bodies(&e.read("s", 7, 100, 1).unwrap()), want(7, 8));
    assert_eq!(bodies(&e.read("s", 7, 100, 0).unwrap()), want(7, 8));
    let r = e.read("s", 6, 100, 1 << 20).unwrap();
    assert_eq!((bodies(&r), r.next_seq), (want(6, 10), 10));
    assert_eq!(
        r.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![6, 7, 8, 9]
    );
    let r = e.read("s", 0, 0, 1 << 20).unwrap();
    assert_eq!((r.records.len(), r.next_seq), (0, 10));
    let r = e.read("s", 10, 100, 1 << 20).unwrap();
    assert_eq!((r.records.len(), r.next_seq), (0, 10));
    assert_eq!(
        e.read("s", 11, 100, 1 << 20),
        Err(ReadError::OutOfRange {
            start_seq: 11,
            first_seq: 0,
            next_seq: 10
        })
    );
    assert_eq!(e.read("none", 0, 100, 1 << 20), Err(ReadError::NotFound));
    e.shutdown().await;
}

#[tokio::test]
async fn list_streams_by_prefix_with_pagination() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    for (name, token) in [
        ("a:2", 2),
        ("b:1", 1),
        ("a:1", 1),
        ("a", 9),
        ("a:3", 3),
        ("ab", 4),
    ] {
        e.fence(name, token).await.unwrap();
    }
    e.append("a:2", 2, recs(&["x", "y"]), None).await.unwrap();
    let names =
        |v: Vec<fencelog_engine::StreamState>| v.into_iter().map(|s| s.stream).collect::<Vec<_>>();

    assert_eq!(
        names(e.list_streams("", None, 100)),
        ["a", "a:1", "a:2", "a:3", "ab", "b:1"]
    );
    assert_eq!(
        names(e.list_streams("a:", None, 100)),
        ["a:1", "a:2", "a:3"]
    );
    let page1 = e.list_streams("a:", None, 2);
    assert_eq!(names(page1.clone()), ["a:1", "a:2"]);
    assert_eq!((page1[1].highest_token, page1[1].next_seq), (2, 2));
    assert_eq!(names(e.list_streams("a:", Some("a:2"), 2)), ["a:3"]);
    assert_eq!(
        names(e.list_streams("a:", Some("a:3"), 2)),
        Vec::<String>::new()
    );
    // A cursor before the prefix starts at the prefix.
    assert_eq!(names(e.list_streams("a:", Some("0"), 1)), ["a:1"]);
    assert_eq!(names(e.list_streams("a", Some("a:3"), 100)), ["ab"]);
    assert_eq!(names(e.list_streams("c", None, 100)), Vec::<String>::new());
    assert_eq!(e.list_streams("", None, 0), Vec::new());
    e.shutdown().await;
}

#[tokio::test]
async fn wait_for_wakes_on_an_append_and_times_out_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _ctl) = open_controlled(dir.path(), Config::default());

    // Registered before the append exists (the stream does not either), so
    // only the writer's wake-up can end it: the timeout is an hour.
    let mut w = Box::pin(e.wait_for("w", 0, Duration::from_secs(3600)));
    assert!(poll_once(&mut w).is_none());
    let waiter = {
        let e = e.clone();
        tokio::spawn(async move { e.wait_for("w", 1, Duration::from_secs(3600)).await })
    };
    e.append("w", 1, recs(&["r0"]), None).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), w).await;
    assert_eq!(got.expect("wait_for woke on the append"), Ok(1));
    // The second waiter wants seq 1, which does not exist yet.
    assert!(!waiter.is_finished());
    e.append("w", 1, recs(&["r1"]), None).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter).await;
    assert_eq!(got.expect("wait_for woke on the append").unwrap(), Ok(2));

    // Already past: returns at once.
    assert_eq!(e.wait_for("w", 0, Duration::ZERO).await, Ok(2));

    // Nothing appended: waits the whole timeout, then reports the tail.
    let started = Instant::now();
    assert_eq!(e.wait_for("w", 2, Duration::from_millis(50)).await, Ok(2));
    assert!(started.elapsed() >= Duration::from_millis(50));
    // An append to another stream does not end the wait early.
    let started = Instant::now();
    let other = {
        let e = e.clone();
        tokio::spawn(async move { e.wait_for("w", 2, Duration::from_millis(300)).await })
    };
    e.append("unrelated", 1, recs(&["u"]), None).await.unwrap();
    assert_eq!(other.await.unwrap(), Ok(2));
    assert!(started.elapsed() >= Duration::from_millis(300));

    assert!(matches!(
        e.wait_for("bad/name", 0, Duration::ZERO).await,
        Err(ReadError::InvalidStreamName(_))
    ));
    e.shutdown().await;
}

/// Readers of one frame of the active segment share one copy of its bytes
/// while any of them holds it (a thousand live tails must not hold a
/// thousand copies), and a later read after all let go reads it again.
#[tokio::test]
async fn readers_of_an_active_frame_share_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    e.append("s", 1, vec![Bytes::from(vec![b'x'; 4096])], None)
        .await
        .unwrap();
    let a = e.read("s", 0, 1, 1 << 20).unwrap();
    let b = e.read("s", 0, 1, 1 << 20).unwrap();
    assert_eq!(a.records[0].body, b.records[0].body);
    assert_eq!(
        a.records[0].body.as_ptr(),
        b.records[0].body.as_ptr(),
        "two copies of one frame"
    );
    drop((a, b));
    let c = e.read("s", 0, 1, 1 << 20).unwrap();
    assert_eq!(c.records[0].body.len(), 4096);
}

/// A second shutdown (a cluster node stopping while a snapshot install
/// had already stopped the shard's old engine) and a reclamation pass
/// asked for after the first both return instead of waiting forever for
/// a reclaimer that has stopped.
#[tokio::test]
async fn shutdown_twice_and_reclaim_after_shutdown_return() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    e.append("s", 1, vec![Bytes::from_static(b"x")], None)
        .await
        .unwrap();
    let bounded = Duration::from_secs(30);
    tokio::time::timeout(bounded, e.shutdown()).await.unwrap();
    tokio::time::timeout(bounded, e.shutdown())
        .await
        .expect("a second shutdown returns");
    let r = tokio::time::timeout(bounded, e.reclaim())
        .await
        .expect("a pass asked for after shutdown is answered");
    assert_eq!(r.err(), Some(WriteError::ShuttingDown));
}
