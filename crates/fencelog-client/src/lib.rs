//! A Rust client for the fencelog HTTP API.
//!
//! Errors are typed so the one outcome a fenced producer must handle —
//! "you lost ownership, stop" — is a variant to match on, never a string:
//!
//! ```no_run
//! # async fn demo() -> Result<(), fencelog_client::ClientError> {
//! use fencelog_client::{Client, ClientError};
//! let client = Client::new("http://127.0.0.1:7070")?;
//! match client.append("orders", 41, ["order #1"]).await {
//!     Ok(ack) => println!("durable at seq {}", ack.first_seq),
//!     Err(ClientError::StaleToken { highest, .. }) => {
//!         // A newer owner (token `highest`) took over: stop, do not retry.
//!         eprintln!("fenced out by token {highest}");
//!     }
//!     Err(e) => return Err(e),
//! }
//! # Ok(()) }
//! ```
//!
//! Plain appends are never retried by the client: if the connection fails
//! after the request was sent, the append may or may not have happened and
//! the error is [`ClientError::OutcomeUnknown`]. A [`Producer`] (an
//! idempotent producer id) does retry, with the same `producer_seq`, which
//! the server applies at most once. Reads, state and listing are
//! idempotent and are retried on transport errors.

#[cfg(feature = "etcd")]
pub mod etcd;
mod producer;

pub use fencelog_api::{CursorInfo, CursorList, FenceJson, FenceList, ProducerInfo};
pub use producer::{BatchOp, Producer, PRODUCER_RETRIES_MAX};

use bytes::Bytes;
use fencelog_api::{
    header, sse, AppendRequest, BodyJson, ConfigRequest, ErrorBody, ErrorCode, FenceRequest,
    TrimRequest,
};
/// The wire types, under the names this crate has always used.
pub use fencelog_api::{AppendAck, StreamInfo, StreamList};
use fencelog_api::{ReadPage, RecordJson, SseEvent, SseParser};
pub use fencelog_engine::Record;
pub use fencelog_engine::{Retention, StreamConfig};
use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use std::fmt;
use std::time::Duration;
use tokio::sync::mpsc;

/// How many extra attempts an idempotent request gets after a transport
/// error before the error is returned.
const IDEMPOTENT_RETRIES_MAX: u32 = 2;
/// The server sends a ping every 15 s; three missed pings mean the
/// connection is dead even if TCP has not noticed.
const TAIL_SILENCE_MAX: Duration = Duration::from_secs(45);
const TAIL_BACKOFF_MIN: Duration = Duration::from_millis(100);
const TAIL_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Records buffered between the tail's connection task and its consumer; a
/// slow consumer stops the task reading, and TCP pushes back on the server.
const TAIL_BUFFER_RECORDS: usize = 1024;

