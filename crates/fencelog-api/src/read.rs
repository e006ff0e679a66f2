//! `GET /v1/streams/{stream}/records`: the page a read answers, the query
//! parameters a read takes, and the limits on what one read may ask for.

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

/// The query parameters of a read, by name.
pub mod param {
    /// The first seq to read (default 0).
    pub const START_SEQ: &str = "start_seq";
    /// Start this many records before the tail (0: at the tail).
    pub const TAIL_OFFSET: &str = "tail_offset";
    /// Start at the first record whose timestamp is at or after this (Unix ms).
    pub const START_TIMESTAMP_MS: &str = "start_timestamp_ms";
    /// Return only records whose timestamp is before this (Unix ms);
    /// plain reads only.
    pub const UNTIL_TIMESTAMP_MS: &str = "until_timestamp_ms";
    pub const COUNT: &str = "count";
    pub const BYTES: &str = "bytes";
    /// Long-poll: wait up to this long for a record at the start.
    pub const WAIT_MS: &str = "wait_ms";
    /// Live tail over Server-Sent Events.
    pub const FOLLOW: &str = "follow";
    /// A stream that does not exist yet is waited for instead of being a 404.
    pub const WAIT_FOR_STREAM: &str = "wait_for_stream";
    /// Below the stream's first seq (trimmed), start there instead of 416.
    pub const CLAMP: &str = "clamp";
}

/// Where a read starts: at most one of the three parameters may be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadStart {
    /// `start_seq`.
    Seq(u64),
    /// `tail_offset`: this many records before the tail (never before the
    /// stream's first seq).
    TailOffset(u64),
    /// `start_timestamp_ms`: the first record at or after this time.
    Timestamp(u64),
}

impl Default for ReadStart {
    fn default() -> Self {
        ReadStart::Seq(0)
    }
}

impl ReadStart {
    /// The query parameter carrying this start and its value.
    pub fn query(self) -> (&'static str, u64) {
        match self {
            ReadStart::Seq(s) => (param::START_SEQ, s),
            ReadStart::TailOffset(n) => (param::TAIL_OFFSET, n),
            ReadStart::Timestamp(t) => (param::START_TIMESTAMP_MS, t),
        }
    }
}

/// One page of a read (the `ReadResult` schema): durable records from the
/// start, where the next page starts, and the stream's tail.
///
/// Page with `next_start_seq`, never with `next_seq`: a page is limited by
/// `count` and `bytes`, so the tail is usually far past its last record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadPage<'a> {
    pub records: Vec<RecordJson<'a>>,
    /// The continuation: the seq right after the last record returned, or
    /// the seq the read started at when it returned none.
    pub next_start_seq: u64,
    /// The stream's tail when the read ran: the seq the next appended
    /// record will get. Not where the next page starts.
    pub next_seq: u64,
    /// Present (and true) when the stream is sealed: nothing will follow
    /// `next_seq`, so a long-poll at the tail returns at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sealed: bool,
}

/// Where the page after one read from `start_seq` starts: right after its
/// last record (`last_seq`), or `start_seq` again when it returned none.
/// The one place the continuation is computed (pages written piece by
/// piece use it too).
pub fn next_start_seq(last_seq: Option<u64>, start_seq: u64) -> u64 {
    last_seq.map_or(start_seq, |seq| seq + 1)
}

impl<'a> ReadPage<'a> {
    /// The page of `records` read from `start_seq` of a stream that is not
    /// sealed (set `sealed` for one that is): the one place the
    /// continuation is computed.
    pub fn new(records: Vec<RecordJson<'a>>, start_seq: u64, next_seq: u64) -> Self {
        let next_start_seq = next_start_seq(records.last().map(|r| r.seq), start_seq);
        ReadPage {
            records,
            next_start_seq,
            next_seq,
            sealed: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::BodyJson;

    #[test]
    fn the_continuation_follows_the_last_record_not_the_tail() {
        let r = |seq| RecordJson {
            seq,
            fencing_token: 1,
            timestamp_ms: 2,
            headers: Default::default(),
            body: BodyJson::encode(b"x"),
        };
        let page = ReadPage::new(vec![r(10), r(11)], 10, 2500);
        assert_eq!((page.next_start_seq, page.next_seq), (12, 2500));
        assert_eq!(
            serde_json::to_string(&page).unwrap(),
            r#"{"records":[{"seq":10,"fencing_token":1,"timestamp_ms":2,"body":"x"},{"seq":11,"fencing_token":1,"timestamp_ms":2,"body":"x"}],"next_start_seq":12,"next_seq":2500}"#
        );
        let empty = ReadPage::new(vec![], 7, 9);
        assert_eq!((empty.next_start_seq, empty.next_seq), (7, 9));
    }

    #[test]
    fn a_start_is_one_query_parameter() {
        assert_eq!(ReadStart::default().query(), ("start_seq", 0));
        assert_eq!(ReadStart::TailOffset(5).query(), ("tail_offset", 5));
        assert_eq!(ReadStart::Timestamp(9).query(), ("start_timestamp_ms", 9));
    }
}
