//! The HTTP/1.1 the pool ([`crate::pool`]) speaks, as pure functions over
//! bytes: a request's head written, an answer's head read, a chunked body
//! taken apart. No I/O here, so every rule is unit-tested on its own.
//!
//! Why not hyper's client connection: for a request and answer of a few
//! hundred bytes, its dispatcher (the request's `HeaderMap` and `Uri`,
//! its encoder, the body channel, the driver polled beside the answer)
//! cost the client crate ~1.8× redis-rs's CPU per request
//! (docs/benchmark-history.md, "the client crate's own HTTP/1.1"). A
//! fencelog server's answers are plain: a `content-length` or chunked
//! body, nothing else.
//!
//! What an answer may be, and what this reader refuses (the connection
//! is then closed, the outcome unknown): a head within
//! [`HEAD_BYTES_MAX`] and [`HEADERS_MAX`] headers that httparse reads
//! strictly; `transfer-encoding: chunked` alone, or one `content-length`
//! (repeats of the same value allowed, as RFC 9112 allows), or neither
//! (the body runs to the connection's end); interim (1xx) answers are
//! skipped.

use bytes::{Buf, Bytes, BytesMut};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::Method;

/// The most bytes an answer's head may take.
pub(crate) const HEAD_BYTES_MAX: usize = 64 << 10;
/// The most headers an answer may have.
pub(crate) const HEADERS_MAX: usize = 64;
/// The longest chunk-size line (digits and extensions) read.
const CHUNK_LINE_BYTES_MAX: usize = 1024;

/// Writes the head of a request for `path` (origin form) with `headers`
/// and a body of `body_bytes`: `host`, `authorization` when given, the
/// headers in order, then `content-length` (left out only for an empty
/// body of a method that never has one).
pub(crate) fn request_head(
    out: &mut Vec<u8>,
    method: &Method,
    path: &str,
    host: &HeaderValue,
    authorization: Option<&HeaderValue>,
    headers: &[(HeaderName, HeaderValue)],
    body_bytes: usize,
) {
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    push(out, b"host", host.as_bytes());
    if let Some(a) = authorization {
        push(out, b"authorization", a.as_bytes());
    }
    for (name, value) in headers {
        push(out, name.as_str().as_bytes(), value.as_bytes());
    }
    let bodiless = matches!(*method, Method::GET | Method::HEAD | Method::DELETE);
    if body_bytes > 0 || !bodiless {
        let digits = itoa(body_bytes);
        push(out, b"content-length", digits.text());
    }
    out.extend_from_slice(b"\r\n");
}

fn push(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// `n`'s decimal digits, on the stack.
struct Digits {
    bytes: [u8; 20],
    at: usize,
}

impl Digits {
    fn text(&self) -> &[u8] {
        &self.bytes[self.at..]
    }
}

#[allow(
    clippy::cast_possible_truncation,
    reason = "`n % 10` is one decimal digit"
)]
fn itoa(mut n: usize) -> Digits {
    let mut d = Digits {
        bytes: [0; 20],
        at: 20,
    };
    loop {
        d.at -= 1;
        d.bytes[d.at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return d;
        }
    }
}

/// How an answer's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body (a 204 or 304, or an answer to `HEAD`).
    Empty,
    Length(u64),
    Chunked,
    /// Until the connection closes.
    ToEnd,
}

/// An answer's head, read.
#[derive(Debug)]
pub(crate) struct Head {
    pub status: u16,
    pub headers: HeaderMap,
    pub framing: Framing,
    /// The server closes the connection after this answer.
    pub close: bool,
    /// The bytes the head took.
    pub head_bytes: usize,
}

