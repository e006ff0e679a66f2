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

mod cluster;
mod error;
#[cfg(feature = "etcd")]
pub mod etcd;
mod http1;
mod pool;
mod producer;
mod redirect;
mod request;
pub use pool::{POOL_CONNECTIONS_DEFAULT, POOL_CONNECTIONS_MAX};
pub use redirect::REDIRECTS_MAX;

pub use fencelog_api::{CursorInfo, CursorList, FenceJson, FenceList, ProducerInfo};
pub use producer::{BatchOp, Producer, PRODUCER_RETRIES_MAX};
mod session;
mod session_io;
mod tail;

use bytes::Bytes;
pub use error::{with_causes, ClientError, TransportError};
use fencelog_api::read::param;
use fencelog_api::{
    header, AppendRequest, ConfigRequest, FenceRequest, ReadStart, RecordInJson, TrimRequest,
};
/// The wire types, under the names this crate has always used.
pub use fencelog_api::{AppendAck, ErrorBody, ErrorCode, StreamInfo, StreamList};
use fencelog_api::{ReadPage, RecordJson};
/// What an accepted append of an append session answers.
pub use fencelog_types::Ack;
pub use fencelog_types::{Header, Record, RecordIn};
pub use fencelog_types::{Retention, StreamConfig};
use futures_util::{Stream, StreamExt};
use pool::{Failure, Pool};
use request::{Answer, Req};
use serde::Deserialize;
pub use session::{
    Answered, AppendSession, SessionReceiver, SessionSender, SESSION_WINDOW_DEFAULT,
};
use std::sync::Arc;
use std::time::Duration;
use tail::TAIL_BACKOFF_MIN;
pub use tail::{TailEvent, TailOptions};

/// How many extra attempts an idempotent request gets after a transport
/// error before the error is returned.
const IDEMPOTENT_RETRIES_MAX: u32 = 2;

/// One page of a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    pub records: Vec<Record>,
    /// Where the next page starts: pass it as the next read's `start_seq`.
    pub next_start_seq: u64,
    /// The stream's tail when the read ran (the seq the next appended
    /// record gets). Not where the next page starts.
    pub next_seq: u64,
    /// The stream is sealed: nothing will follow `next_seq`.
    pub sealed: bool,
}

/// Options of [`Client::read`]; `None` leaves the server's default.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub count: Option<u64>,
    pub bytes: Option<u64>,
    /// Long-poll: wait up to this long for a record at the start.
    pub wait_ms: Option<u64>,
    /// Only records whose timestamp is before this (Unix ms).
    pub until_timestamp_ms: Option<u64>,
    /// With `wait_ms`: wait for a stream that does not exist yet instead
    /// of failing with [`ClientError::StreamNotFound`] at once.
    pub wait_for_stream: bool,
    /// Start at the stream's `first_seq` when the start is below it
    /// (trimmed) instead of failing with [`ClientError::OutOfRange`].
    pub clamp: bool,
    /// Ask for the binary read format (`Accept:
    /// application/vnd.fencelog.batch`): the same page, its bodies as
    /// they are instead of JSON-escaped, the records slices of the
    /// response's pieces — about half JSON's CPU on either side.
    pub binary: bool,
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
    pool_max_connections: usize,
    use_reqwest: bool,
}

