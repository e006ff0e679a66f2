//! A snapshot of one stream's durable state, as every write that changes
//! the stream and every state lookup answers it.

/// A snapshot of a stream's durable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamState {
    /// The stream's name.
    pub stream: String,
    /// The first readable seq: records below it were trimmed.
    pub first_seq: u64,
    /// The seq the next record will get: every seq below it is durable.
    pub next_seq: u64,
    /// The highest fencing token ever accepted, durably.
    pub highest_token: u64,
    /// Timestamp of the last record; 0 when the stream has none.
    pub last_timestamp_ms: u64,
    /// No more appends, fences or trims are accepted.
    pub sealed: bool,
    /// A tombstone: the records are gone; the token stays forever.
    pub deleted: bool,
    /// Retention by age in force (the stream's, or the server's default);
    /// `None` is unlimited.
    pub retention_age_s: Option<u64>,
    /// Retention by size in force; `None` is unlimited.
    pub retention_bytes: Option<u64>,
    /// Retention never trims past a cursor.
    pub retention_respect_cursors: bool,
    /// Bytes on disk of the stream's readable records (whole frames). In
    /// a write's answer: as of its group's publication, so it counts what
    /// later writes of the same group added.
    pub bytes: u64,
}
