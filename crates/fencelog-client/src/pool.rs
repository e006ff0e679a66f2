//! The client's own transport for `http://` servers: a bounded pool of
//! HTTP/1.1 keep-alive connections, one request in flight per connection,
//! spoken by [`crate::http1`].
//!
//! Why not reqwest here: for a request/response of a few hundred bytes,
//! reqwest's layers (its pool and connector services, a task per
//! connection that every request is handed to and back from) cost about
//! three times redis-rs's CPU per request; hyper's client connection,
//! used here before, still ~1.8× (docs/benchmark-history.md, "the client
//! crate's own HTTP/1.1"). Here the task that sends a request writes it
//! and reads its answer on the socket itself: one task's work, no
//! hand-off.
//!
//! **The resend rule.** A request is sent again only when it provably never
//! left: a pooled connection the kernel says the server has closed is not
//! used (see `not_closed_by_peer`), and a request whose first write fails
//! before any byte was taken is handed back. Then the next pooled or a new
//! connection carries it. Once any byte may have been written, a failure
//! is [`Failure::sent`]: the caller reports a write as `OutcomeUnknown`
//! and never resends it. Reads are retried by the caller, as idempotent
//! requests always were.

use crate::error::{Cause, TransportError};
use crate::http1::{self, Chunked, Framing, Step};
use crate::request::{Answer, Req};
use bytes::{Buf, Bytes, BytesMut};
use hyper::header::HeaderValue;
use hyper::Method;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Connections one client keeps open at most by default (busy and idle;
/// clones share them).
pub const POOL_CONNECTIONS_DEFAULT: usize = 64;
/// The most [`crate::ClientBuilder::pool_max_connections`] accepts.
pub const POOL_CONNECTIONS_MAX: usize = 4096;
/// The largest answer body read: a read page is at most 8 MiB of record
/// bytes, which JSON escaping can grow; anything past this is not an
/// answer this client asked for.
const RESPONSE_BYTES_MAX: usize = 64 << 20;
/// Bytes asked of the socket per read of an answer.
const READ_BYTES: usize = 64 << 10;
/// A request body up to this size is written with its head in one write.
const COPY_BODY_BYTES: usize = 16 << 10;

/// A request that got no answer, and whether it may have been sent.
#[derive(Debug)]
pub(crate) struct Failure {
    /// Some byte may have been written: the outcome is unknown.
    pub sent: bool,
    pub error: TransportError,
}

impl Failure {
    pub fn not_sent(cause: Cause) -> Failure {
        Failure {
            sent: false,
            error: TransportError(cause, None),
        }
    }

    pub fn unknown(cause: Cause) -> Failure {
        Failure {
            sent: true,
            error: TransportError(cause, None),
        }
    }
}

/// The pool: idle connections (most recently used last) and one permit per
/// open connection, so at most `max` exist however many tasks send.
pub(crate) struct Pool {
    idle: Mutex<Vec<Idle>>,
    permits: Arc<Semaphore>,
    /// Signalled when a connection goes back idle: a request waiting for
    /// a permit can take it instead (an idle connection keeps its permit).
    returned: Notify,
    connect_timeout: Duration,
    idle_timeout: Duration,
    authorization: Option<HeaderValue>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("free_permits", &self.permits.available_permits())
            .finish_non_exhaustive()
    }
}

struct Conn {
    authority: Box<str>,
    host: HeaderValue,
    tcp: TcpStream,
    /// What has been read of the answer under way; empty between answers
    /// (a connection with bytes left over is not reused).
    buf: BytesMut,
    /// The same socket (a duplicated descriptor), to ask the kernel before
    /// reuse whether the server has closed it: the runtime learns of an
    /// EOF only when its reactor next runs, which may be after the request
    /// was written into a dead connection (an outcome made unknown for
    /// nothing, e.g. right after a server restart).
    probe: std::net::TcpStream,
    _permit: OwnedSemaphorePermit,
}

struct Idle {
    conn: Conn,
    since: Instant,
}

/// How one exchange on one connection ended badly.
enum Broken {
    /// The request was handed back unsent.
    NotSent(Cause),
    Unknown(Cause),
}

