//! Error types. Corruption and I/O failure are different things with
//! different policies: corruption found at open refuses to open (or cuts an
//! unsynced tail); an I/O failure while writing poisons the engine.

use crate::name::NameError;
use crate::record::HeaderError;
use fencelog_types::{BatchAck, StreamState};
use std::fmt;
use std::io;
use std::sync::Arc;

/// A write or sync that failed. Once one happens the engine is poisoned:
/// after a failed fsync the kernel may have dropped the dirty pages, so a
/// retry that succeeds proves nothing about the bytes we care about.
///
/// A panic of the writer thread poisons the engine the same way; it is
/// reported as a failure with `op` `"writer panic"`, no file, and the panic
/// message, because its group's outcome is just as unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageFailure {
    /// What failed: `"write"`, `"fdatasync"`, `"create segment"`, ...
    pub op: &'static str,
    /// The segment file it failed on; empty when no file was involved.
    pub file: String,
    /// The I/O error's kind (`StorageFull` for ENOSPC).
    pub kind: io::ErrorKind,
    /// The I/O error's text.
    pub message: String,
}

impl StorageFailure {
    /// The failure of `op` on `file` with `err`.
    pub fn new(op: &'static str, file: &str, err: &io::Error) -> Self {
        StorageFailure {
            op,
            file: file.to_string(),
            kind: err.kind(),
            message: err.to_string(),
        }
    }

    /// ENOSPC and friends: an operator can fix this by freeing space.
    pub fn is_no_space(&self) -> bool {
        matches!(
            self.kind,
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        )
    }
}

impl fmt::Display for StorageFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.file.is_empty() {
            // Not an I/O call on a file: a writer panic.
            return write!(f, "{}: {}", self.op, self.message);
        }
        write!(f, "{} of {} failed: {}", self.op, self.file, self.message)
    }
}

/// Bytes on disk that are not what we wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    /// The segment file holding the damage.
    pub file: String,
    /// Byte offset of the damaged header or frame in that file.
    pub offset: u64,
    /// What is wrong, e.g. a checksum mismatch or a seq gap.
    pub reason: String,
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "corrupt log: {} at offset {}: {}",
            self.file, self.offset, self.reason
        )
    }
}

impl std::error::Error for Corruption {}

