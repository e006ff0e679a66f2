//! Error types. Corruption and I/O failure are different things with
//! different policies: corruption found at open refuses to open (or cuts an
//! unsynced tail); an I/O failure while writing poisons the engine.

use crate::name::NameError;
use std::fmt;
use std::io;
use std::sync::Arc;

/// A write or sync that failed. Once one happens the engine is poisoned:
/// after a failed fsync the kernel may have dropped the dirty pages, so a
/// retry that succeeds proves nothing about the bytes we care about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageFailure {
    pub op: &'static str,
    pub file: String,
    pub kind: io::ErrorKind,
    pub message: String,
}

impl StorageFailure {
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
        write!(f, "{} of {} failed: {}", self.op, self.file, self.message)
    }
}

/// Bytes on disk that are not what we wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    pub file: String,
    pub offset: u64,
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
    Config(String),
    Corrupt(Corruption),
    Io { context: String, source: io::Error },
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
    InvalidStreamName(NameError),
    /// Token 0 is the floor, never a token.
    ZeroToken,
    EmptyBatch,
    TooLarge {
        what: &'static str,
        limit: u64,
        actual: u64,
    },
    /// The definite "you lost ownership" answer; explained by durable state.
    StaleToken {
        presented: u64,
        highest: u64,
        next_seq: u64,
    },
    SeqMismatch {
        expected: u64,
        next_seq: u64,
    },
    /// The group carrying this request failed to write or sync. Its outcome
    /// is unknown to the client: it was not acknowledged, but torn bytes
    /// may or may not survive a restart. The engine is now poisoned.
    StorageFailed(Arc<StorageFailure>),
    /// An earlier storage failure poisoned the engine; nothing was attempted.
    Poisoned(Arc<StorageFailure>),
    ShuttingDown,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::InvalidStreamName(e) => write!(f, "invalid stream name: {e}"),
            WriteError::ZeroToken => write!(f, "fencing token must be at least 1"),
            WriteError::EmptyBatch => write!(f, "an append needs at least one record"),
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
            WriteError::StorageFailed(e) => {
                write!(f, "storage failed while writing this request; outcome unknown: {e}")
            }
            WriteError::Poisoned(e) => {
                write!(f, "storage failed earlier and the engine refuses writes until reopened: {e}")
            }
            WriteError::ShuttingDown => write!(f, "the engine is shutting down"),
        }
    }
}

impl std::error::Error for WriteError {}

/// Why a read failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    InvalidStreamName(NameError),
    NotFound,
    /// `start_seq` is past the stream's durable tail.
    OutOfRange {
        start_seq: u64,
        next_seq: u64,
    },
    /// A durable frame failed its checksum on the way out: never served.
    Corrupt(Corruption),
    Io(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::InvalidStreamName(e) => write!(f, "invalid stream name: {e}"),
            ReadError::NotFound => write!(f, "stream not found"),
            ReadError::OutOfRange {
                start_seq,
                next_seq,
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