impl Pool {
    pub fn new(
        max: usize,
        connect_timeout: Duration,
        idle_timeout: Duration,
        authorization: Option<HeaderValue>,
    ) -> Pool {
        assert!((1..=POOL_CONNECTIONS_MAX).contains(&max));
        Pool {
            idle: Mutex::new(Vec::with_capacity(max)),
            permits: Arc::new(Semaphore::new(max)),
            returned: Notify::new(),
            connect_timeout,
            idle_timeout,
            authorization,
        }
    }

    /// Connections open now (busy or idle).
    #[cfg(test)]
    pub fn open(&self, max: usize) -> usize {
        max - self.permits.available_permits()
    }

    /// Sends `req` (an `http://` URL) and reads the whole answer, within
    /// `timeout` from now: waiting for a connection, connecting, sending
    /// and reading included.
    pub async fn send(&self, req: &Req, timeout: Duration) -> Result<Answer, Failure> {
        self.send_to(req, timeout).await.map_err(|mut f| {
            f.error.1 = Some(req.url.clone());
            f
        })
    }

    async fn send_to(&self, req: &Req, timeout: Duration) -> Result<Answer, Failure> {
        let deadline = Instant::now() + timeout;
        let (authority, path) = split_http(&req.url)
            .ok_or_else(|| Failure::not_sent(Cause::Answer(format!("not http: {}", req.url))))?;
        // The client escapes what it puts in a URL; anything else here
        // could end the request line early.
        if !path.bytes().all(|b| b.is_ascii_graphic()) {
            let bad = format!("bad path {path:?}: not visible ASCII");
            return Err(Failure::not_sent(Cause::Answer(bad)));
        }
        // A handed-back request goes out on the next connection; every
        // such round drops one connection, so this ends.
        for _ in 0..=POOL_CONNECTIONS_MAX {
            let (mut conn, reused) = self.checkout(authority, deadline).await?;
            let auth = self.authorization.as_ref();
            let exchanged = exchange(&mut conn, req, path, auth);
            match tokio::time::timeout_at(deadline, exchanged).await {
                Ok(Ok((answer, reusable))) => {
                    if reusable {
                        self.checkin(conn);
                    }
                    return Ok(Answer {
                        url: req.url.clone(),
                        ..answer
                    });
                }
                Ok(Err(Broken::NotSent(_))) if reused => continue,
                Ok(Err(Broken::NotSent(cause))) => return Err(Failure::not_sent(cause)),
                Ok(Err(Broken::Unknown(cause))) => return Err(Failure::unknown(cause)),
                Err(_) => return Err(Failure::unknown(Cause::Timeout("waiting for the answer"))),
            }
        }
        unreachable!("every round drops a connection of a bounded pool")
    }

    /// A live idle connection to `authority`, or a new one once a permit
    /// is free (an idle connection elsewhere is closed to free one).
    async fn checkout(&self, authority: &str, deadline: Instant) -> Result<(Conn, bool), Failure> {
        loop {
            // Listening before looking, so a connection returned between
            // the look and the wait is not missed.
            let mut returned = std::pin::pin!(self.returned.notified());
            returned.as_mut().enable();
            if let Some(conn) = self.take_idle(authority) {
                return Ok((conn, true));
            }
            let permit = match self.permits.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) if self.evict_one() => continue,
                Err(_) => {
                    let wait = async {
                        tokio::select! {
                            p = self.permits.clone().acquire_owned() => Some(p),
                            () = returned => None,
                        }
                    };
                    match tokio::time::timeout_at(deadline, wait).await {
                        Ok(Some(p)) => p.expect("the pool's semaphore is never closed"),
                        Ok(None) => continue,
                        Err(_) => {
                            let what = "waiting for a free pooled connection";
                            return Err(Failure::not_sent(Cause::Timeout(what)));
                        }
                    }
                }
            };
            let limit =
                (self.connect_timeout).min(deadline.saturating_duration_since(Instant::now()));
            return match tokio::time::timeout(limit, connect(authority, permit)).await {
                Ok(Ok(conn)) => Ok((conn, false)),
                Ok(Err(cause)) => Err(Failure::not_sent(cause)),
                Err(_) => Err(Failure::not_sent(Cause::Timeout("connecting"))),
            };
        }
    }

    /// The most recently used live connection to `authority`; dead and
    /// expired ones met on the way are closed.
    fn take_idle(&self, authority: &str) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(at) = idle.iter().rposition(|i| &*i.conn.authority == authority) {
            let Idle { mut conn, since } = idle.remove(at);
            if since.elapsed() < self.idle_timeout && conn.not_closed_by_peer() {
                return Some(conn);
            }
        }
        None
    }

    /// Closes the least recently used idle connection; false if none.
    fn evict_one(&self) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.is_empty() {
            return false;
        }
        drop(idle.remove(0));
        true
    }

    fn checkin(&self, conn: Conn) {
        debug_assert!(conn.buf.is_empty(), "only a connection between answers");
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.push(Idle {
            conn,
            since: Instant::now(),
        });
        drop(idle);
        self.returned.notify_one();
    }
}

