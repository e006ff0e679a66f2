//! `RaftLogStorage` for one shard over the node's shared [`Wal`]. Entries
//! are readable as soon as `append` returns (openraft's rule) and count as
//! flushed only when the WAL's sync covered them; a vote is durable before
//! `save_vote` returns, so it is never used before it is durable.

use crate::types::{Entry, LogId, ShardId, StorageError, TypeConfig, Vote};
use crate::wal::{Done, ShardLog, Wal, WalRecord};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, StorageIOError};
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::{Arc, Mutex};

/// One shard's view of the WAL.
#[derive(Clone)]
pub struct LogStore {
    shard: ShardId,
    wal: Arc<Wal>,
    log: Arc<Mutex<ShardLog>>,
}

impl LogStore {
    /// The store of `shard`.
    pub fn new(wal: Arc<Wal>, shard: ShardId) -> Self {
        let log = wal.shard(shard);
        LogStore { shard, wal, log }
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let log = self.log.lock().unwrap();
        Ok(log.entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let log = self.log.lock().unwrap();
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
        self.log.lock().unwrap().vote = Some(*vote);
        self.wal
            .submit_and_wait(&rec)
            .await
            .map_err(|e| StorageIOError::write_vote(&e))?;
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.log.lock().unwrap().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // Not waited for: a lost committed id only means a restart waits
        // for the leader's next commit index before applying.
        let rec = WalRecord::Committed {
            shard: self.shard,
            committed,
        };
        self.wal.submit(&rec, Done::Nobody);
        self.log.lock().unwrap().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.log.lock().unwrap().committed)
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
        self.log.lock().unwrap().append(entries.clone());
        let rec = WalRecord::Entries {
            shard: self.shard,
            entries,
        };
        self.wal.submit(&rec, Done::Flushed(callback));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.log.lock().unwrap().truncate(log_id.index);
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
        self.log.lock().unwrap().purge(log_id);
        self.wal
            .submit_and_wait(&rec)
            .await
            .map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(())
    }
}
