//! `RaftLogStorage` for one shard over the node's shared [`Wal`]. Entries
//! are readable as soon as `append` returns (openraft's rule) and count as
//! flushed only when the WAL's sync covered them; a vote is durable before
//! `save_vote` returns, so it is never used before it is durable.

use super::record::WalRecord;
use super::shard_log::{entry_bytes, locked, ShardLog};
use super::writer::{Done, Wal};
use crate::ids::ShardId;
use crate::raft::types::{Entry, LogId, StorageError, TypeConfig, Vote};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, StorageIOError};
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::{Arc, Mutex};

/// Most bytes of records one AppendEntries carries (at least one entry
/// whatever its size), so that a follower catching up on large records
/// gets RPCs that cross and sync well within openraft 0.9's AppendEntries
/// timeout (the heartbeat, 100 ms) and cost both sides bounded memory:
/// without it openraft sends up to 300 entries, ~75 MiB at 256 KiB
/// records, an RPC that can time out again on every attempt.
pub const APPEND_RPC_BYTES_MAX: u64 = 4 << 20;

/// One shard's view of the WAL.
#[derive(Clone)]
pub struct LogStore {
    shard: ShardId,
    wal: Arc<Wal>,
    log: Arc<Mutex<ShardLog>>,
    /// Most record bytes replication reads at once
    /// ([`APPEND_RPC_BYTES_MAX`] unless set).
    append_bytes_max: u64,
}

impl LogStore {
    /// The store of `shard`.
    pub fn new(wal: Arc<Wal>, shard: ShardId) -> Self {
        let log = wal.shard(shard);
        LogStore {
            shard,
            wal,
            log,
            append_bytes_max: APPEND_RPC_BYTES_MAX,
        }
    }

    /// The store with replication's reads bounded at `bytes` of records.
    pub fn with_append_bytes_max(self, bytes: u64) -> Self {
        LogStore {
            append_bytes_max: bytes,
            ..self
        }
    }
}

/// The first entries of `entries` whose record bytes
/// ([`entry_bytes`]) sum to at most `bytes_max`, and always
/// the first (an entry larger than the bound still has to cross).
pub fn within_bytes<'a>(entries: impl Iterator<Item = &'a Entry>, bytes_max: u64) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut total = 0u64;
    for e in entries {
        total = total.saturating_add(entry_bytes(e));
        if !out.is_empty() && total > bytes_max {
            break;
        }
        out.push(e.clone());
    }
    out
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let log = locked(&self.log);
        Ok(log.entries.range(range).map(|(_, e)| e.clone()).collect())
    }

    /// Replication's read: a prefix bounded in bytes (openraft sends what
    /// this returns and continues after it).
    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry>, StorageError> {
        let log = locked(&self.log);
        let entries = log.entries.range(start..end).map(|(_, e)| e);
        Ok(within_bytes(entries, self.append_bytes_max))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let log = locked(&self.log);
        let last = log.entries.values().next_back().map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id: log.last_purged,
            last_log_id: last.or(log.last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let rec = WalRecord::Vote {
            shard: self.shard,
            vote: *vote,
        };
        // Memory first, so it never lags the file (the WAL's rewrite
        // relies on that); the vote is used only after this returns.
        locked(&self.log).vote = Some(*vote);
        self.wal
            .submit_and_wait(&rec)
            .await
            .map_err(|e| StorageIOError::write_vote(&e))?;
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(locked(&self.log).vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // Not waited for: a lost committed id only means a restart waits
        // for the leader's next commit index before applying.
        let rec = WalRecord::Committed {
            shard: self.shard,
            committed,
        };
        self.wal.submit(&rec, Done::Nobody);
        locked(&self.log).committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(locked(&self.log).committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        if let Some(p) = self.wal.poisoned() {
            return Err(StorageIOError::write_logs(&std::io::Error::other(p)).into());
        }
        let entries: Vec<Entry> = entries.into_iter().collect();
        if entries.is_empty() {
            callback.log_io_completed(Ok(()));
            return Ok(());
        }
        locked(&self.log).append(entries.clone());
        let rec = WalRecord::Entries {
            shard: self.shard,
            entries,
        };
        self.wal.submit(&rec, Done::Flushed(callback));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        locked(&self.log).truncate(log_id.index);
        let rec = WalRecord::Truncate {
            shard: self.shard,
            since: log_id.index,
        };
        self.wal
            .submit_and_wait(&rec)
            .await
            .map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let rec = WalRecord::Purge {
            shard: self.shard,
            upto: log_id,
        };
        locked(&self.log).purge(log_id);
        self.wal
            .submit_and_wait(&rec)
            .await
            .map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::shard_log::tests::big_entry as entry;

    fn indexes(v: &[Entry]) -> Vec<u64> {
        v.iter().map(|e| e.log_id.index).collect()
    }

    /// Entries are taken in order while their bytes fit, the one that
    /// would go over is left for the next RPC, and the bound counts
    /// exactly (an exact fit is taken).
    #[test]
    fn a_prefix_is_taken_while_it_fits() {
        let each = entry_bytes(&entry(1, 1000));
        let all: Vec<Entry> = (1..=10).map(|i| entry(i, 1000)).collect();
        assert_eq!(indexes(&within_bytes(all.iter(), 3 * each)), [1, 2, 3]);
        assert_eq!(indexes(&within_bytes(all.iter(), 4 * each - 1)), [1, 2, 3]);
        assert_eq!(indexes(&within_bytes(all.iter(), 100 * each)).len(), 10);
        assert!(within_bytes(std::iter::empty(), 10).is_empty());
    }

    /// An entry larger than the bound goes alone (replication must never
    /// get nothing for a range that holds entries: openraft would spin).
    #[test]
    fn an_entry_over_the_bound_still_goes_alone() {
        let all = [entry(1, 5000), entry(2, 10)];
        assert_eq!(indexes(&within_bytes(all.iter(), 100)), [1]);
        let all = [entry(1, 10), entry(2, 5000)];
        assert_eq!(indexes(&within_bytes(all.iter(), 100)), [1]);
    }
}
