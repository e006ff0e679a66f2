//! The fencelog target: its HTTP API over raw connections, and an
//! in-process server for runs without `--server`.

use super::http1::{self, Endpoint};
use super::{BenchArgs, BenchError, Encoding, Outcome, StreamDump, Workload};
use bytes::Bytes;
use fencelog_api::read::READ_COUNT_CAP;
use fencelog_api::{batch, header, sse, AppendAck, ErrorBody, ErrorCode, ReadPage};
use fencelog_api::{RecordJson, SseEvent, SseParser, StreamInfo};
use fencelog_engine::Engine;
use fencelog_server::server::{serve, ServerConfig};
use fencelog_server::state::AppState;
use http_body_util::BodyExt;
use hyper::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use hyper::{Method, StatusCode};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub struct Backend {
    endpoint: Endpoint,
    url: String,
    encoding: Encoding,
}

impl Backend {
    pub async fn new(url: &str, args: &BenchArgs) -> Result<Backend, BenchError> {
        Ok(Backend {
            endpoint: Endpoint::parse(url).await?,
            url: url.to_string(),
            encoding: args.effective_encoding(),
        })
    }

    /// `--encoding client`: the client crate, one connection per bench
    /// client like every other target.
    fn client(&self) -> Result<Option<fencelog_client::Client>, BenchError> {
        let reqwest = match self.encoding {
            Encoding::Client => false,
            Encoding::ClientReqwest => true,
            _ => return Ok(None),
        };
        fencelog_client::Client::builder(&self.url)
            .pool_max_connections(1)
            .use_reqwest(reqwest)
            .build()
            .map(Some)
            .map_err(|e| BenchError::args(format!("--server: {e}")))
    }
}

impl super::Backend for Backend {
    type Conn = Conn;

    fn name(&self) -> &'static str {
        "fencelog"
    }

    async fn connect(&self) -> Result<Conn, BenchError> {
        Ok(Conn {
            http: http1::Conn::connect(&self.endpoint).await?,
            at: self.endpoint.authority.clone(),
            encoding: self.encoding,
            client: self.client()?,
        })
    }

    fn supports(&self, _workload: Workload) -> bool {
        true
    }

    fn tail_endpoint(&self) -> Result<Endpoint, BenchError> {
        Ok(self.endpoint.clone())
    }
}

pub struct Conn {
    http: http1::Conn,
    /// The `host:port` the connection goes to.
    at: String,
    encoding: Encoding,
    /// `--encoding client`: appends go through it.
    client: Option<fencelog_client::Client>,
}

/// An append through the client crate, its answer as the bench counts it.
async fn client_append(
    client: &fencelog_client::Client,
    stream: &str,
    token: u64,
    records: &[Bytes],
) -> Result<Outcome, BenchError> {
    let result = match records {
        [one] => client.append_raw(stream, token, one.clone(), None).await,
        _ => {
            client
                .append_batch_binary(stream, token, records, None)
                .await
        }
    };
    match result {
        Ok(ack) => Ok(Outcome::Appended {
            first_seq: ack.first_seq,
        }),
        Err(fencelog_client::ClientError::StaleToken { .. }) => Ok(Outcome::Stale),
        Err(e) => Err(BenchError::target(format!("{stream}: {e}"))),
    }
}

impl Conn {
    /// Follows a cluster's leader hint: a write answered through another
    /// node moves this connection to the shard's leader, as a smart
    /// client does, so the run measures the cluster and not a forwarding
    /// hop per write. A single node sends no hint.
    async fn follow(&mut self, hint: Option<String>) -> Result<(), BenchError> {
        let Some(addr) = hint.filter(|a| *a != self.at) else {
            return Ok(());
        };
        let endpoint = Endpoint::parse(&format!("http://{addr}")).await?;
        self.http = http1::Conn::connect(&endpoint).await?;
        self.at = addr;
        Ok(())
    }
}

