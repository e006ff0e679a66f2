//! Idempotent producers, fence history, cursors and batches on the wire:
//! an idempotent producer's last applied append
//! (`GET /v1/streams/{stream}/producers/{id}`), the fence history
//! (`GET .../fences`), fenced cursors (`PUT`/`GET .../cursors/{name}`,
//! `GET .../cursors`) and multi-stream batches (`POST /v1/batch`).

use crate::record::BodyJson;
use fencelog_types::{CursorEntry, FenceEvent, ProducerEntry};
use serde::{Deserialize, Serialize};

/// Fence history entries one answer returns when `limit` is not given
/// (and the most a stream keeps).
pub const FENCES_LIMIT_DEFAULT: u64 = 64;

/// "Did my write land?": a producer's last applied append on a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerInfo {
    pub producer_id: String,
    pub producer_seq: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    pub fencing_token: u64,
    pub timestamp_ms: u64,
}

impl From<ProducerEntry> for ProducerInfo {
    fn from(p: ProducerEntry) -> Self {
        ProducerInfo {
            producer_id: p.id,
            producer_seq: p.producer_seq,
            first_seq: p.first_seq,
            last_seq: p.last_seq,
            fencing_token: p.token,
            timestamp_ms: p.timestamp_ms,
        }
    }
}

/// One token that took effect on a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceJson {
    pub fencing_token: u64,
    /// The stream's `next_seq` when it took effect.
    pub first_seq: u64,
    pub timestamp_ms: u64,
    /// `append`, `fence`, `trim`, `seal`, `delete` or `config`.
    pub by: String,
}

impl From<FenceEvent> for FenceJson {
    fn from(e: FenceEvent) -> Self {
        FenceJson {
            fencing_token: e.token,
            first_seq: e.first_seq,
            timestamp_ms: e.timestamp_ms,
            by: e.by.as_str().to_string(),
        }
    }
}

/// `GET /v1/streams/{stream}/fences`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceList {
    pub stream: String,
    pub fences: Vec<FenceJson>,
}

/// A named, fenced consumer position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CursorInfo {
    pub stream: String,
    pub name: String,
    pub fencing_token: u64,
    /// The next seq to consume.
    pub seq: u64,
    pub timestamp_ms: u64,
}

impl CursorInfo {
    pub fn new(stream: &str, c: CursorEntry) -> Self {
        CursorInfo {
            stream: stream.to_string(),
            name: c.name,
            fencing_token: c.token,
            seq: c.seq,
            timestamp_ms: c.timestamp_ms,
        }
    }
}

/// `GET /v1/streams/{stream}/cursors`, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CursorList {
    pub stream: String,
    pub cursors: Vec<CursorInfo>,
}

/// `PUT /v1/streams/{stream}/cursors/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CursorRequest {
    pub fencing_token: u64,
    pub seq: u64,
}

/// One operation of `POST /v1/batch`: an append (`records`, optional
/// `match_seq_num`) or a fence (`"fence": true`), never both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchOpRequest<'a> {
    pub stream: String,
    pub fencing_token: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<Vec<BodyJson<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_seq_num: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fence: bool,
}

/// `POST /v1/batch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchRequest<'a> {
    pub ops: Vec<BatchOpRequest<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_after_ms: Option<u64>,
}
