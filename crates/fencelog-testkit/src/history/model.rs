//! What the history checker reads: the calls clients made and what they
//! were told ([`Op`], recorded into a [`History`]), and each replica's
//! final log of a stream ([`FinalLog`]). Plain data, below the rules that
//! judge it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Histories are bounded so a runaway test fails instead of eating memory.
pub const OPS_MAX: usize = 1_000_000;

/// One record as a reader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub seq: u64,
    pub token: u64,
    pub body: Vec<u8>,
}

/// What a client asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Append {
        stream: String,
        token: u64,
        bodies: Vec<Vec<u8>>,
    },
    Fence {
        stream: String,
        token: u64,
    },
    /// Records below `trim_seq` become unreadable.
    Trim {
        stream: String,
        token: u64,
        trim_seq: u64,
    },
    Seal {
        stream: String,
        token: u64,
    },
    Delete {
        stream: String,
        token: u64,
    },
    Read {
        stream: String,
        start: u64,
    },
    /// A retention setting (`PUT .../config` with an age or a byte limit):
    /// once acknowledged, the store may trim the stream's front by itself.
    Retention {
        stream: String,
    },
}

impl Call {
    pub fn stream(&self) -> &str {
        match self {
            Call::Append { stream, .. }
            | Call::Fence { stream, .. }
            | Call::Trim { stream, .. }
            | Call::Seal { stream, .. }
            | Call::Delete { stream, .. }
            | Call::Read { stream, .. }
            | Call::Retention { stream } => stream,
        }
    }

    pub(crate) fn token(&self) -> Option<u64> {
        match self {
            Call::Append { token, .. }
            | Call::Fence { token, .. }
            | Call::Trim { token, .. }
            | Call::Seal { token, .. }
            | Call::Delete { token, .. } => Some(*token),
            Call::Read { .. } | Call::Retention { .. } => None,
        }
    }
}

/// What a client was told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// 200 to an append.
    Appended { first_seq: u64 },
    /// 200 to a fence, trim, seal or delete, with the stream's `next_seq`.
    Fenced { next_seq: u64 },
    /// 409 `stale_fencing_token`, citing the stream's highest token.
    Stale { highest: u64 },
    /// Any other definite refusal (4xx): nothing was applied.
    Refused(String),
    /// 503 `outcome_unknown`, a timeout, a broken connection: may or may
    /// not have applied.
    Unknown(String),
    /// 200 to a read.
    Read { records: Vec<Rec>, next_seq: u64 },
    /// A read that failed (a 503 without a quorum, a refused connection).
    ReadFailed(String),
}

/// One operation: logical ticks from the history's clock, so "sent after
/// that answer came back" is exact without reading a wall clock.
#[derive(Debug, Clone)]
pub struct Op {
    pub call: Call,
    pub outcome: Outcome,
    pub invoked: u64,
    pub completed: u64,
}

/// A history shared by concurrent clients.
#[derive(Debug, Default)]
pub struct History {
    clock: AtomicU64,
    ops: Mutex<Vec<Op>>,
}

impl History {
    /// The tick to pass to [`History::complete`]; take it before sending.
    pub fn invoke(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }

    /// Records an answer, taking the completion tick now.
    pub fn complete(&self, invoked: u64, call: Call, outcome: Outcome) {
        let completed = self.clock.fetch_add(1, Ordering::SeqCst);
        let mut ops = self.ops.lock().unwrap();
        assert!(ops.len() < OPS_MAX, "history over {OPS_MAX} ops");
        ops.push(Op {
            call,
            outcome,
            invoked,
            completed,
        });
    }

    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap().clone()
    }
}

/// One replica's final state of a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FinalLog {
    pub next_seq: u64,
    pub highest_token: u64,
    /// From the stream's first readable seq on.
    pub records: Vec<Rec>,
    pub sealed: bool,
    /// A tombstone: no records, and its token is not readable (it answers
    /// 404), so `highest_token` is 0.
    pub deleted: bool,
}

/// Every stream of one replica.
pub type Replica = BTreeMap<String, FinalLog>;