/// The server's base URL as the client uses it: `host:port` (no scheme)
/// means `http://host:port`; anything else must be an `http` or `https`
/// URL with a host and without a query or fragment.
pub fn normalize_url(url: &str) -> Result<String, ClientError> {
    let invalid = |reason: &str| ClientError::InvalidUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let trimmed = url.trim();
    if trimmed.is_empty() {
        return Err(invalid("it is empty"));
    }
    let full = if trimmed.contains("://") {
        trimmed.to_string()
    } else {
        format!("http://{trimmed}")
    };
    let parsed = reqwest::Url::parse(&full).map_err(|e| {
        invalid(&format!(
            "{e}; write it as http://HOST:PORT (or HOST:PORT), e.g. http://127.0.0.1:7070"
        ))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid(&format!(
            "the scheme is {:?}; use http:// or https://",
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("it has no host; e.g. http://127.0.0.1:7070"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid("a server URL has no query or fragment"));
    }
    Ok(full.trim_end_matches('/').to_string())
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

    /// At most this many connections open to `http://` servers at once
    /// (busy and idle, clones of the client included; default
    /// [`POOL_CONNECTIONS_DEFAULT`], clamped to 1..=[`POOL_CONNECTIONS_MAX`]).
    /// A request that finds them all busy waits for one, within its
    /// timeout; not getting one is [`ClientError::Transport`] (not sent).
    pub fn pool_max_connections(mut self, max: usize) -> Self {
        self.pool_max_connections = max.clamp(1, POOL_CONNECTIONS_MAX);
        self
    }

    /// Sends `http://` requests through reqwest too, as before the
    /// client's own connection pool (kept as a fallback and for
    /// comparison; `https://` always goes through reqwest).
    pub fn use_reqwest(mut self, yes: bool) -> Self {
        self.use_reqwest = yes;
        self
    }

    /// Fails with [`ClientError::InvalidUrl`] for a URL no request could
    /// use (see [`normalize_url`]).
    pub fn build(self) -> Result<Client, ClientError> {
        let base = normalize_url(&self.base_url)?;
        let transport = |e: reqwest::Error| ClientError::Transport { source: e.into() };
        let mut http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .pool_idle_timeout(self.pool_idle_timeout)
            .tcp_nodelay(true)
            .redirect(reqwest::redirect::Policy::none())
            .use_rustls_tls();
        for pem in &self.ca_certs {
            http =
                http.add_root_certificate(reqwest::Certificate::from_pem(pem).map_err(transport)?);
        }
        let mut authorization = None;
        if let Some(secret) = &self.token {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {secret}"))
                .map_err(|_| ClientError::BadRequest {
                    message: "the access token is not a valid header value".into(),
                    answer: None,
                })?;
            value.set_sensitive(true);
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert(reqwest::header::AUTHORIZATION, value.clone());
            http = http.default_headers(headers);
            authorization = Some(value);
        }
        let http = http.build().map_err(transport)?;
        let pool = Pool::new(
            self.pool_max_connections,
            self.connect_timeout,
            self.pool_idle_timeout,
            authorization,
        );
        Ok(Client {
            http,
            pool: Arc::new(pool),
            use_reqwest: self.use_reqwest,
            base,
            timeout: self.timeout,
            token: self.token.map(Secret),
            ca_certs: Arc::new(self.ca_certs),
        })
    }
}

/// A handle to one fencelog server. Cheap to clone; clones share a
/// connection pool.
#[derive(Debug, Clone)]
pub struct Client {
    /// `https://`, live tails, and everything with `use_reqwest`.
    pub(crate) http: reqwest::Client,
    /// Every other request to an `http://` server.
    pub(crate) pool: Arc<Pool>,
    pub(crate) use_reqwest: bool,
    pub(crate) base: String,
    pub(crate) timeout: Duration,
    /// The access-token secret, for connections reqwest does not make
    /// (the append session's WebSocket).
    pub(crate) token: Option<Secret>,
    /// The builder's CA certificates (PEM), for the session's own TLS.
    pub(crate) ca_certs: Arc<Vec<Vec<u8>>>,
}

/// A secret that `Debug` does not print.
#[derive(Clone)]
pub(crate) struct Secret(pub(crate) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// Stream names are `[A-Za-z0-9._:-]`, all URL-safe, but a caller may pass
/// anything: escape so a bad name reaches the server's validation intact.
pub(crate) fn escape_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_segment(&mut out, s);
    out
}

/// [`escape_segment`] onto `out`, without formatting: a URL is built for
/// every request.
fn push_segment(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xf)] as char);
        }
    }
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
            pool_max_connections: POOL_CONNECTIONS_DEFAULT,
            use_reqwest: false,
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub(crate) fn stream_url(&self, stream: &str, tail: &str) -> String {
        const STREAMS: &str = "/v1/streams/";
        let mut url =
            String::with_capacity(self.base.len() + STREAMS.len() + stream.len() + tail.len());
        url.push_str(&self.base);
        url.push_str(STREAMS);
        push_segment(&mut url, stream);
        url.push_str(tail);
        url
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
            records: records.iter().map(|r| RecordInJson::body(r)).collect(),
        };
        let req = Req::post(self.stream_url(stream, "/records")).json(&body);
        self.send_ack(req).await
    }

    /// Appends records that may carry headers, atomically, as JSON (names
    /// and values that are not UTF-8 go base64). Same answers and errors
    /// as [`Client::append_with`]; a header over the limits is
    /// [`ClientError::TooLarge`] or [`ClientError::BadRequest`].
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), fencelog_client::ClientError> {
    /// use fencelog_client::{Client, RecordIn};
    /// let client = Client::new("http://127.0.0.1:7070")?;
    /// let record = RecordIn::new("order #3").with_header("trace-id", "4bf92f35");
    /// client.append_records("orders", 41, vec![record], None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn append_records(
        &self,
        stream: &str,
        fencing_token: u64,
        records: Vec<RecordIn>,
        match_seq_num: Option<u64>,
    ) -> Result<AppendAck, ClientError> {
        let body = AppendRequest {
            fencing_token,
            match_seq_num,
            not_after_ms: None,
            producer_id: None,
            producer_seq: None,
            records: records.iter().map(RecordInJson::new).collect(),
        };
        let req = Req::post(self.stream_url(stream, "/records")).json(&body);
        self.send_ack(req).await
    }

    /// [`Client::append_records`] as the compact binary body, version 2
    /// (`application/vnd.fencelog.batch; version=2`): no JSON escaping or
    /// base64 for records with headers.
    pub async fn append_records_binary(
        &self,
        stream: &str,
        fencing_token: u64,
        records: &[RecordIn],
        match_seq_num: Option<u64>,
    ) -> Result<AppendAck, ClientError> {
        let body = fencelog_api::batch::encode_v2(records);
        let req = Req::post(self.stream_url(stream, "/records"))
            .body(fencelog_api::batch::CONTENT_TYPE_V2, body);
        self.send_ack(fenced(req, fencing_token, match_seq_num))
            .await
    }

    /// Appends one record sent as the raw request body.
    pub async fn append_raw(
        &self,
        stream: &str,
        fencing_token: u64,
        body: impl Into<Bytes>,
        match_seq_num: Option<u64>,
    ) -> Result<AppendAck, ClientError> {
        let req = Req::post(self.stream_url(stream, "/records")).body(header::OCTET_STREAM, body);
        self.send_ack(fenced(req, fencing_token, match_seq_num))
            .await
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
        let req = Req::post(self.stream_url(stream, "/records"))
            .body(fencelog_api::batch::CONTENT_TYPE, body);
        self.send_ack(fenced(req, fencing_token, match_seq_num))
            .await
    }

    /// Raises the stream's highest token without writing a record.
    pub async fn fence(&self, stream: &str, fencing_token: u64) -> Result<StreamInfo, ClientError> {
        let req =
            Req::post(self.stream_url(stream, "/fence")).json(&FenceRequest { fencing_token });
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
        let req = Req::post(self.stream_url(stream, "/trim")).json(&TrimRequest {
            fencing_token,
            trim_seq,
        });
        self.send_once(req).await
    }

    /// Seals the stream: every later append, fence and trim fails with
    /// [`ClientError::StreamSealed`]. Sealing again with the highest
    /// token is idempotent; a higher token is written and becomes the
    /// highest.
    pub async fn seal(&self, stream: &str, fencing_token: u64) -> Result<StreamInfo, ClientError> {
        let req = Req::post(self.stream_url(stream, "/seal")).json(&FenceRequest { fencing_token });
        self.send_once(req).await
    }

    /// Deletes the stream's records; its tombstone keeps the token, so a
    /// stale owner can never write it again. Answers the tombstone.
    pub async fn delete(
        &self,
        stream: &str,
        fencing_token: u64,
    ) -> Result<StreamInfo, ClientError> {
        let req = Req::delete(self.stream_url(stream, "")).json(&FenceRequest { fencing_token });
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
        let req = Req::put(self.stream_url(stream, "/config")).json(&ConfigRequest {
            fencing_token,
            config,
        });
        self.send_once(req).await
    }

    /// Reads one page of durable records from `start_seq`. Page through a
    /// stream with the result's `next_start_seq`, never its `next_seq`
    /// (the tail):
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), fencelog_client::ClientError> {
    /// use fencelog_client::{Client, ReadOptions};
    /// let client = Client::new("http://127.0.0.1:7070")?;
    /// let mut start = 0;
    /// loop {
    ///     let page = client.read("orders", start, &ReadOptions::default()).await?;
    ///     for r in &page.records {
    ///         println!("{} {:?}", r.seq, r.body);
    ///     }
    ///     if page.records.is_empty() {
    ///         break; // at the tail (or past until_timestamp_ms)
    ///     }
    ///     start = page.next_start_seq;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn read(
        &self,
        stream: &str,
        start_seq: u64,
        options: &ReadOptions,
    ) -> Result<ReadResult, ClientError> {
        self.read_from(stream, ReadStart::Seq(start_seq), options)
            .await
    }

    /// [`Client::read`] from any start: a seq, `N` records before the tail
    /// ([`ReadStart::TailOffset`]), or the first record at or after a time
    /// ([`ReadStart::Timestamp`], Unix ms).
    pub async fn read_from(
        &self,
        stream: &str,
        start: ReadStart,
        options: &ReadOptions,
    ) -> Result<ReadResult, ClientError> {
        let mut query = vec![start.query()];
        let optional = [
            (param::COUNT, options.count),
            (param::BYTES, options.bytes),
            (param::WAIT_MS, options.wait_ms),
            (param::UNTIL_TIMESTAMP_MS, options.until_timestamp_ms),
        ];
        query.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
        let mut query: Vec<(&str, String)> =
            query.into_iter().map(|(k, v)| (k, v.to_string())).collect();
        if options.clamp {
            query.push((param::CLAMP, "true".to_string()));
        }
        if options.wait_for_stream {
            query.push((param::WAIT_FOR_STREAM, "true".to_string()));
        }
        let req = Req::get(self.stream_url(stream, "/records")).query(&query);
        if options.binary {
            let accept = fencelog_api::read_batch::ACCEPT;
            let answer = self
                .send_idempotent_raw(req.header("accept", accept).unjoined())
                .await?;
            return decode_binary_page(answer);
        }
        let answer = self.send_idempotent_raw(req).await?;
        decode_json_page(answer)
    }

    pub async fn state(&self, stream: &str) -> Result<StreamInfo, ClientError> {
        self.send_idempotent(Req::get(self.stream_url(stream, "")))
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
        self.send_idempotent(Req::get(url).query(&query)).await
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
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                }
            })
    }

    /// [`Client::tail`] that also reports when the consumer caught up and
    /// when the connection was lost and regained.
    pub fn tail_events(
        &self,
        stream: &str,
        from_seq: u64,
    ) -> impl Stream<Item = Result<TailEvent, ClientError>> {
        let options = TailOptions {
            start: ReadStart::Seq(from_seq),
            wait_for_stream: false,
        };
        self.tail_with(stream, options)
    }

    /// A write: sent once, and never again once it may have left.
    pub(crate) async fn send_once<T: for<'de> Deserialize<'de>>(
        &self,
        req: Req,
    ) -> Result<T, ClientError> {
        decode_response(self.send_once_raw(req).await?)
    }

    pub(crate) async fn send_once_raw(&self, req: Req) -> Result<Answer, ClientError> {
        self.execute(req).await.map_err(Failure::into_error)
    }

    /// An append: sent once, its ack read as the fixed shape it has.
    pub(crate) async fn send_ack(&self, req: Req) -> Result<AppendAck, ClientError> {
        decode_ack(self.send_once_raw(req).await?)
    }

    pub(crate) async fn send_idempotent<T: for<'de> Deserialize<'de>>(
        &self,
        req: Req,
    ) -> Result<T, ClientError> {
        decode_response(self.send_idempotent_raw(req).await?)
    }

    /// An idempotent request, retried on transport errors; the answer
    /// undecoded.
    pub(crate) async fn send_idempotent_raw(&self, req: Req) -> Result<Answer, ClientError> {
        let mut attempt = 0;
        loop {
            match self.execute(req.clone()).await {
                Ok(answer) => return Ok(answer),
                Err(_) if attempt < IDEMPOTENT_RETRIES_MAX => {
                    attempt += 1;
                    tokio::time::sleep(TAIL_BACKOFF_MIN * attempt).await;
                }
                Err(failure) => {
                    return Err(ClientError::Transport {
                        source: failure.error,
                    })
                }
            }
        }
    }
}

