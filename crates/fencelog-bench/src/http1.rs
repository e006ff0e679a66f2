//! The load generator's HTTP/1.1: [`Conn`], written and read by hand so the
//! client adds as little as possible to what is measured, and
//! [`TailConn`] (hyper) for live tails.

use super::BenchError;
use bytes::{Buf, Bytes, BytesMut};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// Where a fencelog server listens. Only loopback addresses are accepted:
/// a load generator must never be pointed at someone else's machine.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    host: HeaderValue,
    /// The `host:port` it was parsed from.
    pub authority: String,
}

impl Endpoint {
    pub async fn parse(url: &str) -> Result<Endpoint, BenchError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| BenchError::args(format!("--server {url:?}: {e}")))?;
        if uri.scheme_str().is_some_and(|s| s != "http") {
            return Err(BenchError::args("--server must be an http:// URL"));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| BenchError::args(format!("--server {url:?} has no host")))?;
        let port = authority.port_u16().unwrap_or(80);
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let addr = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| BenchError::target(format!("resolving {host}: {e}")))?
            .find(|a| a.ip().is_loopback())
            .ok_or_else(|| {
                BenchError::args(format!(
                    "--server {url:?} does not resolve to a loopback address; load is only sent to this machine"
                ))
            })?;
        let host = HeaderValue::from_str(authority.as_str())
            .map_err(|e| BenchError::args(format!("--server host: {e}")))?;
        let authority = authority.as_str().to_string();
        Ok(Endpoint {
            addr,
            host,
            authority,
        })
    }
}

/// One HTTP/1.1 connection written and read by hand (httparse for the
/// head): no pool, no redirects, no retries, no dispatcher task, so the
/// generator spends on each request little more than a Redis client does
/// on its command. Through hyper it took ~31k instructions per stale
/// append against redis-rs's ~18k, CPU taken from the server measured on
/// the same two cores. Answers with a length, chunked answers and answers
/// that end with the connection are read; a connection the server closes
/// is opened again before the next request.
pub struct Conn {
    addr: SocketAddr,
    host: HeaderValue,
    tcp: Option<TcpStream>,
    /// The request being written.
    out: Vec<u8>,
    /// What was read and not yet taken.
    inbuf: BytesMut,
}

/// What an answer's head says.
struct Head {
    status: StatusCode,
    hint: Option<String>,
    framing: Framing,
    close: bool,
}

enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

/// Bytes of an answer's head; of a whole answer (the largest read page is
/// 8 MiB of records, as JSON at most six times that).
const HEAD_BYTES_MAX: usize = 64 << 10;
const ANSWER_BYTES_MAX: usize = 64 << 20;
const HEADERS_MAX: usize = 32;
/// Bodies up to this size are copied behind the head (one write); larger
/// ones are written after it.
const INLINE_BODY_BYTES_MAX: usize = 64 << 10;
const READ_RESERVE_BYTES: usize = 16 << 10;

fn broken(what: impl std::fmt::Display) -> BenchError {
    BenchError::target(format!("HTTP: {what}"))
}

impl Conn {
    pub async fn connect(endpoint: &Endpoint) -> Result<Conn, BenchError> {
        let mut conn = Conn {
            addr: endpoint.addr,
            host: endpoint.host.clone(),
            tcp: None,
            out: Vec::with_capacity(1024),
            inbuf: BytesMut::with_capacity(READ_RESERVE_BYTES),
        };
        conn.tcp = Some(open(conn.addr).await?);
        Ok(conn)
    }

    /// Sends one request and reads the whole answer.
    pub async fn call(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), BenchError> {
        let (status, _, bytes) = self.call_hinted(method, path, headers, body).await?;
        Ok((status, bytes))
    }

    /// [`Conn::call`], also handing back the answer's leader hint
    /// (`fencelog-leader: id=host:port`, cluster mode only).
    pub async fn call_hinted(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, Option<String>, Bytes), BenchError> {
        if self.tcp.is_none() {
            self.tcp = Some(open(self.addr).await?);
        }
        let answer = self.exchange(&method, path, headers, &body).await;
        // A failed exchange leaves the connection in an unknown state.
        if answer.as_ref().map_or(true, |(head, _)| head.close) {
            self.tcp = None;
            self.inbuf.clear();
        }
        let (head, bytes) = answer.map_err(|e| match e {
            BenchError::Target(m) => BenchError::Target(format!("{method} {path}: {m}")),
            other => other,
        })?;
        Ok((head.status, head.hint, bytes))
    }

