//! openraft's own storage test suite against fencelog's Raft WAL log store
//! and the shard engine state machine, and a reopen of what it wrote.

use fencelog_cluster::raft::{ShardSm, StorageError, TypeConfig};
use fencelog_cluster::wal::{encode_record, LogStore, Wal, WalRecord};
use fencelog_engine::{Config, DirStorage};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::testing::{blank_ent, log_id, StoreBuilder, Suite};
use openraft::{RaftLogReader, Vote};
use std::sync::Arc;
use tempfile::TempDir;

struct Builder;

fn wal_in(dir: &TempDir) -> Arc<Wal> {
    let storage = DirStorage::new(dir.path().join("raft")).unwrap();
    Wal::open(Arc::new(storage)).unwrap()
}

impl StoreBuilder<TypeConfig, LogStore, ShardSm, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, ShardSm), StorageError> {
        let dir = TempDir::new().unwrap();
        let log = LogStore::new(wal_in(&dir), 0);
        let sm = ShardSm::open(&dir.path().join("shard-000"), Config::default()).unwrap();
        Ok((dir, log, sm))
    }
}

/// `Suite::test_all` builds a tokio runtime per case, so it runs from a
/// plain `#[test]`.
#[test]
fn openraft_storage_suite_passes() {
    Suite::test_all(Builder).expect("every case of openraft's storage suite passes");
}

/// The vote, a truncate and a purge survive a reopen of the WAL, for the
/// shard that wrote them only.
#[test]
fn wal_reopen_keeps_vote_truncate_and_purge_per_shard() {
    let dir = TempDir::new().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let wal = wal_in(&dir);
        let mut log = LogStore::new(wal.clone(), 3);
        let mut other = LogStore::new(wal.clone(), 4);
        log.save_vote(&Vote::new(2, 1)).await.unwrap();
        let ents = (1..=10).map(|i| blank_ent::<TypeConfig>(2, 1, i));
        log.blocking_append(ents).await.unwrap();
        other
            .blocking_append((1..=2).map(|i| blank_ent::<TypeConfig>(1, 1, i)))
            .await
            .unwrap();
        log.truncate(log_id(2, 1, 8)).await.unwrap();
        log.purge(log_id(2, 1, 3)).await.unwrap();
        wal.close();
        drop((log, other, wal));
        let wal = wal_in(&dir);
        assert_eq!(wal.cut_bytes, 0);
        let mut log = LogStore::new(wal.clone(), 3);
        assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new(2, 1)));
        let st = log.get_log_state().await.unwrap();
        assert_eq!(st.last_purged_log_id, Some(log_id(2, 1, 3)));
        assert_eq!(st.last_log_id, Some(log_id(2, 1, 7)));
        let got = log.try_get_log_entries(0..100).await.unwrap();
        let idx: Vec<u64> = got.iter().map(|e| e.log_id.index).collect();
        assert_eq!(idx, vec![4, 5, 6, 7]);
        let mut other = LogStore::new(wal, 4);
        let st = other.get_log_state().await.unwrap();
        assert_eq!(
            (st.last_purged_log_id, st.last_log_id),
            (None, Some(log_id(1, 1, 2)))
        );
        assert_eq!(other.read_vote().await.unwrap(), None);
    });
}

/// Purged entries leave the file too: past its threshold the WAL rewrites
/// itself with only the live state, and a reopen finds the vote, the purge
/// point and every unpurged entry of every shard.
#[test]
fn wal_rewrite_drops_purged_entries_and_keeps_the_rest() {
    let dir = TempDir::new().unwrap();
    let storage = || Arc::new(DirStorage::new(dir.path().join("raft")).unwrap());
    let file = dir
        .path()
        .join("raft")
        .join(fencelog_cluster::wal::WAL_FILE_NAME);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let wal = Wal::open_with(storage(), 4 << 10).unwrap();
        let mut log = LogStore::new(wal.clone(), 0);
        let mut other = LogStore::new(wal.clone(), 1);
        log.save_vote(&Vote::new(3, 2)).await.unwrap();
        other
            .blocking_append([blank_ent::<TypeConfig>(1, 1, 1)])
            .await
            .unwrap();
        for i in 1..=2000 {
            log.blocking_append([blank_ent::<TypeConfig>(3, 2, i)])
                .await
                .unwrap();
            if i.is_multiple_of(100) {
                log.purge(log_id(3, 2, i - 10)).await.unwrap();
            }
        }
        // The records' bytes, without the zeros preallocated after them.
        let bytes = std::fs::read(&file).unwrap();
        let len = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        wal.close();
        drop((log, other, wal));
        let raw: usize = (1..=2000)
            .map(|i| {
                let entries = vec![blank_ent::<TypeConfig>(3, 2, i)];
                encode_record(&WalRecord::Entries { shard: 0, entries }).len()
            })
            .sum();
        assert!(
            len < raw / 2,
            "the WAL was never rewritten: {len} of {raw} bytes"
        );
        let wal = Wal::open(storage()).unwrap();
        let mut log = LogStore::new(wal.clone(), 0);
        assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new(3, 2)));
        let st = log.get_log_state().await.unwrap();
        assert_eq!(st.last_purged_log_id, Some(log_id(3, 2, 1990)));
        assert_eq!(st.last_log_id, Some(log_id(3, 2, 2000)));
        let got = log.try_get_log_entries(0..3000).await.unwrap();
        assert!(got.iter().map(|e| e.log_id.index).eq(1991..=2000));
        let mut other = LogStore::new(wal, 1);
        assert_eq!(
            other.get_log_state().await.unwrap().last_log_id,
            Some(log_id(1, 1, 1))
        );
    });
}

/// The WAL keeps zeros written ahead of its last record (so a sync flushes
/// data alone), and a reopen takes them for that, not for a torn tail:
/// nothing is cut and every entry is there. Bytes that are not zeros
/// after the last record are a torn group: cut, and the entries before
/// them kept.
#[test]
fn wal_zeros_ahead_are_kept_and_a_torn_tail_after_them_is_cut() {
    use fencelog_cluster::wal::{PREALLOC_BYTES, WAL_FILE_NAME};
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("raft").join(WAL_FILE_NAME);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let indices = |wal: Arc<Wal>| {
        rt.block_on(async {
            let mut log = LogStore::new(wal, 1);
            let got = log.try_get_log_entries(0..100).await.unwrap();
            got.iter().map(|e| e.log_id.index).collect::<Vec<u64>>()
        })
    };
    let wal = wal_in(&dir);
    rt.block_on(async {
        let mut log = LogStore::new(wal.clone(), 1);
        let ents = (1..=5).map(|i| blank_ent::<TypeConfig>(1, 1, i));
        log.blocking_append(ents).await.unwrap();
    });
    wal.close();
    drop(wal);
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len >= PREALLOC_BYTES, "{len} bytes: no zeros ahead");
    let wal = wal_in(&dir);
    assert_eq!(wal.cut_bytes, 0);
    assert_eq!(indices(wal.clone()), vec![1, 2, 3, 4, 5]);
    wal.close();
    drop(wal);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    // Garbage where the zeros were: the tail of a group never synced.
    let bytes = std::fs::read(&path).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).unwrap() + 1;
    let mut torn = bytes.clone();
    torn[end + 100..end + 110].copy_from_slice(b"torn group");
    std::fs::write(&path, &torn).unwrap();
    let wal = wal_in(&dir);
    assert!(wal.cut_bytes > 0, "a non-zero tail was kept");
    assert_eq!(indices(wal), vec![1, 2, 3, 4, 5]);
}
