//! One way to read a request's headers, whichever way the request came
//! in: from hyper (or a test) as an `http` [`HeaderMap`], or from the
//! HTTP/1.1 front as slices of the connection's buffer
//! ([`crate::server::front_head::SliceHeaders`]).
//!
//! Why: building a `HeaderMap` (parsing and lowercasing each name,
//! hashing it in, sharing each value, and dropping it all again) and
//! hashing every name looked up cost a stale rejection through the front
//! ~5k of its ~23k server instructions (callgrind, BENCHMARKS.md), while
//! a producer's request carries four or five headers, which a
//! scan of the parsed slices finds sooner. The append path
//! (`routes/records.rs`, [`crate::auth`], [`crate::routes::body`], [`crate::decode::params`])
//! reads through this trait only, so both ways in read a request alike.

use axum::http::{HeaderMap, HeaderName};

/// A request's headers, read by name.
pub trait HeaderView {
    /// Every value of the header `name`, in the order sent.
    fn values_of<'a>(&'a self, name: &'a HeaderName) -> impl Iterator<Item = &'a [u8]> + 'a;

    /// The bytes of every name and value together (what the header-size
    /// limit measures).
    fn size_bytes(&self) -> usize;

    /// The first value of `name`.
    fn first<'a>(&'a self, name: &'a HeaderName) -> Option<&'a [u8]> {
        self.values_of(name).next()
    }

    fn contains(&self, name: &HeaderName) -> bool {
        self.first(name).is_some()
    }
}

impl HeaderView for HeaderMap {
    fn values_of<'a>(&'a self, name: &'a HeaderName) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.get_all(name).iter().map(|v| v.as_bytes())
    }

    fn size_bytes(&self) -> usize {
        self.iter().map(|(k, v)| k.as_str().len() + v.len()).sum()
    }
}

/// `value` as text when every byte is visible ASCII or a tab: exactly
/// what `HeaderValue::to_str` accepts, so a value reads the same from
/// either kind of view.
pub fn visible_ascii(value: &[u8]) -> Option<&str> {
    let visible = value
        .iter()
        .all(|&b| b == b'\t' || (b' '..0x7f).contains(&b));
    if !visible {
        return None;
    }
    std::str::from_utf8(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn visible_ascii_is_header_value_to_str() {
        for b in 0..=255u8 {
            let bytes = [b'a', b, b'z'];
            let Ok(value) = HeaderValue::from_bytes(&bytes) else {
                continue;
            };
            assert_eq!(visible_ascii(&bytes), value.to_str().ok(), "byte {b:#04x}");
        }
    }

    #[test]
    fn a_header_map_is_read_in_order() {
        let mut map = HeaderMap::new();
        let name = HeaderName::from_static("fencing-token");
        map.append(&name, HeaderValue::from_static("7"));
        map.append(&name, HeaderValue::from_static("8"));
        map.append("host", HeaderValue::from_static("h"));
        let values: Vec<&[u8]> = map.values_of(&name).collect();
        assert_eq!(values, [b"7", b"8"]);
        assert_eq!(map.first(&name), Some(&b"7"[..]));
        assert!(!map.contains(&HeaderName::from_static("match-seq-num")));
        assert_eq!(
            map.size_bytes(),
            2 * ("fencing-token".len() + 1) + "host".len() + 1
        );
    }
}
