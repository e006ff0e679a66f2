//! The HTTP/1.1 front of a connection: it answers whole, plainly framed
//! requests itself (live tails included) and hands the connection to
//! hyper, for good, at the first request that is anything else
//! ([`crate::server::front_head`] says which is which: upgrades, chunked or
//! oversized uploads, anything ambiguous).
//!
//! Why: for a producer's small requests hyper's dispatcher (its parser
//! state, the body channel, the per-request timer, response encoding)
//! costs more instructions than the whole append route (callgrind,
//! BENCHMARKS.md). Here a request is parsed with httparse out of
//! one buffer, its body is a slice of that buffer, the same code hyper's
//! path calls answers it (the append route, [`AppendRoute::serve`], or the
//! router), and the answer is written as hyper would write it.
//!
//! What stays as it was:
//! - Every answer is the route's or the router's; the front adds only the
//!   framing (status line, `content-length` or chunked, `date`,
//!   `keep-alive`, and `connection: close` when the client asked for it
//!   or the server is shutting down; the connection then closes).
//! - An answer's body is written frame by frame as it is produced, each
//!   write awaited: a client that stops reading holds one frame.
//! - While an answer waits for its next frame (a live tail, between
//!   events) what it has so far is on the wire, and the socket is
//!   watched: the client closing ends the answer and the connection, as
//!   hyper ends them (it runs without half-close), and bytes of a next
//!   request are kept, up to the buffer's cap, for after the answer.
//! - Answers go out in request order, one request at a time: pipelined
//!   requests wait in the buffer.
//! - A connection costs at most hyper's read buffer limit of memory.
//! - A head must be whole within the header read timeout, or the
//!   connection closes, as hyper closes it. A body that is slow to come
//!   goes to hyper, whose body deadline answers 408.
//! - Writes go through [`crate::server::conn_io::ConnIo`], so its write deadline
//!   holds.
//! - On shutdown an idle connection closes; a request being answered is
//!   finished first.

use crate::error::Answer;
use crate::routes::append_route::AppendRoute;
use crate::server::front_head::{self, Head};
use crate::state::shutdown::Shutdown;
use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, Request, Response, StatusCode};
use axum::Router;
use bytes::{Bytes, BytesMut};
use futures_util::FutureExt;
use http_body_util::BodyExt;
use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

/// Parsed once: inserting by `&str` parses the name on every response.
pub static KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");

/// Bytes asked of the socket per read once the connection has had a
/// request answered by the front (hyper's first read size).
const READ_CHUNK_BYTES: usize = 8192;

/// Bytes asked of the socket per read until then, and while an answer is
/// being written: enough for the usual first request, and small enough
/// to come from the allocator's per-thread cache, so a connection the
/// front hands to hyper at once leaves no freed 8 KiB behind in the heap,
/// and an idle live tail holds no more.
const FIRST_READ_BYTES: usize = 1024;

/// Body frames up to this size are copied behind their chunk header and
/// written with it; larger ones are written from where they are.
const COPY_FRAME_BYTES: usize = 4096;

/// How long the front waits for the rest of a body whose head it has,
/// before hyper (and its body deadline) take the request over. Bodies
/// that fit the front's buffer come in one or two segments on any live
/// connection, so this bound is reached only by a stalling client.
const BODY_WAIT: Duration = Duration::from_secs(1);

/// The front's share of a connection's settings.
pub struct Front {
    pub route: Arc<AppendRoute>,
    pub router: Router,
    pub head_timeout: Duration,
    /// The most bytes one request (head and body) may take in the buffer.
    pub cap_bytes: usize,
    pub keep_alive: HeaderValue,
}

/// How the front left a connection.
pub enum Left<S> {
    /// Closed (or to be dropped): the client left, timed out, or the
    /// server is shutting down.
    Closed,
    /// Hyper's, with the bytes read and not yet answered.
    ToHyper(S, Bytes),
}

