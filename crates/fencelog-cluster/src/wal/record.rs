//! A WAL record: what the node's WAL writes for a shard's log (entries,
//! a vote, a truncation, a purge, the committed id) and replays into it.

use crate::ids::ShardId;
use crate::raft::types::{Entry, LogId, Vote};
use serde::{Deserialize, Serialize};

/// One WAL record; every record names its shard.
#[derive(Debug, Serialize, Deserialize)]
pub enum WalRecord {
    /// Entries appended at `entries[0].index`, replacing any suffix there.
    Entries {
        /// The shard.
        shard: ShardId,
        /// Consecutive entries.
        entries: Vec<Entry>,
    },
    /// The shard's vote.
    Vote {
        /// The shard.
        shard: ShardId,
        /// The vote.
        vote: Vote,
    },
    /// Entries with index ≥ `since` are gone.
    Truncate {
        /// The shard.
        shard: ShardId,
        /// The first index removed.
        since: u64,
    },
    /// Entries with index ≤ `upto.index` are gone.
    Purge {
        /// The shard.
        shard: ShardId,
        /// The last purged log id.
        upto: LogId,
    },
    /// The committed log id (an optimisation of restarts only).
    Committed {
        /// The shard.
        shard: ShardId,
        /// The committed id.
        committed: Option<LogId>,
    },
}

impl WalRecord {
    pub(crate) fn shard(&self) -> ShardId {
        match self {
            WalRecord::Entries { shard, .. }
            | WalRecord::Vote { shard, .. }
            | WalRecord::Truncate { shard, .. }
            | WalRecord::Purge { shard, .. }
            | WalRecord::Committed { shard, .. } => *shard,
        }
    }
}
