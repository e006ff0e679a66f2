//! Idempotent producers at the engine. A retry of the last
//! applied (producer_id, producer_seq) answers the original ack and writes
//! nothing — after a restart, after a higher token, after the frames that
//! carried it were reclaimed; stale and skipping seqs are refused; the
//! bounded LRU's floor keeps an evicted producer's retry from applying
//! twice; and the lookup answers "did my write land?".

use crate::support::gate::{bodies, recs};
use fencelog_engine::{Ack, AppendOptions, Config, Engine, ProducerSeq, WriteError};

pub fn with_producer(id: &str, seq: u64) -> AppendOptions {
    AppendOptions {
        producer: Some(ProducerSeq { id: id.into(), seq }),
        ..Default::default()
    }
}

async fn put(
    e: &Engine,
    s: &str,
    token: u64,
    id: &str,
    seq: u64,
    body: &str,
) -> Result<Ack, WriteError> {
    e.append_with(s, token, recs(&[body]), with_producer(id, seq))
        .await
}

fn all(e: &Engine, s: &str) -> Vec<bytes::Bytes> {
    let st = e.state(s).unwrap();
    bodies(&e.read(s, st.first_seq, 10_000, 1 << 24).unwrap())
}

#[tokio::test]
async fn a_retry_answers_the_original_ack_even_after_a_higher_token_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let e = Engine::open(dir.path()).unwrap();
        let a = e
            .append_with("s", 3, recs(&["a", "b"]), with_producer("w-1", 0))
            .await
            .unwrap();
        assert_eq!((a.first_seq, a.last_seq, a.duplicate), (0, 1, false));
        // The retry (same producer_seq): the same ack, nothing written.
        let again = e
            .append_with("s", 3, recs(&["a", "b"]), with_producer("w-1", 0))
            .await
            .unwrap();
        assert_eq!(
            again,
            Ack {
                duplicate: true,
                ..a.clone()
            }
        );
        assert_eq!(e.state("s").unwrap().next_seq, 2);
        // A new owner fences; the old owner's retry still learns it landed.
        e.fence("s", 9).await.unwrap();
        let late = put(&e, "s", 3, "w-1", 0, "a").await.unwrap();
        assert_eq!(
            late,
            Ack {
                duplicate: true,
                ..a.clone()
            }
        );
        // Its next write, though, is stale as ever.
        assert_eq!(
            put(&e, "s", 3, "w-1", 1, "c").await,
            Err(WriteError::StaleToken {
                presented: 3,
                highest: 9,
                next_seq: 2
            })
        );
        assert_eq!(e.metrics().producer_duplicates.get(), 2);
        e.shutdown().await;
        a
    };
    let e = Engine::open(dir.path()).unwrap();
    let after = put(&e, "s", 3, "w-1", 0, "a").await.unwrap();
    assert_eq!(
        after,
        Ack {
            duplicate: true,
            ..first.clone()
        }
    );
    let p = e.producer("s", "w-1").unwrap().unwrap();
    assert_eq!(
        (
            p.producer_seq,
            p.first_seq,
            p.last_seq,
            p.token,
            p.timestamp_ms
        ),
        (0, 0, 1, 3, first.timestamp_ms)
    );
    assert_eq!(e.producer("s", "nobody").unwrap(), None);
    assert_eq!(all(&e, "s"), recs(&["a", "b"]));
}

#[tokio::test]
async fn stale_and_skipping_producer_seqs_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    // An unknown producer may start anywhere.
    put(&e, "s", 1, "p", 5, "x5").await.unwrap();
    put(&e, "s", 1, "p", 6, "x6").await.unwrap();
    assert_eq!(
        put(&e, "s", 1, "p", 4, "old").await,
        Err(WriteError::ProducerSeqStale { last: 6 })
    );
    assert_eq!(
        put(&e, "s", 1, "p", 8, "skip").await,
        Err(WriteError::ProducerSeqGap { expected: 7 })
    );
    // A new seq with a stale token is refused as today.
    e.fence("s", 2).await.unwrap();
    assert!(matches!(
        put(&e, "s", 1, "p", 7, "stale").await,
        Err(WriteError::StaleToken { .. })
    ));
    put(&e, "s", 2, "p", 7, "x7").await.unwrap();
    assert_eq!(all(&e, "s"), recs(&["x5", "x6", "x7"]));
    assert_eq!(e.metrics().producer_rejections.get(), 2);
    // Bad ids are bad input.
    assert!(matches!(
        put(&e, "s", 2, "bad id", 0, "x").await,
        Err(WriteError::BadInput(_))
    ));
    assert!(matches!(
        put(&e, "s", 2, &"a".repeat(65), 0, "x").await,
        Err(WriteError::BadInput(_))
    ));
    assert!(matches!(
        put(&e, "s", 0, "p", 8, "x").await,
        Err(WriteError::ZeroToken)
    ));
    e.shutdown().await;
}

