//! Multi-stream batches at the engine: a batch is all or nothing,
//! checked against the state its own earlier operations leave, and
//! durable as one unit.

use crate::support::gate::{bodies, recs};
use fencelog_engine::{BatchAck, BatchAction, BatchOp, Engine, WriteError, BATCH_OPS_MAX};

pub fn append_op(stream: &str, token: u64, items: &[&str], m: Option<u64>) -> BatchOp {
    BatchOp {
        stream: stream.into(),
        fencing_token: token,
        action: BatchAction::Append {
            records: recs(items),
            match_seq_num: m,
        },
    }
}

pub fn fence_op(stream: &str, token: u64) -> BatchOp {
    BatchOp {
        stream: stream.into(),
        fencing_token: token,
        action: BatchAction::Fence,
    }
}

fn all(e: &Engine, s: &str) -> Vec<bytes::Bytes> {
    match e.state(s) {
        Ok(st) => bodies(&e.read(s, st.first_seq, 10_000, 1 << 24).unwrap()),
        Err(_) => Vec::new(),
    }
}

#[tokio::test]
async fn a_batch_applies_every_op_in_order_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path()).unwrap();
        e.append("a", 1, recs(&["a0"]), None).await.unwrap();
        let acks = e
            .batch(
                vec![
                    fence_op("a", 5),
                    append_op("a", 5, &["a1", "a2"], Some(1)),
                    append_op("b", 5, &["b0"], None),
                    // Sees the op before it: next_seq 3.
                    append_op("a", 5, &["a3"], Some(3)),
                    fence_op("c", 5),
                ],
                None,
            )
            .await
            .unwrap();
        assert_eq!(acks.len(), 5);
        let seqs: Vec<(u64, u64)> = acks
            .iter()
            .filter_map(|a| match a {
                BatchAck::Append(a) => Some((a.first_seq, a.last_seq)),
                BatchAck::Fence(_) => None,
            })
            .collect();
        assert_eq!(seqs, vec![(1, 2), (0, 0), (3, 3)]);
        let BatchAck::Fence(c) = &acks[4] else {
            panic!("{acks:?}")
        };
        assert_eq!((c.highest_token, c.next_seq), (5, 0));
        assert_eq!(e.metrics().batches_accepted.get(), 1);
        e.shutdown().await;
    }
    let e = Engine::open(dir.path()).unwrap();
    assert_eq!(all(&e, "a"), recs(&["a0", "a1", "a2", "a3"]));
    assert_eq!(all(&e, "b"), recs(&["b0"]));
    assert_eq!(e.state("c").unwrap().highest_token, 5);
    assert_eq!(e.state("a").unwrap().highest_token, 5);
}

#[tokio::test]
async fn one_refused_op_refuses_the_whole_batch_with_every_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    e.fence("b", 9).await.unwrap();
    e.append("a", 1, recs(&["a0"]), None).await.unwrap();
    let before = (e.state("a").unwrap(), e.state("b").unwrap());
    let r = e
        .batch(
            vec![
                append_op("a", 2, &["a1"], None),
                fence_op("new", 2),
                append_op("b", 2, &["stale"], None),
                append_op("a", 2, &["a2"], Some(7)),
            ],
            None,
        )
        .await;
    let Err(WriteError::BatchRefused(outcomes)) = r else {
        panic!("{r:?}")
    };
    assert!(matches!(&outcomes[0], Ok(BatchAck::Append(a)) if a.first_seq == 1));
    assert!(matches!(&outcomes[1], Ok(BatchAck::Fence(_))));
    assert_eq!(
        outcomes[2],
        Err(WriteError::StaleToken {
            presented: 2,
            highest: 9,
            next_seq: 0
        })
    );
    // Checked against the batch's own first op: next_seq would be 2.
    assert_eq!(
        outcomes[3],
        Err(WriteError::SeqMismatch {
            expected: 7,
            next_seq: 2
        })
    );
    assert_eq!((e.state("a").unwrap(), e.state("b").unwrap()), before);
    assert!(e.state("new").is_err());
    assert_eq!(all(&e, "a"), recs(&["a0"]));
    assert_eq!(e.metrics().batches_refused.get(), 1);
    // Nothing of it is on disk either.
    e.shutdown().await;
    drop(e);
    let e = Engine::open(dir.path()).unwrap();
    assert_eq!(all(&e, "a"), recs(&["a0"]));
    assert!(e.state("new").is_err());
}

#[tokio::test]
async fn malformed_batches_are_refused_before_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    assert!(matches!(
        e.batch(vec![], None).await,
        Err(WriteError::BadInput(_))
    ));
    let many = (0..=BATCH_OPS_MAX)
        .map(|i| fence_op(&format!("s{i}"), 1))
        .collect();
    assert!(matches!(
        e.batch(many, None).await,
        Err(WriteError::BadInput(_))
    ));
    let r = e
        .batch(vec![fence_op("ok", 1), fence_op("bad name", 1)], None)
        .await;
    assert!(
        matches!(&r, Err(WriteError::BadInput(m)) if m.starts_with("ops[1]")),
        "{r:?}"
    );
    let r = e.batch(vec![fence_op("ok", 0)], None).await;
    assert!(
        matches!(&r, Err(WriteError::BadInput(m)) if m.starts_with("ops[0]")),
        "{r:?}"
    );
    let r = e.batch(vec![append_op("ok", 1, &[], None)], None).await;
    assert!(matches!(&r, Err(WriteError::BadInput(_))), "{r:?}");
    assert!(e.state("ok").is_err());
    e.shutdown().await;
}

/// The shard handoff: a new owner fences all of its streams in one batch;
/// the old owner's writes to any of them are refused from then on.
#[tokio::test]
async fn a_handoff_fences_every_stream_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    for s in ["p0", "p1", "p2"] {
        e.append(s, 3, recs(&["old"]), None).await.unwrap();
    }
    e.batch(
        vec![fence_op("p0", 4), fence_op("p1", 4), fence_op("p2", 4)],
        None,
    )
    .await
    .unwrap();
    for s in ["p0", "p1", "p2"] {
        assert!(matches!(
            e.append(s, 3, recs(&["late"]), None).await,
            Err(WriteError::StaleToken { highest: 4, .. })
        ));
        let h = e.fence_history(s).unwrap();
        assert_eq!(h.last().map(|ev| ev.token), Some(4));
    }
    e.shutdown().await;
}