impl Front {
    /// Serves `io` until it closes or holds a request for hyper.
    ///
    /// Until the first request is known to be the front's, none of the
    /// answering state exists: the loop that answers (its route's and
    /// router's futures, a few KiB) is boxed and made only then, and the
    /// first read is small. Why: a connection handed to hyper at once
    /// (an upgrade to the append session) keeps it for hours, and had the
    /// front's state been made and freed first it would leave a hole of
    /// touched heap pages behind. Live tails stay with the front, which
    /// holds one of them in less memory than hyper's connection does
    /// (its 8 KiB read and write buffers; 10,000 idle tails: 16.2 KiB
    /// resident per tail through hyper, 11.2 through the front;
    /// BENCHMARKS.md).
    pub async fn serve<S>(&self, mut io: S, shutdown: &Shutdown) -> Left<S>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let mut buf = BytesMut::new();
        let mut waits = Waits::new(self.head_timeout, shutdown);
        match self.next(&mut io, &mut buf, &mut waits).await {
            Next::Whole(first) => {
                let answering = self.answer_all(io, buf, waits, first, shutdown);
                Box::pin(answering).await
            }
            Next::Hyper => hand_over(io, buf),
            Next::Closed => Left::Closed,
        }
    }

    /// Answers `first` and every request after it that is the front's.
    async fn answer_all<S>(
        &self,
        mut io: S,
        mut buf: BytesMut,
        mut waits: Waits,
        first: front_head::Located,
        shutdown: &Shutdown,
    ) -> Left<S>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut out = Vec::new();
        let mut located = first;
        waits.answered = true;
        loop {
            if !self
                .answer(&mut io, &mut buf, located, shutdown, &mut out)
                .await
            {
                let _ = io.shutdown().await;
                return Left::Closed;
            }
            located = match self.next(&mut io, &mut buf, &mut waits).await {
                Next::Whole(located) => located,
                Next::Hyper => return hand_over(io, buf),
                Next::Closed => return Left::Closed,
            };
        }
    }

    /// Reads until `buf` starts with a whole request the front takes, or
    /// with one it does not (or the connection is to close).
    async fn next<S>(&self, io: &mut S, buf: &mut BytesMut, waits: &mut Waits) -> Next
    where
        S: AsyncRead + Unpin,
    {
        let (mut head_deadline, mut body_deadline) = (None, None);
        loop {
            let head_done = match front_head::parse(buf, self.cap_bytes) {
                Head::Hyper => return Next::Hyper,
                Head::Whole(located) => return Next::Whole(located),
                Head::Partial { head_done } => head_done,
            };
            let now = Instant::now();
            let mut deadline = *head_deadline.get_or_insert(now + self.head_timeout);
            if head_done {
                deadline = deadline.min(*body_deadline.get_or_insert(now + BODY_WAIT));
            }
            buf.reserve(match waits.answered {
                true => READ_CHUNK_BYTES,
                false => FIRST_READ_BYTES,
            });
            // A request under way is finished; an idle or half-sent head
            // is not waited for once the server shuts down.
            let stop = (!head_done).then_some(waits.stop.as_mut());
            match read_more(io, buf, deadline, waits.alarm.as_mut(), stop).await {
                Read::More => {}
                Read::Expired if head_done => return Next::Hyper,
                Read::Expired | Read::Closed => return Next::Closed,
            }
        }
    }

    /// Answers the whole request at the start of `buf` (taking it out);
    /// false when the connection is to close.
    async fn answer<S>(
        &self,
        io: &mut S,
        buf: &mut BytesMut,
        located: front_head::Located,
        shutdown: &Shutdown,
        out: &mut Vec<u8>,
    ) -> bool
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let asked_close = located.close;
        let mut head = buf.split_to(located.head_bytes + located.body_bytes);
        let body = head.split_off(located.head_bytes).freeze();
        let head = head.freeze();
        let answer = match located.append_view(&head) {
            Some((stream, headers)) => {
                let body = crate::routes::body::Incoming::Whole(body);
                let target = located.target(&head);
                self.route.serve_parts(target, stream, &headers, body).await
            }
            None => match self.serve_parts(&located, &head, body).await {
                Some(response) => Answer::Response(response),
                None => {
                    // What hyper answers (and closes after) for a head
                    // `http` refuses.
                    let _ = io
                        .write_all(&crate::server::conn_io::malformed_request())
                        .await;
                    return false;
                }
            },
        };
        // Either way the answer says `connection: close`, as hyper's does.
        let closing = asked_close || shutdown.is_triggered();
        let written = match answer {
            Answer::Json { status, body } => {
                json_head(status, &self.keep_alive, body.len(), closing, out);
                out.extend_from_slice(&body);
                write_out(io, out).await
            }
            Answer::Response(response) => self.respond(io, buf, response, closing, out).await,
        };
        written.is_ok() && !closing
    }

    /// The answer to a request read as `http` parts, as hyper would hand
    /// it on; None when `http` refuses its head.
    async fn serve_parts(
        &self,
        located: &front_head::Located,
        head: &Bytes,
        body: Bytes,
    ) -> Option<Response<Body>> {
        let parts = located.to_parts(head)?;
        let request = Request::from_parts(parts, Body::from(body));
        Some(match located.append {
            true => self.route.serve(request).await,
            false => match self.router.clone().oneshot(request).await {
                Ok(r) => r,
                Err(never) => match never {},
            },
        })
    }

    /// Writes `response` as hyper would: the head with the first body
    /// frame, then each frame as it comes, by length when the body's size
    /// is known and chunked otherwise. An error ends the connection.
    async fn respond<S>(
        &self,
        io: &mut S,
        buf: &mut BytesMut,
        mut response: Response<Body>,
        closing: bool,
        out: &mut Vec<u8>,
    ) -> io::Result<()>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        response
            .headers_mut()
            .insert(KEEP_ALIVE.clone(), self.keep_alive.clone());
        let (parts, mut body) = response.into_parts();
        let framing = framing(&parts, hyper::body::Body::size_hint(&body).exact());
        head(&parts, framing, closing, out);
        if framing == Framing::Empty {
            return write_out(io, out).await;
        }
        while let Some(frame) = self.next_frame(&mut body, io, buf, out).await? {
            let Ok(data) = frame.into_data() else {
                continue; // trailers: hyper sends them only when asked (TE), never here
            };
            if data.is_empty() {
                continue;
            }
            let chunked = framing == Framing::Chunked;
            if chunked {
                let mut hex = [0u8; 16];
                out.extend_from_slice(hexadecimal(data.len(), &mut hex));
                out.extend_from_slice(b"\r\n");
            }
            let tail: &[u8] = if chunked { b"\r\n" } else { b"" };
            if data.len() <= COPY_FRAME_BYTES {
                out.extend_from_slice(&data);
                out.extend_from_slice(tail);
                io.write_all(out).await?;
            } else {
                // One send for header, frame and trailer: three would wake
                // a loopback reader three times per chunk.
                write_all_vectored(io, [&out[..], &data[..], tail]).await?;
            }
            out.clear();
            // A TLS stream holds what it was given until flushed; a live
            // reader must see each frame when it is made.
            io.flush().await?;
        }
        if framing == Framing::Chunked {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        write_out(io, out).await
    }
}

