//! Deadlines at the engine: a write carrying `not_after_ms` is accepted
//! only if the writer's timestamp for it is at most that; otherwise it is
//! refused with the writer's time and nothing changes — for appends,
//! fences, trims and seals, and inside multi-stream batches.

use crate::support::gate::recs;
use fencelog_engine::{AppendOptions, BatchAction, BatchOp, Engine, WriteError};
use std::time::{SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn until(ms: u64) -> AppendOptions {
    AppendOptions {
        not_after_ms: Some(ms),
        ..Default::default()
    }
}

fn exceeded_after(r: &WriteError, before_ms: u64) -> bool {
    matches!(r, WriteError::DeadlineExceeded { writer_ms } if *writer_ms >= before_ms)
}

#[tokio::test]
async fn a_past_deadline_refuses_every_write_kind_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    e.append("s", 2, recs(&["a", "b"]), None).await.unwrap();
    let before = e.state("s").unwrap();
    let t0 = now_ms();
    let past = t0 - 1;
    let err = e
        .append_with("s", 2, recs(&["late"]), until(past))
        .await
        .unwrap_err();
    assert!(exceeded_after(&err, t0), "{err:?}");
    let err = e.fence_with("s", 3, Some(past)).await.unwrap_err();
    assert!(exceeded_after(&err, t0), "{err:?}");
    let err = e.trim_with("s", 3, 1, Some(past)).await.unwrap_err();
    assert!(exceeded_after(&err, t0), "{err:?}");
    let err = e.seal_with("s", 3, Some(past)).await.unwrap_err();
    assert!(exceeded_after(&err, t0), "{err:?}");
    // A fence that would create a stream: no stream appears.
    let err = e.fence_with("new", 1, Some(past)).await.unwrap_err();
    assert!(exceeded_after(&err, t0), "{err:?}");
    assert!(e.state("new").is_err());
    assert_eq!(e.state("s").unwrap(), before);
    assert_eq!(e.fence_history("s").unwrap().len(), 1);
    assert_eq!(e.metrics().deadline_rejections.get(), 5);
    // The token is checked before the deadline: a stale write learns that.
    assert!(matches!(
        e.append_with("s", 1, recs(&["x"]), until(past)).await,
        Err(WriteError::StaleToken { .. })
    ));
    e.shutdown().await;
}

#[tokio::test]
async fn a_future_deadline_is_met_and_the_timestamp_proves_it() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path()).unwrap();
        let deadline = now_ms() + 60_000;
        let a = e
            .append_with("s", 2, recs(&["a"]), until(deadline))
            .await
            .unwrap();
        assert!(a.timestamp_ms <= deadline);
        let f = e.fence_with("s", 3, Some(deadline)).await.unwrap();
        assert_eq!(f.highest_token, 3);
        e.trim_with("s", 3, 1, Some(deadline)).await.unwrap();
        e.seal_with("s", 4, Some(deadline)).await.unwrap();
        let h = e.fence_history("s").unwrap();
        assert!(h.iter().all(|ev| ev.timestamp_ms <= deadline), "{h:?}");
        e.shutdown().await;
    }
    let e = Engine::open(dir.path()).unwrap();
    assert!(e.state("s").unwrap().sealed);
}

#[tokio::test]
async fn a_batch_past_its_deadline_applies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    let ops = vec![
        BatchOp {
            stream: "a".into(),
            fencing_token: 1,
            action: BatchAction::Fence,
        },
        BatchOp {
            stream: "b".into(),
            fencing_token: 1,
            action: BatchAction::Append {
                records: recs(&["x"]),
                match_seq_num: None,
            },
        },
    ];
    let t0 = now_ms();
    match e.batch(ops, Some(t0 - 1)).await {
        Err(WriteError::BatchRefused(outcomes)) => {
            assert_eq!(outcomes.len(), 2);
            for o in outcomes {
                assert!(exceeded_after(&o.unwrap_err(), t0));
            }
        }
        other => panic!("{other:?}"),
    }
    assert!(e.state("a").is_err() && e.state("b").is_err());
    e.shutdown().await;
}
