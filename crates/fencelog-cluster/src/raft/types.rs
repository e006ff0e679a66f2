//! The Raft type configuration and what an entry carries. All openraft
//! type names the rest of the crate uses are aliased here, so a port to
//! openraft 0.10 starts in this file.
//!
//! One entry is a *batch* of ops: openraft 0.9 appends and fsyncs one
//! `client_write` at a time, so the proposer puts every waiting op into one
//! entry. The leader's clock reading travels in the entry; apply never
//! reads a clock.

pub use super::op_codec::CursorView;
use crate::ids::NodeId;
use crate::snapshot::dir::ShardSnapshot;
use fencelog_engine::{Ack, Applied, BatchAck, StreamState, WriteError, WriteOp};
use serde::{Deserialize, Serialize};

/// Every stream `op` changes (a batch's may be several).
pub fn streams_of(op: &WriteOp) -> Vec<&str> {
    match op {
        WriteOp::Batch { ops, .. } => ops.iter().map(|o| o.stream.as_str()).collect(),
        op => vec![op.stream()],
    }
}

/// The entry payload (`C::D`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// Unix ms on the leader when it proposed; apply clamps it per stream
    /// so timestamps never decrease.
    pub leader_ts_ms: u64,
    /// At least one op, each as the leader's route made it (validated),
    /// written by the op codec (`op_codec`), as a forwarded
    /// [`super::WireOp`] is.
    #[serde(with = "super::op_codec::ops")]
    pub ops: Vec<WriteOp>,
}

/// A stream's state as an apply result carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateView {
    /// The stream.
    pub stream: String,
    /// First readable seq.
    pub first_seq: u64,
    /// Next seq.
    pub next_seq: u64,
    /// Highest accepted token.
    pub highest_token: u64,
    /// Timestamp of the last write.
    pub last_timestamp_ms: u64,
    /// Sealed.
    pub sealed: bool,
    /// A tombstone.
    pub deleted: bool,
    /// Retention by age in force on the leader's shard engine.
    pub retention_age_s: Option<u64>,
    /// Retention by size in force.
    pub retention_bytes: Option<u64>,
    /// Retention never trims past a cursor.
    pub retention_respect_cursors: bool,
    /// Bytes of the stream's readable records on the leader.
    pub bytes: u64,
}

impl StateView {
    pub(crate) fn of(s: &StreamState) -> Self {
        StateView {
            stream: s.stream.clone(),
            first_seq: s.first_seq,
            next_seq: s.next_seq,
            highest_token: s.highest_token,
            last_timestamp_ms: s.last_timestamp_ms,
            sealed: s.sealed,
            deleted: s.deleted,
            retention_age_s: s.retention_age_s,
            retention_bytes: s.retention_bytes,
            retention_respect_cursors: s.retention_respect_cursors,
            bytes: s.bytes,
        }
    }

    /// The engine's stream state, as the leader's apply answered it.
    pub fn to_state(&self) -> StreamState {
        StreamState {
            stream: self.stream.clone(),
            first_seq: self.first_seq,
            next_seq: self.next_seq,
            highest_token: self.highest_token,
            last_timestamp_ms: self.last_timestamp_ms,
            sealed: self.sealed,
            deleted: self.deleted,
            retention_age_s: self.retention_age_s,
            retention_bytes: self.retention_bytes,
            retention_respect_cursors: self.retention_respect_cursors,
            bytes: self.bytes,
        }
    }
}

