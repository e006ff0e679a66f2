//! Record headers end to end: appended as JSON `headers` /
//! `headers_base64` or as a binary batch version 2, stored, and returned
//! exactly — names, values, order, repeats, empty values — by reads (UTF-8
//! as strings, anything else as `headers_base64`), by live tails, and after
//! a restart. Batches mix records with and without headers. Over the
//! limits: an exact error body and nothing written.

use fencelog_api::batch::{encode_v2, CONTENT_TYPE_V2};
use fencelog_engine::{Engine, Header, RecordIn};
use fencelog_testkit::http::TestServer;
use serde_json::{json, Value};

async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

fn records_url(srv: &TestServer, stream: &str) -> String {
    format!("{}/v1/streams/{stream}/records", srv.api.base)
}

async fn post_json(srv: &TestServer, stream: &str, body: Value) -> (u16, Value) {
    let req = srv.api.client.post(records_url(srv, stream)).json(&body);
    send(req).await
}

async fn post_v2(srv: &TestServer, stream: &str, records: &[RecordIn]) -> (u16, Value) {
    let req = srv
        .api
        .client
        .post(records_url(srv, stream))
        .header("content-type", CONTENT_TYPE_V2)
        .header("fencing-token", "1")
        .body(encode_v2(records));
    send(req).await
}

/// The stream's whole read answer (records and tail).
async fn page(srv: &TestServer, stream: &str) -> (u16, Value) {
    srv.api.read(stream, "start_seq=0").await
}

/// A JSON batch mixing records with UTF-8 headers (repeated name, empty
/// value), with base64 headers (a value that is not UTF-8), and without.
fn json_batch() -> Value {
    json!({"fencing_token": 1, "records": [
        {"body": "traced", "headers": [["trace-id", "abc"], ["trace-id", ""]]},
        {"body": "plain"},
        {"body_base64": "/w==", "headers_base64": [["dHJhY2UtaWQ=", "/w=="]]},
        {"body": "empty list", "headers": []},
    ]})
}

/// What a read returns for [`json_batch`] appended at seq 0 at `ts`.
fn json_batch_read(ts: &Value) -> Value {
    json!({
        "records": [
            {"seq": 0, "fencing_token": 1, "timestamp_ms": ts,
             "headers": [["trace-id", "abc"], ["trace-id", ""]], "body": "traced"},
            {"seq": 1, "fencing_token": 1, "timestamp_ms": ts, "body": "plain"},
            {"seq": 2, "fencing_token": 1, "timestamp_ms": ts,
             "headers_base64": [["dHJhY2UtaWQ=", "/w=="]], "body_base64": "/w=="},
            {"seq": 3, "fencing_token": 1, "timestamp_ms": ts, "body": "empty list"},
        ],
        "next_start_seq": 4,
        "next_seq": 4,
    })
}

#[tokio::test]
async fn json_headers_come_back_exactly_and_survive_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let serve = || async {
        let engine = Engine::open(data.path()).unwrap();
        TestServer::with_engine(engine, tempfile::tempdir().unwrap()).await
    };
    let srv = serve().await;
    let (status, ack) = post_json(&srv, "h", json_batch()).await;
    assert_eq!((status, &ack["last_seq"]), (200, &json!(3)), "{ack}");
    let want = json_batch_read(&ack["timestamp_ms"]);
    assert_eq!(page(&srv, "h").await, (200, want.clone()));
    srv.stop().await.unwrap();
    let srv = serve().await;
    assert_eq!(page(&srv, "h").await, (200, want));
    srv.stop().await.unwrap();
}

/// The binary batch version 2 takes any bytes; reads give them back as
/// strings when UTF-8, as `headers_base64` otherwise; the engine holds the
/// exact bytes.
#[tokio::test]
async fn binary_batch_headers_come_back_exactly() {
    let srv = TestServer::start().await;
    let records = [
        RecordIn::new("a")
            .with_header("content-type", "text/plain")
            .with_header("x", "1"),
        RecordIn::new("b"),
        RecordIn::new(&b"\xff"[..]).with_header(&b"\xfe"[..], &b"v"[..]),
    ];
    let (status, ack) = post_v2(&srv, "bin", &records).await;
    assert_eq!(status, 200, "{ack}");
    let ts = &ack["timestamp_ms"];
    let (status, got) = page(&srv, "bin").await;
    assert_eq!(status, 200);
    assert_eq!(
        got["records"],
        json!([
            {"seq": 0, "fencing_token": 1, "timestamp_ms": ts,
             "headers": [["content-type", "text/plain"], ["x", "1"]], "body": "a"},
            {"seq": 1, "fencing_token": 1, "timestamp_ms": ts, "body": "b"},
            {"seq": 2, "fencing_token": 1, "timestamp_ms": ts,
             "headers_base64": [["/g==", "dg=="]], "body_base64": "/w=="},
        ])
    );
    let stored = srv.engine.read("bin", 0, 10, 1 << 20).unwrap();
    let heads: Vec<Vec<Header>> = stored.records.into_iter().map(|r| r.headers).collect();
    let sent: Vec<Vec<Header>> = records.into_iter().map(|r| r.headers).collect();
    assert_eq!(heads, sent);
}