/// Everything that can go wrong, by what the caller should do about it.
#[derive(Debug)]
pub enum ClientError {
    /// The stream has accepted a higher token: this writer lost ownership.
    StaleToken {
        presented: u64,
        highest: u64,
        next_seq: u64,
    },
    /// `match_seq_num` did not equal the stream's `next_seq`.
    SeqMismatch {
        expected: u64,
        next_seq: u64,
    },
    /// The stream is sealed: no append, fence or trim is accepted, whatever
    /// the token. Not a lost ownership: nobody can write any more.
    StreamSealed {
        first_seq: u64,
        next_seq: u64,
        highest_token: u64,
    },
    NotFound,
    /// A read started past the stream's tail, or below its `first_seq`
    /// (those records were trimmed; read with `clamp` to start there).
    OutOfRange {
        first_seq: u64,
        next_seq: u64,
    },
    TooLarge {
        message: String,
    },
    BadRequest {
        message: String,
    },
    /// 401: the server wants an access token and got none it knows.
    Unauthenticated {
        message: String,
    },
    /// 403: the token does not cover this operation; `scope` names the
    /// scope it lacks.
    Forbidden {
        message: String,
        scope: Option<String>,
    },
    /// The server's storage failed (or it is shutting down). When
    /// `outcome_unknown` is set, this very request may or may not be durable.
    Unavailable {
        message: String,
        outcome_unknown: bool,
    },
    /// The server's disk is full.
    InsufficientStorage {
        message: String,
        outcome_unknown: bool,
    },
    /// The request may have reached the server and taken effect; the
    /// answer was lost. Never retried for appends.
    OutcomeUnknown {
        source: reqwest::Error,
    },
    /// The request never left (connection refused, bad URL): safe to retry.
    Transport {
        source: reqwest::Error,
    },
    /// The server answered something this client does not understand.
    Protocol {
        status: u16,
        body: String,
    },
    /// An idempotent producer the stream does not know, with a token below
    /// its producer token floor (it may retry an evicted producer's write).
    ProducerFenced {
        floor: u64,
    },
    /// The producer's seq is below its last applied one.
    ProducerSeqStale {
        last: u64,
    },
    /// The producer's seq skips ahead; the stream expects `expected`.
    ProducerSeqGap {
        expected: u64,
    },
    /// The server's time was past the request's `not_after_ms`; nothing
    /// changed.
    DeadlineExceeded {
        writer_ms: u64,
    },
    /// A multi-stream batch was refused whole: `first` is the first
    /// refusal, `ops` every op's outcome (an ack or an error body).
    BatchRefused {
        first: Box<ClientError>,
        ops: Vec<serde_json::Value>,
    },
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::StaleToken {
                presented,
                highest,
                next_seq,
            } => write!(
                f,
                "stale fencing token {presented}: the stream accepted {highest} (next_seq {next_seq})"
            ),
            ClientError::SeqMismatch { expected, next_seq } => {
                write!(f, "match_seq_num {expected} but next_seq is {next_seq}")
            }
            ClientError::StreamSealed {
                next_seq,
                highest_token,
                ..
            } => write!(
                f,
                "the stream is sealed at next_seq {next_seq} (highest token {highest_token})"
            ),
            ClientError::NotFound => write!(f, "stream not found"),
            ClientError::OutOfRange {
                first_seq,
                next_seq,
            } => write!(
                f,
                "start_seq is outside the stream's readable records {first_seq}..{next_seq}"
            ),
            ClientError::TooLarge { message } => write!(f, "too large: {message}"),
            ClientError::BadRequest { message } => write!(f, "bad request: {message}"),
            ClientError::Unauthenticated { message } => write!(f, "unauthenticated: {message}"),
            ClientError::Forbidden { message, .. } => write!(f, "forbidden: {message}"),
            ClientError::Unavailable {
                message,
                outcome_unknown,
            } => write!(f, "unavailable (outcome unknown: {outcome_unknown}): {message}"),
            ClientError::InsufficientStorage {
                message,
                outcome_unknown,
            } => write!(f, "server disk full (outcome unknown: {outcome_unknown}): {message}"),
            ClientError::OutcomeUnknown { source } => {
                write!(f, "outcome unknown, the connection failed after sending: {source}")
            }
            ClientError::Transport { source } => write!(f, "could not reach the server: {source}"),
            ClientError::Protocol { status, body } => {
                write!(f, "unexpected answer {status}: {body}")
            }
            ClientError::ProducerFenced { floor } => write!(
                f,
                "producer fenced: unknown to the stream and below its producer token floor {floor}"
            ),
            ClientError::ProducerSeqStale { last } => {
                write!(f, "producer_seq below the last applied one, {last}")
            }
            ClientError::ProducerSeqGap { expected } => {
                write!(f, "producer_seq skips ahead: expected {expected}")
            }
            ClientError::DeadlineExceeded { writer_ms } => {
                write!(f, "deadline exceeded: the server's time was {writer_ms} ms")
            }
            ClientError::BatchRefused { first, ops } => {
                write!(f, "batch of {} ops refused, none applied: {first}", ops.len())
            }
        }
    }
}

impl std::error::Error for ClientError {}

/// Records read and the stream's `next_seq` at the time of the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    pub records: Vec<Record>,
    pub next_seq: u64,
    /// The stream is sealed: nothing will follow `next_seq`.
    pub sealed: bool,
}