impl Front {
    /// The next frame of an answer's body. When it is not ready, what
    /// `out` holds (the head) goes out first, as hyper sends it: a live
    /// tail that starts with nothing to send must still be seen to have
    /// started. And while the frame is awaited the socket is watched:
    /// the client closing is an error (the answer ends, and the
    /// connection with it, which drops the tail at once rather than at
    /// its next ping), and bytes of a next request are kept in `buf`,
    /// which is never grown past the front's cap by them.
    async fn next_frame<S>(
        &self,
        body: &mut Body,
        io: &mut S,
        buf: &mut BytesMut,
        out: &mut Vec<u8>,
    ) -> io::Result<Option<hyper::body::Frame<Bytes>>>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        // A body's `frame()` holds no state of its own (it polls the
        // body), so dropping it unfinished, here and in the select below,
        // loses nothing.
        if let Some(frame) = body.frame().now_or_never() {
            return frame.transpose().map_err(io::Error::other);
        }
        if !out.is_empty() {
            write_out(io, out).await?;
            out.clear();
        }
        loop {
            let watching = buf.len() < self.cap_bytes;
            if watching && buf.capacity() == buf.len() {
                buf.reserve(FIRST_READ_BYTES.min(self.cap_bytes - buf.len()));
            }
            tokio::select! {
                biased;
                frame = body.frame() => return frame.transpose().map_err(io::Error::other),
                read = io.read_buf(buf), if watching => match read {
                    Ok(0) => return Err(io::ErrorKind::ConnectionAborted.into()),
                    Ok(_) => {}
                    Err(e) => return Err(e),
                },
            }
        }
    }
}

