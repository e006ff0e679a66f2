//! One shard's log in memory, as the WAL's records leave it: the
//! entries the log store reads, the vote, the purge point and the
//! committed id, and what the entries hold of record bytes.

use super::codec::RECORD_BYTES_MAX;
use super::record::WalRecord;
use crate::ids::ShardId;
use crate::raft::types::{Entry, LogId, Vote};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Entries per record in a rewritten file.
const REWRITE_ENTRIES_PER_RECORD: usize = 256;

/// One shard's log as the WAL's records leave it.
#[derive(Debug, Default)]
pub struct ShardLog {
    /// Entries by index, contiguous from `last_purged + 1`.
    pub entries: BTreeMap<u64, Entry>,
    /// The last durable vote.
    pub vote: Option<Vote>,
    /// The last purged log id.
    pub last_purged: Option<LogId>,
    /// The last committed id saved.
    pub committed: Option<LogId>,
    /// What `entries` hold of record bytes, about (`entry_bytes`): the
    /// memory the snapshot hold weighs (`snapshot_trigger`).
    bytes: u64,
}

/// An entry's record bytes, about: its appends' names, bodies and header
/// names and values, plus a fixed overhead per entry and op.
pub fn entry_bytes(e: &Entry) -> u64 {
    const ENTRY_OVERHEAD_BYTES: u64 = 64;
    match &e.payload {
        openraft::EntryPayload::Normal(batch) => batch
            .ops
            .iter()
            .map(|op| crate::disk_budget::append_bytes(op) + ENTRY_OVERHEAD_BYTES)
            .sum(),
        _ => ENTRY_OVERHEAD_BYTES,
    }
}

/// Locks one shard's log. Its holders only read or update the log in
/// memory; a panic under the lock would be a bug, and later holders stop
/// too rather than use a log it may have left half-changed.
pub fn locked(log: &Mutex<ShardLog>) -> MutexGuard<'_, ShardLog> {
    log.lock()
        .expect("no thread panics while holding a shard's Raft log")
}

fn sum_bytes(entries: &BTreeMap<u64, Entry>) -> u64 {
    entries.values().map(entry_bytes).sum()
}

impl ShardLog {
    /// The effect of one record (in memory; replay and the store share it).
    pub fn apply(&mut self, rec: WalRecord) {
        match rec {
            WalRecord::Entries { entries, .. } => self.append(entries),
            WalRecord::Vote { vote, .. } => self.vote = Some(vote),
            WalRecord::Truncate { since, .. } => self.truncate(since),
            WalRecord::Purge { upto, .. } => self.purge(upto),
            WalRecord::Committed { committed, .. } => self.committed = committed,
        }
    }

    /// Appends entries, dropping any suffix at or after the first.
    pub fn append(&mut self, entries: Vec<Entry>) {
        let Some(first) = entries.first() else { return };
        self.truncate(first.log_id.index);
        for e in entries {
            self.bytes += entry_bytes(&e);
            self.entries.insert(e.log_id.index, e);
        }
    }

    /// Forgets entries with index ≥ `since`.
    pub fn truncate(&mut self, since: u64) {
        let gone = self.entries.split_off(&since);
        self.bytes = self.bytes.saturating_sub(sum_bytes(&gone));
    }

    /// Record bytes the entries hold, about (`entry_bytes`).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Records that rebuild this log from nothing.
    pub(super) fn records(&self, shard: ShardId) -> Vec<WalRecord> {
        let mut out = Vec::new();
        if let Some(vote) = self.vote {
            out.push(WalRecord::Vote { shard, vote });
        }
        if let Some(upto) = self.last_purged {
            out.push(WalRecord::Purge { shard, upto });
        }
        let committed = self.committed;
        out.push(WalRecord::Committed { shard, committed });
        // At most REWRITE_ENTRIES_PER_RECORD entries and half the record
        // bound per record: 256 large entries would be over the bound.
        let mut chunk: Vec<Entry> = Vec::new();
        let mut chunk_bytes = 0usize;
        for e in self.entries.values() {
            let bytes = postcard::experimental::serialized_size(e).unwrap_or(RECORD_BYTES_MAX);
            let full = chunk.len() == REWRITE_ENTRIES_PER_RECORD
                || chunk_bytes + bytes > RECORD_BYTES_MAX / 2;
            if !chunk.is_empty() && full {
                let entries = std::mem::take(&mut chunk);
                out.push(WalRecord::Entries { shard, entries });
                chunk_bytes = 0;
            }
            chunk.push(e.clone());
            chunk_bytes += bytes;
        }
        if !chunk.is_empty() {
            out.push(WalRecord::Entries {
                shard,
                entries: chunk,
            });
        }
        out
    }

    /// Forgets entries up to `upto`.
    pub fn purge(&mut self, upto: LogId) {
        let kept = self.entries.split_off(&(upto.index + 1));
        let gone = std::mem::replace(&mut self.entries, kept);
        self.bytes = self.bytes.saturating_sub(sum_bytes(&gone));
        self.last_purged = Some(upto);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::raft::types::Batch;
    use crate::wal::codec::encode_record;
    use fencelog_engine::WriteOp;
    use openraft::{EntryPayload, LeaderId};

    /// An entry at `index` of one append of one record of `bytes` bytes.
    pub(crate) fn big_entry(index: u64, bytes: usize) -> Entry {
        let op = WriteOp::Append {
            stream: "s".into(),
            token: 1,
            records: vec![vec![7u8; bytes].into()],
            headers: vec![],
            options: Default::default(),
        };
        Entry {
            log_id: LogId::new(LeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(Batch {
                leader_ts_ms: 1,
                ops: vec![op],
            }),
        }
    }

    /// The log's byte count follows appends, a suffix replaced, a
    /// truncate and a purge, and is what its entries hold.
    #[test]
    fn the_byte_count_follows_every_change() {
        let mut log = ShardLog::default();
        let each = entry_bytes(&big_entry(1, 1000));
        assert_eq!(each, 1000 + 1 + 64);
        log.append((1..=5).map(|i| big_entry(i, 1000)).collect());
        assert_eq!(log.bytes(), 5 * each);
        log.append(vec![big_entry(4, 10)]);
        assert_eq!(log.bytes(), 3 * each + entry_bytes(&big_entry(4, 10)));
        log.truncate(3);
        assert_eq!(log.bytes(), 2 * each);
        log.purge(LogId::new(LeaderId::new(1, 1), 1));
        assert_eq!(log.bytes(), each);
        assert_eq!(log.bytes(), sum_bytes(&log.entries));
    }

    /// The rewrite's records stay under the record bound however large
    /// the entries (256 entries of a few MiB each would not), and keep
    /// every entry in order.
    #[test]
    fn rewrite_records_are_bounded_by_bytes_as_well_as_entries() {
        let mut log = ShardLog::default();
        log.append((1..=4).map(|i| big_entry(i, 15 << 20)).collect());
        let recs = log.records(3);
        let mut indices = Vec::new();
        for rec in &recs {
            assert!(encode_record(rec).len() <= RECORD_BYTES_MAX + 4);
            if let WalRecord::Entries { entries, .. } = rec {
                assert!(entries.len() <= 2, "{} entries of 15 MiB", entries.len());
                indices.extend(entries.iter().map(|e| e.log_id.index));
            }
        }
        assert_eq!(indices, (1..=4).collect::<Vec<u64>>());
    }
}