/// The answer head at the start of `buf`: `Ok(None)` until it is whole;
/// an interim (1xx) answer is `Ok(Some)` with [`Head::status`] below 200
/// and is to be skipped. `head_request`: the request was a `HEAD`.
pub(crate) fn response_head(buf: &[u8], head_request: bool) -> Result<Option<Head>, String> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut response = httparse::Response::new(&mut headers);
    let head_bytes = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() < HEAD_BYTES_MAX => return Ok(None),
        Ok(httparse::Status::Partial) => {
            return Err(format!("an answer head over {HEAD_BYTES_MAX} bytes"))
        }
        Err(e) => return Err(format!("a malformed answer head: {e}")),
    };
    let status = response.code.ok_or("an answer without a status")?;
    let http10 = response.version == Some(0);
    let mut map = HeaderMap::with_capacity(response.headers.len());
    let (mut length, mut chunked, mut close, mut keep_alive) = (None, false, http10, false);
    for h in response.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| format!("a bad header name {:?}", h.name))?;
        let value = HeaderValue::from_bytes(h.value)
            .map_err(|_| format!("a bad value of header {}", h.name))?;
        if name == hyper::header::CONTENT_LENGTH {
            let n = parse_length(h.value)?;
            if length.is_some_and(|l| l != n) {
                return Err("two different content-length headers".into());
            }
            length = Some(n);
        } else if name == hyper::header::TRANSFER_ENCODING {
            if chunked || !h.value.eq_ignore_ascii_case(b"chunked") {
                return Err(format!(
                    "transfer-encoding {:?}",
                    String::from_utf8_lossy(h.value)
                ));
            }
            chunked = true;
        } else if name == hyper::header::CONNECTION {
            close |= has_token(h.value, b"close");
            keep_alive |= has_token(h.value, b"keep-alive");
        }
        map.append(name, value);
    }
    if chunked && length.is_some() {
        return Err("both content-length and transfer-encoding".into());
    }
    let framing = match (status, chunked, length) {
        (100..=199 | 204 | 304, _, _) => Framing::Empty,
        _ if head_request => Framing::Empty,
        (_, true, _) => Framing::Chunked,
        (_, false, Some(n)) => Framing::Length(n),
        (_, false, None) => Framing::ToEnd,
    };
    Ok(Some(Head {
        status,
        headers: map,
        framing,
        close: (close && !(http10 && keep_alive)) || framing == Framing::ToEnd,
        head_bytes,
    }))
}

fn parse_length(value: &[u8]) -> Result<u64, String> {
    let digits = std::str::from_utf8(value)
        .ok()
        .filter(|d| !d.is_empty() && d.len() <= 19 && d.bytes().all(|b| b.is_ascii_digit()));
    digits
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| format!("content-length {:?}", String::from_utf8_lossy(value)))
}

/// Whether the comma-separated `value` holds `token` (any case).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// A chunked body taken apart as its bytes arrive: each chunk's data
/// comes out as a piece (a slice of the buffer, not copied), extensions
/// and trailers are read past.
#[derive(Debug, Default)]
pub(crate) struct Chunked {
    state: ChunkState,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// A chunk-size line is next.
    #[default]
    Size,
    /// This many bytes of the current chunk's data are still to come.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer lines after the last chunk, up to an empty one.
    Trailers,
    Done,
}

/// What [`Chunked::next`] found in the buffer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Piece(Bytes),
    /// Read more into the buffer, then call again.
    More,
    /// The body ended; what is left in the buffer is not the body's.
    Done,
}

impl Chunked {
    /// Takes what it can from the front of `buf`.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Step, String> {
        loop {
            match self.state {
                ChunkState::Size => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(Step::More);
                    };
                    let size = chunk_size(&line)?;
                    self.state = match size {
                        0 => ChunkState::Trailers,
                        n => ChunkState::Data(n),
                    };
                }
                ChunkState::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    let take = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
                    let piece = buf.split_to(take).freeze();
                    self.state = match left - take as u64 {
                        0 => ChunkState::DataEnd,
                        rest => ChunkState::Data(rest),
                    };
                    return Ok(Step::Piece(piece));
                }
                ChunkState::DataEnd => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(Step::More);
                    };
                    if !line.is_empty() {
                        return Err("chunk data longer than its size".into());
                    }
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailers => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(Step::More);
                    };
                    if line.is_empty() {
                        self.state = ChunkState::Done;
                    }
                }
                ChunkState::Done => return Ok(Step::Done),
            }
        }
    }
}

/// The line at the front of `buf` without its CRLF, taken out of it;
/// `None` while it is not whole.
fn take_line(buf: &mut BytesMut) -> Result<Option<Bytes>, String> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        if buf.len() > CHUNK_LINE_BYTES_MAX {
            return Err(format!("a chunk line over {CHUNK_LINE_BYTES_MAX} bytes"));
        }
        return Ok(None);
    };
    if end > CHUNK_LINE_BYTES_MAX {
        return Err(format!("a chunk line over {CHUNK_LINE_BYTES_MAX} bytes"));
    }
    let line = buf.split_to(end).freeze();
    buf.advance(2);
    Ok(Some(line))
}

