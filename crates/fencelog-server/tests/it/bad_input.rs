//! Hostile and malformed input: each case gets its exact status and error
//! code, leaves the stream exactly as it was, and leaves the server healthy.
//! Most cases drive the router directly; the connection-level limits use a
//! real socket.

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use bytes::Bytes;
use fencelog_engine::sim::HookedStorage;
use fencelog_engine::{Config, DirStorage, Engine};
use fencelog_server::app;
use fencelog_server::server::ServerConfig;
use fencelog_server::state::{AppState, HttpLimits};
use fencelog_testkit::http::{raw_exchange, TestServer};
use futures_util::stream;
use serde_json::{json, Value};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

struct Rig {
    _dir: tempfile::TempDir,
    router: Router,
}

async fn rig_with(config: Config, tweak: impl FnOnce(&mut HttpLimits)) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open_with(dir.path(), config).unwrap();
    engine.fence("s", 10).await.unwrap();
    engine
        .append("s", 10, vec![Bytes::from("kept")], None)
        .await
        .unwrap();
    let mut state = AppState::new(engine);
    tweak(&mut state.limits);
    Rig {
        _dir: dir,
        router: app(state),
    }
}

async fn call(router: &Router, req: Request<Body>) -> (u16, Value) {
    let resp = tokio::time::timeout(Duration::from_secs(10), router.clone().oneshot(req))
        .await
        .expect("sanity bound: the router answered")
        .unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("non-JSON {status}: {bytes:?} ({e})"));
    (status, body)
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

