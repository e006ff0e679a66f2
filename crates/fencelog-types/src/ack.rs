//! What an accepted write answers: an append's [`Ack`], and one
//! [`BatchAck`] per operation of a multi-stream batch.

use crate::stream_state::StreamState;

/// What a successful append returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// Seq of the batch's first record.
    pub first_seq: u64,
    /// Seq of the batch's last record.
    pub last_seq: u64,
    /// The stream's `next_seq` right after the batch.
    pub next_seq: u64,
    /// The token the batch was accepted with.
    pub fencing_token: u64,
    /// The timestamp every record of the batch carries (Unix ms).
    pub timestamp_ms: u64,
    /// An idempotent producer's retry of its last applied append: this is
    /// that append's original ack, and nothing was written.
    pub duplicate: bool,
}

/// One batch operation's acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchAck {
    /// An append's ack.
    Append(Ack),
    /// A fence's: the stream's state after it.
    Fence(StreamState),
}
