//! The replicated entry point of a cluster's shard engines: `apply_batch`
//! runs the fencing rule in order against pending state at the leader's
//! timestamp, and the entry's Applied marker is durable with its effects.

use bytes::Bytes;
use fencelog_engine::{
    Ack, AppendOptions, Applied, AppliedState, Engine, Header, HeaderError, ProducerSeq,
    WriteError, WriteOp,
};

fn at(index: u64, membership: &[u8]) -> AppliedState {
    AppliedState {
        term: 3,
        node_id: 2,
        index,
        membership: membership.to_vec(),
    }
}

pub(crate) fn append(stream: &str, token: u64, body: &str) -> WriteOp {
    WriteOp::Append {
        stream: stream.into(),
        token,
        records: vec![Bytes::from(body.to_string())],
        headers: vec![],
        options: AppendOptions::default(),
    }
}

pub(crate) fn fence(stream: &str, token: u64) -> WriteOp {
    WriteOp::Fence {
        stream: stream.into(),
        token,
        not_after_ms: None,
    }
}

/// A stale append after an accepted fence in the same entry is refused; a
/// later entry's older leader clock does not move timestamps back; the
/// answers are the planned ones.
#[tokio::test]
async fn apply_batch_fences_in_order_at_the_leaders_clamped_timestamp() {
    fences_in_order_at_the_leaders_clamped_timestamp().await;
}

/// The body of the test above (also run under a mutation).
pub(crate) async fn fences_in_order_at_the_leaders_clamped_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    let ops = vec![append("s", 5, "a"), fence("s", 7), append("s", 6, "late")];
    let r = e.apply_batch(at(1, b""), 1_000, ops).await.unwrap();
    assert!(
        matches!(&r[0], Ok(Applied::Appended(a)) if a.first_seq == 0 && a.timestamp_ms == 1_000)
    );
    assert!(matches!(&r[1], Ok(Applied::State(s)) if s.highest_token == 7 && s.next_seq == 1));
    assert_eq!(
        r[2],
        Err(WriteError::StaleToken {
            presented: 6,
            highest: 7,
            next_seq: 1
        })
    );
    let r = e
        .apply_batch(at(2, b""), 400, vec![append("s", 7, "b")])
        .await
        .unwrap();
    assert!(
        matches!(&r[0], Ok(Applied::Appended(a)) if a.first_seq == 1 && a.timestamp_ms == 1_000)
    );
    let read = e.read("s", 0, 10, 1 << 20).unwrap();
    let got: Vec<(u64, u64, u64)> = read
        .records
        .iter()
        .map(|r| (r.seq, r.fencing_token, r.timestamp_ms))
        .collect();
    assert_eq!(got, vec![(0, 5, 1_000), (1, 7, 1_000)]);
    assert_eq!(e.applied().map(|a| a.index), Some(2));
}

/// The applied position and the last membership survive a restart with
/// the effects of exactly the entries they name; an entry without ops (a
/// blank one) moves the position too; format caps are refused the same way
/// on every replica.
#[tokio::test]
async fn applied_marker_is_durable_with_its_entry() {
    marker_is_durable_with_its_entry().await;
}

/// The body of the test above (also run under a mutation).
pub(crate) async fn marker_is_durable_with_its_entry() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path()).unwrap();
        e.apply_batch(at(1, b"members-v1"), 10, vec![])
            .await
            .unwrap();
        e.apply_batch(at(2, b""), 11, vec![append("s", 1, "x")])
            .await
            .unwrap();
        let bad = WriteOp::Append {
            stream: "bad name".into(),
            token: 1,
            records: vec![Bytes::from("y")],
            headers: vec![],
            options: AppendOptions::default(),
        };
        let empty = WriteOp::Append {
            stream: "s".into(),
            token: 1,
            records: vec![],
            headers: vec![],
            options: AppendOptions::default(),
        };
        let r = e
            .apply_batch(at(3, b""), 12, vec![bad, empty])
            .await
            .unwrap();
        assert!(matches!(r[0], Err(WriteError::InvalidStreamName(_))));
        assert_eq!(r[1], Err(WriteError::EmptyBatch));
        e.shutdown().await;
    }
    let e = Engine::open(dir.path()).unwrap();
    assert_eq!(e.applied(), Some(at(3, b"members-v1")));
    let read = e.read("s", 0, 10, 1 << 20).unwrap();
    assert_eq!(read.records.len(), 1);
    assert_eq!(read.next_seq, 1);
}

