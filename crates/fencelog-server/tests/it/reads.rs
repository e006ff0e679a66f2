//! Reading: plain reads and their limits, long-poll, live tail over SSE,
//! stream state and listing.

use axum::body::Body;
use axum::http::Request;
use bytes::Bytes;
use fencelog_engine::{Config, Engine};
use fencelog_server::app;
use fencelog_server::server::ServerConfig;
use fencelog_server::state::AppState;
use fencelog_testkit::http::{state_body, TestServer};
use serde_json::{json, Value};
use std::time::Duration;
use tower::ServiceExt;

fn seqs(records: &Value) -> Vec<u64> {
    records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn read_returns_exact_records_and_honours_limits() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    let (_, a) = api.append("r", 3, &["zero", "one", "two"]).await;
    let ts = a["timestamp_ms"].clone();
    let (status, bin) = api
        .append_raw("r", &[("fencing-token", "4")], vec![0xffu8, 0x00, 0x41])
        .await;
    assert_eq!(status, 200);
    let (status, body) = api.read("r", "start_seq=1&count=2").await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({
            "records": [
                {"seq": 1, "fencing_token": 3, "timestamp_ms": ts, "body": "one"},
                {"seq": 2, "fencing_token": 3, "timestamp_ms": ts, "body": "two"},
            ],
            "next_start_seq": 3,
            "next_seq": 4,
        })
    );
    // Bytes that are not UTF-8 come back as base64, exactly.
    let (_, body) = api.read("r", "start_seq=3").await;
    assert_eq!(
        body["records"],
        json!([{"seq": 3, "fencing_token": 4, "timestamp_ms": bin["timestamp_ms"], "body_base64": "/wBB"}])
    );
    // A byte budget smaller than one record still returns that record.
    let (_, body) = api.read("r", "start_seq=0&bytes=1").await;
    assert_eq!(seqs(&body["records"]), [0]);
    let (_, body) = api.read("r", "start_seq=0&bytes=7").await;
    assert_eq!(seqs(&body["records"]), [0, 1]);
    // Counts above the cap are clamped, not refused.
    let (_, body) = api.read("r", "count=999999999&bytes=999999999999").await;
    assert_eq!(seqs(&body["records"]), [0, 1, 2, 3]);
    // At the tail: empty, not an error; past it: 416.
    assert_eq!(
        api.read("r", "start_seq=4").await,
        (
            200,
            json!({"records": [], "next_start_seq": 4, "next_seq": 4})
        )
    );
    assert_eq!(
        api.read("r", "start_seq=5").await,
        (
            416,
            json!({
                "error": "out_of_range",
                "message": "start_seq 5 is past the stream's next_seq 4",
                "stream": "r",
                "start_seq": 5,
                "first_seq": 0,
                "next_seq": 4,
            })
        )
    );
    let missing =
        json!({"error": "stream_not_found", "message": "stream not found", "stream": "nope"});
    assert_eq!(api.read("nope", "").await, (404, missing.clone()));
    assert_eq!(api.state("nope").await, (404, missing));
}

/// Router-level: the long-poll is provably parked in `wait_for` (its future
/// is pending) when the append happens, and answers with that record.
#[tokio::test]
async fn long_poll_wakes_on_the_append_it_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path()).unwrap();
    engine
        .append("lp", 1, vec![Bytes::from("first")], None)
        .await
        .unwrap();
    let router = app(AppState::new(engine.clone()));
    let req = Request::get("/v1/streams/lp/records?start_seq=1&wait_ms=30000")
        .body(Body::empty())
        .unwrap();
    let poll = router.oneshot(req);
    tokio::pin!(poll);
    assert!(
        futures_util::poll!(poll.as_mut()).is_pending(),
        "nothing to return yet"
    );

    engine
        .append("lp", 1, vec![Bytes::from("second")], None)
        .await
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), poll)
        .await
        .expect("the long-poll must return on the append, not on wait_ms")
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = serde_json::from_slice(
        &axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(seqs(&body["records"]), [1]);
    assert_eq!(body["records"][0]["body"], json!("second"));
    assert_eq!(body["next_seq"], json!(2));
}

