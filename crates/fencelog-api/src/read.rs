//! `GET /v1/streams/{stream}/records`: the page a read answers and the
//! limits on what one read may ask for.

use crate::record::RecordJson;
use serde::{Deserialize, Serialize};

/// Records per read when `count` is not given.
pub const READ_COUNT_DEFAULT: u64 = 1000;
/// Most records one read returns, whatever `count` asks for.
pub const READ_COUNT_CAP: u64 = 10_000;
/// Body bytes per read when `bytes` is not given (1 MiB).
pub const READ_BYTES_DEFAULT: u64 = 1 << 20;
/// Most body bytes one read returns (8 MiB), except that the first record
/// is always returned whole so a reader can make progress.
pub const READ_BYTES_CAP: u64 = 8 << 20;
/// Longest a long-poll waits (60 s); `wait_ms` defaults to 0 (no wait).
pub const WAIT_MS_CAP: u64 = 60_000;

/// Durable records from `start_seq` on, and the stream's `next_seq` at the
/// time of the read (the `ReadResult` schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadPage<'a> {
    pub records: Vec<RecordJson<'a>>,
    pub next_seq: u64,
    /// Present (and true) when the stream is sealed: nothing will follow
    /// `next_seq`, so a long-poll at the tail returns at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sealed: bool,
}