/// Options of [`Client::read`]; `None` leaves the server's default.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub count: Option<u64>,
    pub bytes: Option<u64>,
    /// Long-poll: wait up to this long for a record at `start_seq`.
    pub wait_ms: Option<u64>,
    /// Start at the stream's `first_seq` when `start_seq` is below it
    /// (trimmed) instead of failing with [`ClientError::OutOfRange`].
    pub clamp: bool,
}

/// What a tail yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailEvent {
    Record(Record),
    /// The consumer has read everything durable; `next_seq` is the tail.
    CaughtUp {
        next_seq: u64,
    },
    /// The stream is sealed and everything in it was delivered; the tail
    /// ends.
    Sealed {
        next_seq: u64,
    },
}

/// Builds a [`Client`] with non-default timeouts.
///
/// ```
/// use std::time::Duration;
/// let client = fencelog_client::Client::builder("http://127.0.0.1:7070")
///     .timeout(Duration::from_secs(5))
///     .connect_timeout(Duration::from_millis(500))
///     .build()
///     .unwrap();
/// assert_eq!(client.base_url(), "http://127.0.0.1:7070");
/// ```
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    base_url: String,
    timeout: Duration,
    connect_timeout: Duration,
    pool_idle_timeout: Duration,
    ca_certs: Vec<Vec<u8>>,
    token: Option<String>,
}

impl ClientBuilder {
    /// Trust this CA certificate (PEM) for `https://` servers, besides the
    /// system's roots: how a client trusts a server with a private CA or a
    /// self-signed certificate.
    pub fn ca_cert_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_certs.push(pem.into());
        self
    }

    /// [`ClientBuilder::ca_cert_pem`] from a file.
    pub fn ca_cert_file(self, path: impl AsRef<std::path::Path>) -> std::io::Result<Self> {
        let pem = std::fs::read(path.as_ref())?;
        Ok(self.ca_cert_pem(pem))
    }

    /// The access-token secret, sent as `Authorization: Bearer <secret>`
    /// with every request.
    pub fn token(mut self, secret: impl Into<String>) -> Self {
        self.token = Some(secret.into());
        self
    }

    /// Upper bound on one request, long-polls included (the server caps
    /// `wait_ms` at 60 s, so keep this above that if you long-poll).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long an idle pooled connection is kept for reuse.
    pub fn pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool_idle_timeout = timeout;
        self
    }

    pub fn build(self) -> Result<Client, ClientError> {
        let base = self.base_url.trim_end_matches('/').to_string();
        let transport = |source| ClientError::Transport { source };
        let mut http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .pool_idle_timeout(self.pool_idle_timeout)
            .tcp_nodelay(true)
            .use_rustls_tls();
        for pem in &self.ca_certs {
            http =
                http.add_root_certificate(reqwest::Certificate::from_pem(pem).map_err(transport)?);
        }
        if let Some(secret) = &self.token {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {secret}"))
                .map_err(|_| ClientError::BadRequest {
                    message: "the access token is not a valid header value".into(),
                })?;
            value.set_sensitive(true);
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert(reqwest::header::AUTHORIZATION, value);
            http = http.default_headers(headers);
        }
        let http = http.build().map_err(transport)?;
        Ok(Client {
            http,
            base,
            timeout: self.timeout,
        })
    }
}

/// A handle to one fencelog server. Cheap to clone; clones share a
/// connection pool.
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
    pub(crate) timeout: Duration,
}

