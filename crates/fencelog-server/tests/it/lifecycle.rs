//! A stream's lifecycle over HTTP: trim, seal, DELETE and PUT config with
//! their exact answers and error bodies, reads below the trim point (416,
//! and `clamp=true`), the sealed stream's long-poll and SSE end.

use fencelog_testkit::http::{batch_bytes, stale_body, Api, TestServer};
use serde_json::{json, Value};

async fn trim(api: &Api, s: &str, token: u64, trim_seq: u64) -> (u16, Value) {
    api.post_json(
        &format!("/v1/streams/{s}/trim"),
        &json!({"fencing_token": token, "trim_seq": trim_seq}),
    )
    .await
}

async fn seal(api: &Api, s: &str, token: u64) -> (u16, Value) {
    api.post_json(
        &format!("/v1/streams/{s}/seal"),
        &json!({"fencing_token": token}),
    )
    .await
}

async fn send(
    api: &Api,
    method: reqwest::Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let mut req = api
        .client
        .request(method, format!("{}{path}", api.base))
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.body(body.to_string()).send().await.unwrap();
    let status = resp.status().as_u16();
    (
        status,
        serde_json::from_str(&resp.text().await.unwrap()).unwrap(),
    )
}

pub(crate) async fn delete(api: &Api, s: &str, token: u64) -> (u16, Value) {
    let body = json!({"fencing_token": token}).to_string();
    send(
        api,
        reqwest::Method::DELETE,
        &format!("/v1/streams/{s}"),
        &[],
        &body,
    )
    .await
}

async fn config(api: &Api, s: &str, body: Value) -> (u16, Value) {
    send(
        api,
        reqwest::Method::PUT,
        &format!("/v1/streams/{s}/config"),
        &[],
        &body.to_string(),
    )
    .await
}

/// The state fields after a lifecycle change, with the stream's own values.
fn state(stream: &str, first_seq: u64, next_seq: u64, highest: u64, ts: u64, bytes: u64) -> Value {
    json!({
        "stream": stream,
        "first_seq": first_seq,
        "next_seq": next_seq,
        "highest_token": highest,
        "last_timestamp_ms": ts,
        "sealed": false,
        "retention_age_s": null,
        "retention_bytes": null,
        "retention_respect_cursors": false,
        "bytes": bytes,
    })
}

fn out_of_range(stream: &str, start: u64, first: u64, next: u64, message: &str) -> Value {
    json!({
        "error": "out_of_range",
        "message": message,
        "stream": stream,
        "start_seq": start,
        "first_seq": first,
        "next_seq": next,
    })
}

#[tokio::test]
async fn trim_answers_the_state_and_reads_below_it_are_416_or_clamped() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    api.append("t", 3, &["a", "b"]).await;
    let (_, ack) = api.append("t", 3, &["c"]).await;
    let ts = ack["timestamp_ms"].as_u64().unwrap();
    let one = batch_bytes("t", &[b"a", b"b"]);
    let two = batch_bytes("t", &[b"c"]);
    assert_eq!(
        trim(api, "t", 3, 1).await,
        (200, state("t", 1, 3, 3, ts, one + two))
    );
    // A lower trim_seq is a no-op that answers the current state; past the
    // tail it is clamped to next_seq, and whole trimmed frames stop counting.
    assert_eq!(
        trim(api, "t", 3, 0).await,
        (200, state("t", 1, 3, 3, ts, one + two))
    );
    assert_eq!(
        trim(api, "t", 3, 2).await,
        (200, state("t", 2, 3, 3, ts, two))
    );
    let msg = "start_seq 1 is below the stream's first_seq 2: those records were trimmed";
    assert_eq!(
        api.read("t", "start_seq=1").await,
        (416, out_of_range("t", 1, 2, 3, msg))
    );
    let (status, page) = api.read("t", "start_seq=0&clamp=true").await;
    assert_eq!(
        (
            status,
            page["records"][0]["seq"].clone(),
            page["records"][0]["body"].clone()
        ),
        (200, json!(2), json!("c"))
    );
    // Stale: 409, nothing changes; an accepted trim raises the token.
    assert_eq!(trim(api, "t", 2, 3).await, (409, stale_body("t", 2, 3, 3)));
    assert_eq!(trim(api, "t", 9, 0).await.1["highest_token"], json!(9));
    assert_eq!(
        api.append("t", 3, &["late"]).await,
        (409, stale_body("t", 3, 9, 3))
    );
    // Bad input changes nothing.
    let (status, body) = api
        .post_json("/v1/streams/t/trim", &json!({"fencing_token": 9}))
        .await;
    assert_eq!(
        (status, body["message"].clone()),
        (400, json!("trim_seq is required"))
    );
    let (status, body) = trim(api, "nobody", 1, 0).await;
    assert_eq!(
        (status, body["error"].clone()),
        (404, json!("stream_not_found"))
    );
    api.assert_healthy().await;
}

