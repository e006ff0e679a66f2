//! What the HTTP/1.1 front ([`crate::server::front`]) makes of the bytes a
//! connection has sent so far: a complete append request it answers
//! itself, a request that needs more bytes, or anything else, which hyper
//! takes over. Pure (no I/O), so it is unit-tested and fuzzed
//! (the `http_front_head` fuzz target).
//!
//! The rule is to take only what is unambiguous. A request is the front's
//! only when every one of these holds, and hyper's otherwise:
//!
//! - httparse parses its head strictly, within [`HEADERS_MAX`] headers;
//! - it is HTTP/1.1 with an origin-form target, and not `HEAD` or
//!   `CONNECT` (whose answers hyper frames differently);
//! - at most one `Content-Length`, of digits only (none is an empty body,
//!   as for hyper), and no `Transfer-Encoding`, `Expect`, `Upgrade`, `TE`
//!   or `Connection` (bar a lone `keep-alive` or `close`): no framing but
//!   one, no interim answer, no protocol switch, no connection options;
//! - head and body fit in `cap_bytes` (hyper's read buffer limit, so a
//!   connection costs the front no more than it costs hyper);
//! - the target parses as a URI and every header as an `http` header.
//!
//! So smuggling ambiguities (two lengths, a length beside chunked),
//! oversized heads (431), malformed ones (400), slow bodies (408) and the
//! append session's WebSocket are all served by hyper exactly as before.
//! Live tails are the front's: their answer never ends, and the front
//! watches a tail's socket for the client going away, as hyper does.

use crate::decode::header_view::HeaderView;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri, Version};
use bytes::Bytes;
use std::ops::Range;

/// Headers the front parses; a request with more is hyper's.
pub const HEADERS_MAX: usize = 32;

/// The front's reading of a connection's buffered bytes.
#[allow(
    clippy::large_enum_variant,
    reason = "made once per request and consumed at once: boxing the located head would cost every request an allocation, which the front exists to save"
)]
#[derive(Debug)]
pub enum Head {
    /// Not yet a whole request the front could take: read more.
    Partial {
        /// The head is complete and only the body is missing.
        head_done: bool,
    },
    /// Hyper's from here on: the connection goes to it with every byte
    /// still unanswered.
    Hyper,
    /// A whole request at the start of the buffer.
    Whole(Located),
}

/// Where a whole request's parts lie in the buffer, so that its head can
/// be taken as shared slices of it ([`Located::to_parts`]) instead of
/// copied value by value.
#[derive(Debug)]
pub struct Located {
    pub method: Method,
    pub head_bytes: usize,
    pub body_bytes: usize,
    /// For the append route ([`crate::routes::append_route::AppendRoute`]).
    pub append: bool,
    /// `Connection: close`: the answer is the connection's last.
    pub close: bool,
    /// An append whose target and header names are of the plainest kind
    /// (see [`plain_text`]), so that they are what `http` would make of
    /// them without asking it: the append route reads such a request
    /// straight from the buffer ([`Located::append_view`]).
    plain: bool,
    /// Where the headers the append path reads are (made for a plain
    /// append only).
    known: KnownHeaders,
    target: Span,
    /// The append route's stream segment (empty for any other request).
    stream: Span,
    /// Each header's name and value.
    headers: [(Span, Span); HEADERS_MAX],
    header_count: usize,
}

/// Where bytes lie in the buffer: start and end (a head is under
/// 4 GiB, which [`parse`] checks).
#[derive(Debug, Clone, Copy, Default)]
struct Span(u32, u32);

impl Span {
    /// `start..end` of a head [`parse`] checked to be under 4 GiB.
    #[allow(
        clippy::cast_possible_truncation,
        reason = "`parse` takes only a head and body of at most u32::MAX bytes"
    )]
    fn new(start: usize, end: usize) -> Span {
        Span(start as u32, end as u32)
    }

    fn range(self) -> Range<usize> {
        self.0 as usize..self.1 as usize
    }
}