/// The bytes of a record read back.
fn record_bytes(r: RecordJson) -> Result<Bytes, BenchError> {
    let seq = r.seq;
    r.body
        .into_bytes()
        .map_err(|e| BenchError::target(format!("record {seq}: {e}")))
}

fn unexpected(what: &str, status: StatusCode, body: &[u8]) -> BenchError {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
    BenchError::target(format!("{what}: HTTP {status}: {text}"))
}

fn parse<'a, T: Deserialize<'a>>(what: &str, body: &'a [u8]) -> Result<T, BenchError> {
    serde_json::from_slice(body).map_err(|e| BenchError::target(format!("{what}: bad JSON: {e}")))
}

fn records_path(stream: &str) -> String {
    // Pushed, not formatted: once per request on the generator.
    let mut path = String::with_capacity(stream.len() + 20);
    path.push_str("/v1/streams/");
    path.push_str(stream);
    path.push_str("/records");
    path
}

/// A JSON append built by hand: our bodies are plain ASCII letters, digits
/// and dots, so they need no escaping and serde would only add cost. The
/// test below holds it to [`fencelog_api::AppendRequest`]'s bytes.
fn json_append(token: u64, records: &[Bytes]) -> Bytes {
    let bytes: usize = records.iter().map(|r| r.len() + 12).sum();
    let mut out = Vec::with_capacity(bytes + 48);
    out.extend_from_slice(format!("{{\"fencing_token\":{token},\"records\":[").as_bytes());
    for (i, r) in records.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"body\":\"");
        out.extend_from_slice(r);
        out.extend_from_slice(b"\"}");
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

impl super::Conn for Conn {
    async fn fence(&mut self, stream: &str, token: u64) -> Result<(), BenchError> {
        let body = Bytes::from(format!("{{\"fencing_token\":{token}}}"));
        let path = format!("/v1/streams/{stream}/fence");
        let (status, out) = self
            .http
            .call(Method::POST, &path, &[http1::json_header()], body)
            .await?;
        if status != StatusCode::OK {
            return Err(unexpected(&path, status, &out));
        }
        Ok(())
    }

    async fn append(
        &mut self,
        stream: &str,
        token: u64,
        records: &[Bytes],
    ) -> Result<Outcome, BenchError> {
        if let Some(client) = &self.client {
            return client_append(client, stream, token, records).await;
        }
        let path = records_path(stream);
        let (status, hint, out) = if self.encoding == Encoding::Binary {
            let headers = [
                (CONTENT_TYPE, HeaderValue::from_static(batch::CONTENT_TYPE)),
                (
                    HeaderName::from_static(header::FENCING_TOKEN),
                    HeaderValue::from(token),
                ),
            ];
            let body = batch::encode(records.iter().map(|r| &r[..]));
            self.http
                .call_hinted(Method::POST, &path, &headers, Bytes::from(body))
                .await?
        } else if self.encoding == Encoding::Raw && records.len() == 1 {
            let headers = [
                (CONTENT_TYPE, HeaderValue::from_static(header::OCTET_STREAM)),
                (
                    HeaderName::from_static(header::FENCING_TOKEN),
                    HeaderValue::from(token),
                ),
            ];
            self.http
                .call_hinted(Method::POST, &path, &headers, records[0].clone())
                .await?
        } else {
            self.http
                .call_hinted(
                    Method::POST,
                    &path,
                    &[http1::json_header()],
                    json_append(token, records),
                )
                .await?
        };
        self.follow(hint).await?;
        match status {
            StatusCode::OK => Ok(Outcome::Appended {
                first_seq: parse::<AppendAck>(&path, &out)?.first_seq,
            }),
            _ if is_stale(status, &out) => Ok(Outcome::Stale),
            _ => Err(unexpected(&path, status, &out)),
        }
    }

