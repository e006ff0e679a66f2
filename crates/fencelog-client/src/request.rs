//! A request as the client describes it, whichever transport carries it
//! ([`crate::pool`] for `http://`, reqwest for `https://`), and the answer
//! as both hand it back: status, headers, the whole body.

use bytes::Bytes;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::Method;
use serde::Serialize;

/// Headers one request carries besides `Host`, `Authorization` and
/// `Content-Length` (the most any call sets is three).
pub(crate) const REQUEST_HEADERS_MAX: usize = 4;

/// One request: method, absolute URL (query included), a few headers and
/// the whole body. Cheap to clone (the body is shared), so a redirect or a
/// retry sends exactly the same bytes again.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    pub method: Method,
    pub url: String,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    /// A successful answer's body may come back in the pieces it arrived
    /// in ([`Answer::pieces`]) instead of joined: for a caller that reads
    /// it piece by piece anyway (a binary page), joining is a copy of
    /// every byte for nothing.
    pub unjoined: bool,
}

impl Req {
    pub fn new(method: Method, url: String) -> Req {
        Req {
            method,
            url,
            headers: Vec::with_capacity(REQUEST_HEADERS_MAX),
            body: Bytes::new(),
            unjoined: false,
        }
    }

    /// Asks for [`Req::unjoined`].
    pub fn unjoined(mut self) -> Req {
        self.unjoined = true;
        self
    }

    pub fn get(url: impl Into<String>) -> Req {
        Req::new(Method::GET, url.into())
    }

    pub fn post(url: impl Into<String>) -> Req {
        Req::new(Method::POST, url.into())
    }

    pub fn put(url: impl Into<String>) -> Req {
        Req::new(Method::PUT, url.into())
    }

    pub fn delete(url: impl Into<String>) -> Req {
        Req::new(Method::DELETE, url.into())
    }

    /// Adds a header. Names are the api's constants and values digits or
    /// media types, so an invalid one is a bug here, not an input error.
    pub fn header(self, name: &'static str, value: impl AsRef<str>) -> Req {
        let value = HeaderValue::from_str(value.as_ref()).expect("a valid header value");
        self.header_value(name, value)
    }

    /// Adds a header whose value is already one (numbers: `u64.into()`).
    pub fn header_value(mut self, name: &'static str, value: HeaderValue) -> Req {
        assert!(self.headers.len() < REQUEST_HEADERS_MAX, "too many headers");
        self.headers
            .push((HeaderName::from_static(name_lower(name)), value));
        self
    }

    /// The body, with its media type.
    pub fn body(self, content_type: &'static str, body: impl Into<Bytes>) -> Req {
        let mut req = self.header(CONTENT_TYPE.as_str(), content_type);
        req.body = body.into();
        req
    }

    pub fn json<T: Serialize>(self, value: &T) -> Req {
        let body = serde_json::to_vec(value).expect("the api's request types serialise");
        self.body("application/json", body)
    }

    /// Appends `key=value` pairs to the URL's query, values percent-escaped.
    pub fn query<K: AsRef<str>, V: AsRef<str>>(mut self, pairs: &[(K, V)]) -> Req {
        for (k, v) in pairs {
            self.url
                .push(if self.url.contains('?') { '&' } else { '?' });
            escape_query(&mut self.url, k.as_ref());
            self.url.push('=');
            escape_query(&mut self.url, v.as_ref());
        }
        self
    }
}

/// `HeaderName::from_static` takes lowercase only; the api's names are.
fn name_lower(name: &'static str) -> &'static str {
    debug_assert!(!name.bytes().any(|b| b.is_ascii_uppercase()), "{name}");
    name
}

/// Query-component escaping: unreserved characters as they are, every
/// other byte `%XX`.
fn escape_query(out: &mut String, s: &str) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':') {
            out.push(b as char);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xf) as usize] as char);
        }
    }
}

/// A whole answer: status, headers, body, and the URL that gave it (the
/// last one, after redirects).
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    /// The body, joined; empty when it is in `pieces`.
    pub body: Bytes,
    /// The body as it arrived, when the request was [`Req::unjoined`], the
    /// answer a success and it came in more than one piece.
    pub pieces: Vec<Bytes>,
    pub url: String,
}

impl Answer {
    /// The body's pieces in order, however it was kept.
    pub fn into_pieces(self) -> Vec<Bytes> {
        if self.pieces.is_empty() {
            vec![self.body]
        } else {
            self.pieces
        }
    }

    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)?.to_str().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_escaped_and_joined() {
        let req = Req::get("http://h/v1/streams").query(&[("prefix", "a b&c"), ("limit", "5")]);
        assert_eq!(req.url, "http://h/v1/streams?prefix=a%20b%26c&limit=5");
        let req = Req::get("http://h/x?start_seq=1").query(&[("count", "2")]);
        assert_eq!(req.url, "http://h/x?start_seq=1&count=2");
    }
}