impl Failure {
    /// The client's error for a request that got no answer.
    fn into_error(self) -> ClientError {
        match self.sent {
            true => ClientError::OutcomeUnknown { source: self.error },
            false => ClientError::Transport { source: self.error },
        }
    }
}

/// A raw or binary append's fencing headers.
fn fenced(req: Req, fencing_token: u64, match_seq_num: Option<u64>) -> Req {
    let req = req.header_value(header::FENCING_TOKEN, fencing_token.into());
    match match_seq_num {
        Some(m) => req.header_value(header::MATCH_SEQ_NUM, m.into()),
        None => req,
    }
}

/// The typed error of an answer whose status is not a success.
fn refusal(answer: &Answer) -> ClientError {
    error::from_answer(answer.status, &answer.body, &answer.url)
}

pub(crate) fn decode_response<T: for<'de> Deserialize<'de>>(
    answer: Answer,
) -> Result<T, ClientError> {
    if !answer.is_success() {
        return Err(refusal(&answer));
    }
    serde_json::from_slice(&answer.body).map_err(|e| ClientError::Protocol {
        status: answer.status,
        body: format!("{e}: {}", String::from_utf8_lossy(&answer.body)),
    })
}

/// An append's answer: the ack in the exact shape the server writes it
/// read without serde (its one allocation the stream's name), anything
/// else the general way.
fn decode_ack(answer: Answer) -> Result<AppendAck, ClientError> {
    if answer.is_success() {
        if let Some(ack) = fencelog_api::fixed_json::read_append_ack(&answer.body) {
            return Ok(ack);
        }
    }
    decode_response(answer)
}

