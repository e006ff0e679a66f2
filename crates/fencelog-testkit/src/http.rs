//! Shared helpers for the HTTP tests: an in-process server on an ephemeral
//! port, a small JSON client, raw-socket requests and an SSE reader.

use bytes::Bytes;
use fencelog_engine::{Config, Engine};
use fencelog_server::server::{self as http, ServerConfig};
use fencelog_server::state::{AppState, HttpLimits};
use futures_util::{Stream, StreamExt};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub struct TestServer {
    pub addr: SocketAddr,
    pub api: Api,
    pub engine: Engine,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<io::Result<()>>>,
    pub dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(Config::default(), |_| {}, ServerConfig::default()).await
    }

    pub async fn start_with(
        config: Config,
        tweak: impl FnOnce(&mut HttpLimits),
        server_config: ServerConfig,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open_with(dir.path(), config).unwrap();
        Self::serve(engine, tweak, server_config, dir).await
    }

    /// Serves an engine the test opened itself (on a fault-injecting
    /// storage, say) over `dir`, which the server keeps alive.
    pub async fn with_engine(engine: Engine, dir: tempfile::TempDir) -> Self {
        Self::serve(engine, |_| {}, ServerConfig::default(), dir).await
    }

    async fn serve(
        engine: Engine,
        tweak: impl FnOnce(&mut HttpLimits),
        server_config: ServerConfig,
        dir: tempfile::TempDir,
    ) -> Self {
        let mut state = AppState::new(engine.clone());
        tweak(&mut state.limits);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(http::serve(listener, state, server_config, async move {
            let _ = stopped.await;
        }));
        TestServer {
            addr,
            api: Api::new(format!("http://{addr}")),
            engine,
            stop: Some(stop),
            task: Some(task),
            dir,
        }
    }

    /// `http://ADDR`.
    pub fn url(&self) -> &str {
        &self.api.base
    }

    /// Sends the shutdown signal and waits for the drain and engine shutdown.
    pub async fn stop(mut self) -> io::Result<()> {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap()
    }
}

#[derive(Clone)]
pub struct Api {
    pub client: reqwest::Client,
    pub base: String,
}

pub fn records_json(bodies: &[&str]) -> Value {
    Value::Array(bodies.iter().map(|b| json!({ "body": b })).collect())
}

impl Api {
    pub fn new(base: String) -> Self {
        Api {
            client: reqwest::Client::new(),
            base,
        }
    }