/// Why the engine did not open.
#[derive(Debug)]
pub enum OpenError {
    /// A [`crate::Config`] value past its hard cap.
    Config(String),
    /// The log holds damage recovery must not cut; nothing was changed.
    Corrupt(Corruption),
    /// The storage failed while recovery read, cut or resealed it.
    Io {
        /// What recovery was doing.
        context: String,
        /// The I/O error.
        source: io::Error,
    },
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Config(m) => write!(f, "invalid configuration: {m}"),
            OpenError::Corrupt(c) => write!(f, "{c}"),
            OpenError::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for OpenError {}

impl OpenError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        OpenError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Why an append or fence was not acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteError {
    /// The stream name breaks [`crate::validate_stream_name`].
    InvalidStreamName(NameError),
    /// Token 0 is the floor, never a token.
    ZeroToken,
    /// An append without records.
    EmptyBatch,
    /// Retention settings out of range.
    BadConfig(String),
    /// The batch is over a [`crate::Config`] limit.
    TooLarge {
        /// Which limit: `"records in the batch"` or `"bytes in the batch"`.
        what: &'static str,
        /// The limit.
        limit: u64,
        /// What the batch has.
        actual: u64,
    },
    /// The definite "you lost ownership" answer; explained by durable state.
    StaleToken {
        /// The token the request carried.
        presented: u64,
        /// The stream's highest accepted token, which is durable.
        highest: u64,
        /// The stream's `next_seq` at the time.
        next_seq: u64,
    },
    /// `match_seq_num` was given and is not the stream's `next_seq`.
    SeqMismatch {
        /// The `match_seq_num` the request carried.
        expected: u64,
        /// The stream's `next_seq`.
        next_seq: u64,
    },
    /// The stream is sealed: no append, fence or trim is accepted, whatever
    /// the token. Carries the stream's durable state.
    StreamSealed(Box<StreamState>),
    /// A trim, seal, delete or config of a stream that does not exist, or
    /// that is a tombstone.
    NotFound,
    /// The append would take the data directory past
    /// [`crate::Config::data_bytes_max`]. Definitely not applied; the engine
    /// stays healthy, and appends succeed again once trims, retention or
    /// deletes free space.
    InsufficientStorage {
        /// The budget.
        limit: u64,
        /// Bytes the data directory holds.
        used: u64,
    },
    /// The group carrying this request failed to write or sync. Its outcome
    /// is unknown to the client: it was not acknowledged, but torn bytes
    /// may or may not survive a restart. The engine is now poisoned.
    StorageFailed(Arc<StorageFailure>),
    /// An earlier storage failure poisoned the engine; nothing was attempted.
    Poisoned(Arc<StorageFailure>),
    /// Storage refused the group before any of it was written (the next
    /// segment could not be created, e.g. out of file descriptors; the
    /// space ahead could not be zero-filled, e.g. disk full). Nothing
    /// changed and the engine is not poisoned: retrying later is safe.
    NotWritten(Arc<StorageFailure>),
    /// The writer's queue is full; nothing was attempted. Retry shortly.
    Overloaded {
        /// The queue's bound (`Config::queue_depth_max`).
        queue_depth_max: usize,
    },
    /// [`crate::Engine::shutdown`] has begun; nothing was attempted.
    ShuttingDown,
    /// A producer id or cursor name breaks the short-name rule (1..=64
    /// bytes of `[A-Za-z0-9._:-]`), or a batch is malformed.
    BadInput(String),
    /// An idempotent producer the stream does not know, with a token below
    /// the stream's producer token floor: it may be a retry of a producer
    /// the stream has evicted, so it cannot be told apart from a
    /// duplicate. A new token (a new lease) above the floor fixes it.
    ProducerFenced {
        /// The stream's producer token floor.
        floor: u64,
    },
    /// The producer's seq is below its last applied one.
    ProducerSeqStale {
        /// The producer's last applied seq.
        last: u64,
    },
    /// The producer's seq skips ahead of its last applied one + 1.
    ProducerSeqGap {
        /// The seq the stream expects next from this producer.
        expected: u64,
    },
    /// The writer's timestamp for the write is past its `not_after_ms`;
    /// nothing changed.
    DeadlineExceeded {
        /// The writer's time (Unix ms) when it decided.
        writer_ms: u64,
    },
    /// A cursor commit past the stream's `next_seq` (or a new cursor on a
    /// stream that has the most cursors it may keep).
    CursorOutOfRange {
        /// The seq the commit carried.
        seq: u64,
        /// The stream's `next_seq`.
        next_seq: u64,
    },
    /// A multi-stream batch of which at least one operation was refused:
    /// nothing of it was applied. One outcome per operation, in order:
    /// what it would have answered, or why it was refused.
    BatchRefused(Vec<Result<BatchAck, WriteError>>),
    /// A record's headers break [`crate::validate_headers`].
    BadHeaders {
        /// Which record of the batch, from 0.
        record: usize,
        /// What is wrong with its headers.
        error: HeaderError,
    },
}

impl fmt::Display for WriteError {
    #[allow(
        clippy::too_many_lines,
        reason = "one message per variant: a table that reads best whole"
    )]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::InvalidStreamName(e) => write!(f, "invalid stream name: {e}"),
            WriteError::ZeroToken => write!(f, "fencing token must be at least 1"),
            WriteError::EmptyBatch => write!(f, "an append needs at least one record"),
            WriteError::BadConfig(m) => write!(f, "{m}"),
            WriteError::TooLarge {
                what,
                limit,
                actual,
            } => write!(f, "{what} is {actual}, the limit is {limit}"),
            WriteError::StaleToken {
                presented,
                highest,
                next_seq,
            } => write!(
                f,
                "fencing token {presented} is below the stream's highest accepted token {highest} (next_seq {next_seq})"
            ),
            WriteError::SeqMismatch { expected, next_seq } => write!(
                f,
                "match_seq_num {expected} does not equal the stream's next_seq {next_seq}"
            ),
            WriteError::StreamSealed(s) => write!(
                f,
                "stream {} is sealed (next_seq {}, highest token {}): no more appends, fences or trims",
                s.stream, s.next_seq, s.highest_token
            ),
            WriteError::NotFound => write!(f, "stream not found"),
            WriteError::InsufficientStorage { limit, used } => write!(
                f,
                "the data directory holds {used} bytes and its budget is {limit}; trim, delete or set retention to free space"
            ),
            WriteError::StorageFailed(e) => {
                write!(f, "storage failed while writing this request; outcome unknown: {e}")
            }
            WriteError::Poisoned(e) => {
                write!(f, "storage failed earlier and the engine refuses writes until reopened: {e}")
            }
            WriteError::NotWritten(e) => {
                write!(f, "storage refused the write before any of it was written; nothing changed: {e}")
            }
            WriteError::Overloaded { queue_depth_max } => write!(
                f,
                "the writer's queue is full ({queue_depth_max} requests); nothing was done, retry shortly"
            ),
            WriteError::ShuttingDown => write!(f, "the engine is shutting down"),
            WriteError::BadInput(m) => write!(f, "{m}"),
            WriteError::ProducerFenced { floor } => write!(
                f,
                "unknown producer with a fencing token below the stream's producer token floor {floor}: it may retry a write of an evicted producer; use a token of at least {floor}"
            ),
            WriteError::ProducerSeqStale { last } => write!(
                f,
                "producer_seq is below the producer's last applied producer_seq {last}"
            ),
            WriteError::ProducerSeqGap { expected } => write!(
                f,
                "producer_seq skips ahead: the stream expects producer_seq {expected} from this producer"
            ),
            WriteError::DeadlineExceeded { writer_ms } => write!(
                f,
                "the writer's time {writer_ms} ms is past the request's not_after_ms; nothing changed"
            ),
            WriteError::CursorOutOfRange { seq, next_seq } => write!(
                f,
                "cursor seq {seq} is past the stream's next_seq {next_seq}"
            ),
            WriteError::BatchRefused(outcomes) => {
                let refused = outcomes.iter().filter(|o| o.is_err()).count();
                write!(
                    f,
                    "{refused} of the batch's {} operations were refused; none was applied",
                    outcomes.len()
                )
            }
            WriteError::BadHeaders { record, error } => write!(f, "record {record}: {error}"),
        }
    }
}

