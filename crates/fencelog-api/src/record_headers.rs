//! A record's headers in JSON, and their one rule, like the body's: absent
//! when the record has none; `"headers": [[name, value], ...]` when every
//! name and value is UTF-8 text; otherwise `"headers_base64"` with every
//! name and value base64 (standard alphabet, padded). The whole list takes
//! one form, so a reader checks one field. Pairs keep their order and
//! names may repeat. The limits (64 headers, 8 KiB of names and values,
//! names 1..=255 bytes) are the engine's, `fencelog_engine::validate_headers`.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use fencelog_types::Header;
use serde::ser::{Serialize, SerializeSeq, Serializer};
use serde_json::Value;
use std::borrow::Cow;

/// The field of headers that are all text.
pub const HEADERS: &str = "headers";
/// The field of headers with any binary name or value, all base64.
pub const HEADERS_BASE64: &str = "headers_base64";

/// A record's headers as JSON carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadersJson<'a> {
    /// `headers`: every name and value is this text (borrowed when encoding).
    Text(Vec<(Cow<'a, str>, Cow<'a, str>)>),
    /// `headers_base64`: names and values still base64-encoded.
    Base64(Vec<(String, String)>),
}

impl<'a> HeadersJson<'a> {
    /// The rule: `None` for no headers, text when all of it is UTF-8
    /// (borrowing it), base64 otherwise.
    pub fn encode(headers: &'a [Header]) -> Option<Self> {
        if headers.is_empty() {
            return None;
        }
        let text: Option<Vec<_>> = headers
            .iter()
            .map(|h| {
                let name = std::str::from_utf8(&h.name).ok()?;
                let value = std::str::from_utf8(&h.value).ok()?;
                Some((Cow::Borrowed(name), Cow::Borrowed(value)))
            })
            .collect();
        Some(match text {
            Some(pairs) => HeadersJson::Text(pairs),
            None => HeadersJson::Base64(
                headers
                    .iter()
                    .map(|h| (BASE64.encode(&h.name), BASE64.encode(&h.value)))
                    .collect(),
            ),
        })
    }

    /// The field these headers go in.
    pub fn field(&self) -> &'static str {
        match self {
            HeadersJson::Text(_) => HEADERS,
            HeadersJson::Base64(_) => HEADERS_BASE64,
        }
    }

    /// The headers, decoded. Not checked against the limits.
    pub fn into_headers(self) -> Result<Vec<Header>, String> {
        match self {
            HeadersJson::Text(pairs) => Ok(pairs
                .into_iter()
                .map(|(n, v)| Header::new(cow_bytes(n), cow_bytes(v)))
                .collect()),
            HeadersJson::Base64(pairs) => pairs
                .iter()
                .enumerate()
                .map(|(i, (n, v))| Ok(Header::new(b64(i, 0, n)?, b64(i, 1, v)?)))
                .collect(),
        }
    }
}

fn cow_bytes(c: Cow<'_, str>) -> Bytes {
    match c {
        Cow::Borrowed(s) => Bytes::copy_from_slice(s.as_bytes()),
        Cow::Owned(s) => Bytes::from(s),
    }
}

fn b64(index: usize, part: usize, text: &str) -> Result<Bytes, String> {
    BASE64
        .decode(text.as_bytes())
        .map(Bytes::from)
        .map_err(|e| format!("{HEADERS_BASE64}[{index}][{part}] is not valid base64: {e}"))
}

/// `[[name, value], ...]`.
impl Serialize for HeadersJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            HeadersJson::Text(pairs) => {
                let mut seq = s.serialize_seq(Some(pairs.len()))?;
                for (n, v) in pairs {
                    seq.serialize_element(&[n.as_ref(), v.as_ref()])?;
                }
                seq.end()
            }
            HeadersJson::Base64(pairs) => {
                let mut seq = s.serialize_seq(Some(pairs.len()))?;
                for (n, v) in pairs {
                    seq.serialize_element(&[n.as_str(), v.as_str()])?;
                }
                seq.end()
            }
        }
    }
}

/// The headers of a record object given as a JSON value (the server's
/// reference parser): `headers` and `headers_base64` are each absent or
/// `[[string, string], ...]`, and at most one is present. The messages are
/// the server's 400s, after `records[i] `.
pub fn from_json_fields(
    headers: Option<&Value>,
    headers_base64: Option<&Value>,
) -> Result<Vec<Header>, String> {
    let (field, value) = match (headers, headers_base64) {
        (None, None) => return Ok(Vec::new()),
        (Some(_), Some(_)) => {
            return Err(format!(
                "must have at most one of {HEADERS} and {HEADERS_BASE64}"
            ))
        }
        (Some(v), None) => (HEADERS, v),
        (None, Some(v)) => (HEADERS_BASE64, v),
    };
    let shape = || format!("{field} must be an array of [name, value] pairs of strings");
    let Value::Array(items) = value else {
        return Err(shape());
    };
    let mut pairs = Vec::with_capacity(items.len());
    for item in items {
        match item.as_array().map(Vec::as_slice) {
            Some([Value::String(n), Value::String(v)]) => {
                pairs.push((n.clone(), v.clone()));
            }
            _ => return Err(shape()),
        }
    }
    if field == HEADERS {
        let text = pairs
            .into_iter()
            .map(|(n, v)| (Cow::Owned(n), Cow::Owned(v)))
            .collect();
        HeadersJson::Text(text).into_headers()
    } else {
        HeadersJson::Base64(pairs).into_headers()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_when_all_of_it_is_text_else_all_base64() {
        assert_eq!(HeadersJson::encode(&[]), None);
        let text = [Header::new("trace-id", "abc"), Header::new("k", "")];
        let h = HeadersJson::encode(&text).unwrap();
        assert_eq!(h.field(), "headers");
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            r#"[["trace-id","abc"],["k",""]]"#
        );
        assert_eq!(h.into_headers().unwrap(), text);
        let mixed = [Header::new("a", "b"), Header::new("bin", &b"\xff"[..])];
        let h = HeadersJson::encode(&mixed).unwrap();
        assert_eq!(h.field(), "headers_base64");
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            r#"[["YQ==","Yg=="],["Ymlu","/w=="]]"#
        );
        assert_eq!(h.into_headers().unwrap(), mixed);
    }

    #[test]
    fn json_fields_are_checked_with_messages() {
        let ok = json!([["a", "1"], ["a", "2"]]);
        assert_eq!(
            from_json_fields(Some(&ok), None).unwrap(),
            vec![Header::new("a", "1"), Header::new("a", "2")]
        );
        let b64 = json!([["YQ==", "/w=="]]);
        assert_eq!(
            from_json_fields(None, Some(&b64)).unwrap(),
            vec![Header::new("a", &b"\xff"[..])]
        );
        assert_eq!(from_json_fields(None, None).unwrap(), vec![]);
        assert_eq!(
            from_json_fields(Some(&ok), Some(&b64)).unwrap_err(),
            "must have at most one of headers and headers_base64"
        );
        for bad in [
            json!({"a": "1"}),
            json!([["a"]]),
            json!([["a", 1]]),
            json!("x"),
        ] {
            assert_eq!(
                from_json_fields(Some(&bad), None).unwrap_err(),
                "headers must be an array of [name, value] pairs of strings"
            );
        }
        assert_eq!(
            from_json_fields(None, Some(&json!([["YQ==", "!"]]))).unwrap_err(),
            "headers_base64[0][1] is not valid base64: Invalid symbol 33, offset 0."
        );
    }
}