/// A JSON page: in the common shape read without serde, its bodies slices
/// of the answer ([`fencelog_api::read_json`]), any other the general way.
fn decode_json_page(answer: Answer) -> Result<ReadResult, ClientError> {
    if answer.is_success() {
        if let Some(p) = fencelog_api::read_json::read_plain_page(&answer.body) {
            return Ok(ReadResult {
                records: p.records,
                next_start_seq: p.next_start_seq,
                next_seq: p.next_seq,
                sealed: p.sealed,
            });
        }
    }
    let wire: ReadPage = decode_response(answer)?;
    let records = wire
        .records
        .into_iter()
        .map(decode_record)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ReadResult {
        records,
        next_start_seq: wire.next_start_seq,
        next_seq: wire.next_seq,
        sealed: wire.sealed,
    })
}

/// A page in the binary read format: records from the body (slices of
/// it), positions from the answer's headers; refusals are JSON as always.
fn decode_binary_page(answer: Answer) -> Result<ReadResult, ClientError> {
    use fencelog_api::read_batch;
    if !answer.is_success() {
        return Err(refusal(&answer));
    }
    let number = |name: &str| answer.header(name).and_then(|v| v.parse::<u64>().ok());
    let positions = (
        number(read_batch::NEXT_START_SEQ),
        number(read_batch::NEXT_SEQ),
    );
    let sealed = answer.header(read_batch::SEALED) == Some("true");
    let status = answer.status;
    let protocol = |what: String| ClientError::Protocol { status, body: what };
    let (Some(next_start_seq), Some(next_seq)) = positions else {
        return Err(protocol(format!(
            "a binary page without {} and {} headers",
            read_batch::NEXT_START_SEQ,
            read_batch::NEXT_SEQ
        )));
    };
    let mut decoder = read_batch::PageDecoder::new();
    for piece in answer.into_pieces() {
        decoder.push(piece);
    }
    let records = decoder.finish().map_err(|e| protocol(e.to_string()))?;
    Ok(ReadResult {
        records,
        next_start_seq,
        next_seq,
        sealed,
    })
}