/// An entry's headers are applied with its records and read back exactly
/// after a restart; headers over the format's limits are refused in apply
/// (the same on every replica) and change nothing.
#[tokio::test]
async fn applied_headers_are_stored_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let traced = vec![Header::new("trace-id", "abc"), Header::new("trace-id", "")];
    let op = |headers: Vec<Vec<Header>>| WriteOp::Append {
        stream: "s".into(),
        token: 1,
        records: vec![Bytes::from("a"), Bytes::from("b")],
        headers,
        options: AppendOptions::default(),
    };
    {
        let e = Engine::open(dir.path()).unwrap();
        let many: Vec<Header> = (0..65).map(|_| Header::new("n", "v")).collect();
        let ops = vec![op(vec![traced.clone(), vec![]]), op(vec![vec![], many])];
        let r = e.apply_batch(at(1, b""), 5, ops).await.unwrap();
        assert!(matches!(&r[0], Ok(Applied::Appended(a)) if a.first_seq == 0));
        assert_eq!(
            r[1],
            Err(WriteError::BadHeaders {
                record: 1,
                error: HeaderError::TooMany { count: 65 }
            })
        );
        e.shutdown().await;
    }
    let e = Engine::open(dir.path()).unwrap();
    let read = e.read("s", 0, 10, 1 << 20).unwrap();
    let got: Vec<(Bytes, Vec<Header>)> = read
        .records
        .into_iter()
        .map(|r| (r.body, r.headers))
        .collect();
    assert_eq!(
        got,
        vec![(Bytes::from("a"), traced), (Bytes::from("b"), vec![])]
    );
}

fn producer_append(token: u64, seq: u64, body: &str, not_after_ms: Option<u64>) -> WriteOp {
    WriteOp::Append {
        stream: "p".into(),
        token,
        records: vec![Bytes::from(body.to_string())],
        headers: vec![],
        options: AppendOptions {
            match_seq_num: None,
            producer: Some(ProducerSeq {
                id: "w-1".into(),
                seq,
            }),
            not_after_ms,
        },
    }
}

/// Idempotent producers and deadlines through apply: a producer's retry of
/// its last applied append, even after a fence raised the token past it,
/// is answered with the original ack and writes nothing; a deadline is
/// compared with the entry's timestamp (the leader's, clamped), never the
/// replica's clock; a fence's deadline too. A restart keeps the producer
/// table, so a retry after it is still a duplicate.
#[tokio::test]
async fn applied_producers_and_deadlines_are_decided_by_the_entry() {
    producers_and_deadlines_are_decided_by_the_entry().await;
}