/// Stream names are `[A-Za-z0-9._:-]`, all URL-safe, but a caller may pass
/// anything: escape so a bad name reaches the server's validation intact.
pub(crate) fn escape_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Client {
    /// A client with default timeouts (70 s per request, 5 s to connect).
    pub fn new(base_url: impl Into<String>) -> Result<Client, ClientError> {
        Self::builder(base_url).build()
    }

    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base_url: base_url.into(),
            timeout: Duration::from_secs(70),
            connect_timeout: Duration::from_secs(5),
            // Below the server's default idle limit (10 s, advertised as
            // `Keep-Alive: timeout=9`): a pooled connection is dropped here
            // before the server closes it, so a request is never sent into
            // a closing connection (which would make an append's outcome
            // unknown for nothing).
            pool_idle_timeout: Duration::from_secs(5),
            ca_certs: Vec::new(),
            token: None,
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub(crate) fn stream_url(&self, stream: &str, tail: &str) -> String {
        format!(
            "{}/v1/streams/{}{}",
            self.base,
            escape_segment(stream),
            tail
        )
    }

    /// Appends records (each anything that turns into bytes) atomically.
    pub async fn append<I, B>(
        &self,
        stream: &str,
        fencing_token: u64,
        records: I,
    ) -> Result<AppendAck, ClientError>
    where
        I: IntoIterator<Item = B>,
        B: Into<Bytes>,
    {
        self.append_with(stream, fencing_token, records, None).await
    }

    /// [`Client::append`] with an optional `match_seq_num`: the append only
    /// happens if the stream's `next_seq` equals it. That makes a retry after
    /// [`ClientError::OutcomeUnknown`] safe: if the first attempt landed, the
    /// retry fails with [`ClientError::SeqMismatch`] instead of duplicating.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), fencelog_client::ClientError> {
    /// use fencelog_client::{Client, ClientError};
    /// let client = Client::new("http://127.0.0.1:7070")?;
    /// let next = client.state("orders").await?.next_seq;
    /// match client.append_with("orders", 41, ["order #2"], Some(next)).await {
    ///     Ok(_) => {}
    ///     Err(ClientError::SeqMismatch { next_seq, .. }) => {
    ///         println!("someone else wrote; the stream is at {next_seq}");
    ///     }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn append_with<I, B>(
        &self,
        stream: &str,
        fencing_token: u64,
        records: I,
        match_seq_num: Option<u64>,
    ) -> Result<AppendAck, ClientError>
    where
        I: IntoIterator<Item = B>,
        B: Into<Bytes>,
    {
        let records: Vec<Bytes> = records.into_iter().map(Into::into).collect();
        let body = AppendRequest {
            fencing_token,
            match_seq_num,
            not_after_ms: None,
            producer_id: None,
            producer_seq: None,
            records: records.iter().map(|r| BodyJson::encode(r)).collect(),
        };
        let req = self
            .http
            .post(self.stream_url(stream, "/records"))
            .timeout(self.timeout)
            .json(&body);
        self.send_once(req).await
    }

    /// Appends one record sent as the raw request body.
    pub async fn append_raw(
        &self,
        stream: &str,
        fencing_token: u64,
        body: impl Into<Bytes>,
        match_seq_num: Option<u64>,
    ) -> Result<AppendAck, ClientError> {
        let mut req = self
            .http
            .post(self.stream_url(stream, "/records"))
            .timeout(self.timeout)
            .header("content-type", header::OCTET_STREAM)
            .header(header::FENCING_TOKEN, fencing_token.to_string())
            .body(body.into());
        if let Some(m) = match_seq_num {
            req = req.header(header::MATCH_SEQ_NUM, m.to_string());
        }
        self.send_once(req).await
    }

    /// Appends a batch as the compact binary body
    /// (`application/vnd.fencelog.batch`): no JSON escaping or base64 on
    /// either side, which matters for many or binary records. Same answers
    /// and errors as [`Client::append_with`].
    pub async fn append_batch_binary<I, B>(
        &self,
        stream: &str,
        fencing_token: u64,
        records: I,
        match_seq_num: Option<u64>,
    ) -> Result<AppendAck, ClientError>
    where
        I: IntoIterator<Item = B>,
        B: AsRef<[u8]>,
    {
        let records: Vec<B> = records.into_iter().collect();
        let body = fencelog_api::batch::encode(records.iter().map(|r| r.as_ref()));
        let mut req = self
            .http
            .post(self.stream_url(stream, "/records"))
            .timeout(self.timeout)
            .header("content-type", fencelog_api::batch::CONTENT_TYPE)
            .header(header::FENCING_TOKEN, fencing_token.to_string())
            .body(body);
        if let Some(m) = match_seq_num {
            req = req.header(header::MATCH_SEQ_NUM, m.to_string());
        }
        self.send_once(req).await
    }

    /// Raises the stream's highest token without writing a record.
    pub async fn fence(&self, stream: &str, fencing_token: u64) -> Result<StreamInfo, ClientError> {
        let req = self
            .http
            .post(self.stream_url(stream, "/fence"))
            .timeout(self.timeout)
            .json(&FenceRequest { fencing_token });
        self.send_once(req).await
    }

    /// Makes the records below `trim_seq` unreadable (`first_seq` becomes
    /// `min(trim_seq, next_seq)` and never moves back). Fenced like an
    /// append; never retried.
    pub async fn trim(
        &self,
        stream: &str,
        fencing_token: u64,
        trim_seq: u64,
    ) -> Result<StreamInfo, ClientError> {
        let req = self
            .http
            .post(self.stream_url(stream, "/trim"))
            .timeout(self.timeout)
            .json(&TrimRequest {
                fencing_token,
                trim_seq,
            });
        self.send_once(req).await
    }

    /// Seals the stream: every later append, fence and trim fails with
    /// [`ClientError::StreamSealed`]. Sealing again with the highest token is idempotent; a higher token is written and becomes the highest.
    pub async fn seal(&self, stream: &str, fencing_token: u64) -> Result<StreamInfo, ClientError> {
        let req = self
            .http
            .post(self.stream_url(stream, "/seal"))
            .timeout(self.timeout)
            .json(&FenceRequest { fencing_token });
        self.send_once(req).await
    }

    /// Deletes the stream's records; its tombstone keeps the token, so a
    /// stale owner can never write it again. Answers the tombstone.
    pub async fn delete(
        &self,
        stream: &str,
        fencing_token: u64,
    ) -> Result<StreamInfo, ClientError> {
        let req = self
            .http
            .delete(self.stream_url(stream, ""))
            .timeout(self.timeout)
            .json(&FenceRequest { fencing_token });
        self.send_once(req).await
    }

    /// Replaces the stream's retention settings (a [`Retention::Default`]
    /// setting goes back to the server's). With a token the change is
    /// fenced.
    pub async fn set_config(
        &self,
        stream: &str,
        fencing_token: Option<u64>,
        config: StreamConfig,
    ) -> Result<StreamInfo, ClientError> {
        let req = self
            .http
            .put(self.stream_url(stream, "/config"))
            .timeout(self.timeout)
            .json(&ConfigRequest {
                fencing_token,
                config,
            });
        self.send_once(req).await
    }

    /// Reads durable records from `start_seq`.
    pub async fn read(
        &self,
        stream: &str,
        start_seq: u64,
        options: &ReadOptions,
    ) -> Result<ReadResult, ClientError> {
        let mut query: Vec<(&str, String)> = vec![("start_seq", start_seq.to_string())];
        for (key, value) in [
            ("count", options.count),
            ("bytes", options.bytes),
            ("wait_ms", options.wait_ms),
        ] {
            if let Some(v) = value {
                query.push((key, v.to_string()));
            }
        }
        if options.clamp {
            query.push(("clamp", "true".into()));
        }
        let url = self.stream_url(stream, "/records");
        let wire: ReadPage = self
            .send_idempotent(|| self.http.get(&url).timeout(self.timeout).query(&query))
            .await?;
        let records = wire
            .records
            .into_iter()
            .map(decode_record)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ReadResult {
            records,
            next_seq: wire.next_seq,
            sealed: wire.sealed,
        })
    }

    pub async fn state(&self, stream: &str) -> Result<StreamInfo, ClientError> {
        let url = self.stream_url(stream, "");
        self.send_idempotent(|| self.http.get(&url).timeout(self.timeout))
            .await
    }

    /// One page of streams whose names start with `prefix`, in name order.
    pub async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: Option<u64>,
    ) -> Result<StreamList, ClientError> {
        let mut query: Vec<(&str, String)> = vec![("prefix", prefix.to_string())];
        if let Some(a) = start_after {
            query.push(("start_after", a.to_string()));
        }
        if let Some(l) = limit {
            query.push(("limit", l.to_string()));
        }
        let url = format!("{}/v1/streams", self.base);
        self.send_idempotent(|| self.http.get(&url).timeout(self.timeout).query(&query))
            .await
    }

    /// Follows a stream from `from_seq`: every durable record, in order,
    /// exactly once, across reconnects (it resumes from the last seq it
    /// delivered). Ends after an error that reconnecting cannot fix.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), fencelog_client::ClientError> {
    /// use futures_util::StreamExt;
    /// let client = fencelog_client::Client::new("http://127.0.0.1:7070")?;
    /// let mut tail = Box::pin(client.tail("orders", 0));
    /// while let Some(record) = tail.next().await {
    ///     let record = record?;
    ///     println!("{} (token {})", record.seq, record.fencing_token);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn tail(
        &self,
        stream: &str,
        from_seq: u64,
    ) -> impl Stream<Item = Result<Record, ClientError>> {
        self.tail_events(stream, from_seq)
            .filter_map(|e| async move {
                match e {
                    Ok(TailEvent::Record(r)) => Some(Ok(r)),
                    Ok(TailEvent::CaughtUp { .. } | TailEvent::Sealed { .. }) => None,
                    Err(e) => Some(Err(e)),
                }
            })
    }

    /// [`Client::tail`] that also reports when the consumer caught up.
    pub fn tail_events(
        &self,
        stream: &str,
        from_seq: u64,
    ) -> impl Stream<Item = Result<TailEvent, ClientError>> {
        let (tx, rx) = mpsc::channel(TAIL_BUFFER_RECORDS);
        let this = self.clone();
        let stream = stream.to_string();
        tokio::spawn(async move { this.run_tail(stream, from_seq, tx).await });
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }

    async fn run_tail(self, stream: String, mut next_seq: u64, tx: TailSender) {
        let url = self.stream_url(&stream, "/records");
        let mut backoff = TAIL_BACKOFF_MIN;
        loop {
            let resp = self
                .http
                .get(&url)
                .header("accept", header::EVENT_STREAM)
                .header(header::LAST_EVENT_ID, next_seq.to_string())
                .query(&[("start_seq", next_seq)])
                .send()
                .await;
            let resp = match resp {
                Ok(r) if r.status().is_success() => r,
                Ok(r) => {
                    let err = error_from_response(r).await;
                    let fatal = !matches!(
                        err,
                        ClientError::Unavailable { .. } | ClientError::InsufficientStorage { .. }
                    );
                    if fatal {
                        let _ = tx.send(Err(err)).await;
                        return;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(TAIL_BACKOFF_MAX);
                    continue;
                }
                Err(_) => {
                    if tx.is_closed() {
                        return;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(TAIL_BACKOFF_MAX);
                    continue;
                }
            };
            backoff = TAIL_BACKOFF_MIN;
            let mut body = resp.bytes_stream();
            let mut parser = SseParser::new();
            loop {
                let chunk = match tokio::time::timeout(TAIL_SILENCE_MAX, body.next()).await {
                    Ok(Some(Ok(c))) => c,
                    // Closed, failed or silent for too long: reconnect.
                    _ => break,
                };
                for ev in parser.push(&chunk) {
                    if deliver(ev, &mut next_seq, &tx).await.is_err() {
                        return;
                    }
                }
                if tx.is_closed() {
                    return;
                }
            }
        }
    }

    pub(crate) async fn send_once<T: for<'de> Deserialize<'de>>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T, ClientError> {
        let resp = req.send().await.map_err(|source| {
            if source.is_connect() || source.is_builder() {
                ClientError::Transport { source }
            } else {
                ClientError::OutcomeUnknown { source }
            }
        })?;
        decode_response(resp).await
    }

    async fn send_idempotent<T, F>(&self, make: F) -> Result<T, ClientError>
    where
        T: for<'de> Deserialize<'de>,
        F: Fn() -> reqwest::RequestBuilder,
    {
        decode_response(self.send_idempotent_raw(make).await?).await
    }

    /// An idempotent request, retried on transport errors; the response
    /// undecoded.
    pub(crate) async fn send_idempotent_raw<F>(
        &self,
        make: F,
    ) -> Result<reqwest::Response, ClientError>
    where
        F: Fn() -> reqwest::RequestBuilder,
    {
        let mut attempt = 0;
        loop {
            match make().send().await {
                Ok(resp) => return Ok(resp),
                Err(source) if attempt < IDEMPOTENT_RETRIES_MAX && !source.is_builder() => {
                    attempt += 1;
                    tokio::time::sleep(TAIL_BACKOFF_MIN * attempt).await;
                }
                Err(source) => return Err(ClientError::Transport { source }),
            }
        }
    }
}

pub(crate) async fn decode_response<T: for<'de> Deserialize<'de>>(
    resp: reqwest::Response,
) -> Result<T, ClientError> {
    let status = resp.status();
    if !status.is_success() {
        return Err(error_from_response(resp).await);
    }
    let body = resp
        .bytes()
        .await
        .map_err(|source| ClientError::OutcomeUnknown { source })?;
    serde_json::from_slice(&body).map_err(|e| ClientError::Protocol {
        status: status.as_u16(),
        body: format!("{e}: {}", String::from_utf8_lossy(&body)),
    })
}

type TailSender = mpsc::Sender<Result<TailEvent, ClientError>>;

/// The tail is over: the consumer went away, or it was handed an error
/// reconnecting cannot fix.
struct TailOver;

/// Hands one event to the tail's consumer: a `records` event's records,
/// each seq once, moving `next_seq` past them; a `caught_up` as
/// [`TailEvent::CaughtUp`]; a `sealed` ends the tail after
/// [`TailEvent::Sealed`]. Pings and event types newer than this client
/// only show the connection is alive.
async fn deliver(ev: SseEvent, next_seq: &mut u64, tx: &TailSender) -> Result<(), TailOver> {
    match ev.event.as_str() {
        sse::RECORDS => {
            let wire: Vec<RecordJson> = match serde_json::from_str(&ev.data) {
                Ok(w) => w,
                Err(e) => {
                    let body = format!("bad records event: {e}");
                    return give_up(tx, ClientError::Protocol { status: 200, body }).await;
                }
            };
            for w in wire {
                // A resumed connection may repeat what we already
                // delivered; deliver each seq once.
                if w.seq < *next_seq {
                    continue;
                }
                let rec = match decode_record(w) {
                    Ok(r) => r,
                    Err(e) => return give_up(tx, e).await,
                };
                *next_seq = rec.seq + 1;
                tx.send(Ok(TailEvent::Record(rec)))
                    .await
                    .map_err(|_| TailOver)?;
            }
            Ok(())
        }
        sse::CAUGHT_UP => {
            let at = ev
                .id
                .as_deref()
                .and_then(|i| i.parse().ok())
                .unwrap_or(*next_seq);
            tx.send(Ok(TailEvent::CaughtUp { next_seq: at }))
                .await
                .map_err(|_| TailOver)
        }
        sse::SEALED => {
            // Everything was delivered and nothing more can come.
            let _ = tx
                .send(Ok(TailEvent::Sealed {
                    next_seq: *next_seq,
                }))
                .await;
            Err(TailOver)
        }
        _ => Ok(()),
    }
}

async fn give_up(tx: &TailSender, err: ClientError) -> Result<(), TailOver> {
    let _ = tx.send(Err(err)).await;
    Err(TailOver)
}

/// A record of a read or a tail, with its body decoded.
fn decode_record(r: RecordJson) -> Result<Record, ClientError> {
    let seq = r.seq;
    r.into_record().map_err(|e| ClientError::Protocol {
        status: 200,
        body: format!("record {seq}: {e}"),
    })
}

pub(crate) async fn error_from_response(resp: reqwest::Response) -> ClientError {
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.unwrap_or_default();
    let body = ErrorBody::decode(&bytes);
    let ops = body
        .as_ref()
        .and_then(|b| b.get(fencelog_api::Field::Ops))
        .and_then(serde_json::Value::as_array)
        .cloned();
    if let Some(ops) = ops {
        let mut without = body.clone().expect("ops came from the body");
        without.fields.remove(fencelog_api::Field::Ops.as_str());
        let first = Box::new(error_from_body(status, Some(without), &bytes));
        return ClientError::BatchRefused { first, ops };
    }
    error_from_body(status, body, &bytes)
}

/// The error an answer with `status` and (if it decoded) `body` means.
fn error_from_body(status: u16, body: Option<ErrorBody>, bytes: &[u8]) -> ClientError {
    use fencelog_api::Field;
    let named = |f: Field| {
        body.as_ref()
            .and_then(|b| b.get(f))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    const NOT_FOUND: u16 = ErrorCode::StreamNotFound.status();
    const OUT_OF_RANGE: u16 = ErrorCode::OutOfRange.status();
    const TOO_LARGE: u16 = ErrorCode::TooLarge.status();
    const BAD_REQUEST: u16 = ErrorCode::BadRequest.status();
    const UNAUTHENTICATED: u16 = ErrorCode::Unauthenticated.status();
    const FORBIDDEN: u16 = ErrorCode::Forbidden.status();
    const UNAVAILABLE: u16 = ErrorCode::Unavailable.status();
    const INSUFFICIENT_STORAGE: u16 = ErrorCode::InsufficientStorage.status();
    let field = |get: fn(&ErrorBody) -> Option<u64>| body.as_ref().and_then(get).unwrap_or(0);
    let message = || body.as_ref().map(|b| b.message.clone()).unwrap_or_default();
    let outcome_unknown = body.as_ref().is_some_and(ErrorBody::outcome_unknown);
    // The code counts only with the status it is sent with.
    match (
        body.as_ref()
            .map(|b| b.code)
            .filter(|c| c.status() == status),
        status,
    ) {
        (Some(ErrorCode::StaleFencingToken), _) => ClientError::StaleToken {
            presented: field(ErrorBody::presented_token),
            highest: field(ErrorBody::highest_token),
            next_seq: field(ErrorBody::next_seq),
        },
        (Some(ErrorCode::SeqMismatch), _) => ClientError::SeqMismatch {
            expected: field(ErrorBody::match_seq_num),
            next_seq: field(ErrorBody::next_seq),
        },
        (Some(ErrorCode::ProducerFenced), _) => ClientError::ProducerFenced {
            floor: named(Field::ProducerTokenFloor),
        },
        (Some(ErrorCode::ProducerSeqStale), _) => ClientError::ProducerSeqStale {
            last: named(Field::LastProducerSeq),
        },
        (Some(ErrorCode::ProducerSeqGap), _) => ClientError::ProducerSeqGap {
            expected: named(Field::ExpectedProducerSeq),
        },
        (Some(ErrorCode::DeadlineExceeded), _) => ClientError::DeadlineExceeded {
            writer_ms: named(Field::WriterMs),
        },
        (Some(ErrorCode::StreamSealed), _) => ClientError::StreamSealed {
            first_seq: field(ErrorBody::first_seq),
            next_seq: field(ErrorBody::next_seq),
            highest_token: field(ErrorBody::highest_token),
        },
        // By status alone from here on, so an answer without a code this
        // client knows (a proxy's, a newer server's) still lands in the
        // class its status says.
        (_, NOT_FOUND) => ClientError::NotFound,
        (_, OUT_OF_RANGE) => ClientError::OutOfRange {
            first_seq: field(ErrorBody::first_seq),
            next_seq: field(ErrorBody::next_seq),
        },
        (_, TOO_LARGE) => ClientError::TooLarge { message: message() },
        (_, BAD_REQUEST) => ClientError::BadRequest { message: message() },
        (_, UNAUTHENTICATED) => ClientError::Unauthenticated { message: message() },
        (_, FORBIDDEN) => ClientError::Forbidden {
            message: message(),
            scope: body
                .as_ref()
                .and_then(|b| b.get(fencelog_api::Field::Scope))
                .and_then(|v| v.as_str())
                .map(str::to_string),
        },
        (_, UNAVAILABLE) => ClientError::Unavailable {
            message: message(),
            outcome_unknown,
        },
        (_, INSUFFICIENT_STORAGE) => ClientError::InsufficientStorage {
            message: message(),
            outcome_unknown,
        },
        _ => ClientError::Protocol {
            status,
            body: String::from_utf8_lossy(bytes).into_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_not_trusted() {
        assert_eq!(escape_segment("a.b:c_d-e"), "a.b:c_d-e");
        assert_eq!(escape_segment("a/../b c"), "a%2F..%2Fb%20c");
    }
}