/// A chunk-size line's size: hex digits, then optional extensions.
fn chunk_size(line: &[u8]) -> Result<u64, String> {
    let digits = line
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    let valid =
        !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_hexdigit);
    let text = std::str::from_utf8(digits).ok().filter(|_| valid);
    text.and_then(|t| u64::from_str_radix(t, 16).ok())
        .ok_or_else(|| format!("a bad chunk size {:?}", String::from_utf8_lossy(line)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_carry_host_auth_headers_and_length() {
        let mut out = Vec::new();
        let host = HeaderValue::from_static("h:1");
        let auth = HeaderValue::from_static("Bearer s");
        let headers = [(
            HeaderName::from_static("fencing-token"),
            HeaderValue::from_static("7"),
        )];
        request_head(
            &mut out,
            &Method::POST,
            "/v1/x?a=b",
            &host,
            Some(&auth),
            &headers,
            12,
        );
        assert_eq!(
            out,
            b"POST /v1/x?a=b HTTP/1.1\r\nhost: h:1\r\nauthorization: Bearer s\r\nfencing-token: 7\r\ncontent-length: 12\r\n\r\n"
        );
        out.clear();
        request_head(&mut out, &Method::GET, "/", &host, None, &[], 0);
        assert_eq!(out, b"GET / HTTP/1.1\r\nhost: h:1\r\n\r\n");
        out.clear();
        request_head(&mut out, &Method::POST, "/", &host, None, &[], 0);
        assert_eq!(
            out,
            b"POST / HTTP/1.1\r\nhost: h:1\r\ncontent-length: 0\r\n\r\n"
        );
    }

    fn head(text: &str) -> Result<Option<Head>, String> {
        response_head(text.as_bytes(), false)
    }

    #[test]
    fn answer_heads_say_how_their_body_ends() {
        let ok = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\nok";
        let h = head(ok).unwrap().unwrap();
        assert_eq!(
            (h.status, h.framing, h.close),
            (200, Framing::Length(2), false)
        );
        assert_eq!(h.head_bytes, ok.len() - 2);
        assert_eq!(h.headers["content-type"], "application/json");
        for cut in 0..ok.len() - 2 {
            assert!(head(&ok[..cut]).unwrap().is_none(), "cut at {cut}");
        }
        let cases = [
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
                Framing::Chunked,
                false,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n",
                Framing::Chunked,
                false,
            ),
            ("HTTP/1.1 200 OK\r\n\r\n", Framing::ToEnd, true),
            ("HTTP/1.1 204 No Content\r\n\r\n", Framing::Empty, false),
            ("HTTP/1.1 100 Continue\r\n\r\n", Framing::Empty, false),
            (
                "HTTP/1.1 409 Conflict\r\ncontent-length: 3\r\nconnection: close\r\n\r\n",
                Framing::Length(3),
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 3\r\n\r\n",
                Framing::Length(3),
                false,
            ),
            (
                "HTTP/1.0 200 OK\r\ncontent-length: 3\r\n\r\n",
                Framing::Length(3),
                true,
            ),
            (
                "HTTP/1.0 200 OK\r\ncontent-length: 3\r\nconnection: keep-alive\r\n\r\n",
                Framing::Length(3),
                false,
            ),
        ];
        for (text, framing, close) in cases {
            let h = head(text).unwrap().unwrap();
            assert_eq!((h.framing, h.close), (framing, close), "{text:?}");
        }
        let refused = [
            "HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: +3\r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
        ];
        for text in refused {
            assert!(head(text).is_err(), "{text:?}");
        }
        let head_answer = response_head(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n", true);
        assert_eq!(head_answer.unwrap().unwrap().framing, Framing::Empty);
    }

    /// Every piece of `wire` decoded, fed `step` bytes at a time; and the
    /// bytes after the body's end (in the buffer or not yet fed).
    fn decode(wire: &[u8], step: usize) -> Result<(Vec<u8>, Vec<u8>), String> {
        let mut chunked = Chunked::default();
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        let mut fed = 0;
        loop {
            match chunked.next(&mut buf)? {
                Step::Piece(p) => body.extend_from_slice(&p),
                Step::Done => {
                    let mut rest = buf.to_vec();
                    rest.extend_from_slice(&wire[fed..]);
                    return Ok((body, rest));
                }
                Step::More if fed == wire.len() => return Err("cut short".into()),
                Step::More => {
                    let to = (fed + step).min(wire.len());
                    buf.extend_from_slice(&wire[fed..to]);
                    fed = to;
                }
            }
        }
    }

    #[test]
    fn chunked_bodies_come_apart_however_they_are_cut() {
        let wire =
            b"3\r\nabc\r\n1;ext=1\r\nd\r\n10\r\n0123456789abcdef\r\n0\r\nx-trailer: t\r\n\r\nNEXT";
        for step in 1..wire.len() + 1 {
            let (body, rest) = decode(wire, step).unwrap();
            assert_eq!(body, b"abcd0123456789abcdef", "step {step}");
            assert_eq!(rest, b"NEXT", "step {step}");
        }
        for cut in 0..wire.len() - 4 {
            assert!(decode(&wire[..cut], 7).is_err(), "cut at {cut}");
        }
        for bad in [
            &b"x\r\n"[..],
            b"3\r\nabcd\r\n",
            b"\r\n",
            b"1000000000000000\r\n",
        ] {
            assert!(
                decode(bad, 64).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