/// Reads the request at the start of `buf`.
pub fn parse(buf: &[u8], cap_bytes: usize) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut req = httparse::Request::new(&mut headers);
    let head_bytes = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() < cap_bytes => {
            return Head::Partial { head_done: false }
        }
        _ => return Head::Hyper,
    };
    let (Some(method), Some(1), Some(target)) = (req.method, req.version, req.path) else {
        return Head::Hyper;
    };
    if !target.starts_with('/') || method == "HEAD" || method == "CONNECT" {
        return Head::Hyper;
    }
    let Some((body_bytes, close)) = plain_framing(req.headers) else {
        return Head::Hyper;
    };
    let Some(total) = head_bytes.checked_add(body_bytes) else {
        return Head::Hyper;
    };
    if total > cap_bytes || total > u32::MAX as usize {
        return Head::Hyper;
    }
    if buf.len() < total {
        return Head::Partial { head_done: true };
    }
    let method = match method {
        "POST" => Method::POST,
        "GET" => Method::GET,
        other => match Method::from_bytes(other.as_bytes()) {
            Ok(m) => m,
            Err(_) => return Head::Hyper,
        },
    };
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    let stream = crate::routes::append_route::AppendRoute::matches_path(&method, path);
    let append = stream.is_some();
    let at = |s: &[u8]| {
        let start = s.as_ptr() as usize - buf.as_ptr() as usize;
        debug_assert!(start + s.len() <= head_bytes);
        Span::new(start, start + s.len())
    };
    let plain = append
        && plain_text(target.as_bytes(), PLAIN_TARGET)
        && req
            .headers
            .iter()
            .all(|h| plain_text(h.name.as_bytes(), PLAIN_NAME));
    let mut located = Located {
        method,
        head_bytes,
        body_bytes,
        append,
        close,
        plain,
        known: match plain {
            true => KnownHeaders::of(req.headers),
            false => KnownHeaders::default(),
        },
        target: at(target.as_bytes()),
        stream: stream.map_or(Span::default(), |s| at(s.as_bytes())),
        headers: [(Span::default(), Span::default()); HEADERS_MAX],
        header_count: req.headers.len(),
    };
    for (slot, h) in located.headers.iter_mut().zip(req.headers.iter()) {
        *slot = (at(h.name.as_bytes()), at(h.value));
    }
    Head::Whole(located)
}

impl Located {
    /// The head as hyper would have handed it on: method, URI, version
    /// and headers in the order sent, the URI and values sharing `head`
    /// (the request's first `head_bytes`). None when the URI or a header
    /// is not valid for `http` (hyper answers those 400).
    pub fn to_parts(&self, head: &Bytes) -> Option<axum::http::request::Parts> {
        debug_assert!(head.len() >= self.head_bytes);
        let uri = Uri::from_maybe_shared(head.slice(self.target.range())).ok()?;
        let mut map = HeaderMap::with_capacity(self.header_count);
        for (name, value) in &self.headers[..self.header_count] {
            let name = HeaderName::from_bytes(&head[name.range()]).ok()?;
            let value = HeaderValue::from_maybe_shared(head.slice(value.range())).ok()?;
            map.append(name, value);
        }
        let (mut parts, ()) = Request::new(()).into_parts();
        parts.method = self.method.clone();
        parts.uri = uri;
        parts.version = Version::HTTP_11;
        parts.headers = map;
        Some(parts)
    }

    /// The append's stream segment and headers as slices of `head` (the
    /// request's first `head_bytes`), when the request is plain enough to
    /// be read that way; None sends it through [`Located::to_parts`].
    pub fn append_view<'a>(&'a self, head: &'a [u8]) -> Option<(&'a str, SliceHeaders<'a>)> {
        if !self.plain {
            return None;
        }
        debug_assert!(head.len() >= self.head_bytes);
        // Plain text is ASCII.
        let stream = std::str::from_utf8(&head[self.stream.range()]).ok()?;
        let headers = SliceHeaders {
            head,
            spans: &self.headers[..self.header_count],
            known: &self.known,
        };
        Some((stream, headers))
    }

    /// The request target (path and query) of a plain append, as sent
    /// (plain text: ASCII).
    pub fn target<'a>(&self, head: &'a [u8]) -> &'a [u8] {
        &head[self.target.range()]
    }
}

