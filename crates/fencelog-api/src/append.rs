//! `POST /v1/streams/{stream}/records`: the JSON request a client sends and
//! the acknowledgement it gets back. (Raw and binary-batch appends carry
//! the token in headers instead; see [`crate::header`] and [`crate::batch`].)

use crate::record::BodyJson;
use fencelog_engine::Ack;
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
    pub records: Vec<BodyJson<'a>>,
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
            records: vec![BodyJson::encode(b"hi"), BodyJson::encode(b"\xff")],
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
    }
}