impl std::error::Error for WriteError {}

/// Why a read failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The stream name breaks [`crate::validate_stream_name`].
    InvalidStreamName(NameError),
    /// No such stream: nothing was ever appended or fenced on it.
    NotFound,
    /// `start_seq` is past the stream's durable tail, or below its first
    /// readable seq (trimmed).
    OutOfRange {
        /// The requested start.
        start_seq: u64,
        /// The stream's first readable seq.
        first_seq: u64,
        /// The stream's durable `next_seq`.
        next_seq: u64,
    },
    /// A durable frame failed its checksum on the way out: never served.
    Corrupt(Corruption),
    /// Reading the segment failed.
    Io(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::InvalidStreamName(e) => write!(f, "invalid stream name: {e}"),
            ReadError::NotFound => write!(f, "stream not found"),
            ReadError::OutOfRange {
                start_seq,
                first_seq,
                next_seq,
            } if start_seq < first_seq => write!(
                f,
                "start_seq {start_seq} is below the stream's first_seq {first_seq}: those records were trimmed"
            ),
            ReadError::OutOfRange {
                start_seq,
                next_seq,
                ..
            } => write!(
                f,
                "start_seq {start_seq} is past the stream's next_seq {next_seq}"
            ),
            ReadError::Corrupt(c) => write!(f, "{c}"),
            ReadError::Io(m) => write!(f, "read failed: {m}"),
        }
    }
}

impl std::error::Error for ReadError {}