/// Text that `http` takes as it is: only ASCII letters, digits, `-`,
/// `.`, `_` and `~` ([`PLAIN_NAME`]: any such text is a header name),
/// and in a URI also `/?=&` ([`PLAIN_TARGET`]). Reading such text
/// without `http` reads it alike.
fn plain_text(text: &[u8], kind: u8) -> bool {
    text.len() <= PLAIN_TEXT_BYTES_MAX && text.iter().all(|&b| PLAIN[b as usize] & kind != 0)
}

const PLAIN_NAME: u8 = 1;
const PLAIN_TARGET: u8 = 2;

/// Each byte's [`PLAIN_NAME`] and [`PLAIN_TARGET`] bits: a table, as a
/// head's bytes are tested one by one.
#[allow(
    clippy::cast_possible_truncation,
    reason = "`b` runs over 0..256, every one a u8"
)]
static PLAIN: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
            table[b] = PLAIN_NAME | PLAIN_TARGET;
        } else if matches!(c, b'/' | b'?' | b'=' | b'&') {
            table[b] = PLAIN_TARGET;
        }
        b += 1;
    }
    table
};

/// Under `http`'s own length limits for a header name and a URI.
const PLAIN_TEXT_BYTES_MAX: usize = 4096;

/// The headers the append path reads, by their lowercase names.
const KNOWN: [&str; 10] = [
    "content-type",
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "authorization",
    fencelog_api::header::FENCING_TOKEN,
    fencelog_api::header::MATCH_SEQ_NUM,
    fencelog_api::header::NOT_AFTER_MS,
    fencelog_api::header::PRODUCER_ID,
    fencelog_api::header::PRODUCER_SEQ,
];

/// The longest name in [`KNOWN`].
const KNOWN_NAME_BYTES_MAX: usize = 17;

/// Where a plain append's [`KNOWN`] headers are, found in one pass over
/// the head: so that each of the dozen lookups the append path makes is a
/// match on the name asked for, not a scan of every header's name.
#[derive(Debug, Clone, Copy, Default)]
struct KnownHeaders {
    /// Per known name: 1 + the index of its first header, or 0 if absent.
    first: [u8; KNOWN.len()],
    /// Bit i: the known name i appears more than once.
    repeated: u16,
}

impl KnownHeaders {
    #[allow(
        clippy::cast_possible_truncation,
        reason = "`i` indexes a head's at most HEADERS_MAX headers, below u8::MAX (asserted)"
    )]
    fn of(headers: &[httparse::Header<'_>]) -> Self {
        const { assert!(HEADERS_MAX < u8::MAX as usize && KNOWN.len() <= 16) };
        let mut known = KnownHeaders::default();
        for (i, h) in headers.iter().enumerate() {
            let Some(k) = known_index_folded(h.name.as_bytes()) else {
                continue;
            };
            match known.first[k] {
                0 => known.first[k] = i as u8 + 1,
                _ => known.repeated |= 1 << k,
            }
        }
        known
    }
}

/// The index in [`KNOWN`] of the lowercase `name`: a `match`, which
/// compiles to a switch on the length and one comparison (a search of
/// the list cost ~50 instructions a lookup, a dozen lookups a request).
fn known_index(name: &str) -> Option<usize> {
    use fencelog_api::header as h;
    let k = match name {
        "content-type" => 0,
        "content-length" => 1,
        "content-encoding" => 2,
        "transfer-encoding" => 3,
        "authorization" => 4,
        h::FENCING_TOKEN => 5,
        h::MATCH_SEQ_NUM => 6,
        h::NOT_AFTER_MS => 7,
        h::PRODUCER_ID => 8,
        h::PRODUCER_SEQ => 9,
        _ => return None,
    };
    debug_assert_eq!(KNOWN[k], name);
    Some(k)
}

