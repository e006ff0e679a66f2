//! An idempotent producer as a stream remembers it: its last applied
//! append.

/// A producer's last applied append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// The producer's id.
    pub id: String,
    /// Its last applied producer_seq.
    pub producer_seq: u64,
    /// That append's first record's seq.
    pub first_seq: u64,
    /// That append's last record's seq.
    pub last_seq: u64,
    /// The token that append carried.
    pub token: u64,
    /// That append's timestamp (Unix ms).
    pub timestamp_ms: u64,
    /// For LRU eviction: the group that last used it.
    pub last_used_group: u64,
}
