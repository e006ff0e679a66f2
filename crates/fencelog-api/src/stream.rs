//! Stream-level answers and requests: a stream's state (`GET
//! /v1/streams/{stream}`, and the answer to a fence), a page of the stream
//! list (`GET /v1/streams`), and the fence request.

use fencelog_engine::StreamState;
use serde::{Deserialize, Serialize};

/// Streams per listing page when `limit` is not given.
pub const LIST_LIMIT_DEFAULT: u64 = 100;
/// Most streams one listing page returns, whatever `limit` asks for.
pub const LIST_LIMIT_CAP: u64 = 1000;

/// A stream's durable state (the `StreamState` schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamInfo {
    pub stream: String,
    /// 0 until trimming exists.
    pub first_seq: u64,
    pub next_seq: u64,
    pub highest_token: u64,
    /// Timestamp of the last record; 0 when the stream has none.
    pub last_timestamp_ms: u64,
}

impl From<StreamState> for StreamInfo {
    fn from(s: StreamState) -> Self {
        StreamInfo {
            stream: s.stream,
            first_seq: s.first_seq,
            next_seq: s.next_seq,
            highest_token: s.highest_token,
            last_timestamp_ms: s.last_timestamp_ms,
        }
    }
}

/// One page of streams, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamList {
    pub streams: Vec<StreamInfo>,
    /// Pass as `start_after` to get the next page; `null` on the last one.
    #[serde(default)]
    pub next_start_after: Option<String>,
}

/// `POST /v1/streams/{stream}/fence`. Only serialised, like
/// [`crate::AppendRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FenceRequest {
    pub fencing_token: u64,
}
