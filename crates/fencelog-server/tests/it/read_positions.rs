//! Where reads start and stop: paging with the continuation field alone,
//! `tail_offset`, `start_timestamp_ms`, `until_timestamp_ms`, and waiting
//! for a stream that does not exist yet (long-poll and live tail).

use axum::body::Body;
use axum::http::Request;
use bytes::Bytes;
use fencelog_engine::{Config, Engine};
use fencelog_server::app;
use fencelog_server::server::ServerConfig;
use fencelog_server::state::AppState;
use fencelog_testkit::http::TestServer;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tower::ServiceExt;

fn seqs(records: &Value) -> Vec<u64> {
    records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect()
}

/// 2,500 records, then every page of 10 from 0 using nothing but each
/// page's `next_start_seq`: every record exactly once, in order, while
/// `next_seq` (the tail) says 2500 on every page.
#[tokio::test]
async fn paging_with_next_start_seq_alone_visits_every_record_once() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    let bodies: Vec<String> = (0..2500).map(|i| format!("r{i}")).collect();
    for chunk in bodies.chunks(500) {
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        assert_eq!(api.append("long", 1, &chunk).await.0, 200);
    }
    let mut start = 0u64;
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let (status, page) = api
            .read("long", &format!("start_seq={start}&count=10"))
            .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["next_seq"], json!(2500), "the tail, on every page");
        let records = page["records"].as_array().unwrap();
        if records.is_empty() {
            assert_eq!(page["next_start_seq"], json!(start));
            break;
        }
        seen.extend(
            records
                .iter()
                .map(|r| r["body"].as_str().unwrap().to_string()),
        );
        start = page["next_start_seq"].as_u64().unwrap();
        pages += 1;
        assert!(pages <= 251, "paging does not end");
    }
    assert_eq!(pages, 250);
    assert_eq!(seen, bodies);
    // A byte budget pages the same way: the continuation follows the last
    // record returned, whatever cut the page short.
    let (_, page) = api.read("long", "start_seq=100&bytes=9").await;
    assert_eq!(seqs(&page["records"]), [100, 101]);
    assert_eq!(page["next_start_seq"], json!(102));
}

