//! The serialisable forms of what a config change, a cursor commit and a
//! multi-stream batch carry in a Raft entry and answer from apply. The
//! engine has no serde (it owns the on-disk format, not the wire), so the
//! cluster mirrors its types here, one conversion each way.

use bytes::Bytes;
use fencelog_engine::{BatchAction, BatchOp, CursorEntry, Retention, StreamConfig};
use serde::{Deserialize, Serialize};

/// [`Retention`]: not set (the server's default), unlimited, or a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RetentionView {
    /// Not set on the stream.
    Default,
    /// Set, without a limit.
    Unlimited,
    /// Set to this limit (seconds or bytes).
    Limit(u64),
}

impl RetentionView {
    fn of(r: Retention) -> Self {
        match r {
            Retention::Default => RetentionView::Default,
            Retention::Unlimited => RetentionView::Unlimited,
            Retention::Limit(n) => RetentionView::Limit(n),
        }
    }

    fn to_engine(self) -> Retention {
        match self {
            RetentionView::Default => Retention::Default,
            RetentionView::Unlimited => Retention::Unlimited,
            RetentionView::Limit(n) => Retention::Limit(n),
        }
    }
}

/// [`StreamConfig`]: a stream's retention settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigView {
    /// Retention by age.
    pub retention_age_s: RetentionView,
    /// Retention by size.
    pub retention_bytes: RetentionView,
    /// Retention never trims past a cursor.
    pub respect_cursors: bool,
}

impl ConfigView {
    /// The settings as a config route parsed them.
    pub fn of(c: &StreamConfig) -> Self {
        ConfigView {
            retention_age_s: RetentionView::of(c.retention_age_s),
            retention_bytes: RetentionView::of(c.retention_bytes),
            respect_cursors: c.respect_cursors,
        }
    }

    /// The settings as the engine applies them.
    pub fn to_engine(&self) -> StreamConfig {
        StreamConfig {
            retention_age_s: self.retention_age_s.to_engine(),
            retention_bytes: self.retention_bytes.to_engine(),
            respect_cursors: self.respect_cursors,
        }
    }
}

/// [`CursorEntry`]: a committed cursor, as apply answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CursorView {
    /// The cursor's name.
    pub name: String,
    /// Its highest token.
    pub token: u64,
    /// The seq it points at.
    pub seq: u64,
    /// When it was committed (the entry's timestamp, clamped).
    pub timestamp_ms: u64,
}

impl CursorView {
    /// The engine's answer, carried.
    pub fn of(c: &CursorEntry) -> Self {
        CursorView {
            name: c.name.clone(),
            token: c.token,
            seq: c.seq,
            timestamp_ms: c.timestamp_ms,
        }
    }

    /// Back to the engine's type, for the single node's response shapes.
    pub fn to_engine(&self) -> CursorEntry {
        CursorEntry {
            name: self.name.clone(),
            token: self.token,
            seq: self.seq,
            timestamp_ms: self.timestamp_ms,
        }
    }
}

/// [`BatchOp`]: one op of a multi-stream batch. `records: None` is a
/// fence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchOpView {
    /// The stream.
    pub stream: String,
    /// Its fencing token.
    pub token: u64,
    /// An append's records; `None` for a fence.
    pub records: Option<Vec<Vec<u8>>>,
    /// An append's `match_seq_num`.
    pub match_seq: Option<u64>,
}

impl BatchOpView {
    /// The op as the batch route parsed it.
    pub fn of(op: &BatchOp) -> Self {
        let (records, match_seq) = match &op.action {
            BatchAction::Append {
                records,
                match_seq_num,
            } => (
                Some(records.iter().map(|r| r.to_vec()).collect()),
                *match_seq_num,
            ),
            BatchAction::Fence => (None, None),
        };
        BatchOpView {
            stream: op.stream.clone(),
            token: op.fencing_token,
            records,
            match_seq,
        }
    }

    /// The op as the engine plans it.
    pub fn to_engine(&self) -> BatchOp {
        let action = match &self.records {
            Some(records) => BatchAction::Append {
                records: records.iter().map(|r| Bytes::from(r.clone())).collect(),
                match_seq_num: self.match_seq,
            },
            None => BatchAction::Fence,
        };
        BatchOp {
            stream: self.stream.clone(),
            fencing_token: self.token,
            action,
        }
    }

    /// Record bytes it carries (the proposer's batch bound).
    pub fn bytes(&self) -> usize {
        self.records
            .iter()
            .flatten()
            .map(|r| r.len() + 4)
            .sum::<usize>()
    }
}
