//! The append route's fast path (`crate::routes::append_route`) answers
//! exactly as the router does. Two servers over fresh data directories
//! get the same hand-written requests: one through [`serve`], which puts
//! the fast path in front of the router, one through [`serve_router`] with
//! the bare router. Every answer — status, headers, body bytes — must be
//! the same (the acks' timestamps aside), and afterwards so must the
//! streams' durable contents and the per-route request counters.

use crate::app;
use crate::auth::{hash_secret, to_hex, Auth, AuthSettings, TokenSettings};
use crate::server::serve::{serve, serve_router};
use crate::server::ServerConfig;
use crate::state::{AppState, HttpMetrics};
use fencelog_engine::{Config, Engine};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One server of the pair, and what the test reads back from it.
struct Side {
    addr: SocketAddr,
    engine: Engine,
    metrics: Arc<HttpMetrics>,
    _dir: tempfile::TempDir,
}

/// Header bytes over which both servers answer 431 (small, so a test
/// request can cross it).
const HEADER_BYTES_MAX: usize = 2048;

async fn side(fast: bool, auth: Auth) -> Side {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open_with(dir.path(), Config::default()).unwrap();
    let mut state = AppState::new(engine.clone()).with_auth(auth);
    state.limits.header_bytes_max = HEADER_BYTES_MAX;
    let metrics = state.http_metrics.clone();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = ServerConfig::default();
    let never = std::future::pending();
    if fast {
        tokio::spawn(serve(listener, state, config, never));
    } else {
        let build = move |shutdown| {
            state.shutdown = shutdown;
            app(state)
        };
        tokio::spawn(serve_router(listener, build, config, never));
    }
    Side {
        addr,
        engine,
        metrics,
        _dir: dir,
    }
}

/// The whole response to `request` on a fresh connection, with the parts
/// that differ between any two servers (the date, the acks' clocks)
/// replaced by a fixed text.
async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(request).await.unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let text = mask_number(&text, "\"timestamp_ms\":");
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole response");
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default();
    // Header order carries no meaning (no name repeats here): axum puts
    // content-length in itself, hyper after the others.
    let mut headers: Vec<&str> = lines
        .map(|l| match l.to_ascii_lowercase().starts_with("date:") {
            true => "date: <masked>",
            false => l,
        })
        .collect();
    headers.sort_unstable();
    format!("{status}\n{}\n\n{body}", headers.join("\n"))
}