/// [`known_index`] of a name as sent, in any case: the lengths first, so
/// most names meet one comparison at most.
fn known_index_folded(name: &[u8]) -> Option<usize> {
    if name.len() > KNOWN_NAME_BYTES_MAX {
        return None;
    }
    KNOWN
        .iter()
        .position(|k| k.len() == name.len() && name.eq_ignore_ascii_case(k.as_bytes()))
}

/// A plain append's headers, read from the buffer they came in
/// ([`Located::append_view`]): names compared without regard to case, as
/// `http` compares them, values exactly as httparse delimited them (the
/// bytes hyper would put in a `HeaderValue`).
pub struct SliceHeaders<'a> {
    head: &'a [u8],
    spans: &'a [(Span, Span)],
    known: &'a KnownHeaders,
}

impl HeaderView for SliceHeaders<'_> {
    fn values_of<'a>(&'a self, name: &'a HeaderName) -> impl Iterator<Item = &'a [u8]> + 'a {
        let name = name.as_str();
        // The spans to look at, and whether their names need comparing.
        let (spans, compare) = match known_index(name) {
            Some(k) if self.known.repeated & (1 << k) == 0 => {
                let first = usize::from(self.known.first[k]);
                (&self.spans[first.saturating_sub(1)..first], false)
            }
            _ => (self.spans, true),
        };
        let matches =
            move |n: &Span| !compare || self.head[n.range()].eq_ignore_ascii_case(name.as_bytes());
        spans
            .iter()
            .filter(move |(n, _)| matches(n))
            .map(|(_, v)| &self.head[v.range()])
    }

    fn size_bytes(&self) -> usize {
        self.spans
            .iter()
            .map(|(n, v)| n.range().len() + v.range().len())
            .sum()
    }
}