/// Beyond `producers_per_stream_max` the least recently used producer is
/// evicted and the floor rises past its token: its retry can never apply
/// a second time — with the stream's current token it would not be stale,
/// so only the floor stops it (refused as fenced) — and a producer with a
/// new, higher token starts afresh. The same after a restart.
#[tokio::test]
async fn eviction_raises_the_floor_so_an_evicted_retry_never_applies_twice() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        producers_per_stream_max: 2,
        ..Config::default()
    };
    {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        put(&e, "s", 5, "a", 0, "a0").await.unwrap();
        put(&e, "s", 5, "b", 0, "b0").await.unwrap();
        put(&e, "s", 5, "c", 0, "c0").await.unwrap(); // evicts a (LRU)
        assert_eq!(e.metrics().producer_evictions.get(), 1);
        assert_eq!(e.producer("s", "a").unwrap(), None);
        assert_eq!(
            put(&e, "s", 5, "a", 0, "a0").await,
            Err(WriteError::ProducerFenced { floor: 6 })
        );
        e.shutdown().await;
    }
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    assert_eq!(
        put(&e, "s", 5, "a", 0, "a0").await,
        Err(WriteError::ProducerFenced { floor: 6 })
    );
    // b and c are remembered (a duplicate does not refresh b: it wrote
    // nothing); a under a new lease (token 6) is a new producer, and
    // evicts b, now the least recently used.
    assert!(put(&e, "s", 5, "b", 0, "b0").await.unwrap().duplicate);
    put(&e, "s", 6, "a", 1, "a1").await.unwrap();
    assert_eq!(all(&e, "s"), recs(&["a0", "b0", "c0", "a1"]));
    assert!(e.producer("s", "c").unwrap().is_some());
    assert_eq!(e.producer("s", "b").unwrap(), None);
    e.shutdown().await;
}

/// Producer state outlives the frames that carried it: trimmed away and
/// reclaimed (checkpoint, segment deletion), then restarted, a retry is
/// still a duplicate, with the original ack.
#[tokio::test]
async fn producer_state_survives_trim_checkpoint_deletion_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        segment_bytes_max: 4096,
        reclaim_interval_ms: 0,
        ..Config::default()
    };
    let original = {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        let a = put(&e, "s", 2, "w", 10, "landed").await.unwrap();
        let filler = "f".repeat(1000);
        for _ in 0..12 {
            e.append("s", 2, recs(&[&filler]), None).await.unwrap();
        }
        let next = e.state("s").unwrap().next_seq;
        e.trim("s", 2, next).await.unwrap();
        let r = e.reclaim().await.unwrap();
        assert!(r.checkpoint.is_some(), "{r:?}");
        assert!(
            !r.deleted.is_empty(),
            "the producer's segment is gone: {r:?}"
        );
        e.shutdown().await;
        a
    };
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    let again = put(&e, "s", 2, "w", 10, "landed").await.unwrap();
    assert_eq!(
        again,
        Ack {
            duplicate: true,
            ..original
        }
    );
    assert_eq!(
        put(&e, "s", 2, "w", 12, "gap").await,
        Err(WriteError::ProducerSeqGap { expected: 11 })
    );
    e.shutdown().await;
}

/// A delete forgets the producers with the records; the tombstone's token
/// still refuses the old owner's retry (stale), so nothing comes back.
#[tokio::test]
async fn a_deleted_stream_forgets_its_producers_but_stays_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    put(&e, "s", 2, "w", 0, "x").await.unwrap();
    e.delete("s", 3).await.unwrap();
    assert!(matches!(
        put(&e, "s", 2, "w", 0, "x").await,
        Err(WriteError::StaleToken { .. })
    ));
    let a = put(&e, "s", 4, "w", 0, "y").await.unwrap();
    assert!(!a.duplicate);
    assert_eq!(all(&e, "s"), recs(&["y"]));
    e.shutdown().await;
}

/// Compaction copies a segment's live frames forward and deletes it; the
/// producer's state and the fence history were in frames of that segment
/// and must come through (from the checkpoint), across a restart too.
#[tokio::test]
async fn producer_state_and_fence_history_survive_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        segment_bytes_max: 4096,
        reclaim_interval_ms: 0,
        ..Config::default()
    };
    let filler = "f".repeat(400);
    let (original, history) = {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        let a = put(&e, "s", 2, "w", 0, "landed").await.unwrap();
        e.fence("s", 3).await.unwrap();
        // Mostly dead bytes (a trimmed stream) around a few live ones.
        for i in 0..30 {
            let s = if i % 5 == 0 { "keep" } else { "s" };
            e.append(s, 3, recs(&[&filler]), None).await.unwrap();
        }
        let next = e.state("s").unwrap().next_seq;
        e.trim("s", 3, next).await.unwrap();
        let r = e.reclaim().await.unwrap();
        assert!(r.frames_copied > 0 && !r.deleted.is_empty(), "{r:?}");
        let h = e.fence_history("s").unwrap();
        e.shutdown().await;
        (a, h)
    };
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    assert_eq!(e.fence_history("s").unwrap(), history);
    assert_eq!(
        history.iter().map(|h| h.token).collect::<Vec<_>>(),
        vec![2, 3]
    );
    let again = put(&e, "s", 2, "w", 0, "landed").await.unwrap();
    assert_eq!(
        again,
        Ack {
            duplicate: true,
            ..original
        }
    );
    assert_eq!(all(&e, "keep").len(), 6);
    e.shutdown().await;
}