/// The body of the test above (also run under mutations).
pub(crate) async fn producers_and_deadlines_are_decided_by_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let original = {
        let e = Engine::open(dir.path()).unwrap();
        // Deadline 1_500 at the entry's 1_000: accepted, whatever the clock.
        let r = e
            .apply_batch(
                at(1, b""),
                1_000,
                vec![producer_append(3, 0, "a", Some(1_500))],
            )
            .await
            .unwrap();
        let Ok(Applied::Appended(original)) = &r[0] else {
            panic!("{r:?}")
        };
        assert_eq!((original.first_seq, original.duplicate), (0, false));
        let ops = vec![
            fence("p", 4),
            producer_append(3, 0, "a", None),
            producer_append(3, 2, "gap", None),
            WriteOp::Fence {
                stream: "p".into(),
                token: 5,
                not_after_ms: Some(1_999),
            },
        ];
        let r = e.apply_batch(at(2, b""), 2_000, ops).await.unwrap();
        let dup = Ack {
            duplicate: true,
            ..original.clone()
        };
        assert_eq!(r[1], Ok(Applied::Appended(dup)));
        assert_eq!(
            r[2],
            Err(WriteError::StaleToken {
                presented: 3,
                highest: 4,
                next_seq: 1
            })
        );
        assert_eq!(r[3], Err(WriteError::DeadlineExceeded { writer_ms: 2_000 }));
        e.shutdown().await;
        original.clone()
    };
    let e = Engine::open(dir.path()).unwrap();
    let r = e
        .apply_batch(at(3, b""), 2_100, vec![producer_append(1, 0, "a", None)])
        .await
        .unwrap();
    assert_eq!(
        r[0],
        Ok(Applied::Appended(Ack {
            duplicate: true,
            ..original
        }))
    );
    let r = e
        .apply_batch(
            at(4, b""),
            2_200,
            vec![producer_append(4, 1, "late", Some(2_100))],
        )
        .await
        .unwrap();
    assert_eq!(r[0], Err(WriteError::DeadlineExceeded { writer_ms: 2_200 }));
    let read = e.read("p", 0, 10, 1 << 20).unwrap();
    assert_eq!(read.records.len(), 1, "one record: nothing written twice");
    assert_eq!(e.state("p").unwrap().highest_token, 4);
}

/// Trim, seal and delete through apply: each is decided by the
/// fencing rule in log order against pending state (a stale trim after a
/// seal in the same entry is refused as sealed, a stale delete as stale),
/// and the states survive a restart with the entry's Applied marker.
#[tokio::test]
async fn applied_trim_seal_and_delete_are_fenced_and_durable() {
    let dir = tempfile::tempdir().unwrap();
    let trim = |stream: &str, token, trim_seq| WriteOp::Trim {
        stream: stream.into(),
        token,
        trim_seq,
        not_after_ms: None,
    };
    {
        let e = Engine::open(dir.path()).unwrap();
        let ops = vec![
            append("t", 2, "a"),
            append("t", 2, "b"),
            append("d", 2, "x"),
        ];
        e.apply_batch(at(1, b""), 10, ops).await.unwrap();
        let ops = vec![
            trim("t", 2, 1),
            WriteOp::Seal {
                stream: "t".into(),
                token: 3,
                not_after_ms: None,
            },
            trim("t", 3, 2),
            WriteOp::Delete {
                stream: "d".into(),
                token: 1,
            },
            WriteOp::Delete {
                stream: "d".into(),
                token: 3,
            },
        ];
        let r = e.apply_batch(at(2, b""), 20, ops).await.unwrap();
        assert!(
            matches!(&r[0], Ok(Applied::State(s)) if s.first_seq == 1),
            "{r:?}"
        );
        assert!(matches!(&r[1], Ok(Applied::State(s)) if s.sealed), "{r:?}");
        assert!(matches!(&r[2], Err(WriteError::StreamSealed(_))), "{r:?}");
        assert_eq!(
            r[3],
            Err(WriteError::StaleToken {
                presented: 1,
                highest: 2,
                next_seq: 1
            })
        );
        assert!(matches!(&r[4], Ok(Applied::State(s)) if s.deleted), "{r:?}");
        e.shutdown().await;
    }
    let e = Engine::open(dir.path()).unwrap();
    assert_eq!(e.applied().map(|a| a.index), Some(2));
    let t = e.state("t").unwrap();
    assert_eq!(
        (t.first_seq, t.next_seq, t.sealed, t.highest_token),
        (1, 2, true, 3)
    );
    assert!(e.state("d").unwrap().deleted);
}