#[tokio::test]
async fn tail_offset_counts_back_from_the_tail() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    api.append("t", 1, &["a", "b", "c", "d", "e"]).await;
    let (_, page) = api.read("t", "tail_offset=2").await;
    assert_eq!(seqs(&page["records"]), [3, 4]);
    assert_eq!(
        (page["next_start_seq"].clone(), page["next_seq"].clone()),
        (json!(5), json!(5))
    );
    // Zero is the tail itself; more than the stream holds is its start.
    let (_, page) = api.read("t", "tail_offset=0").await;
    assert_eq!(
        page,
        json!({"records": [], "next_start_seq": 5, "next_seq": 5})
    );
    let (_, page) = api.read("t", "tail_offset=99").await;
    assert_eq!(seqs(&page["records"]), [0, 1, 2, 3, 4]);
    // At most one start.
    for q in [
        "start_seq=1&tail_offset=2",
        "tail_offset=1&start_timestamp_ms=5",
        "start_seq=0&start_timestamp_ms=5",
    ] {
        assert_eq!(
            api.read("t", q).await,
            (
                400,
                json!({
                    "error": "bad_request",
                    "message": "give at most one of start_seq, tail_offset and start_timestamp_ms",
                    "stream": "t",
                })
            ),
            "{q}"
        );
    }
    let (status, body) = api.read("t", "tail_offset=-1").await;
    assert_eq!((status, body["stream"].clone()), (400, json!("t")));
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Three appends in three different milliseconds (the clock is the only
/// signal there is to wait for, and it takes at most a millisecond).
async fn three_moments(api: &fencelog_testkit::http::Api) -> [u64; 3] {
    let mut stamps = [0u64; 3];
    for (i, bodies) in [["a0", "a1"], ["b0", "b1"], ["c0", "c1"]]
        .iter()
        .enumerate()
    {
        let after = if i == 0 { 0 } else { stamps[i - 1] };
        while now_ms() <= after {
            tokio::task::yield_now().await;
        }
        let (status, ack) = api.append("time", 1, bodies).await;
        assert_eq!(status, 200);
        stamps[i] = ack["timestamp_ms"].as_u64().unwrap();
    }
    assert!(stamps[0] < stamps[1] && stamps[1] < stamps[2], "{stamps:?}");
    stamps
}

#[tokio::test]
async fn reads_start_and_stop_at_timestamps() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    let [a, b, c] = three_moments(api).await;
    let read = |q: String| async move { api.read("time", &q).await.1 };
    assert_eq!(
        seqs(&read(format!("start_timestamp_ms={b}")).await["records"]),
        [2, 3, 4, 5]
    );
    assert_eq!(
        seqs(&read(format!("start_timestamp_ms={}", a + 1)).await["records"]),
        [2, 3, 4, 5]
    );
    assert_eq!(
        seqs(&read("start_timestamp_ms=0".into()).await["records"]),
        [0, 1, 2, 3, 4, 5]
    );
    // After the last record: an empty page at the tail.
    let page = read(format!("start_timestamp_ms={}", c + 1)).await;
    assert_eq!(
        page,
        json!({"records": [], "next_start_seq": 6, "next_seq": 6})
    );
    // until is exclusive, and combines with any start.
    let page = read(format!("until_timestamp_ms={c}")).await;
    assert_eq!(seqs(&page["records"]), [0, 1, 2, 3]);
    assert_eq!(page["next_start_seq"], json!(4));
    let page = read(format!("start_timestamp_ms={b}&until_timestamp_ms={c}")).await;
    assert_eq!(seqs(&page["records"]), [2, 3]);
    // A page that starts at the until is empty though the tail is further:
    // the range is done.
    let page = read(format!("start_seq=4&until_timestamp_ms={c}")).await;
    assert_eq!(
        page,
        json!({"records": [], "next_start_seq": 4, "next_seq": 6})
    );
    // A live tail never ends by itself, so it takes no until.
    let resp = api
        .client
        .get(format!(
            "{}/v1/streams/time/records?follow=true&until_timestamp_ms=1",
            api.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body,
        json!({"error": "bad_request", "message": "until_timestamp_ms applies to reads, not to live tails", "stream": "time"})
    );
    // Live tails start at a time or before the tail too.
    let mut tail = api
        .tail("time", &format!("start_timestamp_ms={c}"), None)
        .await;
    assert_eq!(seqs(&tail.expect("records").await.json()), [4, 5]);
    let mut tail = api.tail("time", "tail_offset=1", None).await;
    assert_eq!(seqs(&tail.expect("records").await.json()), [5]);
    let mut tail = api.tail("time", "tail_offset=0", None).await;
    assert_eq!(tail.expect("caught_up").await.id.as_deref(), Some("6"));
}

/// Without `wait_for_stream` a tail of a missing stream is a 404 at once;
/// with it, pings until a fence creates the stream, then its records.
#[tokio::test]
async fn a_tail_can_wait_for_its_stream_to_be_created() {
    let srv = TestServer::start_with(
        Config::default(),
        |l| l.ping_interval = Duration::from_millis(50),
        ServerConfig::default(),
    )
    .await;
    let api = &srv.api;
    let resp = api
        .client
        .get(format!("{}/v1/streams/later/records?follow=true", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    let mut tail = api.tail("later", "wait_for_stream=true", None).await;
    // Only pings while it does not exist.
    tail.expect("ping").await;
    tail.expect("ping").await;
    api.fence("later", 4).await;
    api.append("later", 4, &["first"]).await;
    loop {
        let ev = tail.next().await.unwrap();
        match ev.event.as_str() {
            "ping" | "caught_up" => continue,
            "records" => {
                assert_eq!(ev.json()[0]["body"], json!("first"));
                assert_eq!(ev.id.as_deref(), Some("1"));
                break;
            }
            other => panic!("unexpected {other}: {ev:?}"),
        }
    }
    tail.expect("caught_up").await;
    // A start past the tail of the stream that appeared ends the tail with
    // the read's own error.
    let mut tail = api
        .tail("late2", "wait_for_stream=true&start_seq=5", None)
        .await;
    tail.expect("ping").await;
    api.append("late2", 1, &["only"]).await;
    let ev = loop {
        let ev = tail.next().await.unwrap();
        if ev.event != "ping" {
            break ev;
        }
    };
    assert_eq!(ev.event, "error");
    assert_eq!(ev.json()["error"], json!("out_of_range"));
    assert_eq!(tail.next().await, None);
}

/// Router-level: a long-poll with `wait_for_stream` is parked (its future
/// pending) on a stream that does not exist, and the append that creates
/// the stream answers it with that record; without a creation it is the
/// 404 once `wait_ms` is over.
#[tokio::test]
async fn a_long_poll_can_wait_for_its_stream_to_be_created() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path()).unwrap();
    let router = app(AppState::new(engine.clone()));
    let req = Request::get("/v1/streams/new/records?wait_ms=30000&wait_for_stream=true")
        .body(Body::empty())
        .unwrap();
    let poll = router.clone().oneshot(req);
    tokio::pin!(poll);
    assert!(futures_util::poll!(poll.as_mut()).is_pending());
    engine
        .append("new", 1, vec![Bytes::from("hello")], None)
        .await
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), poll)
        .await
        .expect("answered on the append, not after wait_ms")
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = serde_json::from_slice(
        &axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(seqs(&body["records"]), [0]);
    assert_eq!(body["next_start_seq"], json!(1));

    let req = Request::get("/v1/streams/never/records?wait_ms=20&wait_for_stream=true")
        .body(Body::empty())
        .unwrap();
    let resp = router.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 404);
    engine.shutdown().await;
}
