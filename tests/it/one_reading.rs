//! "One request, one reading", against the real binary: every
//! way a request could mean two things is a 400 (415 for an encoding or a
//! content type the route does not take) with the JSON error body, and each
//! ends with the data unchanged and the server healthy.

use crate::support::serve;
use fencelog_testkit::process::ServerProcess;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One request on its own connection, as raw bytes; returns the status,
/// the head and the body.
fn raw(srv: &ServerProcess, request: &[u8]) -> (u16, String, Value) {
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {:?}", &text[..text.len().min(300)]));
    let body = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", &text[..text.len().min(300)]));
    (status, head.to_string(), body)
}

fn post(path: &str, headers: &[&str], body: &str) -> Vec<u8> {
    let mut r = format!("POST {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
    for h in headers {
        r.push_str(h);
        r.push_str("\r\n");
    }
    r.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    r.into_bytes()
}

const JSON: &str = "Content-Type: application/json";
const RECORDS: &str = "/v1/streams/s/records";

/// A server with stream `s` holding one record at token 10.
fn start(dir: &std::path::Path) -> ServerProcess {
    let srv = serve().data_dir(dir.join("data")).start();
    let (status, _, _) = raw(
        &srv,
        &post(
            RECORDS,
            &[JSON],
            r#"{"fencing_token": 10, "records": [{"body": "kept"}]}"#,
        ),
    );
    assert_eq!(status, 200);
    srv
}

fn snapshot(srv: &ServerProcess) -> Value {
    let get = format!("GET {RECORDS}?start_seq=0 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    raw(srv, get.as_bytes()).2
}

/// Sends `request`, expects `status` with exactly `body`, then checks that
/// nothing changed and the server is healthy.
fn refused(request: Vec<u8>, status: u16, body: Value) {
    let tmp = tempfile::tempdir().unwrap();
    let srv = start(tmp.path());
    let before = snapshot(&srv);
    let (got, _, answer) = raw(&srv, &request);
    let shown = String::from_utf8_lossy(&request[..request.len().min(200)]).into_owned();
    assert_eq!((got, &answer), (status, &body), "{shown}");
    assert_eq!(
        snapshot(&srv),
        before,
        "the refused request changed the stream"
    );
    let health = raw(
        &srv,
        b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(health.0, 200);
    srv.sigterm_and_wait();
}

/// A 400 about stream `s`: every error a stream route answers names it.
fn bad(message: &str) -> Value {
    json!({"error": "bad_request", "message": message, "stream": "s"})
}

#[test]
fn a_repeated_json_key_is_400_not_last_wins() {
    refused(
        post(
            RECORDS,
            &[JSON],
            r#"{"fencing_token":1,"fencing_token":100,"records":[{"body":"x"}]}"#,
        ),
        400,
        bad("the body has the field \"fencing_token\" more than once"),
    );
}

#[test]
fn a_repeated_record_field_is_400() {
    refused(
        post(
            RECORDS,
            &[JSON],
            r#"{"fencing_token":10,"records":[{"body":"x","body":"y"}]}"#,
        ),
        400,
        bad("records[0] has the field \"body\" more than once"),
    );
}

#[test]
fn repeated_fencing_token_headers_are_400() {
    refused(
        post(RECORDS, &["Fencing-Token: 10", "Fencing-Token: 100"], "x"),
        400,
        bad("header fencing-token appears more than once"),
    );
}

#[test]
fn repeated_match_seq_num_headers_are_400() {
    refused(
        post(
            RECORDS,
            &["Fencing-Token: 10", "Match-Seq-Num: 1", "Match-Seq-Num: 5"],
            "x",
        ),
        400,
        bad("header match-seq-num appears more than once"),
    );
}

#[test]
fn repeated_producer_id_headers_are_400() {
    refused(
        post(
            RECORDS,
            &[
                "Fencing-Token: 10",
                "Producer-Seq: 0",
                "Producer-Id: a",
                "Producer-Id: b",
            ],
            "x",
        ),
        400,
        bad("header producer-id appears more than once"),
    );
}

#[test]
fn a_match_seq_num_header_on_a_json_append_is_400() {
    refused(
        post(RECORDS, &[JSON, "Match-Seq-Num: 5"], r#"{"fencing_token":10,"records":[{"body":"x"}]}"#),
        400,
        bad("header match-seq-num is for raw and binary-batch appends; a JSON append carries its fields in the body"),
    );
}

#[test]
fn a_misspelled_append_field_is_400_not_ignored() {
    refused(
        post(RECORDS, &[JSON], r#"{"fencing_token":10,"match_seq_numb":0,"records":[{"body":"x"}]}"#),
        400,
        bad("the body has an unknown field \"match_seq_numb\"; the fields are fencing_token, match_seq_num, not_after_ms, producer_id, producer_seq, records"),
    );
}

#[test]
fn an_unknown_record_field_is_400() {
    refused(
        post(
            RECORDS,
            &[JSON],
            r#"{"fencing_token":10,"records":[{"body":"x","extra":1}]}"#,
        ),
        400,
        bad("records[0] has an unknown field \"extra\"; the fields are body, body_base64, headers, headers_base64"),
    );
}

#[test]
fn an_unknown_fence_field_is_400() {
    refused(
        post(
            "/v1/streams/s/fence",
            &[JSON],
            r#"{"fencing_token":11,"fencing_tokens":12}"#,
        ),
        400,
        bad("the body has an unknown field \"fencing_tokens\"; the fields are fencing_token, not_after_ms"),
    );
}

#[test]
fn a_token_past_u64_is_quoted_as_sent() {
    refused(
        post("/v1/streams/s/fence", &[JSON], r#"{"fencing_token":18446744073709551616}"#),
        400,
        bad("fencing_token must be an integer in 1..=18446744073709551615, got 18446744073709551616"),
    );
}

#[test]
fn a_fence_that_is_not_json_is_415() {
    refused(
        post(
            "/v1/streams/s/fence",
            &["Content-Type: text/plain"],
            r#"{"fencing_token":11}"#,
        ),
        415,
        json!({"error": "unsupported_media_type", "message": "a fence body is JSON: send Content-Type: application/json", "stream": "s"}),
    );
}

#[test]
fn transfer_encoding_other_than_chunked_is_415() {
    let body = r#"{"fencing_token":11,"records":[{"body":"x"}]}"#;
    let request = format!(
        "POST {RECORDS} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{JSON}\r\nTransfer-Encoding: gzip, chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    refused(
        request.into_bytes(),
        415,
        json!({"error": "unsupported_media_type", "message": "Transfer-Encoding \"gzip, chunked\" is not supported: send the body as is, or chunked", "stream": "s"}),
    );
}

#[test]
fn a_compressed_body_is_415() {
    refused(
        post(
            RECORDS,
            &["Fencing-Token: 11", "Content-Encoding: gzip"],
            "x",
        ),
        415,
        json!({"error": "unsupported_media_type", "message": "Content-Encoding \"gzip\" is not supported: send the body uncompressed", "stream": "s"}),
    );
}

#[test]
fn headers_over_the_limit_are_431_with_a_json_body() {
    let mut request = format!("GET {RECORDS} HTTP/1.1\r\nHost: t\r\n");
    request.push_str(&format!(
        "X-Big: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(40 << 10)
    ));
    refused(
        request.into_bytes(),
        431,
        json!({"error": "headers_too_large", "message": "the request headers are 40985 bytes, over the server's limit of 32768"}),
    );
}

#[test]
fn a_request_hyper_cannot_parse_is_400_with_a_json_body() {
    refused(
        b"POST /v1/streams/s/records HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n".to_vec(),
        400,
        // hyper's own answer: no route was reached, so no stream is named.
        json!({"error": "bad_request", "message": "malformed HTTP request"}),
    );
}

#[test]
fn the_chunked_body_that_is_plain_chunked_is_taken() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = start(tmp.path());
    let body = r#"{"fencing_token":11,"records":[{"body":"chunked"}]}"#;
    let request = format!(
        "POST {RECORDS} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{JSON}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    let (status, head, ack) = raw(&srv, request.as_bytes());
    assert_eq!(status, 200, "{ack}");
    assert_eq!(ack["first_seq"], json!(1));
    assert!(
        head.to_ascii_lowercase().contains("keep-alive: timeout=9"),
        "{head}"
    );
    srv.sigterm_and_wait();
}
