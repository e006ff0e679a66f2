//! A record in JSON, and the one rule for its bytes: `body` when they are
//! UTF-8 text, `body_base64` otherwise, so text stays readable and binary
//! stays exact. Encoded and decoded here only.

use crate::record_headers::HeadersJson;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use fencelog_types::Record;
use serde::de::{self, Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeMap, SerializeStruct, Serializer};
use std::borrow::Cow;
use std::fmt;

/// The field of a record's bytes as text.
pub const BODY: &str = "body";
/// The field of a record's bytes as base64 (standard alphabet, padded).
pub const BODY_BASE64: &str = "body_base64";

/// Why a record object's body is not one this API accepts. The texts are
/// the server's 400 messages, after `records[i] `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// Neither field, both, or other fields beside them.
    NotOneField,
    /// The field is there but is not a JSON string.
    NotAString,
    NotBase64(base64::DecodeError),
    /// The record's headers are malformed (the text says how).
    BadHeaders(String),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::NotOneField => {
                write!(f, "must have exactly one field: {BODY} or {BODY_BASE64}")
            }
            BodyError::NotAString => write!(f, "{BODY} must be a string"),
            BodyError::NotBase64(e) => write!(f, "{BODY_BASE64} is not valid base64: {e}"),
            BodyError::BadHeaders(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for BodyError {}

/// Decodes a `body_base64` value.
pub fn decode_base64(text: &[u8]) -> Result<Vec<u8>, BodyError> {
    BASE64.decode(text).map_err(BodyError::NotBase64)
}

/// A record's bytes as JSON carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyJson<'a> {
    /// The bytes are this UTF-8 text (`body`).
    Text(Cow<'a, str>),
    /// The bytes are this base64 (`body_base64`), still encoded.
    Base64(Cow<'a, str>),
}

impl<'a> BodyJson<'a> {
    /// The rule: text when the bytes are UTF-8, borrowing them; base64
    /// otherwise. Inlined, like the small accessors below, because a read
    /// calls it once per record from another crate.
    #[inline]
    pub fn encode(bytes: &'a [u8]) -> Self {
        match std::str::from_utf8(bytes) {
            Ok(text) => BodyJson::Text(Cow::Borrowed(text)),
            Err(_) => BodyJson::Base64(Cow::Owned(BASE64.encode(bytes))),
        }
    }

    /// The body of a record object that has these two fields (each `None`
    /// when absent): exactly one of them.
    pub fn from_fields(
        body: Option<Cow<'a, str>>,
        body_base64: Option<Cow<'a, str>>,
    ) -> Result<Self, BodyError> {
        match (body, body_base64) {
            (Some(text), None) => Ok(BodyJson::Text(text)),
            (None, Some(b64)) => Ok(BodyJson::Base64(b64)),
            _ => Err(BodyError::NotOneField),
        }
    }

    /// The field this body goes in.
    #[inline]
    pub fn field(&self) -> &'static str {
        match self {
            BodyJson::Text(_) => BODY,
            BodyJson::Base64(_) => BODY_BASE64,
        }
    }

    /// The field's value as JSON carries it.
    #[inline]
    pub fn as_json_str(&self) -> &str {
        match self {
            BodyJson::Text(text) | BodyJson::Base64(text) => text,
        }
    }

    /// The record's bytes.
    pub fn into_bytes(self) -> Result<Bytes, BodyError> {
        match self {
            BodyJson::Text(Cow::Borrowed(text)) => Ok(Bytes::copy_from_slice(text.as_bytes())),
            BodyJson::Text(Cow::Owned(text)) => Ok(Bytes::from(text)),
            BodyJson::Base64(b64) => decode_base64(b64.as_bytes()).map(Bytes::from),
        }
    }
}

/// `{"body": text}` or `{"body_base64": b64}`: one record of an append.
impl Serialize for BodyJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry(self.field(), self.as_json_str())?;
        map.end()
    }
}