/// What one op did, decided deterministically in apply on every replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpResult {
    /// An accepted append.
    Appended {
        /// Seq of the first record.
        first_seq: u64,
        /// Seq of the last record.
        last_seq: u64,
        /// The stream's next seq after it.
        next_seq: u64,
        /// The token it was accepted with.
        token: u64,
        /// Its records' timestamp.
        ts_ms: u64,
        /// An idempotent producer's retry of its last applied append: the
        /// original ack, nothing written.
        duplicate: bool,
    },
    /// An accepted fence, trim, seal or delete: the state after it.
    Fenced(StateView),
    /// A committed higher token explains the refusal.
    Stale {
        /// The op's token.
        presented: u64,
        /// The stream's highest token.
        highest: u64,
        /// The stream's next seq.
        next_seq: u64,
    },
    /// `match_seq` was not the stream's next seq.
    SeqMismatch {
        /// The op's `match_seq`.
        expected: u64,
        /// The stream's next seq.
        next_seq: u64,
    },
    /// The stream is sealed.
    Sealed(StateView),
    /// Token 0.
    ZeroToken,
    /// Refused by the format's own caps (name, record count): a message.
    Invalid(String),
    /// A malformed idempotent producer's id.
    BadInput(String),
    /// An unknown producer below the stream's producer token floor.
    ProducerFenced {
        /// The floor.
        floor: u64,
    },
    /// A producer seq below its last applied one.
    ProducerSeqStale {
        /// The producer's last applied seq.
        last: u64,
    },
    /// A producer seq that skips ahead.
    ProducerSeqGap {
        /// The seq expected next.
        expected: u64,
    },
    /// The entry's timestamp is past the op's `not_after_ms`.
    DeadlineExceeded {
        /// The timestamp apply decided at (the leader's, clamped).
        writer_ms: u64,
    },
    /// A trim or seal of a stream that does not exist (or a tombstone).
    NotFound,
    /// An accepted cursor commit.
    Cursor(CursorView),
    /// A cursor commit past the stream's next seq.
    CursorOutOfRange {
        /// The commit's seq.
        seq: u64,
        /// The stream's next seq.
        next_seq: u64,
    },
    /// An accepted batch: each op's `Appended` or `Fenced`.
    Batch(Vec<OpResult>),
    /// A refused batch (nothing applied): every op's outcome.
    BatchRefused(Vec<OpResult>),
    /// Refused by the leader before proposing: the append would take its
    /// shard engines past the node's disk budget ([`crate::disk_budget`]).
    /// Last, so the variants before it keep their numbers on the wire.
    InsufficientStorage {
        /// The budget.
        limit: u64,
        /// The leader's shard engines' bytes.
        used: u64,
    },
}

impl OpResult {
    /// What the engine's apply answered for one op. `None` for an engine
    /// failure, which is no result at all (the group stops).
    pub fn of(r: &Result<Applied, WriteError>) -> Option<OpResult> {
        Some(match r {
            Ok(Applied::Appended(a)) => OpResult::Appended {
                first_seq: a.first_seq,
                last_seq: a.last_seq,
                next_seq: a.next_seq,
                token: a.fencing_token,
                ts_ms: a.timestamp_ms,
                duplicate: a.duplicate,
            },
            Ok(Applied::State(s)) => OpResult::Fenced(StateView::of(s)),
            Ok(Applied::Cursor(c)) => OpResult::Cursor(CursorView::of(c)),
            Ok(Applied::Batch(acks)) => OpResult::Batch(acks.iter().map(batch_ack).collect()),
            Err(WriteError::BatchRefused(outcomes)) => {
                let mut out = Vec::with_capacity(outcomes.len());
                for o in outcomes {
                    out.push(match o {
                        Ok(a) => batch_ack(a),
                        Err(e) => OpResult::of(&Err(e.clone()))?,
                    });
                }
                OpResult::BatchRefused(out)
            }
            Err(WriteError::CursorOutOfRange { seq, next_seq }) => OpResult::CursorOutOfRange {
                seq: *seq,
                next_seq: *next_seq,
            },
            Err(WriteError::StaleToken {
                presented,
                highest,
                next_seq,
            }) => OpResult::Stale {
                presented: *presented,
                highest: *highest,
                next_seq: *next_seq,
            },
            Err(WriteError::SeqMismatch { expected, next_seq }) => OpResult::SeqMismatch {
                expected: *expected,
                next_seq: *next_seq,
            },
            Err(WriteError::StreamSealed(s)) => OpResult::Sealed(StateView::of(s)),
            Err(WriteError::ZeroToken) => OpResult::ZeroToken,
            Err(WriteError::NotFound) => OpResult::NotFound,
            Err(WriteError::BadInput(m)) => OpResult::BadInput(m.clone()),
            Err(WriteError::ProducerFenced { floor }) => OpResult::ProducerFenced { floor: *floor },
            Err(WriteError::ProducerSeqStale { last }) => {
                OpResult::ProducerSeqStale { last: *last }
            }
            Err(WriteError::ProducerSeqGap { expected }) => OpResult::ProducerSeqGap {
                expected: *expected,
            },
            Err(WriteError::DeadlineExceeded { writer_ms }) => OpResult::DeadlineExceeded {
                writer_ms: *writer_ms,
            },
            Err(WriteError::InsufficientStorage { limit, used }) => OpResult::InsufficientStorage {
                limit: *limit,
                used: *used,
            },
            Err(
                WriteError::StorageFailed(_) | WriteError::Poisoned(_) | WriteError::ShuttingDown,
            ) => return None,
            Err(e) => OpResult::Invalid(e.to_string()),
        })
    }