/// The token floor and the LRU's survivors outlive the frames that set
/// them: the eviction's segment trimmed away and reclaimed (from the
/// checkpoint alone), then a restart — the evicted
/// producer's retry is still fenced, a survivor's retry is still its
/// duplicate with the original ack, and the last seqs still decide stale
/// and gap.
#[tokio::test]
async fn the_token_floor_and_producers_survive_reclaiming_their_segment_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        producers_per_stream_max: 2,
        segment_bytes_max: 4096,
        reclaim_interval_ms: 0,
        ..Config::default()
    };
    let filler = "f".repeat(1000);
    let (b_ack, c_ack) = {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        put(&e, "s", 5, "a", 0, "a0").await.unwrap();
        let b = put(&e, "s", 5, "b", 3, "b3").await.unwrap();
        let c = put(&e, "s", 5, "c", 7, "c7").await.unwrap(); // evicts a
        for i in 0..12 {
            let s = if i % 4 == 0 { "keep" } else { "s" };
            e.append(s, 5, recs(&[&filler]), None).await.unwrap();
        }
        let next = e.state("s").unwrap().next_seq;
        e.trim("s", 5, next).await.unwrap();
        let r = e.reclaim().await.unwrap();
        assert!(r.checkpoint.is_some() && !r.deleted.is_empty(), "{r:?}");
        e.shutdown().await;
        (b, c)
    };
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    assert_eq!(
        e.state("s").unwrap().first_seq,
        e.state("s").unwrap().next_seq
    );
    assert_eq!(
        put(&e, "s", 5, "a", 0, "a0").await,
        Err(WriteError::ProducerFenced { floor: 6 })
    );
    let b_info = e.producer("s", "b").unwrap().expect("b is remembered");
    assert_eq!(
        (b_info.producer_seq, b_info.first_seq),
        (3, b_ack.first_seq)
    );
    let again = put(&e, "s", 5, "c", 7, "c7").await.unwrap();
    assert_eq!(
        again,
        Ack {
            duplicate: true,
            ..c_ack
        }
    );
    assert_eq!(
        put(&e, "s", 5, "b", 2, "b2").await,
        Err(WriteError::ProducerSeqStale { last: 3 })
    );
    assert_eq!(
        put(&e, "s", 5, "b", 5, "b5").await,
        Err(WriteError::ProducerSeqGap { expected: 4 })
    );
    // Nothing of the refusals or the duplicate was written.
    assert!(all(&e, "s").is_empty());
    assert_eq!(all(&e, "keep").len(), 3);
    e.shutdown().await;
}

/// One append's (token, match_seq, producer) and whether it writes.
type Case = (u64, Option<u64>, Option<(&'static str, u64)>, bool);

/// `Engine::append_would_write` (a cluster leader's question before its
/// disk budget) is the fencing rule's answer against the durable state:
/// each case agrees with what the append itself then does.
#[tokio::test]
async fn would_write_agrees_with_the_append_itself() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    assert!(e.append_would_write("fresh", 1, None, None), "a new stream");
    assert!(!e.append_would_write("fresh", 0, None, None), "token 0");
    put(&e, "s", 5, "p", 0, "a").await.unwrap();
    // In order: each written case moves next_seq (1 after the first put).
    let cases: [Case; 7] = [
        (4, None, None, false),
        (5, Some(0), None, false),
        (5, Some(1), None, true),
        (5, None, None, true),
        (5, None, Some(("p", 0)), false),
        (5, None, Some(("p", 1)), true),
        (5, None, Some(("p", 3)), false),
    ];
    for (token, match_seq, producer, writes) in cases {
        let case = format!("token {token}, match_seq {match_seq:?}, producer {producer:?}");
        assert_eq!(
            e.append_would_write("s", token, match_seq, producer),
            writes,
            "{case}"
        );
        // What the append does: only a written one moves next_seq.
        let before = e.state("s").unwrap().next_seq;
        let options = AppendOptions {
            match_seq_num: match_seq,
            producer: producer.map(|(id, seq)| ProducerSeq { id: id.into(), seq }),
            ..Default::default()
        };
        let _ = e.append_with("s", token, recs(&["x"]), options).await;
        assert_eq!(e.state("s").unwrap().next_seq > before, writes, "{case}");
    }
    e.shutdown().await;
}