impl Conn {
    /// The kernel's word that nothing has arrived on the idle connection:
    /// no EOF, no reset, no bytes (an idle HTTP/1.1 connection gets none;
    /// anything there is a server's parting words). One `recv` with
    /// `MSG_PEEK` on the non-blocking socket.
    fn not_closed_by_peer(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.probe.peek(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}

/// `http://authority/path?query` → (`authority`, `/path?query`).
fn split_http(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("http://")?;
    let at = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(at);
    (!authority.is_empty()).then_some((authority, if path.is_empty() { "/" } else { path }))
}

/// `authority` as a socket address to connect to: port 80 if it has none.
fn with_port(authority: &str) -> std::borrow::Cow<'_, str> {
    let port = authority.rsplit_once(':').map(|(_, p)| p);
    match port {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => authority.into(),
        _ => format!("{authority}:80").into(),
    }
}

async fn connect(authority: &str, permit: OwnedSemaphorePermit) -> Result<Conn, Cause> {
    let host = HeaderValue::from_str(authority)
        .map_err(|_| Cause::Answer(format!("bad host {authority:?}")))?;
    let tcp = tcp_connect(&with_port(authority)).await?;
    // One small request and answer at a time: never wait for Nagle.
    tcp.set_nodelay(true).map_err(Cause::Io)?;
    // Shares the socket's non-blocking flag, so a peek never waits.
    let probe = std::net::TcpStream::from(tcp.as_fd().try_clone_to_owned().map_err(Cause::Io)?);
    Ok(Conn {
        authority: authority.into(),
        host,
        tcp,
        buf: BytesMut::new(),
        probe,
        _permit: permit,
    })
}

/// The first address of `addr` that accepts; the name's lookup failing
/// is its own cause, as it has a different remedy.
async fn tcp_connect(addr: &str) -> Result<TcpStream, Cause> {
    let mut last = None;
    for at in tokio::net::lookup_host(addr).await.map_err(Cause::Dns)? {
        match TcpStream::connect(at).await {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = Some(e),
        }
    }
    let none = || std::io::Error::other(format!("{addr} resolves to no address"));
    Err(Cause::Io(last.unwrap_or_else(none)))
}

/// One request and its whole answer on `conn`; whether the connection can
/// be reused after.
async fn exchange(
    conn: &mut Conn,
    req: &Req,
    path: &str,
    authorization: Option<&HeaderValue>,
) -> Result<(Answer, bool), Broken> {
    debug_assert!(conn.buf.is_empty(), "a connection between answers");
    let mut out = Vec::with_capacity(256 + req.body.len().min(COPY_BODY_BYTES));
    let (host, headers) = (&conn.host, &req.headers[..]);
    http1::request_head(
        &mut out,
        &req.method,
        path,
        host,
        authorization,
        headers,
        req.body.len(),
    );
    let body: &[u8] = if req.body.len() <= COPY_BODY_BYTES {
        out.extend_from_slice(&req.body);
        &[]
    } else {
        &req.body
    };
    // An answer that comes before the whole request is written (a 413
    // for a body over the limit, sent as soon as its length was read) is
    // still the answer: the rest of the request is not written, and the
    // connection is not used again.
    let written = write(&conn.tcp, &mut conn.buf, [&out[..], body]).await;
    let whole = match written {
        Ok(Sent::Whole) => true,
        Ok(Sent::AnsweredEarly) => false,
        Err(Broken::NotSent(cause)) => return Err(Broken::NotSent(cause)),
        // The server may have answered and then closed on the rest.
        Err(Broken::Unknown(cause)) => match read_answer(conn, &req.method).await {
            Ok((head, pieces)) => return Ok((answer(req, head, pieces), false)),
            Err(_) => return Err(Broken::Unknown(cause)),
        },
    };
    let (head, pieces) = read_answer(conn, &req.method).await?;
    let reusable = whole && !head.close && conn.buf.is_empty();
    Ok((answer(req, head, pieces), reusable))
}

/// The answer's head and body.
async fn read_answer(
    conn: &mut Conn,
    method: &Method,
) -> Result<(http1::Head, Vec<Bytes>), Broken> {
    let head = read_head(conn, *method == Method::HEAD).await?;
    let pieces = read_body(conn, head.framing).await?;
    Ok((head, pieces))
}

/// `head` and `pieces` as the caller's [`Answer`].
fn answer(req: &Req, head: http1::Head, mut pieces: Vec<Bytes>) -> Answer {
    // Refusals are always joined: they are parsed as one JSON body.
    let body = if req.unjoined && (200..300).contains(&head.status) && pieces.len() > 1 {
        Bytes::new()
    } else {
        join(std::mem::take(&mut pieces))
    };
    Answer {
        status: head.status,
        headers: head.headers,
        body,
        pieces,
        url: String::new(),
    }
}

/// How a request's bytes went out.
enum Sent {
    Whole,
    /// The server's answer (or its close) came before the last byte.
    AnsweredEarly,
}

/// Writes every byte of `parts`, watching for the server to answer (or
/// close) before the last one: what arrives meanwhile goes to `buf`. A
/// failure before the first byte was taken is [`Broken::NotSent`]
/// (nothing left), any later one [`Broken::Unknown`].
async fn write(tcp: &TcpStream, buf: &mut BytesMut, parts: [&[u8]; 2]) -> Result<Sent, Broken> {
    let mut sent_any = false;
    let broken = |sent: bool, cause| match sent {
        true => Broken::Unknown(cause),
        false => Broken::NotSent(cause),
    };
    let both = Interest::READABLE | Interest::WRITABLE;
    for part in parts {
        let mut at = 0;
        while at < part.len() {
            // Written at once while the socket takes it (a usual request
            // goes out in one write); waited for only when it is full.
            match tcp.try_write(&part[at..]) {
                Ok(0) => {
                    let closed = Cause::Answer("the connection closed".into());
                    return Err(broken(sent_any, closed));
                }
                Ok(n) => {
                    at += n;
                    sent_any = true;
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(broken(sent_any, Cause::Io(e))),
            }
            let ready = tcp
                .ready(both)
                .await
                .map_err(|e| broken(sent_any, Cause::Io(e)))?;
            // Readiness may be left over from the last answer's reads:
            // only bytes (or the end) actually there mean an answer — or,
            // before any byte went out, a connection not to use.
            if ready.is_readable() {
                buf.reserve(READ_BYTES);
                match tcp.try_read_buf(buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Ok(_) | Err(_) if sent_any => return Ok(Sent::AnsweredEarly),
                    Ok(_) | Err(_) => {
                        let gone = Cause::Answer("the connection ended before the request".into());
                        return Err(Broken::NotSent(gone));
                    }
                }
            }
        }
    }
    Ok(Sent::Whole)
}

/// Reads more of the answer into `conn.buf`; the connection ending first
/// is an answer lost.
async fn read_more(conn: &mut Conn, want: usize) -> Result<(), Broken> {
    conn.buf.reserve(want.clamp(1, READ_BYTES));
    match conn.tcp.read_buf(&mut conn.buf).await {
        Ok(0) => Err(Broken::Unknown(Cause::Answer(
            "the connection closed before the answer ended".into(),
        ))),
        Ok(_) => Ok(()),
        Err(e) => Err(Broken::Unknown(Cause::Io(e))),
    }
}

/// The answer's head, interim (1xx) answers skipped.
async fn read_head(conn: &mut Conn, head_request: bool) -> Result<http1::Head, Broken> {
    loop {
        match http1::response_head(&conn.buf, head_request) {
            Ok(Some(head)) => {
                conn.buf.advance(head.head_bytes);
                if head.status >= 200 {
                    return Ok(head);
                }
            }
            Ok(None) => read_more(conn, READ_BYTES).await?,
            Err(e) => return Err(Broken::Unknown(Cause::Answer(e))),
        }
    }
}

/// The whole body in the pieces it arrived in (a chunked body's chunks, a
/// body of known length in one), bounded by [`RESPONSE_BYTES_MAX`].
async fn read_body(conn: &mut Conn, framing: Framing) -> Result<Vec<Bytes>, Broken> {
    let over = || {
        let what = format!("an answer over {RESPONSE_BYTES_MAX} bytes");
        Broken::Unknown(Cause::Answer(what))
    };
    match framing {
        Framing::Empty => Ok(Vec::new()),
        Framing::Length(n) => {
            let n = usize::try_from(n)
                .ok()
                .filter(|&n| n <= RESPONSE_BYTES_MAX)
                .ok_or_else(over)?;
            // Room for the whole body at once: growing the buffer read by
            // read would copy what it holds at every doubling.
            conn.buf.reserve(n.saturating_sub(conn.buf.len()));
            while conn.buf.len() < n {
                let left = n - conn.buf.len();
                read_more(conn, left).await?;
            }
            Ok(vec![conn.buf.split_to(n).freeze()])
        }
        Framing::Chunked => {
            let (mut chunked, mut pieces, mut total) = (Chunked::default(), Vec::new(), 0);
            loop {
                match chunked.next(&mut conn.buf) {
                    Ok(Step::Piece(p)) => {
                        total += p.len();
                        if total > RESPONSE_BYTES_MAX {
                            return Err(over());
                        }
                        pieces.push(p);
                    }
                    Ok(Step::More) => read_more(conn, READ_BYTES).await?,
                    Ok(Step::Done) => return Ok(pieces),
                    Err(e) => return Err(Broken::Unknown(Cause::Answer(e))),
                }
            }
        }
        Framing::ToEnd => {
            loop {
                if conn.buf.len() > RESPONSE_BYTES_MAX {
                    return Err(over());
                }
                conn.buf.reserve(READ_BYTES);
                match conn.tcp.read_buf(&mut conn.buf).await {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => return Err(Broken::Unknown(Cause::Io(e))),
                }
            }
            Ok(vec![std::mem::take(&mut conn.buf).freeze()])
        }
    }
}

/// `pieces` as one buffer: the one piece a body usually arrives in as it
/// is, several copied once into a buffer of their total size (growing one
/// buffer as they came copied an 8 MiB page about twice).
fn join(mut pieces: Vec<Bytes>) -> Bytes {
    let total = pieces.iter().map(Bytes::len).sum();
    match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.pop().expect("one piece"),
        _ => {
            let mut joined = BytesMut::with_capacity(total);
            for p in &pieces {
                joined.extend_from_slice(p);
            }
            joined.freeze()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_authority_and_origin_form() {
        assert_eq!(
            split_http("http://h:1/v1/s?x=1"),
            Some(("h:1", "/v1/s?x=1"))
        );
        assert_eq!(split_http("http://h:1"), Some(("h:1", "/")));
        assert_eq!(split_http("https://h:1/"), None);
        assert_eq!(split_http("http:///x"), None);
        assert_eq!(with_port("h:7070"), "h:7070");
        assert_eq!(with_port("h"), "h:80");
        assert_eq!(with_port("[::1]"), "[::1]:80");
        assert_eq!(with_port("[::1]:9"), "[::1]:9");
    }

    /// A server that answers each connection's first request and closes
    /// it when `close` is signalled; it sends every request's bytes to
    /// the test.
    /// What arrives on `conn` up to the end of one [`one`] request (less
    /// if the peer closes first).
    async fn read_one(conn: &mut tokio::net::TcpStream) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        while !seen.ends_with(b"\r\n\r\none") {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        seen
    }

    async fn answer_once_server() -> (
        String,
        tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
        Arc<Notify>,
    ) {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/x", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let close = Arc::new(Notify::new());
        let closing = close.clone();
        tokio::spawn(async move {
            loop {
                let (mut conn, _) = listener.accept().await.unwrap();
                tx.send(read_one(&mut conn).await).unwrap();
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
                let closing = closing.clone();
                tokio::spawn(async move {
                    closing.notified().await;
                    drop(conn);
                });
            }
        });
        (url, rx, close)
    }

    fn one(url: &str) -> Req {
        Req::post(url.to_string()).body("application/octet-stream", "one")
    }

    impl Pool {
        /// Waits until every idle connection has seen its server close
        /// (the socket turns readable with the EOF: a real signal, not a
        /// timer).
        async fn idle_closed(&self) {
            let idle = std::mem::take(&mut *self.idle.lock().unwrap());
            for i in &idle {
                i.conn.tcp.readable().await.unwrap();
            }
            *self.idle.lock().unwrap() = idle;
        }
    }

    #[tokio::test]
    async fn a_pooled_connection_the_server_closed_is_skipped_and_the_request_sent_once() {
        let (url, mut requests, close) = answer_once_server().await;
        let pool = Pool::new(4, Duration::from_secs(5), Duration::from_secs(5), None);
        let answer = pool.send(&one(&url), Duration::from_secs(5)).await.unwrap();
        assert_eq!((answer.status, &answer.body[..]), (200, &b"ok"[..]));
        requests.recv().await.unwrap();
        assert_eq!(pool.open(4), 1, "kept alive");
        close.notify_one();
        pool.idle_closed().await;
        assert_eq!(pool.open(4), 1, "the closed one is still pooled");
        let answer = pool.send(&one(&url), Duration::from_secs(5)).await.unwrap();
        assert_eq!(answer.status, 200);
        requests.recv().await.unwrap();
        assert!(requests.try_recv().is_err(), "sent once");
        assert_eq!(pool.open(4), 1, "the dead one was closed");
    }

    /// A server that answers every request with `status` and a chunked
    /// body of three chunks (hyper hands each over as a piece of its own).
    async fn chunked_server(status: &'static str) -> String {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/x", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if !read_one(&mut conn).await.ends_with(b"one") {
                        return;
                    }
                    let head = format!("HTTP/1.1 {status}\r\ntransfer-encoding: chunked\r\n\r\n");
                    conn.write_all(head.as_bytes()).await.unwrap();
                    for piece in ["{\"a\"", ":", "1}"] {
                        let chunk = format!("{:x}\r\n{piece}\r\n", piece.len());
                        conn.write_all(chunk.as_bytes()).await.unwrap();
                        conn.flush().await.unwrap();
                    }
                    conn.write_all(b"0\r\n\r\n").await.unwrap();
                });
            }
        });
        url
    }

    /// An unjoined request gets a success's pieces as they came (their
    /// concatenation the body); a refusal, or a request that did not ask,
    /// gets the body joined.
    #[tokio::test]
    async fn unjoined_answers_keep_their_pieces_and_refusals_are_joined() {
        let pool = Pool::new(4, Duration::from_secs(5), Duration::from_secs(5), None);
        let ok = chunked_server("200 OK").await;
        let a = pool.send(&one(&ok), Duration::from_secs(5)).await.unwrap();
        assert_eq!((&a.body[..], a.pieces.len()), (&b"{\"a\":1}"[..], 0));
        let a = pool
            .send(&one(&ok).unjoined(), Duration::from_secs(5))
            .await
            .unwrap();
        let pieces = a.into_pieces();
        assert_eq!(pieces, [&b"{\"a\""[..], b":", b"1}"]);
        let refused = chunked_server("409 Conflict").await;
        let a = pool
            .send(&one(&refused).unjoined(), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(
            (a.status, &a.body[..], a.pieces.len()),
            (409, &b"{\"a\":1}"[..], 0)
        );
    }

    #[tokio::test]
    async fn a_connection_that_ended_is_not_taken_again() {
        let (url, mut requests, close) = answer_once_server().await;
        let pool = Pool::new(1, Duration::from_secs(5), Duration::from_secs(5), None);
        pool.send(&one(&url), Duration::from_secs(5)).await.unwrap();
        requests.recv().await.unwrap();
        close.notify_one();
        pool.idle_closed().await;
        let authority = split_http(&url).unwrap().0;
        assert!(pool.take_idle(authority).is_none(), "taken though closed");
        assert_eq!(pool.open(1), 0, "the dead one was closed");
        assert!(requests.try_recv().is_err(), "nothing reached the server");
    }

    /// A connection the server reset: the request's first write fails
    /// before any byte is taken, and it comes back unsent.
    #[tokio::test]
    async fn a_request_refused_before_its_first_byte_is_handed_back_unsent() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/x", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (conn, _) = listener.accept().await.unwrap();
            #[allow(
                deprecated,
                reason = "linger 0 makes the drop reset the connection at once, and here it does not block, which is what the deprecation warns of"
            )]
            conn.set_linger(Some(Duration::ZERO)).unwrap();
            drop(conn); // a reset, not a FIN
        });
        let pool = Pool::new(1, Duration::from_secs(5), Duration::from_secs(5), None);
        let authority = split_http(&url).unwrap().0;
        let permit = pool.permits.clone().acquire_owned().await.unwrap();
        let mut conn = connect(authority, permit).await.unwrap();
        conn.tcp.readable().await.unwrap();
        match exchange(&mut conn, &one(&url), "/x", None).await {
            Err(Broken::NotSent(_)) => {}
            Err(Broken::Unknown(c)) => panic!("unknown: {c:?}"),
            Ok(_) => panic!("answered on a reset connection"),
        }
    }

    /// A server that answers as soon as it has a head and then neither
    /// reads nor closes: the answer is taken while the body is still
    /// going out, and the connection is not reused.
    #[tokio::test]
    async fn an_answer_before_the_whole_body_is_the_answer() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/x", listener.local_addr().unwrap());
        let (done_tx, done) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut byte = [0u8; 1];
            while !seen.ends_with(b"\r\n\r\n") {
                conn.read_exact(&mut byte).await.unwrap();
                seen.push(byte[0]);
            }
            let refusal = b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 2\r\n\r\nno";
            conn.write_all(refusal).await.unwrap();
            let _ = done.await; // holds the connection open, unread
        });
        let pool = Pool::new(1, Duration::from_secs(5), Duration::from_secs(5), None);
        let big = Req::post(url).body("application/octet-stream", vec![b'x'; 64 << 20]);
        let answer = pool.send(&big, Duration::from_secs(30)).await.unwrap();
        assert_eq!((answer.status, &answer.body[..]), (413, &b"no"[..]));
        assert_eq!(pool.open(1), 0, "not reused");
        let _ = done_tx.send(());
    }

    #[tokio::test]
    async fn no_free_connection_in_time_is_not_sent() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/x", listener.local_addr().unwrap());
        let (tx, mut requests) = tokio::sync::mpsc::unbounded_channel();
        // Reads whatever comes and never answers.
        tokio::spawn(async move {
            loop {
                let (mut conn, _) = listener.accept().await.unwrap();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n @ 1..) = conn.read(&mut buf).await {
                        tx.send(buf[..n].to_vec()).unwrap();
                    }
                });
            }
        });
        let pool = Arc::new(Pool::new(
            1,
            Duration::from_secs(5),
            Duration::from_secs(5),
            None,
        ));
        let first = {
            let (pool, url) = (pool.clone(), url.clone());
            tokio::spawn(async move { pool.send(&one(&url), Duration::from_secs(30)).await })
        };
        requests.recv().await.unwrap();
        let failure = pool
            .send(&one(&url), Duration::from_millis(100))
            .await
            .unwrap_err();
        assert!(!failure.sent, "{failure:?}");
        assert!(failure.error.is_timeout());
        assert!(
            failure.error.to_string().contains("free pooled connection"),
            "{}",
            failure.error
        );
        assert!(requests.try_recv().is_err(), "the second never left");
        assert_eq!(pool.open(1), 1);
        first.abort();
    }
}