/// Config, cursor and batch ops through apply: decided by the
/// fencing rule in order, at the entry's timestamp, all or nothing for a
/// batch, and the same after a restart.
#[tokio::test]
async fn applied_config_cursor_and_batch_ops_are_fenced_and_durable() {
    use fencelog_engine::{BatchAck, BatchAction, BatchOp, Retention, StreamConfig};
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    let config = |token, age| WriteOp::Config {
        stream: "s".into(),
        token,
        config: StreamConfig {
            retention_age_s: Retention::Limit(age),
            ..StreamConfig::default()
        },
    };
    let cursor = |token, seq| WriteOp::Cursor {
        stream: "s".into(),
        name: "c".into(),
        token,
        seq,
    };
    let op = |stream: &str, token, records: Option<&str>| BatchOp {
        stream: stream.into(),
        fencing_token: token,
        action: match records {
            Some(b) => BatchAction::Append {
                records: vec![Bytes::from(b.to_string())],
                match_seq_num: None,
            },
            None => BatchAction::Fence,
        },
    };
    let batch = |ops| WriteOp::Batch {
        ops,
        not_after_ms: None,
    };
    let ops = vec![
        append("s", 5, "a"),
        config(Some(5), 60),
        config(Some(4), 1),
        config(None, 0),
        cursor(2, 1),
        cursor(1, 1),
        cursor(2, 7),
        batch(vec![op("s", 5, Some("b")), op("t", 3, None)]),
        batch(vec![op("t", 3, Some("x")), op("s", 4, Some("stale"))]),
        batch(vec![]),
    ];
    let r = e.apply_batch(at(1, b""), 2_000, ops).await.unwrap();
    assert!(matches!(&r[0], Ok(Applied::Appended(_))));
    assert!(matches!(&r[1], Ok(Applied::State(s)) if s.retention_age_s == Some(60)));
    assert!(matches!(
        &r[2],
        Err(WriteError::StaleToken {
            presented: 4,
            highest: 5,
            ..
        })
    ));
    assert!(matches!(&r[3], Err(WriteError::BadConfig(m)) if m.contains("retention_age_s")));
    assert!(
        matches!(&r[4], Ok(Applied::Cursor(c)) if c.seq == 1 && c.token == 2 && c.timestamp_ms == 2_000)
    );
    assert!(matches!(
        &r[5],
        Err(WriteError::StaleToken { presented: 1, .. })
    ));
    assert!(matches!(
        &r[6],
        Err(WriteError::CursorOutOfRange {
            seq: 7,
            next_seq: 1
        })
    ));
    match &r[7] {
        Ok(Applied::Batch(acks)) => assert!(matches!(
            &acks[..],
            [BatchAck::Append(a), BatchAck::Fence(t)] if a.first_seq == 1 && t.highest_token == 3
        )),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&r[8], Err(WriteError::BatchRefused(o)) if o[0].is_ok() && o[1].is_err()),
        "{:?}",
        r[8]
    );
    assert!(matches!(&r[9], Err(WriteError::BadInput(_))));
    let seen = |e: &Engine| {
        (
            e.state("s").unwrap(),
            e.state("t").unwrap().next_seq,
            e.cursors("s").unwrap(),
            e.read("s", 0, 10, 1 << 20).unwrap().records.len(),
        )
    };
    let before = seen(&e);
    assert_eq!(
        (before.1, before.3),
        (0, 2),
        "the refused batch wrote nothing"
    );
    e.shutdown().await;
    drop(e);
    let e = Engine::open(dir.path()).unwrap();
    assert_eq!(seen(&e), before);
    assert_eq!(e.applied().map(|a| a.index), Some(1));
}

/// A stale trim, seal or delete is refused in apply, and nothing changes.
#[tokio::test]
async fn applied_stale_lifecycle_ops_are_refused() {
    stale_lifecycle_ops_are_refused().await;
}