/// A live tail's `records` event carries the headers in the read's form.
#[tokio::test]
async fn a_live_tail_carries_headers() {
    let srv = TestServer::start().await;
    let (status, ack) = post_json(&srv, "t", json_batch()).await;
    assert_eq!(status, 200);
    let mut tail = srv.api.tail("t", "start_seq=0", None).await;
    let ev = tail.expect("records").await;
    assert_eq!(ev.id.as_deref(), Some("4"));
    let want = json_batch_read(&ack["timestamp_ms"]);
    assert_eq!(ev.json(), want["records"]);
}

/// The limits with their exact bodies; a refused batch writes nothing
/// (the stream keeps its records, and one that did not exist still does
/// not).
#[tokio::test]
async fn header_limits_are_refused_exactly_and_nothing_is_written() {
    let srv = TestServer::start().await;
    assert_eq!(srv.api.append("h", 1, &["kept"]).await.0, 200);
    let before = page(&srv, "h").await;
    let with = |headers: Vec<Header>| {
        [
            RecordIn::new("ok").with_header("a", "b"),
            RecordIn {
                body: "b".into(),
                headers,
            },
        ]
    };
    let many: Vec<Header> = (0..65).map(|_| Header::new("n", "v")).collect();
    let big = vec![Header::new("n", vec![b'v'; 8192])];
    let cases = [
        (
            with(many),
            413,
            json!({"error": "too_large", "message": "records[1]: 65 headers, the limit is 64 per record",
                   "limit": 64, "actual": 65, "stream": "h"}),
        ),
        (
            with(big),
            413,
            json!({"error": "too_large",
                   "message": "records[1]: 8193 bytes of header names and values, the limit is 8192 per record",
                   "limit": 8192, "actual": 8193, "stream": "h"}),
        ),
        (
            with(vec![Header::new(vec![b'n'; 256], "")]),
            400,
            json!({"error": "bad_request", "message": "records[1]: header 0 has a 256-byte name, the limit is 255",
                   "stream": "h"}),
        ),
    ];
    for (records, status, body) in cases {
        assert_eq!(post_v2(&srv, "h", &records).await, (status, body));
    }
    let (status, body) = post_json(
        &srv,
        "h",
        json!({"fencing_token": 1, "records": [{"body": "b", "headers": [["", "v"]]}]}),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"error": "bad_request", "message": "records[0]: header 0 has an empty name", "stream": "h"})
        )
    );
    assert_eq!(page(&srv, "h").await, before);
    let many: Vec<Header> = (0..65).map(|_| Header::new("n", "v")).collect();
    assert_eq!(post_v2(&srv, "new", &with(many)).await.0, 413);
    assert_eq!(page(&srv, "new").await.0, 404);
    // At the limits exactly: accepted, and read back whole.
    let mut max: Vec<Header> = (0..63).map(|_| Header::new("n", "")).collect();
    max.push(Header::new(vec![b'n'; 255], vec![b'v'; 8192 - 255 - 63]));
    let (status, ack) = post_v2(&srv, "h", &with(max.clone())).await;
    assert_eq!((status, &ack["first_seq"]), (200, &json!(1)), "{ack}");
    let stored = srv.engine.read("h", 2, 1, 1 << 20).unwrap();
    assert_eq!(stored.records[0].headers, max);
}

/// Without headers, both bodies that can carry them append as usual, and
/// reads show no `headers` field.
#[tokio::test]
async fn the_same_records_without_headers_are_plain_records() {
    let srv = TestServer::start().await;
    let (status, _) = post_json(
        &srv,
        "h",
        json!({"fencing_token": 1, "records": [{"body": "a", "headers": []}]}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, ack) = post_v2(&srv, "h", &[RecordIn::new("b"), RecordIn::new("c")]).await;
    assert_eq!(
        (status, &ack["first_seq"], &ack["next_seq"]),
        (200, &json!(1), &json!(3))
    );
    let (_, page) = page(&srv, "h").await;
    let records = page["records"].as_array().unwrap();
    let bodies: Vec<&Value> = records.iter().map(|r| &r["body"]).collect();
    assert_eq!(bodies, [&json!("a"), &json!("b"), &json!("c")]);
    assert!(records.iter().all(|r| r.get("headers").is_none()), "{page}");
}
