//! Record headers until the v2 codec's HEADERS flag is written: the wire
//! contract takes them (JSON `headers` / `headers_base64`, binary batch version 2)
//! and checks their limits, but this build cannot store them, so a batch
//! with any header is refused with 400 `headers_unsupported` and changes
//! nothing — never silently stored without its headers. The same records
//! without headers are accepted, whichever body carries them.

use fencelog_api::batch::{encode_v2, CONTENT_TYPE_V2};
use fencelog_engine::{Header, RecordIn};
use fencelog_testkit::http::TestServer;
use serde_json::{json, Value};

const UNSUPPORTED: &str = "record headers are not stored by this build yet";

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

/// The stream's whole read answer (records and tail): what must not change.
async fn state(srv: &TestServer, stream: &str) -> (u16, Value) {
    srv.api.read(stream, "start_seq=0").await
}

#[tokio::test]
async fn a_batch_with_any_header_is_refused_and_changes_nothing() {
    let srv = TestServer::start().await;
    assert_eq!(srv.api.append("h", 1, &["kept"]).await.0, 200);
    let before = state(&srv, "h").await;
    let refusal = json!({"error": "headers_unsupported", "message": UNSUPPORTED, "stream": "h"});
    let json_bodies = [
        json!({"fencing_token": 1, "records": [
            {"body": "plain"},
            {"body": "traced", "headers": [["trace-id", "abc"]]},
        ]}),
        json!({"fencing_token": 1, "records": [
            {"body_base64": "AA==", "headers_base64": [["dHJhY2UtaWQ=", "/w=="]]},
        ]}),
    ];
    for body in json_bodies {
        assert_eq!(
            post_json(&srv, "h", body.clone()).await,
            (400, refusal.clone()),
            "{body}"
        );
    }
    let with_header = RecordIn::new("traced").with_header("content-type", "text/plain");
    assert_eq!(
        post_v2(&srv, "h", &[RecordIn::new("plain"), with_header.clone()]).await,
        (400, refusal)
    );
    assert_eq!(state(&srv, "h").await, before);
    // Nor does a refused batch create its stream.
    let (status, body) = post_v2(&srv, "new", &[with_header]).await;
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("headers_unsupported"))
    );
    assert_eq!(state(&srv, "new").await.0, 404);
}

/// The limits are checked first: a bad header is the client's mistake
/// whatever the build stores.
#[tokio::test]
async fn header_limits_are_checked_before_the_format_refusal() {
    let srv = TestServer::start().await;
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
    let many: Vec<Header> = (0..65).map(|_| Header::new("n", "v")).collect();
    let record = RecordIn {
        body: "b".into(),
        headers: many,
    };
    let (status, body) = post_v2(&srv, "h", &[RecordIn::new("ok"), record]).await;
    assert_eq!(
        (status, body),
        (
            413,
            json!({"error": "too_large", "message": "records[1]: 65 headers, the limit is 64 per record", "limit": 64, "actual": 65, "stream": "h"})
        )
    );
    assert_eq!(state(&srv, "h").await.0, 404);
}

/// Without headers, both bodies that can carry them append as usual, and
/// reads show no `headers` field.
#[tokio::test]
async fn the_same_records_without_headers_are_accepted() {
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
    let (_, page) = state(&srv, "h").await;
    let records = page["records"].as_array().unwrap();
    let bodies: Vec<&Value> = records.iter().map(|r| &r["body"]).collect();
    assert_eq!(bodies, [&json!("a"), &json!("b"), &json!("c")]);
    assert!(records.iter().all(|r| r.get("headers").is_none()), "{page}");
}