    async fn answer(resp: reqwest::Response) -> (u16, Value) {
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("non-JSON response {status}: {text:?} ({e})"));
        (status, body)
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        Self::answer(resp).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let resp = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        Self::answer(resp).await
    }

    /// `GET /metrics`, which must answer 200: the Prometheus text.
    pub async fn metrics_text(&self) -> String {
        let resp = self
            .client
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        resp.text().await.unwrap()
    }

    pub async fn append(&self, stream: &str, token: u64, bodies: &[&str]) -> (u16, Value) {
        self.post_json(
            &format!("/v1/streams/{stream}/records"),
            &json!({ "fencing_token": token, "records": records_json(bodies) }),
        )
        .await
    }

    pub async fn append_matching(
        &self,
        stream: &str,
        token: u64,
        bodies: &[&str],
        match_seq_num: u64,
    ) -> (u16, Value) {
        self.post_json(
            &format!("/v1/streams/{stream}/records"),
            &json!({
                "fencing_token": token,
                "records": records_json(bodies),
                "match_seq_num": match_seq_num,
            }),
        )
        .await
    }

    pub async fn append_raw(
        &self,
        stream: &str,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> (u16, Value) {
        let mut req = self
            .client
            .post(format!("{}/v1/streams/{stream}/records", self.base))
            .header("content-type", "application/octet-stream");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        Self::answer(req.body(body).send().await.unwrap()).await
    }

    pub async fn fence(&self, stream: &str, token: u64) -> (u16, Value) {
        self.post_json(
            &format!("/v1/streams/{stream}/fence"),
            &json!({ "fencing_token": token }),
        )
        .await
    }

    pub async fn state(&self, stream: &str) -> (u16, Value) {
        self.get(&format!("/v1/streams/{stream}")).await
    }

    pub async fn read(&self, stream: &str, query: &str) -> (u16, Value) {
        self.get(&format!("/v1/streams/{stream}/records?{query}"))
            .await
    }

    /// Every record body of the stream, in order.
    pub async fn bodies(&self, stream: &str) -> Vec<String> {
        let (status, body) = self.read(stream, "start_seq=0&count=10000").await;
        assert_eq!(status, 200, "{body}");
        body["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["body"].as_str().unwrap().to_string())
            .collect()
    }

    pub async fn assert_healthy(&self) {
        assert_eq!(self.get("/healthz").await, (200, json!({ "status": "ok" })));
    }

    pub async fn tail(&self, stream: &str, query: &str, last_event_id: Option<u64>) -> SseReader {
        let mut req = self
            .client
            .get(format!("{}/v1/streams/{stream}/records?{query}", self.base))
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id.to_string());
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(
            resp.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        SseReader::new(resp.bytes_stream())
    }
}

/// Stale rejection body, exactly as the API sends it.
pub fn stale_body(stream: &str, presented: u64, highest: u64, next_seq: u64) -> Value {
    json!({
        "error": "stale_fencing_token",
        "message": format!("fencing token {presented} is below the stream's highest accepted token {highest} (next_seq {next_seq})"),
        "stream": stream,
        "presented_token": presented,
        "highest_token": highest,
        "next_seq": next_seq,
    })
}

/// A stream's state, exactly as the API sends it, for a stream that was
/// never trimmed, sealed or configured: `bytes` is what its batches take
/// on disk ([`batch_bytes`]).
pub fn state_body(
    stream: &str,
    next_seq: u64,
    highest_token: u64,
    last_timestamp_ms: u64,
    bytes: u64,
) -> Value {
    json!({
        "stream": stream,
        "first_seq": 0,
        "next_seq": next_seq,
        "highest_token": highest_token,
        "last_timestamp_ms": last_timestamp_ms,
        "sealed": false,
        "retention_age_s": null,
        "retention_bytes": null,
        "retention_respect_cursors": false,
        "bytes": bytes,
    })
}

/// Bytes one batch of `bodies` takes on disk in `stream`: the 56-byte
/// frame header, the name, and a u32 length per record (docs/design.md).
pub fn batch_bytes(stream: &str, bodies: &[&[u8]]) -> u64 {
    (56 + stream.len() + bodies.iter().map(|b| 4 + b.len()).sum::<usize>()) as u64
}

/// Sends a hand-written request on a fresh connection and reads the answer;
/// `head` should say `Connection: close`.
/// The bytes of an HTTP/1.1 request with `headers` (each a whole
/// `Name: value` line) and `body`, on a connection the server closes
/// after answering.
pub fn raw_request(method: &str, path: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

pub async fn raw_exchange(addr: SocketAddr, head: &str, body: &[u8]) -> (u16, Value) {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(body).await.unwrap();
    read_response(&mut conn).await
}

/// Reads one response from a `Connection: close` exchange.
pub async fn read_response(conn: &mut TcpStream) -> (u16, Value) {
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {text:?}"));
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap())
}

#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    pub event: String,
    pub id: Option<String>,
    pub data: String,
}

impl SseEvent {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap()
    }
}

/// Events from a live tail, parsed by the api crate's parser (the one the
/// client and the load generator use).
pub struct SseReader {
    stream: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    parser: fencelog_api::SseParser,
    parsed: VecDeque<SseEvent>,
}

impl SseReader {
    pub fn new(stream: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static) -> Self {
        SseReader {
            stream: Box::pin(stream),
            parser: fencelog_api::SseParser::new(),
            parsed: VecDeque::new(),
        }
    }

    /// The next event, or None when the server ended the stream.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(ev) = self.parsed.pop_front() {
                return Some(ev);
            }
            match self.stream.next().await {
                Some(Ok(chunk)) => {
                    let events = self.parser.push(&chunk).into_iter();
                    self.parsed.extend(events.map(|e| SseEvent {
                        event: e.event,
                        id: e.id,
                        data: e.data,
                    }));
                }
                Some(Err(e)) => panic!("SSE stream failed: {e}"),
                None => return None,
            }
        }
    }

    /// The next event, which must be of kind `event`.
    pub async fn expect(&mut self, event: &str) -> SseEvent {
        let ev = self
            .next()
            .await
            .unwrap_or_else(|| panic!("stream ended, wanted {event}"));
        assert_eq!(ev.event, event, "{ev:?}");
        ev
    }
}
