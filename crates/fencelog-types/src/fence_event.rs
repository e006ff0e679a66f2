//! A stream's fence history: each token that took effect on it, when, and
//! what carried it.

/// What made a token take effect on a stream (fence history).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FenceBy {
    /// An append that carried a higher token (or created the stream).
    Append = 1,
    /// A fence.
    Fence = 2,
    /// A trim.
    Trim = 3,
    /// A seal.
    Seal = 4,
    /// A delete (the tombstone).
    Delete = 5,
    /// A change of the stream's retention settings that carried a higher
    /// token.
    Config = 6,
}

impl FenceBy {
    /// The name the HTTP API uses (`by`).
    pub fn as_str(self) -> &'static str {
        match self {
            FenceBy::Append => "append",
            FenceBy::Fence => "fence",
            FenceBy::Trim => "trim",
            FenceBy::Seal => "seal",
            FenceBy::Delete => "delete",
            FenceBy::Config => "config",
        }
    }
}

/// One token that took effect on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceEvent {
    /// The token that took effect.
    pub token: u64,
    /// The stream's `next_seq` when it took effect.
    pub first_seq: u64,
    /// When (the writer's clock, Unix ms).
    pub timestamp_ms: u64,
    /// What carried it.
    pub by: FenceBy,
}