    async fn exchange(
        &mut self,
        method: &Method,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: &Bytes,
    ) -> Result<(Head, Bytes), BenchError> {
        self.write_head(method, path, headers, body.len());
        let inline = body.len() <= INLINE_BODY_BYTES_MAX;
        if inline {
            self.out.extend_from_slice(body);
        }
        let tcp = self.tcp.as_mut().expect("connected above");
        tcp.write_all(&self.out).await.map_err(broken)?;
        if !inline {
            tcp.write_all(body).await.map_err(broken)?;
        }
        let head = loop {
            let head = self.read_head().await?;
            // An interim answer (100 Continue) is followed by the real one.
            if !head.status.is_informational() {
                break head;
            }
        };
        let bytes = self.read_body(&head).await?;
        if !self.inbuf.is_empty() && !head.close {
            return Err(broken("bytes after the answer to a request sent alone"));
        }
        Ok((head, bytes))
    }

    fn write_head(
        &mut self,
        method: &Method,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
        body_bytes: usize,
    ) {
        let out = &mut self.out;
        out.clear();
        out.extend_from_slice(method.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
        out.extend_from_slice(self.host.as_bytes());
        out.extend_from_slice(b"\r\n");
        for (name, value) in headers {
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if body_bytes > 0 || !matches!(*method, Method::GET | Method::HEAD) {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(body_bytes.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
    }

    /// Reads more into `inbuf`; the end of the connection is an error.
    async fn fill(&mut self) -> Result<(), BenchError> {
        self.inbuf.reserve(READ_RESERVE_BYTES);
        let tcp = self.tcp.as_mut().expect("connected");
        match tcp.read_buf(&mut self.inbuf).await.map_err(broken)? {
            0 => Err(broken("the connection closed before the answer ended")),
            _ => Ok(()),
        }
    }

    async fn read_head(&mut self) -> Result<Head, BenchError> {
        loop {
            if let Some((head, used)) = parse_head(&self.inbuf)? {
                self.inbuf.advance(used);
                return Ok(head);
            }
            if self.inbuf.len() > HEAD_BYTES_MAX {
                return Err(broken(format!(
                    "an answer head over {HEAD_BYTES_MAX} bytes"
                )));
            }
            self.fill().await?;
        }
    }

    async fn read_body(&mut self, head: &Head) -> Result<Bytes, BenchError> {
        match head.framing {
            Framing::Length(n) => {
                if n > ANSWER_BYTES_MAX {
                    return Err(broken(format!("an answer of {n} bytes")));
                }
                while self.inbuf.len() < n {
                    self.fill().await?;
                }
                Ok(self.inbuf.split_to(n).freeze())
            }
            Framing::Chunked => self.read_chunked().await,
            Framing::UntilClose => {
                let tcp = self.tcp.as_mut().expect("connected");
                while tcp.read_buf(&mut self.inbuf).await.map_err(broken)? > 0 {
                    if self.inbuf.len() > ANSWER_BYTES_MAX {
                        return Err(broken("an answer over the size limit"));
                    }
                    self.inbuf.reserve(READ_RESERVE_BYTES);
                }
                Ok(self.inbuf.split().freeze())
            }
        }
    }

    /// A chunked body: `size[;ext]\r\n data \r\n` until size 0, then
    /// trailer lines up to an empty one.
    async fn read_chunked(&mut self) -> Result<Bytes, BenchError> {
        let mut body = BytesMut::new();
        loop {
            let line = self.line().await?;
            let digits = line.split(|&b| b == b';').next().unwrap_or_default();
            let size = std::str::from_utf8(digits)
                .ok()
                .and_then(|d| usize::from_str_radix(d.trim(), 16).ok())
                .ok_or_else(|| {
                    broken(format!(
                        "a bad chunk size {:?}",
                        String::from_utf8_lossy(&line)
                    ))
                })?;
            if size == 0 {
                while !self.line().await?.is_empty() {}
                return Ok(body.freeze());
            }
            if body.len() + size > ANSWER_BYTES_MAX {
                return Err(broken("an answer over the size limit"));
            }
            while self.inbuf.len() < size + 2 {
                self.fill().await?;
            }
            body.extend_from_slice(&self.inbuf[..size]);
            if &self.inbuf[size..size + 2] != b"\r\n" {
                return Err(broken("a chunk not ended by CRLF"));
            }
            self.inbuf.advance(size + 2);
        }
    }

    /// The next line of the body's framing, without its CRLF.
    async fn line(&mut self) -> Result<Bytes, BenchError> {
        loop {
            if let Some(at) = self.inbuf.windows(2).position(|w| w == b"\r\n") {
                let line = self.inbuf.split_to(at).freeze();
                self.inbuf.advance(2);
                return Ok(line);
            }
            if self.inbuf.len() > HEAD_BYTES_MAX {
                return Err(broken("a chunk line over the size limit"));
            }
            self.fill().await?;
        }
    }
}

/// The head at the start of `buf` and its length; `None` when more bytes
/// are needed.
fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, BenchError> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut answer = httparse::Response::new(&mut headers);
    let used = match answer.parse(buf).map_err(broken)? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => return Ok(None),
    };
    let status = answer
        .code
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or_else(|| broken("no status"))?;
    let (mut length, mut chunked, mut close, mut hint) = (None, false, false, None);
    let text = |v: &[u8]| String::from_utf8_lossy(v).trim().to_ascii_lowercase();
    for h in answer.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let n = text(h.value).parse::<usize>().map_err(broken)?;
            if length.is_some_and(|l| l != n) {
                return Err(broken("two different content-lengths"));
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = text(h.value).ends_with("chunked");
        } else if name.eq_ignore_ascii_case("connection") {
            close = text(h.value).split(',').any(|t| t.trim() == "close");
        } else if name.eq_ignore_ascii_case(fencelog_api::header::LEADER) {
            let value = std::str::from_utf8(h.value).ok();
            hint = value
                .and_then(|v| v.split_once('='))
                .map(|(_, addr)| addr.to_string());
        }
    }
    let bodiless = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let framing = match (bodiless, chunked, length) {
        (true, _, _) => Framing::Length(0),
        (false, true, _) => Framing::Chunked,
        (false, false, Some(n)) => Framing::Length(n),
        (false, false, None) => {
            close = true;
            Framing::UntilClose
        }
    };
    let head = Head {
        status,
        hint,
        framing,
        close,
    };
    Ok(Some((head, used)))
}

async fn open(addr: SocketAddr) -> Result<TcpStream, BenchError> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| BenchError::target(format!("connecting to {addr}: {e}")))?;
    // Requests are small and each waits for its answer: Nagle would add
    // a delayed-ACK round to every one of them.
    tcp.set_nodelay(true)
        .map_err(|e| BenchError::target(format!("TCP_NODELAY: {e}")))?;
    Ok(tcp)
}