/// Over a socket: a long-poll with a 30 s budget comes back with the record
/// appended after it was sent.
#[tokio::test]
async fn long_poll_over_http_returns_with_data() {
    let srv = TestServer::start().await;
    let api = srv.api.clone();
    assert_eq!(api.append("lp", 1, &["first"]).await.0, 200);
    // An expired short wait answers empty rather than failing.
    assert_eq!(
        api.read("lp", "start_seq=1&wait_ms=20").await,
        (
            200,
            json!({"records": [], "next_start_seq": 1, "next_seq": 1})
        )
    );
    let waiter = tokio::spawn({
        let api = api.clone();
        async move { api.read("lp", "start_seq=1&wait_ms=30000").await }
    });
    assert_eq!(api.append("lp", 1, &["second"]).await.0, 200);
    let (status, body) = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("sanity bound")
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(seqs(&body["records"]), [1]);
    assert_eq!(body["records"][0]["body"], json!("second"));
}

/// SSE: backlog, `caught_up`, then records appended after connecting, each
/// `id` the next seq to read.
#[tokio::test]
async fn tail_delivers_backlog_then_live_records() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    api.append("t", 1, &["old0", "old1"]).await;
    let mut tail = api.tail("t", "start_seq=0", None).await;
    let ev = tail.expect("records").await;
    assert_eq!(ev.id.as_deref(), Some("2"));
    assert_eq!(seqs(&ev.json()), [0, 1]);
    let ev = tail.expect("caught_up").await;
    assert_eq!(
        (ev.id.as_deref(), ev.json()),
        (Some("2"), json!({"next_seq": 2}))
    );

    let (_, ack) = api.append("t", 1, &["live2"]).await;
    let ev = tail.expect("records").await;
    assert_eq!(ev.id.as_deref(), Some("3"));
    assert_eq!(
        ev.json(),
        json!([{"seq": 2, "fencing_token": 1, "timestamp_ms": ack["timestamp_ms"], "body": "live2"}])
    );
    // Back at the tail after a live record: caught_up again, every time.
    assert_eq!(
        tail.expect("caught_up").await.json(),
        json!({"next_seq": 3})
    );
    api.append("t", 2, &["live3", "live4"]).await;
    let ev = tail.expect("records").await;
    assert_eq!(
        (ev.id.as_deref(), seqs(&ev.json())),
        (Some("5"), vec![3, 4])
    );
    tail.expect("caught_up").await;

    // follow=true without the Accept header is the same tail.
    let resp = api
        .client
        .get(format!(
            "{}/v1/streams/t/records?follow=true&start_seq=4",
            api.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut follow = fencelog_testkit::http::SseReader::new(resp.bytes_stream());
    assert_eq!(seqs(&follow.expect("records").await.json()), [4]);
    follow.expect("caught_up").await;
}

#[tokio::test]
async fn idle_tail_gets_pings() {
    let srv = TestServer::start_with(
        Config::default(),
        |l| l.ping_interval = Duration::from_millis(50),
        ServerConfig::default(),
    )
    .await;
    srv.api.fence("quiet", 1).await;
    let mut tail = srv.api.tail("quiet", "", None).await;
    tail.expect("caught_up").await;
    tail.expect("ping").await;
    tail.expect("ping").await;
    srv.api.append("quiet", 1, &["finally"]).await;
    // Pings may be in flight; the record must still arrive, once, and the
    // tail says it is live again.
    loop {
        let ev = tail.next().await.unwrap();
        if ev.event == "records" {
            assert_eq!(seqs(&ev.json()), [0]);
            break;
        }
        assert_eq!(ev.event, "ping");
    }
    let ev = tail.expect("caught_up").await;
    assert_eq!(
        (ev.id.as_deref(), ev.json()),
        (Some("1"), json!({"next_seq": 1}))
    );
}

/// A consumer that disconnects and resumes with `Last-Event-ID` sees every
/// record exactly once, including ones appended while it was away.
#[tokio::test]
async fn tail_resumes_from_last_event_id_without_gaps_or_repeats() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    for i in 0..5 {
        api.append("rs", 1, &[&format!("r{i}")]).await;
    }
    let mut seen = Vec::new();
    // Small batches so the consumer is behind when it drops.
    let mut tail = api.tail("rs", "count=2", None).await;
    let ev = tail.expect("records").await;
    seen.extend(seqs(&ev.json()));
    let last_id: u64 = ev.id.unwrap().parse().unwrap();
    assert_eq!(last_id, 2);
    drop(tail);

    for i in 5..8 {
        api.append("rs", 1, &[&format!("r{i}")]).await;
    }
    // start_seq is ignored when Last-Event-ID is present, as on a browser reconnect.
    let mut tail = api.tail("rs", "count=2&start_seq=0", Some(last_id)).await;
    loop {
        let ev = tail.next().await.unwrap();
        match ev.event.as_str() {
            "records" => {
                let batch = seqs(&ev.json());
                assert_eq!(
                    ev.id.unwrap().parse::<u64>().unwrap(),
                    batch.last().unwrap() + 1
                );
                seen.extend(batch);
            }
            "caught_up" => {
                assert_eq!(ev.id.as_deref(), Some("8"));
                break;
            }
            other => panic!("unexpected {other}"),
        }
    }
    api.append("rs", 1, &["r8"]).await;
    seen.extend(seqs(&tail.expect("records").await.json()));
    tail.expect("caught_up").await;
    assert_eq!(seen, (0..9).collect::<Vec<_>>());

    // Resuming past the tail is refused before any event is sent.
    let resp = api
        .client
        .get(format!("{}/v1/streams/rs/records", api.base))
        .header("accept", "text/event-stream")
        .header("last-event-id", "10")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 416);
}