    async fn read(
        &mut self,
        stream: &str,
        start_seq: u64,
        count: usize,
    ) -> Result<Vec<(u64, Bytes)>, BenchError> {
        let path = format!(
            "{}?start_seq={start_seq}&count={count}",
            records_path(stream)
        );
        let (status, out) = self
            .http
            .call(Method::GET, &path, &[], Bytes::new())
            .await?;
        if status != StatusCode::OK {
            return Err(unexpected(&path, status, &out));
        }
        let read: ReadPage = parse(&path, &out)?;
        read.records
            .into_iter()
            .map(|r| Ok((r.seq, record_bytes(r)?)))
            .collect()
    }

    async fn healthz(&mut self) -> Result<(), BenchError> {
        let (status, out) = self
            .http
            .call(Method::GET, "/healthz", &[], Bytes::new())
            .await?;
        if status != StatusCode::OK {
            return Err(unexpected("/healthz", status, &out));
        }
        Ok(())
    }

    async fn dump(&mut self, stream: &str, with_token: bool) -> Result<StreamDump, BenchError> {
        let mut dump = StreamDump::default();
        if with_token {
            let path = format!("/v1/streams/{stream}");
            let (status, out) = self
                .http
                .call(Method::GET, &path, &[], Bytes::new())
                .await?;
            if status == StatusCode::NOT_FOUND {
                return Ok(dump);
            }
            if status != StatusCode::OK {
                return Err(unexpected(&path, status, &out));
            }
            dump.highest_token = Some(parse::<StreamInfo>(&path, &out)?.highest_token);
        }
        let mut start_seq = 0u64;
        // Each pass either advances or ends, and the stream cannot hold more
        // than it has acknowledged, so this ends.
        loop {
            let path = format!(
                "{}?start_seq={start_seq}&count={READ_COUNT_CAP}",
                records_path(stream)
            );
            let (status, out) = self
                .http
                .call(Method::GET, &path, &[], Bytes::new())
                .await?;
            if status == StatusCode::NOT_FOUND && start_seq == 0 {
                return Ok(dump);
            }
            if status != StatusCode::OK {
                return Err(unexpected(&path, status, &out));
            }
            let read: ReadPage = parse(&path, &out)?;
            dump.next_seq = read.next_seq;
            let got = read.records.len();
            for r in read.records {
                let (seq, token) = (r.seq, r.fencing_token);
                dump.records.push((seq, token, record_bytes(r)?));
            }
            // The continuation, not the tail (`next_seq`), which is past
            // everything this page left out.
            start_seq = read.next_start_seq;
            if got == 0 || start_seq >= read.next_seq {
                return Ok(dump);
            }
        }
    }
}

/// A live tail on one stream: records `(seq, when it arrived)` until
/// aborted.
pub struct Tail {
    seen: Arc<AtomicU64>,
    task: JoinHandle<Result<Vec<(u64, Instant)>, BenchError>>,
    stop: Option<oneshot::Sender<()>>,
}

impl Tail {
    /// Connects and waits until the server has answered the tail request,
    /// so records appended afterwards are certain to be delivered.
    pub async fn start(endpoint: &Endpoint, stream: &str) -> Result<Tail, BenchError> {
        let mut http = http1::TailConn::connect(endpoint).await?;
        let path = format!("{}?start_seq=0", records_path(stream));
        let (status, mut body) = http
            .stream(
                &path,
                &[(ACCEPT, HeaderValue::from_static(header::EVENT_STREAM))],
            )
            .await?;
        if status != StatusCode::OK {
            return Err(BenchError::target(format!("tail {path}: HTTP {status}")));
        }
        let (stop, mut stopped) = oneshot::channel();
        let seen_count = Arc::new(AtomicU64::new(0));
        let counter = seen_count.clone();
        let task = tokio::spawn(async move {
            let _keep = http;
            let mut seen = Vec::new();
            let mut parser = SseParser::new();
            loop {
                let frame = tokio::select! {
                    f = body.frame() => f,
                    _ = &mut stopped => return Ok(seen),
                };
                let Some(frame) = frame else { return Ok(seen) };
                let frame = frame.map_err(|e| BenchError::target(format!("tail: {e}")))?;
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                let now = Instant::now();
                for event in parser.push(&data) {
                    on_event(&event, now, &mut seen)?;
                }
                counter.store(seen.len() as u64, Ordering::Relaxed);
            }
        });
        Ok(Tail {
            seen: seen_count,
            task,
            stop: Some(stop),
        })
    }