/// The body of the test above (also run under a mutation).
pub(crate) async fn stale_lifecycle_ops_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    let ops = vec![
        append("s", 5, "a"),
        append("s", 5, "b"),
        WriteOp::Trim {
            stream: "s".into(),
            token: 4,
            trim_seq: 1,
            not_after_ms: None,
        },
        WriteOp::Seal {
            stream: "s".into(),
            token: 3,
            not_after_ms: None,
        },
        WriteOp::Delete {
            stream: "s".into(),
            token: 2,
        },
    ];
    let r = e.apply_batch(at(1, b""), 1_000, ops).await.unwrap();
    for (i, presented) in [(2, 4), (3, 3), (4, 2)] {
        assert_eq!(
            r[i],
            Err(WriteError::StaleToken {
                presented,
                highest: 5,
                next_seq: 2
            }),
            "op {i}"
        );
    }
    let s = e.state("s").unwrap();
    assert_eq!((s.first_seq, s.sealed, s.deleted), (0, false, false));
}

/// Retention in a shard engine: its reclaimer trims nothing by
/// itself; `retention_due` says where the leader's clock wants each front
/// (the stream's own setting or the given defaults); a `Retain` op moves
/// the front forward only, never past `next_seq`, under the stream's own
/// token, and the result survives a restart.
#[tokio::test]
async fn applied_retention_moves_the_front_only_as_the_entry_says() {
    use fencelog_engine::{Config, Retention, StreamConfig};
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        reclaim_interval_ms: 0,
        retention_in_reclaim: false,
        ..Config::default()
    };
    let retain = |stream: &str, first_seq| WriteOp::Retain {
        stream: stream.into(),
        first_seq,
    };
    {
        let e = Engine::open_with(dir.path(), config.clone()).unwrap();
        let age = WriteOp::Config {
            stream: "s".into(),
            token: None,
            config: StreamConfig {
                retention_age_s: Retention::Limit(10),
                ..StreamConfig::default()
            },
        };
        let ops = vec![append("s", 5, "a"), append("s", 5, "b"), age];
        e.apply_batch(at(1, b""), 1_000, ops).await.unwrap();
        let ops = vec![append("s", 5, "c"), append("u", 2, "x")];
        e.apply_batch(at(2, b""), 30_000, ops).await.unwrap();
        // At 15 s the first two records are older than 10 s (the third is
        // from 30 s). A default size of 0 reaches `s`'s unset size limit
        // and `u`, which sets nothing: everything goes.
        assert_eq!(e.retention_due(5_000, None, None), vec![]);
        assert_eq!(e.retention_due(15_000, None, None), vec![("s".into(), 2)]);
        let mut due = e.retention_due(15_000, None, Some(0));
        due.sort();
        assert_eq!(due, vec![("s".into(), 3), ("u".into(), 1)]);
        let report = e.reclaim().await.unwrap();
        assert_eq!(report.retention_trims, 0, "the reclaimer trimmed by itself");
        assert_eq!(e.state("s").unwrap().first_seq, 0);
        let ops = vec![
            retain("s", 2),
            retain("s", 1),
            retain("s", 99),
            retain("gone", 4),
        ];
        let r = e.apply_batch(at(3, b""), 40_000, ops).await.unwrap();
        let fronts: Vec<(u64, u64, u64)> = r
            .iter()
            .map(|r| match r {
                Ok(Applied::State(s)) => (s.first_seq, s.next_seq, s.highest_token),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(fronts, vec![(2, 3, 5), (2, 3, 5), (3, 3, 5), (0, 0, 0)]);
        e.shutdown().await;
    }
    let e = Engine::open_with(dir.path(), config).unwrap();
    assert_eq!(e.applied().map(|a| a.index), Some(3));
    let s = e.state("s").unwrap();
    assert_eq!((s.first_seq, s.next_seq, s.highest_token), (3, 3, 5));
    assert!(
        e.state("gone").is_err(),
        "a retention trim created a stream"
    );
    let r = e
        .apply_batch(at(4, b""), 50_000, vec![append("s", 4, "late")])
        .await
        .unwrap();
    assert!(
        matches!(&r[0], Err(WriteError::StaleToken { highest: 5, .. })),
        "{r:?}"
    );
}
