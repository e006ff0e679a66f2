//! The binary read format (`Accept: application/vnd.fencelog.batch`): its
//! exact bytes for a small stream (seqs, tokens,
//! timestamps, headers), its positions in response headers, pages that
//! span many chunks, its refusals (JSON, as for every read), and the
//! Rust client reading it to the same records as JSON.

use fencelog_client::{Client, ReadOptions, RecordIn};
use fencelog_testkit::http::TestServer;
use serde_json::{json, Value};

const BINARY: &str = "application/vnd.fencelog.batch";
const PAGE_TYPE: &str = "application/vnd.fencelog.batch; layout=read";

/// One record as the format lays it out, written out field by field here
/// rather than with the encoder under test.
fn frame(seq: u64, token: u64, ts: u64, headers: &[(&[u8], &[u8])], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&token.to_le_bytes());
    out.extend_from_slice(&ts.to_le_bytes());
    out.extend_from_slice(&(headers.len() as u16).to_le_bytes());
    for (name, value) in headers {
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(value);
    }
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    out
}

struct Page {
    status: u16,
    content_type: String,
    next_start_seq: Option<String>,
    next_seq: Option<String>,
    sealed: Option<String>,
    body: Vec<u8>,
}

impl Page {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

async fn get(srv: &TestServer, stream: &str, query: &str) -> Page {
    let resp = reqwest::Client::new()
        .get(format!("{}/v1/streams/{stream}/records?{query}", srv.url()))
        .header("accept", BINARY)
        .send()
        .await
        .unwrap();
    let header = |n: &str| {
        resp.headers()
            .get(n)
            .map(|v| v.to_str().unwrap().to_string())
    };
    Page {
        status: resp.status().as_u16(),
        content_type: header("content-type").unwrap_or_default(),
        next_start_seq: header("next-start-seq"),
        next_seq: header("next-seq"),
        sealed: header("stream-sealed"),
        body: resp.bytes().await.unwrap().to_vec(),
    }
}

#[tokio::test]
async fn a_small_stream_reads_back_as_exactly_these_bytes() {
    let srv = TestServer::start().await;
    let with_headers = vec![
        RecordIn::new("zero")
            .with_header("trace-id", "abc")
            .with_header("k", ""),
        RecordIn::new(""),
    ];
    let a = srv
        .engine
        .append_records("r", 3, with_headers, None)
        .await
        .unwrap();
    let b = srv
        .engine
        .append("r", 9, vec![vec![0xffu8, 0x00, 0x41].into()], None)
        .await
        .unwrap();
    let mut want = frame(
        0,
        3,
        a.timestamp_ms,
        &[(b"trace-id", b"abc"), (b"k", b"")],
        b"zero",
    );
    want.extend(frame(1, 3, a.timestamp_ms, &[], b""));
    want.extend(frame(2, 9, b.timestamp_ms, &[], &[0xff, 0x00, 0x41]));

    let page = get(&srv, "r", "start_seq=0").await;
    assert_eq!(page.status, 200);
    assert_eq!(page.content_type, PAGE_TYPE);
    assert_eq!(page.body, want);
    assert_eq!(page.next_start_seq.as_deref(), Some("3"));
    assert_eq!(page.next_seq.as_deref(), Some("3"));
    assert_eq!(page.sealed, None);

    // count and bytes page as JSON does: the second record alone.
    let page = get(&srv, "r", "start_seq=1&count=1").await;
    assert_eq!(page.body, frame(1, 3, a.timestamp_ms, &[], b""));
    assert_eq!(page.next_start_seq.as_deref(), Some("2"));
    assert_eq!(page.next_seq.as_deref(), Some("3"));

    // At the tail: an empty body, not an error; sealed says so.
    let page = get(&srv, "r", "start_seq=3").await;
    assert_eq!((page.status, page.body.len()), (200, 0));
    assert_eq!(page.next_start_seq.as_deref(), Some("3"));
    srv.engine.seal("r", 9).await.unwrap();
    let page = get(&srv, "r", "start_seq=3").await;
    assert_eq!((page.status, page.body.len()), (200, 0));
    assert_eq!(page.sealed.as_deref(), Some("true"));
}

#[tokio::test]
async fn refusals_are_json_whatever_the_accept_header() {
    let srv = TestServer::start().await;
    srv.engine
        .append("r", 1, vec!["a".into(), "b".into()], None)
        .await
        .unwrap();
    let page = get(&srv, "r", "start_seq=5").await;
    assert_eq!(page.status, 416);
    assert_eq!(page.content_type, "application/json");
    assert_eq!(
        page.json(),
        json!({
            "error": "out_of_range",
            "message": "start_seq 5 is past the stream's next_seq 2",
            "stream": "r",
            "start_seq": 5,
            "first_seq": 0,
            "next_seq": 2,
        })
    );
    let page = get(&srv, "nope", "").await;
    assert_eq!(page.status, 404);
    assert_eq!(
        page.json(),
        json!({"error": "stream_not_found", "message": "stream not found", "stream": "nope"})
    );
    let page = get(&srv, "r", "count=0").await;
    assert_eq!(page.status, 400);
    assert_eq!(page.json()["error"], "bad_request");
    assert_eq!(page.json()["stream"], "r");
    assert_eq!(page.next_seq, None, "a refusal carries no positions");
}

/// A page of bodies larger than a chunk (64 KiB) and of many small ones
/// streams in pieces that concatenate to the records, which the client
/// decodes to exactly what the JSON read gives.
#[tokio::test]
async fn the_client_reads_binary_pages_to_the_same_records_as_json() {
    let srv = TestServer::start().await;
    let big: Vec<bytes::Bytes> = (0..3u8).map(|i| vec![i; 150_000].into()).collect();
    srv.engine.append("s", 2, big, None).await.unwrap();
    // Two batches: the engine takes at most 1000 records in one.
    for half in [0..1000, 1000..2000] {
        let small: Vec<RecordIn> = half
            .map(|i| RecordIn::new(format!("record {i}")).with_header("n", format!("{i}")))
            .collect();
        srv.engine
            .append_records("s", 2, small, None)
            .await
            .unwrap();
    }
    let c = Client::new(srv.url().to_string()).unwrap();
    let json = ReadOptions {
        count: Some(10_000),
        bytes: Some(8 << 20),
        ..ReadOptions::default()
    };
    let binary = ReadOptions {
        binary: true,
        ..json.clone()
    };
    let want = c.read("s", 0, &json).await.unwrap();
    let got = c.read("s", 0, &binary).await.unwrap();
    assert_eq!(got.records.len(), 2003);
    assert_eq!(got.records, want.records);
    assert_eq!(
        (got.next_start_seq, got.next_seq, got.sealed),
        (2003, 2003, false)
    );
    // A 416 through the client is the same typed error as over JSON.
    let err = c.read("s", 9999, &binary).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        c.read("s", 9999, &json).await.unwrap_err().to_string()
    );
}
