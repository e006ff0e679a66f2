//! What a write is: [`WriteOp`], the one type a write has from the front
//! that parsed it to the writer's plan, with the values it carries
//! ([`AppendOptions`], a batch's [`BatchOp`]s) and what an accepted one
//! answers ([`Applied`]). Plain data: the checks are `checks.rs`'s, the
//! request the writer queues is `writer/request.rs`'s.

use bytes::Bytes;
use fencelog_types::{Ack, BatchAck, CursorEntry, Header, StreamConfig, StreamState};

/// An idempotent producer's identity on an append: its id and
/// its own sequence number for this append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerSeq {
    /// 1..=64 bytes of `[A-Za-z0-9._:-]`.
    pub id: String,
    /// Continues the producer's last applied seq on the stream by one; a
    /// producer the stream does not know may start anywhere.
    pub seq: u64,
}

/// What an append may carry besides its token and records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppendOptions {
    /// Append only if the stream's `next_seq` equals it.
    pub match_seq_num: Option<u64>,
    /// An idempotent producer's id and seq: a retry of its last applied
    /// append is answered with the original ack and writes nothing.
    pub producer: Option<ProducerSeq>,
    /// Accept only if the writer's timestamp for the batch is at most this
    /// (Unix ms, the writer's clock).
    pub not_after_ms: Option<u64>,
}

/// One operation of a multi-stream batch ([`crate::Engine::batch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOp {
    /// The stream it changes.
    pub stream: String,
    /// The token it carries, checked as a single operation's would be.
    pub fencing_token: u64,
    /// What it does.
    pub action: BatchAction,
}

/// What one batch operation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchAction {
    /// Append these records (`match_seq_num` as for a single append).
    Append {
        /// At least one record, within the single append's limits.
        records: Vec<Bytes>,
        /// Append only if the stream's `next_seq` (after the batch's
        /// earlier operations) equals it.
        match_seq_num: Option<u64>,
    },
    /// Fence the stream (creating it if need be).
    Fence,
}

/// A write, as every front hands it to the engine: a single node's HTTP
/// routes and append sessions ([`crate::Engine::write`]), and a cluster's
/// Raft entries ([`crate::Engine::apply_entries`]), which carry the op the
/// leader's route made. [`crate::Engine::check_write`] is every check it
/// gets before the writer; apply re-checks only the format's own caps (the
/// same on every node) and the fencing rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    /// An append, like [`crate::Engine::append`].
    Append {
        /// The stream.
        stream: String,
        /// The writer's fencing token.
        token: u64,
        /// The records, 1..=4096.
        records: Vec<Bytes>,
        /// Empty when no record has headers; else one list per record,
        /// as [`crate::Engine::append_records`] takes them.
        headers: Vec<Vec<Header>>,
        /// `match_seq_num`, the idempotent producer and the deadline. In a
        /// Raft entry the deadline is compared with the entry's timestamp
        /// (the leader's, clamped per stream), so every replica decides it
        /// the same.
        options: AppendOptions,
    },
    /// A fence, like [`crate::Engine::fence`].
    Fence {
        /// The stream.
        stream: String,
        /// The new token.
        token: u64,
        /// Refuse the fence if the entry's timestamp is past it.
        not_after_ms: Option<u64>,
    },
    /// A trim, like [`crate::Engine::trim_with`].
    Trim {
        /// The stream.
        stream: String,
        /// The writer's fencing token.
        token: u64,
        /// Records below `min(trim_seq, next_seq)` become unreadable.
        trim_seq: u64,
        /// A deadline, as for a fence.
        not_after_ms: Option<u64>,
    },
    /// A seal, like [`crate::Engine::seal_with`].
    Seal {
        /// The stream.
        stream: String,
        /// The writer's fencing token.
        token: u64,
        /// A deadline, as for a fence.
        not_after_ms: Option<u64>,
    },
    /// A delete, like [`crate::Engine::delete`].
    Delete {
        /// The stream.
        stream: String,
        /// The writer's fencing token.
        token: u64,
    },
    /// New retention settings, like [`crate::Engine::set_config`]
    /// (`token: None` is an operator's change).
    Config {
        /// The stream.
        stream: String,
        /// Fences the change when given.
        token: Option<u64>,
        /// The settings.
        config: StreamConfig,
    },
    /// A cursor commit, like [`crate::Engine::commit_cursor`].
    Cursor {
        /// The stream.
        stream: String,
        /// The cursor's name.
        name: String,
        /// The cursor's own fencing token.
        token: u64,
        /// The seq it moves to.
        seq: u64,
    },
    /// A multi-stream batch, like [`crate::Engine::batch`]: all of it or
    /// none, every stream in this engine (the cluster refuses a batch
    /// across shards before proposing).
    Batch {
        /// 1..=64 ops.
        ops: Vec<BatchOp>,
        /// Shared by every op, compared with the entry's timestamp.
        not_after_ms: Option<u64>,
    },
    /// A retention trim, as a single node's reclaimer makes it: the
    /// stream's front moves to `min(first_seq, next_seq)` under its own
    /// token, if that is forward and the stream is no tombstone. The
    /// shard leader chose `first_seq` from its own clock and applied
    /// state ([`crate::Engine::retention_due`]); apply reads no clock.
    Retain {
        /// The stream.
        stream: String,
        /// The front the leader's retention wants.
        first_seq: u64,
    },
}