/// A record of a read or a tail, with its body and headers decoded.
fn decode_record(r: RecordJson) -> Result<Record, ClientError> {
    let seq = r.seq;
    r.into_record().map_err(|e| ClientError::Protocol {
        status: 200,
        body: format!("record {seq}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_take_host_port_and_explain_the_rest() {
        assert_eq!(
            normalize_url("localhost:7070").unwrap(),
            "http://localhost:7070"
        );
        assert_eq!(
            normalize_url("127.0.0.1:7070").unwrap(),
            "http://127.0.0.1:7070"
        );
        assert_eq!(
            normalize_url(" http://h:1/pre/ ").unwrap(),
            "http://h:1/pre"
        );
        assert_eq!(normalize_url("https://h").unwrap(), "https://h");
        for (bad, says) in [
            ("", "it is empty"),
            (
                "ftp://h:1",
                "the scheme is \"ftp\"; use http:// or https://",
            ),
            ("http://h:1/?x=1", "a server URL has no query or fragment"),
            (
                "h:99999",
                "invalid port number; write it as http://HOST:PORT",
            ),
            ("http://", "empty host; write it as"),
        ] {
            let e = normalize_url(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn names_are_escaped_not_trusted() {
        assert_eq!(escape_segment("a.b:c_d-e"), "a.b:c_d-e");
        assert_eq!(escape_segment("a/../b c"), "a%2F..%2Fb%20c");
    }
}