    /// Records shown so far.
    pub fn seen(&self) -> u64 {
        self.seen.load(Ordering::Relaxed)
    }

    /// Stops the tail and returns what it saw.
    pub async fn finish(mut self) -> Result<Vec<(u64, Instant)>, BenchError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task)
            .await
            .map_err(|e| BenchError::target(format!("tail task: {e}")))?
    }
}

/// Whether an answer is the server's stale-token rejection. Reads the code
/// alone: the reject workload does this for every request, on the same
/// cores as the server it measures.
fn is_stale(status: StatusCode, body: &[u8]) -> bool {
    let stale = ErrorCode::StaleFencingToken;
    // The exact bytes the server writes are read without a JSON parser;
    // anything else in general.
    status.as_u16() == stale.status()
        && (fencelog_api::fixed_json::read_stale_body(body).is_some()
            || ErrorBody::decode_code(body) == Some(stale))
}

/// Records the seqs a `records` event shows; an `error` event ends the
/// tail with its body.
fn on_event(
    event: &SseEvent,
    now: Instant,
    seen: &mut Vec<(u64, Instant)>,
) -> Result<(), BenchError> {
    match event.event.as_str() {
        sse::RECORDS => {
            let records: Vec<RecordJson> = parse("tail event", event.data.as_bytes())?;
            seen.extend(records.into_iter().map(|r| (r.seq, now)));
            Ok(())
        }
        sse::ERROR => Err(BenchError::target(format!(
            "tail error event: {}",
            event.data
        ))),
        _ => Ok(()),
    }
}

/// A fencelog server on 127.0.0.1, in this process, on a fresh data
/// directory that is removed when it stops.
pub struct InProcess {
    addr: std::net::SocketAddr,
    dir: PathBuf,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl InProcess {
    pub async fn start() -> Result<InProcess, BenchError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("fencelog-bench-{}-{nanos:x}", std::process::id()));
        let engine = Engine::open(&dir)
            .map_err(|e| BenchError::target(format!("opening {}: {e}", dir.display())))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| BenchError::target(format!("binding 127.0.0.1:0: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| BenchError::target(format!("local address: {e}")))?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(
            listener,
            AppState::new(engine),
            ServerConfig::default(),
            async move {
                let _ = stopped.await;
            },
        ));
        Ok(InProcess {
            addr,
            dir,
            stop,
            task,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Shuts the server down (draining and syncing) and removes its data.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_events_and_reads_record_seqs() {
        let raw = b"event: records\nid: 2\ndata: [{\"seq\":0,\"fencing_token\":1,\"timestamp_ms\":1,\"body\":\"a\"},{\"seq\":1,\"fencing_token\":1,\"timestamp_ms\":1,\"body\":\"b\"}]\n\nevent: caught_up\ndata: {}\n\n";
        let events = SseParser::new().push(raw);
        let mut seen = Vec::new();
        let now = Instant::now();
        for event in &events {
            on_event(event, now, &mut seen).unwrap();
        }
        // Both events came out whole, nothing left half-read.
        assert_eq!(events.len(), 2);
        assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), vec![0, 1]);
    }

    #[test]
    fn json_append_is_valid_json() {
        let body = json_append(7, &[Bytes::from("a.b"), Bytes::from("c")]);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["fencing_token"], 7);
        assert_eq!(v["records"][1]["body"], "c");
        let request = fencelog_api::AppendRequest {
            fencing_token: 7,
            match_seq_num: None,
            not_after_ms: None,
            producer_id: None,
            producer_seq: None,
            records: vec![
                fencelog_api::RecordInJson::body(b"a.b"),
                fencelog_api::RecordInJson::body(b"c"),
            ],
        };
        assert_eq!(body, serde_json::to_vec(&request).unwrap());
    }
}