/// A hyper connection for live tails: the body is handed back unread and
/// read as it arrives.
pub struct TailConn {
    sender: SendRequest<Full<Bytes>>,
    host: HeaderValue,
    driver: JoinHandle<()>,
}

impl Drop for TailConn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl TailConn {
    pub async fn connect(endpoint: &Endpoint) -> Result<TailConn, BenchError> {
        let tcp = open(endpoint.addr).await?;
        let (sender, connection) = http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| BenchError::target(format!("HTTP handshake: {e}")))?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(TailConn {
            sender,
            host: endpoint.host.clone(),
            driver,
        })
    }

    /// Sends a GET and hands back the body unread.
    pub async fn stream(
        &mut self,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Result<(StatusCode, Incoming), BenchError> {
        let mut req = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(HOST, self.host.clone());
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let req = req
            .body(Full::new(Bytes::new()))
            .map_err(|e| BenchError::target(format!("building request {path}: {e}")))?;
        self.sender
            .ready()
            .await
            .map_err(|e| BenchError::target(format!("connection closed: {e}")))?;
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| BenchError::target(format!("request failed: {e}")))?;
        Ok((resp.status(), resp.into_body()))
    }
}

pub fn json_header() -> (HeaderName, HeaderValue) {
    (
        CONTENT_TYPE,
        HeaderValue::from_static(fencelog_api::header::JSON),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A server that answers the requests it reads with `answers` in
    /// turn, written `step` bytes at a time (so heads and chunks arrive
    /// cut anywhere); it closes the connection after an answer that says
    /// `connection: close` and takes the next one. Hands back the
    /// requests it read.
    async fn scripted(
        answers: Vec<&'static [u8]>,
        step: usize,
    ) -> (Endpoint, tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut answers = answers.into_iter();
            'accept: while let Ok((mut tcp, _)) = listener.accept().await {
                loop {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    // Each test request's head ends its body-less request
                    // or is followed by a body of "xyz".
                    while !(seen.ends_with(b"\r\n\r\n") || seen.ends_with(b"xyz")) {
                        match tcp.read(&mut buf).await {
                            Ok(0) | Err(_) => continue 'accept,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                    }
                    tx.send(seen).unwrap();
                    let Some(answer) = answers.next() else { return };
                    for piece in answer.chunks(step) {
                        tcp.write_all(piece).await.unwrap();
                        tcp.flush().await.unwrap();
                    }
                    if String::from_utf8_lossy(answer).contains("connection: close") {
                        continue 'accept;
                    }
                }
            }
        });
        (Endpoint::parse(&url).await.unwrap(), rx)
    }

    const LENGTH: &[u8] = b"HTTP/1.1 409 Conflict\r\ncontent-length: 5\r\nfencelog-leader: 2=127.0.0.1:9\r\n\r\nhello";
    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\ntrailer: t\r\n\r\n";
    const CLOSING: &[u8] = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok";
    const INTERIM: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";

    #[tokio::test]
    async fn answers_are_read_however_they_are_framed_and_cut() {
        for step in [1, 2, 7, 4096] {
            let answers = vec![LENGTH, CHUNKED, CLOSING, INTERIM, LENGTH];
            let (endpoint, mut requests) = scripted(answers, step).await;
            let mut c = Conn::connect(&endpoint).await.unwrap();
            let token = (
                HeaderName::from_static("fencing-token"),
                HeaderValue::from(7u64),
            );
            let post = c
                .call_hinted(
                    Method::POST,
                    "/a",
                    std::slice::from_ref(&token),
                    Bytes::from_static(b"xyz"),
                )
                .await
                .unwrap();
            assert_eq!(
                post,
                (
                    StatusCode::CONFLICT,
                    Some("127.0.0.1:9".into()),
                    Bytes::from_static(b"hello")
                )
            );
            let sent = requests.recv().await.unwrap();
            let host = endpoint.authority.clone();
            let want = format!("POST /a HTTP/1.1\r\nhost: {host}\r\nfencing-token: 7\r\ncontent-length: 3\r\n\r\nxyz");
            assert_eq!(String::from_utf8(sent).unwrap(), want);
            let got = c.call(Method::GET, "/b", &[], Bytes::new()).await.unwrap();
            assert_eq!(
                got,
                (StatusCode::OK, Bytes::from_static(b"abc0123456789abcdef"))
            );
            let sent = requests.recv().await.unwrap();
            assert_eq!(
                String::from_utf8(sent).unwrap(),
                format!("GET /b HTTP/1.1\r\nhost: {host}\r\n\r\n")
            );
            let got = c.call(Method::GET, "/c", &[], Bytes::new()).await.unwrap();
            assert_eq!(got, (StatusCode::OK, Bytes::from_static(b"ok")));
            // The server closed: the next request goes on a new connection.
            let got = c.call(Method::GET, "/d", &[], Bytes::new()).await.unwrap();
            assert_eq!(got, (StatusCode::NO_CONTENT, Bytes::new()));
            let got = c.call(Method::GET, "/e", &[], Bytes::new()).await.unwrap();
            assert_eq!(got.0, StatusCode::CONFLICT);
            for path in ["/c", "/d", "/e"] {
                let sent = String::from_utf8(requests.recv().await.unwrap()).unwrap();
                assert!(sent.starts_with(&format!("GET {path} ")), "{sent}");
            }
        }
    }

    #[tokio::test]
    async fn a_cut_or_bad_answer_is_an_error_and_the_next_request_reconnects() {
        let bad: [&'static [u8]; 4] = [
            b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\nconnection: close\r\n\r\nshort",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab",
            b"NOT HTTP\r\n\r\n",
        ];
        for answer in bad {
            let (endpoint, _requests) = scripted(vec![answer, CLOSING], 3).await;
            let mut c = Conn::connect(&endpoint).await.unwrap();
            let e = c
                .call(Method::GET, "/x", &[], Bytes::new())
                .await
                .unwrap_err();
            assert!(e.to_string().starts_with("target: GET /x: HTTP: "), "{e}");
            let got = c.call(Method::GET, "/y", &[], Bytes::new()).await.unwrap();
            assert_eq!(
                got,
                (StatusCode::OK, Bytes::from_static(b"ok")),
                "after {answer:?}"
            );
        }
    }
}
