//! `POST /v1/streams/{stream}/records`: the JSON request a client sends and
//! the acknowledgement it gets back. (Raw and binary-batch appends carry
//! the token in headers instead; see [`crate::header`] and [`crate::batch`].)

use crate::record::BodyJson;
use crate::record_headers::HeadersJson;
use fencelog_types::{Ack, RecordIn};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// A JSON append. Keys serialise in sorted order, as the server's own
/// `Value`-based examples and the clients always sent them.
///
/// Only serialised: the server decodes appends with its own parsers, which
/// explain every malformed body in a 400.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppendRequest<'a> {
    pub fencing_token: u64,
    /// Append only if the stream's `next_seq` equals it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_seq_num: Option<u64>,
    /// Deadline: accept only if the writer's timestamp is at most this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_after_ms: Option<u64>,
    /// An idempotent producer's id; needs `producer_seq`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub producer_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub producer_seq: Option<u64>,
    pub records: Vec<RecordInJson<'a>>,
}

/// One record of a JSON append: `{"body" | "body_base64", ["headers" |
/// "headers_base64"]}`, keys sorted like the request's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordInJson<'a> {
    pub body: BodyJson<'a>,
    pub headers: Option<HeadersJson<'a>>,
}

impl<'a> RecordInJson<'a> {
    /// A record of bytes without headers.
    pub fn body(bytes: &'a [u8]) -> Self {
        RecordInJson {
            body: BodyJson::encode(bytes),
            headers: None,
        }
    }

    /// A record with its headers, each part text or base64 by the rule.
    pub fn new(r: &'a RecordIn) -> Self {
        RecordInJson {
            body: BodyJson::encode(&r.body),
            headers: HeadersJson::encode(&r.headers),
        }
    }
}

impl Serialize for RecordInJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(1 + self.headers.is_some() as usize))?;
        map.serialize_entry(self.body.field(), self.body.as_json_str())?;
        if let Some(h) = &self.headers {
            map.serialize_entry(h.field(), h)?;
        }
        map.end()
    }
}

/// A successful append: durable from `first_seq` through `last_seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendAck {
    pub stream: String,
    pub first_seq: u64,
    pub last_seq: u64,
    pub next_seq: u64,
    pub fencing_token: u64,
    pub timestamp_ms: u64,
    /// A producer's retry of its last applied append: this is that
    /// append's original ack, and nothing was written.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
}

impl AppendAck {
    pub fn new(stream: String, ack: Ack) -> Self {
        AppendAck {
            stream,
            first_seq: ack.first_seq,
            last_seq: ack.last_seq,
            next_seq: ack.next_seq,
            fencing_token: ack.fencing_token,
            timestamp_ms: ack.timestamp_ms,
            duplicate: ack.duplicate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_serialise_as_clients_always_sent_them() {
        let req = AppendRequest {
            fencing_token: 3,
            match_seq_num: None,
            not_after_ms: None,
            producer_id: None,
            producer_seq: None,
            records: vec![RecordInJson::body(b"hi"), RecordInJson::body(b"\xff")],
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"fencing_token":3,"records":[{"body":"hi"},{"body_base64":"/w=="}]}"#
        );
        let req = AppendRequest {
            match_seq_num: Some(4),
            ..req
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"fencing_token":3,"match_seq_num":4,"records":[{"body":"hi"},{"body_base64":"/w=="}]}"#
        );
        let with = RecordIn::new("b").with_header("trace-id", "abc");
        let req = AppendRequest {
            fencing_token: 1,
            match_seq_num: None,
            not_after_ms: None,
            producer_id: None,
            producer_seq: None,
            records: vec![RecordInJson::new(&with)],
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"fencing_token":1,"records":[{"body":"b","headers":[["trace-id","abc"]]}]}"#
        );
    }
}