#[tokio::test]
async fn a_sealed_stream_refuses_writes_with_its_state_and_ends_its_tails() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    api.append("s", 4, &["x", "y"]).await;
    let mut tail = api.tail("s", "start_seq=0", None).await;
    let ev = tail.expect("records").await;
    assert_eq!(ev.id.as_deref(), Some("2"));
    tail.expect("caught_up").await;
    assert_eq!(seal(api, "s", 3).await, (409, stale_body("s", 3, 4, 2)));
    let (status, sealed) = seal(api, "s", 4).await;
    assert_eq!(
        (status, sealed["sealed"].clone(), sealed["next_seq"].clone()),
        (200, json!(true), json!(2))
    );
    // The live tail gets `sealed` after the last record, and the server
    // ends the response.
    let ev = tail.expect("sealed").await;
    assert_eq!(
        (ev.id.as_deref(), ev.json()),
        (Some("2"), json!({"next_seq": 2}))
    );
    assert!(
        tail.next().await.is_none(),
        "the response goes on after sealed"
    );
    let refusal = json!({
        "error": "stream_sealed",
        "message": "stream s is sealed (next_seq 2, highest token 4): no more appends, fences or trims",
        "stream": "s",
        "first_seq": 0,
        "next_seq": 2,
        "highest_token": 4,
        "sealed": true,
    });
    for token in [1, 4, 99] {
        assert_eq!(
            api.append("s", token, &["no"]).await,
            (409, refusal.clone())
        );
        assert_eq!(api.fence("s", token).await, (409, refusal.clone()));
        assert_eq!(trim(api, "s", token, 1).await, (409, refusal.clone()));
    }
    // Sealing again with the highest token is idempotent; a higher one
    // is written and raises the token.
    assert_eq!(seal(api, "s", 4).await.0, 200);
    assert_eq!(api.state("s").await.1["highest_token"], json!(4));
    assert_eq!(seal(api, "s", 5).await.0, 200);
    assert_eq!(api.state("s").await.1["highest_token"], json!(5));
    // Reads keep working; a long-poll at the tail returns at once.
    assert_eq!(api.bodies("s").await, ["x", "y"]);
    let started = std::time::Instant::now();
    assert_eq!(
        api.read("s", "start_seq=2&wait_ms=30000").await,
        (
            200,
            json!({"records": [], "next_start_seq": 2, "next_seq": 2, "sealed": true})
        )
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // A new tail of a sealed stream: the records, then sealed, then the end.
    let mut tail = api.tail("s", "start_seq=1", None).await;
    assert_eq!(tail.expect("records").await.id.as_deref(), Some("2"));
    tail.expect("sealed").await;
    assert!(tail.next().await.is_none());
    api.assert_healthy().await;
}

#[tokio::test]
async fn delete_leaves_a_tombstone_that_only_a_higher_token_passes() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    api.append("d", 5, &["a", "b"]).await;
    assert_eq!(delete(api, "d", 4).await, (409, stale_body("d", 4, 5, 2)));
    let (status, t) = delete(api, "d", 5).await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            t["deleted"].clone(),
            t["first_seq"].clone(),
            t["next_seq"].clone(),
            t["highest_token"].clone(),
            t["bytes"].clone()
        ),
        (json!(true), json!(2), json!(2), json!(5), json!(0))
    );
    let not_found =
        |s: &str| json!({"error": "stream_not_found", "message": "stream not found", "stream": s});
    assert_eq!(api.state("d").await, (404, not_found("d")));
    assert_eq!(api.read("d", "start_seq=0").await, (404, not_found("d")));
    let (_, list) = api.get("/v1/streams").await;
    assert_eq!(list["streams"], json!([]));
    // The stale owner cannot resurrect it with its old token.
    assert_eq!(
        api.append("d", 5, &["zombie"]).await,
        (409, stale_body("d", 5, 5, 2))
    );
    assert_eq!(api.fence("d", 5).await, (409, stale_body("d", 5, 5, 2)));
    // The header works too; both at once is a 400.
    assert_eq!(
        send(
            api,
            reqwest::Method::DELETE,
            "/v1/streams/d",
            &[("fencing-token", "5")],
            ""
        )
        .await,
        (409, stale_body("d", 5, 5, 2))
    );
    let (status, _) = send(
        api,
        reqwest::Method::DELETE,
        "/v1/streams/d",
        &[("fencing-token", "6")],
        "{\"fencing_token\": 6}",
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(delete(api, "never", 1).await, (404, not_found("never")));
    // A higher token creates it afresh where it ended: seqs are never reused.
    let (status, ack) = api.append("d", 6, &["new"]).await;
    assert_eq!((status, ack["first_seq"].clone()), (200, json!(2)));
    assert_eq!(api.read("d", "start_seq=0").await.0, 416);
    assert_eq!(
        api.read("d", "start_seq=2").await.1["records"][0]["body"],
        json!("new")
    );
    api.assert_healthy().await;
}