/// Writes `out` whole and flushes (a TLS stream holds what it is given
/// until then).
async fn write_out<S: AsyncWrite + Unpin>(io: &mut S, out: &[u8]) -> io::Result<()> {
    io.write_all(out).await?;
    io.flush().await
}

/// Writes every byte of `parts`, in order, with as few writes as the
/// stream takes (a TCP stream takes all three in one `writev`).
async fn write_all_vectored<S: AsyncWrite + Unpin>(
    io: &mut S,
    parts: [&[u8]; 3],
) -> io::Result<()> {
    let mut slices = parts.map(io::IoSlice::new);
    let mut rest = &mut slices[..];
    io::IoSlice::advance_slices(&mut rest, 0);
    while !rest.is_empty() {
        let n = io.write_vectored(rest).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        io::IoSlice::advance_slices(&mut rest, n);
    }
    Ok(())
}

/// What the front found at the start of its buffer.
#[allow(
    clippy::large_enum_variant,
    reason = "made once per request and consumed at once (as `front_head::Head`): a box would cost every request an allocation"
)]
enum Next {
    Whole(front_head::Located),
    /// Hyper's: a request the front does not take, or a body that is slow.
    Hyper,
    Closed,
}

/// A connection's timer and its wait on the shutdown signal, each made
/// once for the connection's life: arming a timer or joining the
/// signal's waiter list (a lock each way) per read would cost every
/// request. Boxed so the answering loop can take them over; each is
/// small, from the allocator's per-thread cache.
struct Waits {
    alarm: Pin<Box<Sleep>>,
    stop: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// The front has answered a request on this connection.
    answered: bool,
}

impl Waits {
    fn new(head_timeout: Duration, shutdown: &Shutdown) -> Self {
        let mut signal = shutdown.clone();
        Waits {
            alarm: Box::pin(tokio::time::sleep(head_timeout)),
            stop: Box::pin(async move { signal.wait().await }),
            answered: false,
        }
    }
}

/// The connection for hyper, with a copy of the unanswered bytes.
///
/// Why a copy: the front's read buffer is freed here, before hyper
/// allocates its own, instead of living until hyper has read it (see
/// [`Front::serve`] on the heap an idle tail leaves behind).
fn hand_over<S>(io: S, buf: BytesMut) -> Left<S> {
    Left::ToHyper(io, Bytes::copy_from_slice(&buf))
}

/// What a wait for more request bytes ended with.
enum Read {
    More,
    /// The client closed, the read failed, or the server is shutting down.
    Closed,
    /// `deadline` passed.
    Expired,
}

/// Reads more of a request into `buf` until `deadline`.
///
/// `alarm` is the connection's one timer, and it is moved only when it
/// fires before the deadline (or the deadline comes earlier): arming a
/// timer for each read would cost every request a timer-wheel insert and
/// removal, since a keep-alive client's next request is rarely there yet.
///
/// `stop` is the connection's wait on the shutdown signal, when it is to
/// end the read; once it has fired the connection closes, so it is never
/// polled again.
async fn read_more<S, F>(
    io: &mut S,
    buf: &mut BytesMut,
    deadline: Instant,
    mut alarm: Pin<&mut Sleep>,
    mut stop: Option<Pin<&mut F>>,
) -> Read
where
    S: AsyncRead + Unpin,
    F: Future<Output = ()> + ?Sized,
{
    if alarm.deadline() > deadline || alarm.is_elapsed() {
        alarm.as_mut().reset(deadline);
    }
    loop {
        let stop = async {
            match stop.as_mut() {
                Some(s) => s.as_mut().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            r = io.read_buf(buf) => {
                return match r {
                    Ok(n) if n > 0 => Read::More,
                    _ => Read::Closed,
                };
            }
            () = alarm.as_mut() => {
                if Instant::now() >= deadline {
                    return Read::Expired;
                }
                alarm.as_mut().reset(deadline);
            }
            () = stop => return Read::Closed,
        }
    }
}

/// How an answer's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// No body at all (204, 304).
    Empty,
    /// `content-length`: the route's own, or added from the body's size.
    Length(Option<u64>),
    /// `transfer-encoding: chunked`.
    Chunked,
}