/// A server told to stop ends live tails, then shuts the engine down.
#[tokio::test]
async fn shutdown_ends_live_tails() {
    let srv = TestServer::start().await;
    let api = srv.api.clone();
    api.append("sd", 1, &["x"]).await;
    let mut tail = api.tail("sd", "start_seq=1", None).await;
    tail.expect("caught_up").await;
    let engine = srv.engine.clone();
    srv.stop().await.unwrap();
    assert_eq!(tail.next().await, None);
    assert!(
        !engine.is_healthy(),
        "the engine was shut down after the drain"
    );
}

/// A long-poll parked when shutdown begins answers at once, so the drain is
/// not held up for `wait_ms`.
#[tokio::test]
async fn shutdown_answers_parked_long_polls() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path()).unwrap();
    engine
        .append("lp", 1, vec![Bytes::from("x")], None)
        .await
        .unwrap();
    let (trigger, shutdown) = fencelog_server::server::Shutdown::new();
    let mut state = AppState::new(engine);
    state.shutdown = shutdown;
    let req = Request::get("/v1/streams/lp/records?start_seq=1&wait_ms=60000")
        .body(Body::empty())
        .unwrap();
    let poll = app(state).oneshot(req);
    tokio::pin!(poll);
    assert!(futures_util::poll!(poll.as_mut()).is_pending());
    trigger.send(true).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), poll)
        .await
        .expect("answered on shutdown, not after wait_ms")
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = serde_json::from_slice(
        &axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        body,
        json!({"records": [], "next_start_seq": 1, "next_seq": 1})
    );
}

#[tokio::test]
async fn state_and_paginated_listing() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    for name in ["b.2", "a", "b.1", "b.3", "c"] {
        assert_eq!(api.fence(name, 1).await.0, 200);
    }
    assert_eq!(api.state("b.1").await, (200, state_body("b.1", 0, 1, 0, 0)));

    let names = |v: &Value| -> Vec<String> {
        v["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["stream"].as_str().unwrap().to_string())
            .collect()
    };
    let (status, page) = api.get("/v1/streams?prefix=b.&limit=2").await;
    assert_eq!(status, 200);
    assert_eq!(names(&page), ["b.1", "b.2"]);
    assert_eq!(page["next_start_after"], json!("b.2"));
    assert_eq!(page["streams"][0], state_body("b.1", 0, 1, 0, 0));
    let (_, page) = api
        .get("/v1/streams?prefix=b.&limit=2&start_after=b.2")
        .await;
    assert_eq!(
        (names(&page), page["next_start_after"].clone()),
        (vec!["b.3".to_string()], Value::Null)
    );
    let (_, all) = api.get("/v1/streams").await;
    assert_eq!(names(&all), ["a", "b.1", "b.2", "b.3", "c"]);
    assert_eq!(all["next_start_after"], Value::Null);
}

#[tokio::test]
async fn metrics_are_prometheus_text() {
    let srv = TestServer::start().await;
    srv.api.append("m", 2, &["x", "y"]).await;
    srv.api.append("m", 1, &["stale"]).await;
    let resp = srv
        .api
        .client
        .get(format!("{}/metrics", srv.api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = resp.text().await.unwrap();
    for line in [
        "fencelog_appends_accepted_total 1",
        "fencelog_records_written_total 2",
        "fencelog_stale_rejections_total 1",
        "fencelog_writer_queue_depth 0",
        "fencelog_healthy 1",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert!(text.contains("fencelog_fsync_seconds_bucket"));
}