/// The body's length, when the headers frame it one plain way only, and
/// whether the client asked to close after the answer.
fn plain_framing(headers: &[httparse::Header<'_>]) -> Option<(usize, bool)> {
    let mut length = None;
    let mut close = false;
    for h in headers {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            if length.is_some() || h.value.is_empty() || h.value.len() > 12 {
                return None;
            }
            if !h.value.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let digits = std::str::from_utf8(h.value).ok()?;
            length = Some(digits.parse::<usize>().ok()?);
        } else if name.eq_ignore_ascii_case("connection") {
            if h.value.eq_ignore_ascii_case(b"close") {
                close = true;
            } else if !h.value.eq_ignore_ascii_case(b"keep-alive") {
                return None;
            }
        } else if ["transfer-encoding", "expect", "upgrade", "te"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n))
        {
            return None;
        }
    }
    // No length is an empty body, as hyper reads it.
    Some((length.unwrap_or(0), close))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: usize = 8192;
    const OK: &str = "POST /v1/streams/s/records HTTP/1.1\r\nHost: t\r\nFencing-Token: 3\r\nContent-Type: application/octet-stream\r\nContent-Length: 5\r\n\r\nhello";

    fn kind(buf: &[u8]) -> &'static str {
        match parse(buf, CAP) {
            Head::Partial { head_done: false } => "partial",
            Head::Partial { head_done: true } => "body",
            Head::Hyper => "hyper",
            Head::Whole(l) if l.append && l.close => "append, then close",
            Head::Whole(l) if l.append => "append",
            Head::Whole(_) => "router",
        }
    }

    #[test]
    fn a_plain_append_is_taken_with_its_head_and_body_located() {
        let Head::Whole(l) = parse(OK.as_bytes(), CAP) else {
            panic!("not taken");
        };
        let (head_bytes, body_bytes) = (l.head_bytes, l.body_bytes);
        assert!(l.append);
        let parts = l.to_parts(&Bytes::from_static(OK.as_bytes())).unwrap();
        assert_eq!((head_bytes + body_bytes, body_bytes), (OK.len(), 5));
        assert_eq!(&OK[head_bytes..], "hello");
        assert_eq!(
            (&parts.method, parts.uri.path()),
            (&Method::POST, "/v1/streams/s/records")
        );
        assert_eq!(parts.headers["fencing-token"], "3");
        let names: Vec<_> = parts.headers.keys().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            ["host", "fencing-token", "content-type", "content-length"]
        );
        // Followed by the next request: only the first is taken.
        let two = format!("{OK}{OK}");
        assert!(
            matches!(parse(two.as_bytes(), CAP), Head::Whole(l) if l.head_bytes + l.body_bytes == OK.len())
        );
    }

    #[test]
    fn a_plain_append_is_read_from_the_buffer_and_anything_else_through_http() {
        let Head::Whole(l) = parse(OK.as_bytes(), CAP) else {
            panic!("not taken");
        };
        let (stream, headers) = l.append_view(OK.as_bytes()).expect("plain");
        assert_eq!(stream, "s");
        let token = HeaderName::from_static("fencing-token");
        assert_eq!(headers.values_of(&token).collect::<Vec<_>>(), [b"3"]);
        assert_eq!(
            headers.first(&axum::http::header::CONTENT_LENGTH),
            Some(&b"5"[..])
        );
        let parts = l.to_parts(&Bytes::from_static(OK.as_bytes())).unwrap();
        assert_eq!(headers.size_bytes(), parts.headers.size_bytes());
        for (from, to, plain) in [
            ("Host: t", "Host: t\r\nX_a.b~c: v", true),
            ("/records", "/records?a=b&c=d", true),
            ("Host: t", "Host: t\r\nX!: v", false),
            ("Host: t", "Host: t\r\nX+: v", false),
            ("/records", "/records?a=%20", false),
            ("/records", "/records?a=b;c", false),
            (
                "POST /v1/streams/s/records",
                "GET /v1/streams/s/records",
                false,
            ),
        ] {
            let req = OK.replacen(from, to, 1);
            let Head::Whole(l) = parse(req.as_bytes(), CAP) else {
                panic!("not taken: {req:?}");
            };
            assert_eq!(l.append_view(req.as_bytes()).is_some(), plain, "{req:?}");
        }
    }

    #[test]
    fn every_known_name_is_found_in_any_case_and_others_are_not() {
        for (i, k) in KNOWN.iter().enumerate() {
            assert_eq!(known_index(k), Some(i));
            assert_eq!(known_index_folded(k.as_bytes()), Some(i));
            let upper = k.to_ascii_uppercase();
            assert_eq!(known_index_folded(upper.as_bytes()), Some(i));
            assert!(k.len() <= KNOWN_NAME_BYTES_MAX);
        }
        for other in ["host", "content-typ", "fencing-tokens", "x"] {
            assert_eq!(
                (known_index(other), known_index_folded(other.as_bytes())),
                (None, None)
            );
        }
    }

    #[test]
    fn every_cut_of_a_request_is_partial_and_the_whole_is_taken() {
        let head_end = OK.find("\r\n\r\n").unwrap() + 4;
        for cut in 0..OK.len() {
            let want = if cut < head_end { "partial" } else { "body" };
            assert_eq!(kind(&OK.as_bytes()[..cut]), want, "cut at {cut}");
        }
        assert_eq!(kind(OK.as_bytes()), "append");
    }

    #[test]
    #[allow(
        clippy::too_many_lines,
        reason = "a table: each edit of a request and where it goes"
    )]
    fn other_routes_go_to_the_router_and_anything_ambiguous_to_hyper() {
        let swaps = [
            ("POST /v1", "PUT /v1", "router"),
            ("POST /v1", "DELETE /v1", "router"),
            ("POST /v1", "HEAD /v1", "hyper"),
            ("POST /v1/streams/s/records", "CONNECT t:80", "hyper"),
            ("HTTP/1.1", "HTTP/1.0", "hyper"),
            ("/v1/streams/s/records", "/v1/streams/s/records/x", "router"),
            (
                "/v1/streams/s/records",
                "/v1/streams/a%2Fb/records",
                "router",
            ),
            ("/v1/streams/s/records", "/v1/streams//records", "router"),
            ("/v1/streams/s/records", "/v1/streams/s/fence", "router"),
            (
                "/v1/streams/s/records",
                "http://t/v1/streams/s/records",
                "hyper",
            ),
            ("/v1/streams/s/records", "*", "hyper"),
            // Live tails are the front's (the route answers what a POST
            // with these means, as it does through hyper).
            (
                "/v1/streams/s/records",
                "/v1/streams/s/records?follow=true",
                "append",
            ),
            ("Host: t", "Host: t\r\nAccept: text/Event-Stream", "append"),
            (
                "POST /v1/streams/s/records",
                "GET /v1/streams/s/records?follow=true",
                "router",
            ),
            ("Host: t", "Host: t\r\nAccept: application/json", "append"),
            ("Host: t", "Host: t\r\nConnection: Keep-Alive", "append"),
            (
                "Host: t",
                "Host: t\r\nConnection: CLOSE",
                "append, then close",
            ),
            ("Content-Length: 5", "Content-Length: +5", "hyper"),
            ("Content-Length: 5", "Content-Length: 5, 5", "hyper"),
            (
                "Content-Length: 5",
                "Content-Length: 5\r\nContent-Length: 5",
                "hyper",
            ),
            (
                "Content-Length: 5",
                "Content-Length: 5\r\nTransfer-Encoding: chunked",
                "hyper",
            ),
            (
                "Content-Length: 5",
                "Content-Length: 99999999999999999999",
                "hyper",
            ),
            ("Content-Length: 5", "Transfer-Encoding: chunked", "hyper"),
            (
                "Content-Length: 5",
                "Content-Length: 5\r\nExpect: 100-continue",
                "hyper",
            ),
            (
                "Content-Length: 5",
                "Content-Length: 5\r\nConnection: close",
                "append, then close",
            ),
            (
                "Content-Length: 5",
                "Content-Length: 5\r\nConnection: keep-alive, close",
                "hyper",
            ),
            (
                "Content-Length: 5",
                "Content-Length: 5\r\nConnection: x-hop",
                "hyper",
            ),
            (
                "Content-Length: 5",
                "Content-Length: 5\r\nUpgrade: websocket",
                "hyper",
            ),
            (
                "Content-Length: 5",
                "Content-Length: 5\r\nTE: trailers",
                "hyper",
            ),
            ("Host: t", "Host : t", "hyper"),
            ("Host: t", "Host: t\r\n folded", "hyper"),
        ];
        for (from, to, want) in swaps {
            let req = OK.replacen(from, to, 1);
            assert_eq!(kind(req.as_bytes()), want, "{req:?}");
        }
        let many: String = (0..HEADERS_MAX).map(|i| format!("X-{i}: v\r\n")).collect();
        let crowded = OK.replacen("Host: t\r\n", &format!("Host: t\r\n{many}"), 1);
        assert_eq!(kind(crowded.as_bytes()), "hyper");
    }

    #[test]
    fn no_length_is_an_empty_body() {
        let get = b"GET /v1/streams/s/records?start_seq=0 HTTP/1.1\r\nHost: t\r\n\r\nGET";
        let Head::Whole(l) = parse(get, CAP) else {
            panic!("not taken");
        };
        assert_eq!((l.body_bytes, l.append), (0, false));
        let parts = l.to_parts(&Bytes::from_static(get)).unwrap();
        assert_eq!((parts.method, l.head_bytes), (Method::GET, get.len() - 3));
        assert_eq!(parts.uri.query(), Some("start_seq=0"));
    }

    #[test]
    fn what_does_not_fit_the_cap_is_hyper_s_even_unfinished() {
        let big = OK.replacen("Content-Length: 5", &format!("Content-Length: {CAP}"), 1);
        assert_eq!(kind(big.as_bytes()), "hyper");
        let head = format!(
            "POST /v1/streams/s/records HTTP/1.1\r\nX: {}",
            "a".repeat(CAP)
        );
        assert_eq!(kind(head.as_bytes()), "hyper");
        assert_eq!(kind(&head.as_bytes()[..CAP - 1]), "partial");
    }
}
