//! Reading by time: `seq_at_timestamp` (the binary search over the index)
//! and `read_until`, checked against a brute-force answer over every
//! record, across sealed and active segments and after a restart; and
//! `wait_for_stream`.

use bytes::Bytes;
use fencelog_engine::{Config, Engine, ReadError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Returns once the wall clock has passed `ms`, so the next append gets a
/// later timestamp. The clock is the signal: there is nothing else to wait
/// for, and the wait is at most a millisecond.
async fn clock_past(ms: u64) {
    while now_ms() <= ms {
        tokio::task::yield_now().await;
    }
}

/// Appends batches of 1..=5 records, the clock moving between most of
/// them (every fourth batch shares its predecessor's millisecond, so equal
/// timestamps across frames are covered); returns each record's timestamp.
async fn fill(e: &Engine, batches: u64) -> Vec<u64> {
    let mut stamps = Vec::new();
    for b in 0..batches {
        if b % 4 != 3 {
            clock_past(stamps.last().copied().unwrap_or(0)).await;
        }
        let n = b % 5 + 1;
        let recs: Vec<Bytes> = (0..n).map(|k| Bytes::from(format!("{b}-{k}"))).collect();
        let ack = e.append("t", 1, recs, None).await.unwrap();
        stamps.extend(std::iter::repeat_n(ack.timestamp_ms, n as usize));
    }
    stamps
}

fn brute_first_at(stamps: &[u64], t: u64) -> u64 {
    stamps.iter().position(|&s| s >= t).unwrap_or(stamps.len()) as u64
}

fn check_every_point(e: &Engine, stamps: &[u64]) {
    let (first, last) = (stamps[0], *stamps.last().unwrap());
    for t in (first - 2..=last + 2).chain([0, u64::MAX]) {
        let want = brute_first_at(stamps, t);
        assert_eq!(e.seq_at_timestamp("t", t), Ok(want), "timestamp {t}");
        // read_until from 0 stops right before the same seq.
        let page = e.read_until("t", 0, 10_000, usize::MAX, t).unwrap();
        assert_eq!(page.records.len() as u64, want, "until {t}");
        assert!(page.records.iter().all(|r| r.timestamp_ms < t));
        // And from the middle of a frame.
        if want > 1 {
            let page = e.read_until("t", 1, 10_000, usize::MAX, t).unwrap();
            assert_eq!(page.records.first().map(|r| r.seq), Some(1));
            assert_eq!(page.records.len() as u64, want - 1);
        }
    }
}

#[tokio::test]
async fn seq_at_timestamp_and_read_until_agree_with_every_record() {
    let dir = tempfile::tempdir().unwrap();
    // Small segments, so the search crosses sealed (mapped) segments and
    // the active one.
    let config = Config {
        segment_bytes_max: 4096,
        ..Config::default()
    };
    let e = Engine::open_with(dir.path(), config.clone()).unwrap();
    let stamps = fill(&e, 120).await;
    assert!(e.recovery_report().segments <= 1);
    check_every_point(&e, &stamps);
    e.shutdown().await;
    drop(e);

    let e = Engine::open_with(dir.path(), config).unwrap();
    assert!(
        e.recovery_report().segments >= 3,
        "{:?}",
        e.recovery_report()
    );
    check_every_point(&e, &stamps);
    e.shutdown().await;
}

#[tokio::test]
async fn seeking_an_empty_or_missing_stream() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    assert_eq!(e.seq_at_timestamp("nope", 0), Err(ReadError::NotFound));
    assert!(matches!(
        e.seq_at_timestamp("a/b", 0),
        Err(ReadError::InvalidStreamName(_))
    ));
    e.fence("empty", 3).await.unwrap();
    assert_eq!(e.seq_at_timestamp("empty", 0), Ok(0));
    assert_eq!(
        e.read_until("empty", 0, 10, 10, 0).unwrap().records,
        Vec::new()
    );
    e.shutdown().await;
}

#[tokio::test]
async fn wait_for_stream_wakes_on_the_fence_that_creates_it() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    // Times out while nothing creates it, however much else is written.
    e.append("other", 1, vec![Bytes::from("x")], None)
        .await
        .unwrap();
    assert_eq!(
        e.wait_for_stream("w", Duration::from_millis(20)).await,
        Ok(false)
    );
    // An hour-long wait ends on the fence alone (no record).
    let waiter = {
        let e = e.clone();
        tokio::spawn(async move { e.wait_for_stream("w", Duration::from_secs(3600)).await })
    };
    // The waiter is registered before the fence: wait until it is parked.
    tokio::task::yield_now().await;
    e.fence("w", 5).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter).await;
    assert_eq!(got.expect("woken by the fence").unwrap(), Ok(true));
    // Existing already: at once.
    assert_eq!(e.wait_for_stream("w", Duration::ZERO).await, Ok(true));
    e.shutdown().await;
}

/// A search never lands below the trim point (those records are not
/// readable, whatever their time), a tombstone is not found, and a wait
/// for a deleted stream ends only when a higher token creates it afresh.
#[tokio::test]
async fn seeking_respects_the_trim_point_and_the_tombstone() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    let stamps = fill(&e, 12).await;
    let cut = 10;
    assert_eq!(e.trim("t", 1, cut).await.unwrap().first_seq, cut);
    let last = *stamps.last().unwrap();
    for t in (stamps[0]..=last + 1).chain([0, u64::MAX]) {
        let want = brute_first_at(&stamps, t).max(cut);
        assert_eq!(e.seq_at_timestamp("t", t), Ok(want), "timestamp {t}");
    }
    e.delete("t", 1).await.unwrap();
    assert_eq!(e.seq_at_timestamp("t", 0), Err(ReadError::NotFound));
    assert_eq!(e.wait_for_stream("t", Duration::ZERO).await, Ok(false));
    let waiter = {
        let e = e.clone();
        tokio::spawn(async move { e.wait_for_stream("t", Duration::from_secs(3600)).await })
    };
    tokio::task::yield_now().await;
    e.fence("t", 2).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter).await;
    assert_eq!(got.expect("woken by the fence").unwrap(), Ok(true));
    // Created afresh where it was: nothing to find, the tail is the answer.
    let next_seq = stamps.len() as u64;
    assert_eq!(e.state("t").unwrap().next_seq, next_seq);
    assert_eq!(e.seq_at_timestamp("t", 0), Ok(next_seq));
    e.shutdown().await;
}
