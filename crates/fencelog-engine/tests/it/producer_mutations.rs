//! Tests of the exactly-once tests: each deliberate bug behind the
//! `mutations` feature that breaks a guarantee of the idempotent
//! producers, deadlines, batches or cursors must make the suite guarding
//! that guarantee fail.

use crate::exactly_once::crash_suite;
use crate::exactly_once_check::{check_recovered, run, STEPS};
use crate::support::mutation::with_mutation;
use crate::support::{config, open, runtime};
use fencelog_engine::sim::SimStorage;
use fencelog_engine::{AppendOptions, Config, Engine, Mutation, ProducerSeq, WriteError};

/// The script and the checker on one engine, no crash.
fn script_once() -> Result<(), String> {
    let rt = runtime();
    let sim = SimStorage::new();
    let e = open(&sim, &config(4096)).map_err(|e| e.to_string())?;
    let seen = rt.block_on(run(&e, STEPS));
    rt.block_on(check_recovered(&e, &seen))
}

fn assert_caught<T: std::fmt::Debug>(m: Mutation, r: Result<T, String>) {
    match r {
        Ok(v) => panic!("mutation {m:?} was not caught ({v:?})"),
        Err(e) => println!("{m:?} caught: {e}"),
    }
}

#[test]
fn a_duplicate_written_again_is_caught() {
    let m = Mutation::DuplicateWritten;
    assert_caught(m, with_mutation(m, script_once));
    assert_caught(m, with_mutation(m, crash_suite));
}

#[test]
fn a_deadline_not_checked_is_caught() {
    let m = Mutation::DeadlineIgnored;
    assert_caught(m, with_mutation(m, script_once));
}

#[test]
fn a_partially_applied_batch_is_caught() {
    let m = Mutation::BatchPartial;
    assert_caught(m, with_mutation(m, script_once));
}

/// The eviction suite: producers beyond the bound, then the evicted one's
/// retry, which must never apply a second time.
fn eviction_suite() -> Result<(), String> {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        producers_per_stream_max: 1,
        ..Config::default()
    };
    rt.block_on(async {
        let e = Engine::open_with(dir.path(), cfg).map_err(|e| e.to_string())?;
        let put = |id: &str| {
            let opts = AppendOptions {
                producer: Some(ProducerSeq {
                    id: id.into(),
                    seq: 0,
                }),
                ..Default::default()
            };
            e.append_with("s", 2, vec![bytes::Bytes::from(id.to_string())], opts)
        };
        put("a").await.map_err(|e| e.to_string())?;
        put("b").await.map_err(|e| e.to_string())?; // evicts a
        match put("a").await {
            Err(WriteError::ProducerFenced { .. }) => Ok(()),
            other => Err(format!("the evicted producer's retry answered {other:?}")),
        }
    })
}

#[test]
fn eviction_without_the_floor_is_caught() {
    with_mutation(Mutation::None, eviction_suite).unwrap();
    let m = Mutation::EvictWithoutFloor;
    assert_caught(m, with_mutation(m, eviction_suite));
}

/// The cursor rule: the same token never moves a cursor back.
fn cursor_suite() -> Result<(), String> {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let e = Engine::open(dir.path()).map_err(|e| e.to_string())?;
        e.append("s", 1, vec![bytes::Bytes::from("x"); 3], None)
            .await
            .map_err(|e| e.to_string())?;
        e.commit_cursor("s", "c", 2, 3)
            .await
            .map_err(|e| e.to_string())?;
        match e.commit_cursor("s", "c", 2, 1).await {
            Err(WriteError::StaleToken { .. }) => Ok(()),
            other => Err(format!("a backwards commit answered {other:?}")),
        }
    })
}

#[test]
fn a_cursor_moving_back_is_caught() {
    with_mutation(Mutation::None, cursor_suite).unwrap();
    let m = Mutation::CursorBackwards;
    assert_caught(m, with_mutation(m, cursor_suite));
}

/// A producer's retry after another owner fenced the stream: answered
/// from the producer table with the original ack, before the token, so
/// the fenced-out producer learns its write landed (the rejection fast
/// path must not refuse it from the higher token).
fn retry_after_fence_suite() -> Result<(), String> {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let e = Engine::open(dir.path()).map_err(|e| e.to_string())?;
        let put = || {
            let opts = AppendOptions {
                producer: Some(ProducerSeq {
                    id: "p".into(),
                    seq: 0,
                }),
                ..Default::default()
            };
            e.append_with("s", 3, vec![bytes::Bytes::from("a")], opts)
        };
        let first = put().await.map_err(|e| e.to_string())?;
        e.fence("s", 4).await.map_err(|e| e.to_string())?;
        match put().await {
            Ok(ack) if ack.duplicate && ack.first_seq == first.first_seq => Ok(()),
            other => Err(format!(
                "the producer's retry after a fence answered {other:?}"
            )),
        }
    })
}

#[test]
fn a_producer_refused_early_is_caught() {
    with_mutation(Mutation::None, retry_after_fence_suite).unwrap();
    let m = Mutation::ProducerRefusedEarly;
    assert_caught(m, with_mutation(m, retry_after_fence_suite));
}