/// One record as reads and tails answer it:
/// `{"seq", "fencing_token", "timestamp_ms", ["headers" | "headers_base64"],
/// "body" | "body_base64"}`, in that order; the headers field is there only
/// when the record has headers ([`crate::record_headers`]).
/// Serialising borrows the record's bytes when they are text, so a read
/// copies each body once, into the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordJson<'a> {
    pub seq: u64,
    pub fencing_token: u64,
    pub timestamp_ms: u64,
    /// `None` when the record has no headers.
    pub headers: Option<HeadersJson<'a>>,
    pub body: BodyJson<'a>,
}

impl<'a> RecordJson<'a> {
    #[inline]
    pub fn new(r: &'a Record) -> Self {
        RecordJson {
            seq: r.seq,
            fencing_token: r.fencing_token,
            timestamp_ms: r.timestamp_ms,
            headers: HeadersJson::encode(&r.headers),
            body: BodyJson::encode(&r.body),
        }
    }

    pub fn all(records: &'a [Record]) -> Vec<Self> {
        records.iter().map(Self::new).collect()
    }

    /// The record, with its bytes decoded.
    pub fn into_record(self) -> Result<Record, BodyError> {
        let headers = match self.headers {
            None => Vec::new(),
            Some(h) => h.into_headers().map_err(BodyError::BadHeaders)?,
        };
        Ok(Record {
            seq: self.seq,
            fencing_token: self.fencing_token,
            timestamp_ms: self.timestamp_ms,
            headers,
            body: self.body.into_bytes()?,
        })
    }
}

impl Serialize for RecordJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let fields = 4 + self.headers.is_some() as usize;
        let mut st = s.serialize_struct("Record", fields)?;
        st.serialize_field("seq", &self.seq)?;
        st.serialize_field("fencing_token", &self.fencing_token)?;
        st.serialize_field("timestamp_ms", &self.timestamp_ms)?;
        if let Some(h) = &self.headers {
            st.serialize_field(h.field(), h)?;
        }
        st.serialize_field(self.body.field(), self.body.as_json_str())?;
        st.end()
    }
}

/// The record object as it arrives; [`RecordJson`] checks its body.
#[derive(serde::Deserialize)]
struct RecordFields {
    seq: u64,
    fencing_token: u64,
    timestamp_ms: u64,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    body_base64: Option<String>,
    #[serde(default)]
    headers: Option<Vec<(String, String)>>,
    #[serde(default)]
    headers_base64: Option<Vec<(String, String)>>,
}