fn post_json(uri: &str, body: &str) -> Request<Body> {
    Request::post(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn post_raw(uri: &str, headers: &[(&str, &str)], body: &'static [u8]) -> Request<Body> {
    let mut req = Request::post(uri).header("content-type", "application/octet-stream");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(Body::from(body)).unwrap()
}

/// Stream `s` and the whole listing, as the API shows them.
async fn snapshot(router: &Router) -> (Value, Value, Value) {
    let (_, state) = call(router, get("/v1/streams/s")).await;
    let (_, records) = call(router, get("/v1/streams/s/records")).await;
    let (_, list) = call(router, get("/v1/streams")).await;
    (state, records, list)
}

/// Sends `req`, expects `status` with error `code` and a message, and
/// checks nothing changed and the server is still healthy.
async fn refused(router: &Router, req: Request<Body>, status: u16, code: &str) -> Value {
    let what = format!("{} {}", req.method(), req.uri());
    let before = snapshot(router).await;
    let (got, body) = call(router, req).await;
    assert_eq!(
        (got, body["error"].as_str()),
        (status, Some(code)),
        "{what}: {body}"
    );
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {body}"
    );
    // Every refusal of a request that names a valid stream names it (the
    // router's own "no such route" and "method not allowed" know no stream).
    let routed = !matches!(code, "not_found" | "method_not_allowed");
    let named = what
        .split(' ')
        .nth(1)
        .and_then(|uri| uri.strip_prefix("/v1/streams/"))
        .map(|rest| rest.split(['/', '?']).next().unwrap_or(""))
        .filter(|name| routed && fencelog_engine::validate_stream_name(name).is_ok());
    if let Some(name) = named {
        assert_eq!(body["stream"], json!(name), "{what}: {body}");
    }
    assert_eq!(snapshot(router).await, before, "{what} changed state");
    assert_eq!(
        call(router, get("/healthz")).await,
        (200, json!({"status": "ok"})),
        "{what} hurt health"
    );
    body
}

const RECORDS: &str = "/v1/streams/s/records";

#[tokio::test]
async fn malformed_json_appends_are_400() {
    let rig = rig_with(Config::default(), |_| {}).await;
    let r = &rig.router;
    let ok_records = r#"[{"body":"x"}]"#;
    let mut bodies: Vec<String> = vec![
        r#"{"fencing_token": 10, "records": ["#.into(),
        "".into(),
        "[1, 2]".into(),
        "\"text\"".into(),
        format!(r#"{{"records": {ok_records}}}"#),
    ];
    for token in [
        "0",
        "-1",
        "1.5",
        "10.0",
        "1e3",
        "\"10\"",
        "18446744073709551616",
        "99999999999999999999999",
        "null",
        "true",
        "[10]",
    ] {
        bodies.push(format!(
            r#"{{"fencing_token": {token}, "records": {ok_records}}}"#
        ));
    }
    for records in [
        "",
        r#", "records": null"#,
        r#", "records": []"#,
        r#", "records": {"body": "x"}"#,
        r#", "records": "x""#,
        r#", "records": [1]"#,
        r#", "records": [{}]"#,
        r#", "records": [{"body": "x", "body_base64": "eA=="}]"#,
        r#", "records": [{"body": 1}]"#,
        r#", "records": [{"body_base64": 1}]"#,
        r#", "records": [{"body_base64": "!!not base64"}]"#,
        r#", "records": [{"body_base64": "eA="}]"#,
        r#", "records": [{"body": "x", "extra": 1}]"#,
        r#", "records": [{"text": "x"}]"#,
        r#", "records": [{"body": "ok"}, {"body_base64": "%%"}]"#,
    ] {
        bodies.push(format!(r#"{{"fencing_token": 10{records}}}"#));
    }
    for m in ["-1", "\"1\"", "1.5", "true"] {
        bodies.push(format!(
            r#"{{"fencing_token": 10, "records": {ok_records}, "match_seq_num": {m}}}"#
        ));
    }
    for body in &bodies {
        refused(r, post_json(RECORDS, body), 400, "bad_request").await;
    }
    // The token message names the accepted range.
    let body = refused(
        r,
        post_json(
            RECORDS,
            &format!(r#"{{"fencing_token": 0, "records": {ok_records}}}"#),
        ),
        400,
        "bad_request",
    )
    .await;
    assert_eq!(
        body,
        json!({"error": "bad_request", "message": "fencing_token must be an integer in 1..=18446744073709551615, got 0", "stream": "s"})
    );
}

#[tokio::test]
async fn invalid_stream_names_are_400_on_every_route() {
    let rig = rig_with(Config::default(), |_| {}).await;
    let r = &rig.router;
    let long = "a".repeat(256);
    for name in [
        "a%20b",
        "..",
        "%2E",
        "a%2Fb",
        "%FF",
        "caf%C3%A9",
        long.as_str(),
    ] {
        let body = r#"{"fencing_token": 10, "records": [{"body": "x"}]}"#;
        refused(
            r,
            post_json(&format!("/v1/streams/{name}/records"), body),
            400,
            "bad_request",
        )
        .await;
        refused(
            r,
            post_raw(
                &format!("/v1/streams/{name}/records"),
                &[("fencing-token", "10")],
                b"x",
            ),
            400,
            "bad_request",
        )
        .await;
        refused(
            r,
            post_json(
                &format!("/v1/streams/{name}/fence"),
                r#"{"fencing_token": 10}"#,
            ),
            400,
            "bad_request",
        )
        .await;
        refused(
            r,
            get(&format!("/v1/streams/{name}/records")),
            400,
            "bad_request",
        )
        .await;
        refused(r, get(&format!("/v1/streams/{name}")), 400, "bad_request").await;
    }
}

#[tokio::test]
async fn bad_raw_append_headers_are_400() {
    let rig = rig_with(Config::default(), |_| {}).await;
    let r = &rig.router;
    refused(r, post_raw(RECORDS, &[], b"x"), 400, "bad_request").await;
    for token in [
        "",
        "abc",
        "0",
        "-1",
        "+5",
        "1.0",
        "0x10",
        "18446744073709551616",
    ] {
        refused(
            r,
            post_raw(RECORDS, &[("fencing-token", token)], b"x"),
            400,
            "bad_request",
        )
        .await;
    }
    for m in ["x", "-1", "1.5"] {
        refused(
            r,
            post_raw(
                RECORDS,
                &[("fencing-token", "10"), ("match-seq-num", m)],
                b"x",
            ),
            400,
            "bad_request",
        )
        .await;
    }
    // No Content-Type at all is a raw append too, so it needs the header.
    let req = Request::post(RECORDS).body(Body::from("x")).unwrap();
    refused(r, req, 400, "bad_request").await;
}

#[tokio::test]
async fn bad_fences_are_400() {
    let rig = rig_with(Config::default(), |_| {}).await;
    let r = &rig.router;
    for body in [
        "",
        "{",
        "[]",
        "{}",
        r#"{"fencing_token": 0}"#,
        r#"{"fencing_token": -5}"#,
        r#"{"fencing_token": "43"}"#,
        r#"{"fencing_token": 43.5}"#,
        r#"{"fencing_token": 18446744073709551616}"#,
    ] {
        refused(
            r,
            post_json("/v1/streams/s/fence", body),
            400,
            "bad_request",
        )
        .await;
    }
}

#[tokio::test]
async fn bad_read_and_list_parameters_are_400() {
    let rig = rig_with(Config::default(), |_| {}).await;
    let r = &rig.router;
    for q in [
        "start_seq=-1",
        "start_seq=abc",
        "start_seq=18446744073709551616",
        "count=0",
        "count=1.5",
        "bytes=0",
        "wait_ms=x",
        "wait_ms=-5",
        "follow=maybe",
    ] {
        refused(r, get(&format!("{RECORDS}?{q}")), 400, "bad_request").await;
    }
    let req = Request::get(RECORDS)
        .header("accept", "text/event-stream")
        .header("last-event-id", "abc")
        .body(Body::empty())
        .unwrap();
    refused(r, req, 400, "bad_request").await;
    for q in ["limit=0", "limit=x", "limit=-1"] {
        refused(r, get(&format!("/v1/streams?{q}")), 400, "bad_request").await;
    }
    refused(
        r,
        get(&format!("{RECORDS}?start_seq=2")),
        416,
        "out_of_range",
    )
    .await;
    refused(r, get("/v1/streams/other/records"), 404, "stream_not_found").await;
    refused(r, get("/nowhere"), 404, "not_found").await;
    refused(
        r,
        Request::delete(RECORDS).body(Body::empty()).unwrap(),
        405,
        "method_not_allowed",
    )
    .await;
}

#[tokio::test]
async fn batches_over_the_engine_limits_are_413() {
    let config = Config {
        batch_records_max: 4,
        batch_bytes_max: 64,
        ..Config::default()
    };
    let rig = rig_with(config, |_| {}).await;
    let r = &rig.router;
    let five = r#"{"fencing_token": 10, "records": [{"body":"1"},{"body":"2"},{"body":"3"},{"body":"4"},{"body":"5"}]}"#;
    let body = refused(r, post_json(RECORDS, five), 413, "too_large").await;
    assert_eq!(
        body,
        json!({"error": "too_large", "message": "records in the batch is 5, the limit is 4", "limit": 4, "actual": 5, "stream": "s"})
    );
    let big = format!(
        r#"{{"fencing_token": 10, "records": [{{"body": "{}"}}]}}"#,
        "x".repeat(65)
    );
    let body = refused(r, post_json(RECORDS, &big), 413, "too_large").await;
    assert_eq!(
        body,
        json!({"error": "too_large", "message": "bytes in the batch is 65, the limit is 64", "limit": 64, "actual": 65, "stream": "s"})
    );
    refused(
        r,
        post_raw(RECORDS, &[("fencing-token", "10")], &[7u8; 65]),
        413,
        "too_large",
    )
    .await;
}

#[tokio::test]
async fn request_bodies_are_capped_before_buffering_and_timed() {
    let rig = rig_with(Config::default(), |l| {
        l.body_bytes_max = 1024;
        l.body_read_timeout = Duration::from_millis(100);
    })
    .await;
    let r = &rig.router;
    // A declared length over the cap is refused without reading: this body
    // never yields, so reading it would hang.
    for uri in [RECORDS, "/v1/streams/s/fence"] {
        let req = Request::post(uri)
            .header("content-type", "application/json")
            .header("content-length", "1000000000")
            .body(Body::from_stream(stream::pending::<io::Result<Bytes>>()))
            .unwrap();
        let body = refused(r, req, 413, "too_large").await;
        assert_eq!(body["limit"], json!(1024));
    }
    // Without a length, the cap is enforced while streaming.
    let chunks = (0..64).map(|_| Ok::<_, io::Error>(Bytes::from(vec![b'x'; 100])));
    let req = Request::post(RECORDS)
        .header("content-type", "application/octet-stream")
        .header("fencing-token", "10")
        .body(Body::from_stream(stream::iter(chunks)))
        .unwrap();
    refused(r, req, 413, "too_large").await;
    // A body that stops arriving is cut off.
    let trickle = stream::iter([Ok::<_, io::Error>(Bytes::from_static(b"{\"fencing"))])
        .chain(stream::pending());
    let req = Request::post(RECORDS)
        .header("content-type", "application/json")
        .body(Body::from_stream(trickle))
        .unwrap();
    refused(r, req, 408, "request_timeout").await;
}

use futures_util::StreamExt as _;

/// Over a socket: an oversized declared length gets 413 straight away, and
/// a client that never finishes its headers is disconnected.
#[tokio::test]
async fn slow_and_oversized_clients_over_a_socket() {
    let srv = TestServer::start_with(
        Config::default(),
        |_| {},
        ServerConfig {
            header_read_timeout: Duration::from_millis(200),
            ..ServerConfig::default()
        },
    )
    .await;
    assert_eq!(srv.api.fence("s", 10).await.0, 200);
    let head = "POST /v1/streams/s/records HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\nFencing-Token: 10\r\nContent-Length: 1000000000\r\nConnection: close\r\n\r\n";
    let (status, body) =
        tokio::time::timeout(Duration::from_secs(10), raw_exchange(srv.addr, head, b""))
            .await
            .expect("answered without waiting for the body");
    assert_eq!((status, body["error"].clone()), (413, json!("too_large")));

    for partial in ["GET /healthz HTTP/1.1\r\nHost:", ""] {
        let mut conn = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
        conn.write_all(partial.as_bytes()).await.unwrap();
        let mut rest = Vec::new();
        // The server closes the connection; the bound only keeps a broken
        // build from hanging the suite.
        let closed =
            tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut rest)).await;
        assert!(closed.is_ok(), "connection with {partial:?} was not closed");
    }
    assert_eq!(srv.api.state("s").await.1["next_seq"], json!(0));
    srv.api.assert_healthy().await;
}

async fn poisoned_rig(kind: io::ErrorKind) -> (tempfile::TempDir, Router) {
    let dir = tempfile::tempdir().unwrap();
    let fail = Arc::new(Mutex::new(None));
    let disk = HookedStorage::failing_when(DirStorage::new(dir.path()).unwrap(), fail.clone());
    let engine = Engine::open_storage(Arc::new(disk), Config::default()).unwrap();
    let router = app(AppState::new(engine));
    let ok = r#"{"fencing_token": 1, "records": [{"body": "before"}]}"#;
    assert_eq!(call(&router, post_json(RECORDS, ok)).await.0, 200);
    *fail.lock().unwrap() = Some(kind);
    (dir, router)
}

async fn assert_storage_failure(kind: io::ErrorKind, status: u16, code: &str) {
    let (_dir, r) = poisoned_rig(kind).await;
    let write = r#"{"fencing_token": 1, "records": [{"body": "during"}]}"#;
    let (got, body) = call(&r, post_json(RECORDS, write)).await;
    assert_eq!(
        (got, &body["error"], &body["outcome_unknown"]),
        (status, &json!(code), &json!(true)),
        "{body}"
    );
    // Later writes were never attempted, so their outcome is known.
    let (got, body) = call(&r, post_json(RECORDS, write)).await;
    assert_eq!((got, &body["error"]), (status, &json!(code)), "{body}");
    assert_eq!(body.get("outcome_unknown"), None);
    let (got, body) = call(
        &r,
        post_json("/v1/streams/s/fence", r#"{"fencing_token": 2}"#),
    )
    .await;
    assert_eq!((got, &body["error"]), (status, &json!(code)), "{body}");
    let (got, body) = call(&r, get("/healthz")).await;
    assert_eq!(
        (got, &body["error"]),
        (503, &json!("unavailable")),
        "{body}"
    );
    // What an alert watches: the health gauge of the scrape.
    let metrics = r.clone().oneshot(get("/metrics")).await.unwrap();
    let text = axum::body::to_bytes(metrics.into_body(), 1 << 20)
        .await
        .unwrap();
    let text = String::from_utf8(text.to_vec()).unwrap();
    assert!(text.lines().any(|l| l == "fencelog_healthy 0"), "{text}");
    // Reads keep serving what was durable.
    let (got, body) = call(&r, get(RECORDS)).await;
    assert_eq!(got, 200);
    assert_eq!(body["records"][0]["body"], json!("before"));
    assert_eq!(body["next_seq"], json!(1));
}

#[tokio::test]
async fn storage_failure_is_503_with_outcome_unknown() {
    assert_storage_failure(io::ErrorKind::Other, 503, "unavailable").await;
}

#[tokio::test]
async fn full_disk_is_507() {
    assert_storage_failure(io::ErrorKind::StorageFull, 507, "insufficient_storage").await;
}