/// `text` with the digits after every `key` replaced by `0`.
fn mask_number(text: &str, key: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(key) {
        let (head, tail) = rest.split_at(at + key.len());
        out.push_str(head);
        out.push('0');
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// A POST to `path` with `headers` (each a whole `Name: value` line) and
/// `body`, on a connection the server closes after answering.
fn post(path: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    request("POST", path, headers, body)
}

fn request(method: &str, path: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    fencelog_testkit::http::raw_request(method, path, headers, body)
}

/// Sends each request to both servers in turn and asserts the answers
/// match; returns them for the caller's own checks.
async fn both_answer_alike(fast: &Side, router: &Side, requests: &[Vec<u8>]) -> Vec<String> {
    let mut answers = Vec::new();
    for req in requests {
        let a = exchange(fast.addr, req).await;
        let b = exchange(router.addr, req).await;
        assert_eq!(a, b, "request {:?}", String::from_utf8_lossy(req));
        answers.push(a);
    }
    answers
}

/// [`both_answer_alike`], then: the answers have `statuses`, and
/// `stream` holds `expect` (seq, token, body) on both servers.
async fn both_end_alike(
    fast: &Side,
    router: &Side,
    requests: &[Vec<u8>],
    statuses: &[u16],
    stream: &str,
    expect: &[(u64, u64, &[u8])],
) {
    let answers = both_answer_alike(fast, router, requests).await;
    let got: Vec<u16> = answers.iter().map(|a| status(a)).collect();
    assert_eq!(got, statuses, "{answers:#?}");
    let expect: Vec<(u64, u64, Vec<u8>)> = expect
        .iter()
        .map(|(s, t, b)| (*s, *t, b.to_vec()))
        .collect();
    assert_eq!(contents(fast, stream), expect);
    assert_eq!(contents(router, stream), expect);
}

/// The status of an answer from [`exchange`].
fn status(answer: &str) -> u16 {
    answer.split(' ').nth(1).unwrap().parse().unwrap()
}

/// The `http_requests` counter lines (not the timings, which differ).
fn request_counts(side: &Side) -> Vec<String> {
    let text = side.metrics.encode_without_eof();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("fencelog_http_requests_total{"))
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// Every record of `stream` as (seq, token, body), read from the engine.
fn contents(side: &Side, stream: &str) -> Vec<(u64, u64, Vec<u8>)> {
    let page = side.engine.read(stream, 0, 1000, 1 << 20).unwrap();
    page.records
        .into_iter()
        .map(|r| (r.seq, r.fencing_token, r.body.to_vec()))
        .collect()
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "a table: each request, the status it gets and what the stream holds after"
)]
async fn the_fast_path_answers_every_append_as_the_router_does() {
    let fast = side(true, Auth::Open).await;
    let router = side(false, Auth::Open).await;
    let path = "/v1/streams/s/records";
    let raw = "Content-Type: application/octet-stream";
    let json = "Content-Type: application/json";
    let pad = format!("X-Pad: {}", "p".repeat(HEADER_BYTES_MAX));
    let long_name = format!("/v1/streams/{}/records", "n".repeat(300));
    let requests = vec![
        post(path, &[raw, "Fencing-Token: 5"], b"first"),
        post(path, &[raw, "Fencing-Token: 3"], b"stale"),
        post(path, &[raw], b"no token"),
        post(path, &[raw, "Fencing-Token: five"], b"bad token"),
        post(
            path,
            &[raw, "Fencing-Token: 5", "Fencing-Token: 6"],
            b"twice",
        ),
        post(
            path,
            &[raw, "Fencing-Token: 5", "Match-Seq-Num: 0"],
            b"behind",
        ),
        post(
            path,
            &[raw, "Fencing-Token: 5", "Match-Seq-Num: 1"],
            b"matched",
        ),
        post(
            path,
            &[json],
            br#"{"fencing_token": 6, "records": [{"body": "a"}, {"body": "b"}]}"#,
        ),
        post(
            path,
            &[json],
            br#"{"fencing_token": 6, "records": [], "extra": 1}"#,
        ),
        post(
            path,
            &[json],
            br#"{"fencing_token": 4, "records": [{"body": "old"}]}"#,
        ),
        post(path, &[json], b"{not json"),
        post(
            path,
            &[
                "Content-Type: application/vnd.fencelog.batch",
                "Fencing-Token: 6",
            ],
            b"\x01",
        ),
        post(
            path,
            &[raw, "Fencing-Token: 6", &pad],
            b"over the header limit",
        ),
        post(
            "/v1/streams/a~b/records",
            &[raw, "Fencing-Token: 1"],
            b"bad name",
        ),
        post(
            "/v1/streams/../records",
            &[raw, "Fencing-Token: 1"],
            b"dot name",
        ),
        post(&long_name, &[raw, "Fencing-Token: 1"], b"long name"),
        post(
            "/v1/streams/p%41/records",
            &[raw, "Fencing-Token: 1"],
            b"encoded",
        ),
        post(
            "/v1/streams/p%zz/records",
            &[raw, "Fencing-Token: 1"],
            b"bad escape",
        ),
        post(
            "/v1/streams//records",
            &[raw, "Fencing-Token: 1"],
            b"empty name",
        ),
        post(
            "/v1/streams/s/records/",
            &[raw, "Fencing-Token: 6"],
            b"trailing slash",
        ),
        post(
            "/v1/streams/s/records?x=1",
            &[raw, "Fencing-Token: 6"],
            b"query",
        ),
        request("PUT", path, &[raw, "Fencing-Token: 6"], b"wrong method"),
        request("GET", "/v1/streams/s/records?start_seq=0", &[], b""),
    ];
    let statuses = [
        200, 409, 400, 400, 400, 412, 200, 200, 400, 409, 400, 400, 431, 400, 400, 400, 200, 400,
        400, 404, 200, 405, 200,
    ];
    let expect: [(u64, u64, &[u8]); 5] = [
        (0, 5, b"first"),
        (1, 5, b"matched"),
        (2, 6, b"a"),
        (3, 6, b"b"),
        (4, 6, b"query"),
    ];
    both_end_alike(&fast, &router, &requests, &statuses, "s", &expect).await;
    let encoded = vec![(0, 1, b"encoded".to_vec())];
    assert_eq!(contents(&fast, "pA"), encoded);
    assert_eq!(contents(&router, "pA"), encoded);
    let counts = request_counts(&fast);
    assert_eq!(counts, request_counts(&router));
    let records = r#"route="/v1/streams/{stream}/records""#;
    for line in [
        format!(r#"fencelog_http_requests_total{{method="POST",{records},status="200"}} 5"#),
        format!(r#"fencelog_http_requests_total{{method="POST",{records},status="409"}} 2"#),
        format!(r#"fencelog_http_requests_total{{method="POST",{records},status="431"}} 1"#),
    ] {
        assert!(counts.contains(&line), "{line} in {counts:#?}");
    }
}

/// The front reads a plain append's headers from its buffer rather than
/// through `http` (`crate::decode::header_view`): names in any case,
/// values byte for byte, repeats, encodings and lengths all read as the
/// router reads them. The last requests are not plain (a name or a query
/// with bytes the front leaves to `http`) and take the other way.
#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "a table: each request, the status it gets and what the stream holds after"
)]
async fn the_front_reads_headers_as_the_router_does() {
    let fast = side(true, Auth::Open).await;
    let router = side(false, Auth::Open).await;
    let path = "/v1/streams/h/records";
    let raw = "Content-Type: application/octet-stream";
    let requests = vec![
        post(path, &[raw, "fencing-TOKEN:   2  "], b"any case"),
        post(
            path,
            &[raw, "Fencing-Token: 2", "FENCING-token: 2"],
            b"twice",
        ),
        post(path, &[raw, "Fencing-Token: 2\u{e9}"], b"not ascii"),
        post(path, &[raw, "Fencing-Token: 2\t"], b"tab"),
        post(
            path,
            &[raw, "Fencing-Token: 2", "Content-Encoding: gzip"],
            b"zip",
        ),
        post(
            path,
            &[raw, "Fencing-Token: 2", "Content-Encoding: identity"],
            b"plain",
        ),
        post(
            path,
            &["Fencing-Token: 2", "Match-Seq-Num: 9"],
            b"no type, behind",
        ),
        post(
            path,
            &["CONTENT-TYPE: Application/JSON; charset=utf-8"],
            br#"{"fencing_token": 2, "records": [{"body": "j"}]}"#,
        ),
        post(
            path,
            &["Content-Type: application/json", "Fencing-Token: 2"],
            br#"{"fencing_token": 2, "records": []}"#,
        ),
        post(
            path,
            &[raw, "Fencing-Token: 2", "Producer-Id: p"],
            b"half a producer",
        ),
        post(
            path,
            &[raw, "Fencing-Token: 2", "Producer-Id: p", "producer-seq: 0"],
            b"producer",
        ),
        post(
            path,
            &[raw, "Fencing-Token: 2", "Producer-Id: p", "Producer-Seq: 0"],
            b"again",
        ),
        post(
            path,
            &[raw, "Fencing-Token: 1", "X_Under.Score~: v"],
            b"stale",
        ),
        post(path, &[raw, "Fencing-Token: 3", "X!: v"], b"not plain name"),
        post(
            "/v1/streams/h/records?x=%20",
            &[raw, "Fencing-Token: 3"],
            b"not plain query",
        ),
    ];
    let statuses = [
        200, 400, 400, 200, 415, 200, 412, 200, 400, 400, 200, 200, 409, 200, 200,
    ];
    let expect: [(u64, u64, &[u8]); 7] = [
        (0, 2, b"any case"),
        (1, 2, b"tab"),
        (2, 2, b"plain"),
        (3, 2, b"j"),
        (4, 2, b"producer"),
        (5, 3, b"not plain name"),
        (6, 3, b"not plain query"),
    ];
    both_end_alike(&fast, &router, &requests, &statuses, "h", &expect).await;
    assert_eq!(request_counts(&fast), request_counts(&router));
}

fn token(name: &str, scopes: &[&str], prefix: &str) -> TokenSettings {
    TokenSettings {
        name: name.into(),
        sha256: to_hex(&hash_secret(&format!("{name}-secret"))),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        stream_prefix: prefix.into(),
    }
}

fn tokens() -> Auth {
    Auth::from_settings(&AuthSettings {
        tokens: vec![
            token("writer", &["append"], "in-"),
            token("reader", &["read"], ""),
        ],
    })
    .unwrap()
}

#[tokio::test]
async fn the_fast_path_authorizes_as_the_router_does() {
    let fast = side(true, tokens()).await;
    let router = side(false, tokens()).await;
    let raw = "Content-Type: application/octet-stream";
    let writer = "Authorization: Bearer writer-secret";
    let reader = "Authorization: Bearer reader-secret";
    let in_s = "/v1/streams/in-s/records";
    let bad_in = format!("/v1/streams/in-{}/records", "~".repeat(3));
    let pad = format!("X-Pad: {}", "p".repeat(HEADER_BYTES_MAX));
    let requests = vec![
        post(in_s, &[raw, "Fencing-Token: 2"], b"anonymous"),
        post(
            in_s,
            &[raw, "Fencing-Token: 2", "Authorization: Bearer nope"],
            b"unknown",
        ),
        post(
            in_s,
            &[raw, "Fencing-Token: 2", "Authorization: Basic eDp5"],
            b"basic",
        ),
        post(in_s, &[raw, "Fencing-Token: 2", reader], b"read only"),
        post(
            "/v1/streams/out-s/records",
            &[raw, "Fencing-Token: 2", writer],
            b"outside",
        ),
        post(&bad_in, &[raw, "Fencing-Token: 2", writer], b"bad name"),
        post(
            "/v1/streams/a~b/records",
            &[raw, "Fencing-Token: 2", writer],
            b"bad, outside",
        ),
        post(
            in_s,
            &[raw, "Fencing-Token: 2", &pad],
            b"over the limit, anonymous",
        ),
        post(
            in_s,
            &[raw, "Fencing-Token: 2", writer, writer],
            b"two authorizations",
        ),
        post(in_s, &[raw, "Fencing-Token: 2", writer], b"written"),
        post(in_s, &[raw, "Fencing-Token: 1", writer], b"stale"),
    ];
    let answers = both_answer_alike(&fast, &router, &requests).await;
    let statuses: Vec<u16> = answers.iter().map(|a| status(a)).collect();
    assert_eq!(
        statuses,
        [401, 401, 401, 403, 403, 400, 403, 431, 401, 200, 409],
        "{answers:#?}"
    );
    assert!(
        answers[0]
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{}",
        answers[0]
    );
    assert!(
        answers[8].contains("appears more than once"),
        "{}",
        answers[8]
    );
    let expect = vec![(0, 2, b"written".to_vec())];
    assert_eq!(contents(&fast, "in-s"), expect);
    assert_eq!(contents(&router, "in-s"), expect);
    assert_eq!(request_counts(&fast), request_counts(&router));
}