#[tokio::test]
async fn config_sets_retention_durably_and_refuses_what_it_cannot_mean() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    api.fence("c", 2).await;
    let (status, s) = config(
        api,
        "c",
        json!({"retention_age_s": 604800, "retention_bytes": "unlimited"}),
    )
    .await;
    assert_eq!(
        (
            status,
            s["retention_age_s"].clone(),
            s["retention_bytes"].clone(),
            s["highest_token"].clone()
        ),
        (200, json!(604800), json!(null), json!(2))
    );
    assert_eq!(api.state("c").await.1["retention_age_s"], json!(604800));
    let (status, s) = config(
        api,
        "c",
        json!({"retention_bytes": 10737418240u64, "fencing_token": 3}),
    )
    .await;
    assert_eq!(
        (
            status,
            s["retention_bytes"].clone(),
            s["retention_age_s"].clone(),
            s["highest_token"].clone()
        ),
        (200, json!(10737418240u64), json!(null), json!(3))
    );
    assert_eq!(
        config(api, "c", json!({"fencing_token": 2})).await,
        (409, stale_body("c", 2, 3, 0))
    );
    for (bad, why) in [
        (json!({"retention_age": 5}), "unknown field \"retention_age\"; known fields are fencing_token, retention_age_s, retention_bytes, retention_respect_cursors"),
        (json!({"retention_age_s": 0}), "retention_age_s must be a positive integer, \"unlimited\" or null, got 0"),
        (json!({"retention_bytes": "10GiB"}), "retention_bytes must be a positive integer, \"unlimited\" or null, got \"10GiB\""),
        (json!({"retention_respect_cursors": 1}), "retention_respect_cursors must be true or false, got 1"),
    ] {
        assert_eq!(config(api, "c", bad).await, (400, json!({"error": "bad_request", "message": why})));
    }
    assert_eq!(config(api, "missing", json!({})).await.0, 404);
    assert_eq!(
        api.state("c").await.1["retention_bytes"],
        json!(10737418240u64)
    );
    api.assert_healthy().await;
}

/// The disk budget: filled to `data_bytes_max`, appends get 507 (definitely
/// not applied) while `/healthz` stays 200 and reads, fences, trims and
/// seals work; once a trim and a reclamation pass bring usage down,
/// appends succeed again without a restart.
#[tokio::test]
async fn a_full_budget_refuses_appends_until_a_trim_frees_space() {
    const BUDGET: u64 = 64 << 10;
    let config = fencelog_engine::Config {
        segment_bytes_max: 4096,
        data_bytes_max: Some(BUDGET),
        reclaim_interval_ms: 0,
        ..fencelog_engine::Config::default()
    };
    let s = TestServer::start_with(config, |_| {}, Default::default()).await;
    let api = &s.api;
    let body = "f".repeat(500);
    let mut appended = 0u64;
    let full = loop {
        let (status, b) = api.append("fill", 5, &[&body]).await;
        match status {
            200 => appended += 1,
            507 => break b,
            _ => panic!("{status}: {b}"),
        }
        assert!(appended < 1000, "the budget never filled");
    };
    assert_eq!(full["error"], json!("insufficient_storage"), "{full}");
    assert_eq!(full["limit"], json!(BUDGET));
    assert_eq!(full["outcome_unknown"], json!(false));
    assert!(full["actual"].as_u64().unwrap() <= BUDGET, "{full}");
    // Healthy: the budget is not a storage failure.
    api.assert_healthy().await;
    let (status, st) = api.state("fill").await;
    assert_eq!((status, &st["next_seq"]), (200, &json!(appended)));
    assert_eq!(api.read("fill", "start_seq=0&count=1").await.0, 200);
    assert_eq!(api.fence("other", 1).await.0, 200);
    // Nothing of the refused append was applied.
    let (status, again) = api.append("fill", 5, &[&body]).await;
    assert_eq!(
        (status, &again["error"]),
        (507, &json!("insufficient_storage"))
    );
    assert_eq!(api.state("fill").await.1["next_seq"], json!(appended));
    // Trim nearly everything; reclamation gives the segments back.
    let (status, t) = trim(api, "fill", 5, appended - 1).await;
    assert_eq!(status, 200, "{t}");
    let r = s.engine.reclaim().await.unwrap();
    assert!(!r.deleted.is_empty(), "{r:?}");
    let (status, a) = api.append("fill", 5, &[&body]).await;
    assert_eq!((status, &a["first_seq"]), (200, &json!(appended)), "{a}");
    api.assert_healthy().await;
    s.stop().await.unwrap();
}