    /// The answer as the engine's types: an append's ack, a fence's state,
    /// or the refusal.
    pub fn to_engine(&self) -> Result<Applied, WriteError> {
        match self {
            OpResult::Appended {
                first_seq,
                last_seq,
                next_seq,
                token,
                ts_ms,
                duplicate,
            } => Ok(Applied::Appended(Ack {
                first_seq: *first_seq,
                last_seq: *last_seq,
                next_seq: *next_seq,
                fencing_token: *token,
                timestamp_ms: *ts_ms,
                duplicate: *duplicate,
            })),
            OpResult::Fenced(s) => Ok(Applied::State(s.to_state())),
            OpResult::Stale {
                presented,
                highest,
                next_seq,
            } => Err(WriteError::StaleToken {
                presented: *presented,
                highest: *highest,
                next_seq: *next_seq,
            }),
            OpResult::SeqMismatch { expected, next_seq } => Err(WriteError::SeqMismatch {
                expected: *expected,
                next_seq: *next_seq,
            }),
            OpResult::Sealed(s) => Err(WriteError::StreamSealed(Box::new(s.to_state()))),
            OpResult::ZeroToken => Err(WriteError::ZeroToken),
            OpResult::NotFound => Err(WriteError::NotFound),
            OpResult::Invalid(m) => Err(WriteError::BadConfig(m.clone())),
            OpResult::BadInput(m) => Err(WriteError::BadInput(m.clone())),
            OpResult::ProducerFenced { floor } => Err(WriteError::ProducerFenced { floor: *floor }),
            OpResult::ProducerSeqStale { last } => {
                Err(WriteError::ProducerSeqStale { last: *last })
            }
            OpResult::ProducerSeqGap { expected } => Err(WriteError::ProducerSeqGap {
                expected: *expected,
            }),
            OpResult::DeadlineExceeded { writer_ms } => Err(WriteError::DeadlineExceeded {
                writer_ms: *writer_ms,
            }),
            OpResult::Cursor(c) => Ok(Applied::Cursor(c.to_engine())),
            OpResult::CursorOutOfRange { seq, next_seq } => Err(WriteError::CursorOutOfRange {
                seq: *seq,
                next_seq: *next_seq,
            }),
            OpResult::Batch(items) => Ok(Applied::Batch(
                items
                    .iter()
                    .map(|i| i.to_batch_ack())
                    .collect::<Result<_, _>>()?,
            )),
            OpResult::BatchRefused(items) => Err(WriteError::BatchRefused(
                items.iter().map(OpResult::to_batch_ack).collect(),
            )),
            OpResult::InsufficientStorage { limit, used } => Err(WriteError::InsufficientStorage {
                limit: *limit,
                used: *used,
            }),
        }
    }

    /// One op of a batch: an append's ack, a fence's state, or its refusal.
    fn to_batch_ack(&self) -> Result<BatchAck, WriteError> {
        match self.to_engine()? {
            Applied::Appended(a) => Ok(BatchAck::Append(a)),
            Applied::State(s) => Ok(BatchAck::Fence(s)),
            other => Err(WriteError::BadInput(format!(
                "a batch op answered {other:?}"
            ))),
        }
    }
}

fn batch_ack(a: &BatchAck) -> OpResult {
    let r = match a {
        BatchAck::Append(a) => Ok(Applied::Appended(a.clone())),
        BatchAck::Fence(s) => Ok(Applied::State(s.clone())),
    };
    OpResult::of(&r).expect("an accepted op is a result")
}

/// The apply result (`C::R`): one result per op; empty for blank and
/// membership entries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResult(pub Vec<OpResult>);

openraft::declare_raft_types!(
    /// fencelog's Raft types.
    pub TypeConfig:
        D = Batch,
        R = BatchResult,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = ShardSnapshot,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A shard's Raft instance.
pub type Raft = openraft::Raft<TypeConfig>;
/// A Raft log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// openraft's LogId.
pub type LogId = openraft::LogId<NodeId>;
/// openraft's vote.
pub type Vote = openraft::Vote<NodeId>;
/// A storage error as openraft wants it.
pub type StorageError = openraft::StorageError<NodeId>;
/// A membership with the log id that set it.
pub type StoredMembership = openraft::StoredMembership<NodeId, openraft::BasicNode>;
/// A snapshot's metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, openraft::BasicNode>;
/// A snapshot.
pub type Snapshot = openraft::Snapshot<TypeConfig>;