impl WriteOp {
    /// The stream a one-stream op changes, to take it out; `None` for a
    /// batch, whose streams are its ops'.
    pub(crate) fn stream_mut(&mut self) -> Option<&mut String> {
        Some(match self {
            WriteOp::Append { stream, .. }
            | WriteOp::Fence { stream, .. }
            | WriteOp::Trim { stream, .. }
            | WriteOp::Seal { stream, .. }
            | WriteOp::Delete { stream, .. }
            | WriteOp::Config { stream, .. }
            | WriteOp::Cursor { stream, .. }
            | WriteOp::Retain { stream, .. } => stream,
            WriteOp::Batch { .. } => return None,
        })
    }

    /// The stream the op changes.
    pub fn stream(&self) -> &str {
        match self {
            WriteOp::Append { stream, .. }
            | WriteOp::Fence { stream, .. }
            | WriteOp::Trim { stream, .. }
            | WriteOp::Seal { stream, .. }
            | WriteOp::Delete { stream, .. }
            | WriteOp::Config { stream, .. }
            | WriteOp::Cursor { stream, .. }
            | WriteOp::Retain { stream, .. } => stream,
            // Checked non-empty in apply before anything asks.
            WriteOp::Batch { ops, .. } => ops.first().map_or("", |o| o.stream.as_str()),
        }
    }
}

/// What an applied op did: an append's ack or a state change's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// An accepted append.
    Appended(Ack),
    /// An accepted fence, trim, seal, delete or config: the stream's
    /// state after it.
    State(StreamState),
    /// An accepted cursor commit.
    Cursor(CursorEntry),
    /// An accepted multi-stream batch: one ack per op.
    Batch(Vec<BatchAck>),
}

impl Applied {
    /// An append's ack; the writer answers an append with nothing else.
    pub(crate) fn into_ack(self) -> Ack {
        match self {
            Applied::Appended(ack) => ack,
            other => unreachable!("an append answered {other:?}"),
        }
    }

    /// A fence's, trim's, seal's, delete's or config's state.
    pub(crate) fn into_state(self) -> StreamState {
        match self {
            Applied::State(state) => state,
            other => unreachable!("a state change answered {other:?}"),
        }
    }

    /// A cursor commit's cursor.
    pub(crate) fn into_cursor(self) -> CursorEntry {
        match self {
            Applied::Cursor(cursor) => cursor,
            other => unreachable!("a cursor commit answered {other:?}"),
        }
    }

    /// A batch's acks.
    pub(crate) fn into_batch(self) -> Vec<BatchAck> {
        match self {
            Applied::Batch(acks) => acks,
            other => unreachable!("a batch answered {other:?}"),
        }
    }
}