/// Decoded bodies are owned, so a decoded record outlives its input.
impl<'de> Deserialize<'de> for RecordJson<'_> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = RecordFields::deserialize(d)?;
        let body = BodyJson::from_fields(f.body.map(Cow::Owned), f.body_base64.map(Cow::Owned))
            .map_err(|e| de::Error::custom(format_args!("record {}: {e}", f.seq)))?;
        let headers = match (f.headers, f.headers_base64) {
            (None, None) => None,
            (Some(text), None) => Some(HeadersJson::Text(
                text.into_iter()
                    .map(|(n, v)| (Cow::Owned(n), Cow::Owned(v)))
                    .collect(),
            )),
            (None, Some(b64)) => Some(HeadersJson::Base64(b64)),
            (Some(_), Some(_)) => {
                return Err(de::Error::custom(format_args!(
                    "record {}: both headers and headers_base64",
                    f.seq
                )))
            }
        };
        Ok(RecordJson {
            seq: f.seq,
            fencing_token: f.fencing_token,
            timestamp_ms: f.timestamp_ms,
            headers,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, body: &'static [u8]) -> Record {
        Record {
            seq,
            fencing_token: 2,
            timestamp_ms: 3,
            headers: Vec::new(),
            body: Bytes::from_static(body),
        }
    }

    #[test]
    fn text_is_borrowed_and_binary_is_base64() {
        let records = [record(1, b"hi"), record(2, b"\xff\x00")];
        let json = RecordJson::all(&records);
        match &json[0].body {
            BodyJson::Text(Cow::Borrowed(text)) => {
                assert_eq!(text.as_ptr(), records[0].body.as_ptr())
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            serde_json::to_string(&json).unwrap(),
            r#"[{"seq":1,"fencing_token":2,"timestamp_ms":3,"body":"hi"},{"seq":2,"fencing_token":2,"timestamp_ms":3,"body_base64":"/wA="}]"#
        );
        assert_eq!(
            serde_json::to_string(&json[1].body).unwrap(),
            r#"{"body_base64":"/wA="}"#
        );
    }

    #[test]
    fn decodes_both_body_forms_back_to_the_same_records() {
        let records = [record(1, b"hi"), record(2, b"\xff\x00"), record(3, b"")];
        let text = serde_json::to_string(&RecordJson::all(&records)).unwrap();
        let back: Vec<RecordJson> = serde_json::from_str(&text).unwrap();
        let back: Vec<Record> = back.into_iter().map(|r| r.into_record().unwrap()).collect();
        assert_eq!(back, records);
    }

    #[test]
    fn headers_come_between_the_timestamp_and_the_body_and_round_trip() {
        use fencelog_types::Header;
        let mut text = record(1, b"hi");
        text.headers = vec![Header::new("trace-id", "abc"), Header::new("trace-id", "")];
        let mut binary = record(2, b"\xff");
        binary.headers = vec![Header::new(&b"\xfe"[..], "v")];
        let records = [text, binary, record(3, b"plain")];
        let json = serde_json::to_string(&RecordJson::all(&records)).unwrap();
        assert_eq!(
            json,
            r#"[{"seq":1,"fencing_token":2,"timestamp_ms":3,"headers":[["trace-id","abc"],["trace-id",""]],"body":"hi"},{"seq":2,"fencing_token":2,"timestamp_ms":3,"headers_base64":[["/g==","dg=="]],"body_base64":"/w=="},{"seq":3,"fencing_token":2,"timestamp_ms":3,"body":"plain"}]"#
        );
        let back: Vec<RecordJson> = serde_json::from_str(&json).unwrap();
        let back: Vec<Record> = back.into_iter().map(|r| r.into_record().unwrap()).collect();
        assert_eq!(back, records);
        let both = r#"{"seq":5,"fencing_token":1,"timestamp_ms":1,"body":"a","headers":[],"headers_base64":[]}"#;
        let err = serde_json::from_str::<RecordJson>(both).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("record 5: both headers and headers_base64"),
            "{err}"
        );
    }

    /// The Rust client's decoding test, from before its decoder moved here.
    #[test]
    fn wire_records_decode_both_body_forms() {
        let w: Vec<RecordJson> = serde_json::from_str(
            r#"[{"seq":1,"fencing_token":2,"timestamp_ms":3,"body":"hi"},
                {"seq":2,"fencing_token":2,"timestamp_ms":3,"body_base64":"/wA="}]"#,
        )
        .unwrap();
        let r: Vec<Record> = w.into_iter().map(|w| w.into_record().unwrap()).collect();
        assert_eq!(r[0].body, Bytes::from("hi"));
        assert_eq!(r[1].body, Bytes::from(vec![0xff, 0x00]));
    }

    #[test]
    fn exactly_one_body_field_and_valid_base64() {
        for (input, want) in [
            (
                r#"{"seq":5,"fencing_token":1,"timestamp_ms":1}"#,
                "record 5: must have exactly one field: body or body_base64",
            ),
            (
                r#"{"seq":5,"fencing_token":1,"timestamp_ms":1,"body":"a","body_base64":"YQ=="}"#,
                "record 5: must have exactly one field: body or body_base64",
            ),
        ] {
            let err = serde_json::from_str::<RecordJson>(input).unwrap_err();
            assert!(err.to_string().starts_with(want), "{err}");
        }
        let bad: RecordJson = serde_json::from_str(
            r#"{"seq":5,"fencing_token":1,"timestamp_ms":1,"body_base64":"!"}"#,
        )
        .unwrap();
        assert_eq!(
            bad.into_record().unwrap_err().to_string(),
            "body_base64 is not valid base64: Invalid symbol 33, offset 0."
        );
        assert_eq!(BodyError::NotAString.to_string(), "body must be a string");
    }
}