fn framing(parts: &axum::http::response::Parts, exact: Option<u64>) -> Framing {
    let status = parts.status;
    if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        return Framing::Empty;
    }
    if parts.headers.keys().any(|k| k == header::CONTENT_LENGTH) {
        return Framing::Length(None);
    }
    match exact {
        Some(n) => Framing::Length(Some(n)),
        None => Framing::Chunked,
    }
}

/// The head as hyper writes it: status line, the answer's headers in
/// order, then the framing, `connection: close` when closing, the date.
fn head(parts: &axum::http::response::Parts, framing: Framing, closing: bool, out: &mut Vec<u8>) {
    status_line(parts.status, out);
    // Which of its own the answer has, seen as it is written: a route's
    // answer has a header or two, which a look at each finds sooner than
    // a lookup by name (hashing it) would.
    let (mut has_connection, mut has_date) = (false, false);
    for (name, value) in &parts.headers {
        has_connection |= name == header::CONNECTION;
        has_date |= name == header::DATE;
        push_header(out, name.as_str(), value.as_bytes());
    }
    head_end(framing, closing && !has_connection, !has_date, out);
}

/// What [`head`] writes for [`crate::error::json_response`]`(status, ..)`
/// of `body_bytes` with the `keep-alive` header added, without the
/// `Response`.
fn json_head(
    status: StatusCode,
    keep_alive: &HeaderValue,
    body_bytes: usize,
    closing: bool,
    out: &mut Vec<u8>,
) {
    status_line(status, out);
    push_header(out, header::CONTENT_TYPE.as_str(), b"application/json");
    push_header(out, KEEP_ALIVE.as_str(), keep_alive.as_bytes());
    head_end(Framing::Length(Some(body_bytes as u64)), closing, true, out);
}

fn status_line(status: StatusCode, out: &mut Vec<u8>) {
    debug_assert!(!status.is_informational(), "no interim answers here");
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The framing, `connection: close` and the date, then the blank line.
fn head_end(framing: Framing, close: bool, date: bool, out: &mut Vec<u8>) {
    match framing {
        Framing::Length(Some(n)) => {
            let mut digits = [0u8; 20];
            push_header(out, "content-length", decimal(n, &mut digits));
        }
        Framing::Chunked => push_header(out, "transfer-encoding", b"chunked"),
        Framing::Empty | Framing::Length(None) => {}
    }
    if close {
        push_header(out, "connection", b"close");
    }
    if date {
        DATE.with(|d| push_header(out, "date", d.borrow_mut().now()));
    }
    out.extend_from_slice(b"\r\n");
}

fn push_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// `n` in lowercase hexadecimal, in the tail of `digits`.
fn hexadecimal(mut n: usize, digits: &mut [u8; 16]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b"0123456789abcdef"[n % 16];
        n /= 16;
        if n == 0 {
            return &digits[at..];
        }
    }
}

/// `n` in decimal, in the tail of `digits`.
fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[at..];
        }
    }
}

/// The `date` header's text, formatted once a second per thread (as
/// hyper caches it).
struct DateCache {
    second: u64,
    text: String,
}

impl DateCache {
    fn now(&mut self) -> &[u8] {
        let now = SystemTime::now();
        let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if second != self.second || self.text.is_empty() {
            self.second = second;
            self.text = httpdate::fmt_http_date(now);
        }
        self.text.as_bytes()
    }
}

thread_local! {
    static DATE: RefCell<DateCache> = const {
        RefCell::new(DateCache { second: 0, text: String::new() })
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(status: StatusCode) -> axum::http::response::Parts {
        let (mut parts, ()) = Response::new(()).into_parts();
        parts.status = status;
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        parts
    }

    #[test]
    fn heads_are_framed_as_hyper_frames_them() {
        let conflict = parts(StatusCode::CONFLICT);
        let mut out = Vec::new();
        head(&conflict, framing(&conflict, Some(2)), false, &mut out);
        let text = String::from_utf8(out.clone()).unwrap();
        let lines: Vec<&str> = text.strip_suffix("\r\n\r\n").unwrap().lines().collect();
        assert_eq!(
            lines[..3],
            [
                "HTTP/1.1 409 Conflict",
                "content-type: application/json",
                "content-length: 2"
            ]
        );
        assert!(
            lines[3].starts_with("date: ") && lines[3].ends_with(" GMT"),
            "{text}"
        );
        assert_eq!(lines.len(), 4);
        head(&conflict, framing(&conflict, Some(0)), true, &mut out);
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.contains("\r\ncontent-length: 0\r\nconnection: close\r\ndate: "),
            "{text}"
        );
        let ok = parts(StatusCode::OK);
        head(&ok, framing(&ok, None), false, &mut out);
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.contains("\r\ntransfer-encoding: chunked\r\n"),
            "{text}"
        );
        let none = parts(StatusCode::NO_CONTENT);
        assert_eq!(framing(&none, Some(0)), Framing::Empty);
        head(&none, Framing::Empty, false, &mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.contains("content-length") && !text.contains("chunked"),
            "{text}"
        );
    }

    /// A prepared JSON answer is framed byte for byte as the response
    /// it stands for ([`crate::error::json_response`] with `keep-alive`
    /// added, as `respond` adds it).
    #[test]
    fn a_json_answer_is_framed_as_its_response_would_be() {
        let keep_alive = HeaderValue::from_static("timeout=9");
        let mask = |out: &[u8]| {
            let text = String::from_utf8(out.to_vec()).unwrap();
            let at = text.find("date: ").expect("a date");
            let end = at + text[at..].find("\r\n").unwrap();
            format!("{}date: <masked>{}", &text[..at], &text[end..])
        };
        for status in [StatusCode::OK, StatusCode::CONFLICT] {
            for closing in [false, true] {
                let body = b"{\"stream\":\"s\"}".to_vec();
                let mut response = crate::error::json_response(status, body.clone());
                response
                    .headers_mut()
                    .insert(KEEP_ALIVE.clone(), keep_alive.clone());
                let (parts, _) = response.into_parts();
                let mut want = Vec::new();
                head(
                    &parts,
                    framing(&parts, Some(body.len() as u64)),
                    closing,
                    &mut want,
                );
                let mut got = Vec::new();
                json_head(status, &keep_alive, body.len(), closing, &mut got);
                assert_eq!(mask(&got), mask(&want), "{status} closing {closing}");
            }
        }
    }

    /// What every connection's task carries for the front, an idle live
    /// tail's too (hyper's state comes on top): the answering loop, a few
    /// KiB, is boxed and made only for a request the front answers.
    #[tokio::test]
    async fn the_front_s_share_of_a_connection_s_task_is_small() {
        let dir = tempfile::tempdir().unwrap();
        let config = fencelog_engine::Config::default();
        let state = crate::state::AppState::new(
            fencelog_engine::Engine::open_with(dir.path(), config).unwrap(),
        );
        let front = Front {
            route: Arc::new(AppendRoute::new(state.clone())),
            router: crate::routes::router::app(state),
            head_timeout: Duration::from_secs(1),
            cap_bytes: 8192,
            keep_alive: HeaderValue::from_static("timeout=9"),
        };
        let (io, _peer) = tokio::io::duplex(64);
        let shutdown = Shutdown::never();
        let serving = front.serve(io, &shutdown);
        let bytes = std::mem::size_of_val(&serving);
        assert!(bytes <= 2048, "the front's future is {bytes} bytes");
    }

    /// A stream that takes a few bytes per write (a reader slower than
    /// the sender) still gets every byte of the three parts, in order.
    #[tokio::test]
    async fn a_vectored_write_taken_in_pieces_arrives_whole_and_in_order() {
        use tokio::io::AsyncReadExt;
        let head = b"2710\r\n".to_vec();
        let body: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let (mut io, mut peer) = tokio::io::duplex(7);
        let reading = tokio::spawn(async move {
            let mut got = Vec::new();
            peer.read_to_end(&mut got).await.unwrap();
            got
        });
        write_all_vectored(&mut io, [&head, &body, b"\r\n"])
            .await
            .unwrap();
        drop(io);
        let want = [&head[..], &body[..], b"\r\n"].concat();
        assert_eq!(reading.await.unwrap(), want);
    }

    #[test]
    fn numbers() {
        let mut d = [0u8; 20];
        for n in [0, 7, 10, 409, 65_536, u64::MAX] {
            assert_eq!(decimal(n, &mut d), n.to_string().as_bytes());
        }
        let mut h = [0u8; 16];
        for n in [0usize, 9, 10, 255, 65_536, usize::MAX] {
            assert_eq!(hexadecimal(n, &mut h), format!("{n:x}").as_bytes());
        }
    }
}
