//! The Raft WAL: one per node, shared by every shard's Raft group, with
//! group commit. A dedicated thread takes every record waiting, writes
//! them as one buffer, calls `sync_data` once, and only then completes
//! each waiter — openraft's `LogFlushed` for appends (so an entry counts
//! towards commit only once it is durable), a oneshot for votes, truncates
//! and purges. A failed write or sync poisons the WAL: it is never retried
//! into a false "durable", and every later record fails.
//!
//! The bytes are [`codec`]'s (version 2): a file header, then
//! numbered groups, one per batch, each under one salted CRC and saying
//! which groups were synced before it was written. Replay applies records
//! in file order; at the first group that does not read whole it cuts the
//! file if that group is the unsynced tail a crash leaves (nobody heard
//! about it), and refuses to open if a later group shows it had been
//! synced ([`WalOpenError::Damaged`]): acknowledged entries and votes are
//! never dropped silently. A version-1 file is read and rewritten as
//! version 2 before the writer starts.
//!
//! The writer keeps [`PREALLOC_BYTES`] of zeros ahead of the last record
//! (written in the same sync as the group that needs them), so a group's
//! `sync_data` flushes data alone, not a file-size change the filesystem
//! must journal as well: measured here with 1 KB writes, 155–170 µs of CPU
//! and 395–573 µs per fdatasync appending against 70–75 µs and
//! 217–335 µs overwriting. Replay stops at a zero header (no record has an
//! empty payload) and keeps an all-zero tail as it is; a tail that is not
//! all zeros after the last valid record is a torn group and is cut.
//!
//! The WAL goes through the engine's [`Storage`] seam, so the simulated
//! disk plugs in. One file: once it has grown past [`REWRITE_BYTES_MIN`]
//! and doubled since, the writer thread rewrites it between two groups
//! with only what every shard's log still holds (votes, purge points,
//! unpurged entries), so purging bounds the disk too.

use super::codec::{self, encode_record, Damage, GROUP_PAYLOAD_BYTES_MAX, WAL_VERSION};
use super::record::WalRecord;
use super::shard_log::{locked, ShardLog};
use crate::ids::ShardId;
use crate::mutation::Switch;
use crate::raft::types::TypeConfig;
use fencelog_engine::{Storage, StorageFile};
use openraft::storage::LogFlushed;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};

/// The WAL's file in its storage.
pub const WAL_FILE_NAME: &str = "raft.wal";
/// The rewrite's temp file; a leftover is removed at open.
pub const WAL_TMP_NAME: &str = "raft.wal.tmp";
/// The file is rewritten without purged entries once it is this long and
/// twice as long as after the last rewrite.
pub const REWRITE_BYTES_MIN: u64 = 64 << 20;
/// Zeros kept written ahead of the last record (see the module comment).
pub const PREALLOC_BYTES: u64 = 4 << 20;
/// Zeros written per call while preallocating.
const ZEROS_BYTES: usize = 64 << 10;
/// The WAL's own locks (its sender, thread, storage and shard map) are
/// held for one take, send or lookup, none of which panics.
const UNPOISONED: &str = "no thread panics while holding a lock of the raft WAL";

/// Who hears that a record is durable.
pub enum Done {
    /// openraft's append callback.
    Flushed(LogFlushed<TypeConfig>),
    /// A waiting store method.
    Oneshot(tokio::sync::oneshot::Sender<io::Result<()>>),
    /// Nobody (the committed id).
    Nobody,
}

impl Done {
    fn complete(self, r: &Result<(), String>) {
        let r = r.clone().map_err(io::Error::other);
        match self {
            Done::Flushed(cb) => cb.log_io_completed(r),
            Done::Oneshot(tx) => drop(tx.send(r)),
            Done::Nobody => {}
        }
    }
}

struct Msg {
    bytes: Vec<u8>,
    done: Done,
    /// A vote record (only the `WalVoteUnsynced` mutation asks).
    vote: bool,
    /// Someone waits for this record to be durable (see [`Writer::commit`]).
    synced: bool,
}

/// The node's Raft WAL.
pub struct Wal {
    tx: Mutex<Option<mpsc::Sender<Msg>>>,
    shards: Shards,
    poisoned: Arc<OnceLock<String>>,
    fsyncs: Arc<AtomicU64>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Holds the directory lock until [`Wal::close`].
    storage: Mutex<Option<Arc<dyn Storage>>>,
    /// Bytes replay cut from the end (a torn last group).
    pub cut_bytes: u64,
}

/// Why the WAL would not open: the disk failed, or replay found damage to
/// what was durable (kept apart: the first may pass, the second needs an
/// operator).
#[derive(Debug)]
pub enum WalOpenError {
    /// An I/O error.
    Io(io::Error),
    /// Damage or an unknown layout ([`Damage`]).
    Damaged(Damage),
}

impl std::fmt::Display for WalOpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalOpenError::Io(e) => write!(f, "raft WAL: {e}"),
            WalOpenError::Damaged(d) => write!(
                f,
                "{d}; the node will not start on it (restore the node from its peers: remove it from the cluster, empty its data directory, add it again)"
            ),
        }
    }
}

impl std::error::Error for WalOpenError {}

impl From<io::Error> for WalOpenError {
    fn from(e: io::Error) -> Self {
        WalOpenError::Io(e)
    }
}

impl From<WalOpenError> for io::Error {
    fn from(e: WalOpenError) -> Self {
        match e {
            WalOpenError::Io(e) => e,
            d @ WalOpenError::Damaged(_) => {
                io::Error::new(io::ErrorKind::InvalidData, d.to_string())
            }
        }
    }
}

/// A salt for a new file (see [`codec`]): not a secret, only unlikely
/// to be in any record body.
fn new_salt() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now())
}

/// Packs record bytes into groups numbered from `seq` (each at most
/// [`GROUP_PAYLOAD_BYTES_MAX`]) appended to `out`; answers the groups
/// written.
fn put_groups<'a>(
    out: &mut Vec<u8>,
    payload: &mut Vec<u8>,
    records: impl IntoIterator<Item = &'a [u8]>,
    (salt, seq, durable_below): (u64, u64, u64),
) -> u64 {
    let mut n = 0;
    payload.clear();
    for rec in records {
        if !payload.is_empty() && payload.len() + rec.len() > GROUP_PAYLOAD_BYTES_MAX {
            codec::put_group(out, salt, seq + n, durable_below, payload);
            payload.clear();
            n += 1;
        }
        payload.extend_from_slice(rec);
    }
    if !payload.is_empty() {
        codec::put_group(out, salt, seq + n, durable_below, payload);
        n += 1;
    }
    n
}

/// A new version-2 file holding `shards`' logs, in place of the WAL file
/// (temp, sync, rename, directory sync), its first group numbered
/// `first_seq`: (file, salt, length, next group's number).
fn write_fresh(
    storage: &dyn Storage,
    shards: &[(ShardId, Arc<Mutex<ShardLog>>)],
    first_seq: u64,
) -> io::Result<(Arc<dyn StorageFile>, u64, u64, u64)> {
    let salt = new_salt();
    let mut recs = Vec::new();
    for (shard, log) in shards {
        let log = locked(log);
        recs.extend(log.records(*shard).iter().map(encode_record));
    }
    let mut bytes = codec::file_header(salt, first_seq).to_vec();
    let groups = put_groups(
        &mut bytes,
        &mut Vec::new(),
        recs.iter().map(Vec::as_slice),
        (salt, first_seq, first_seq),
    );
    let _ = storage.remove(WAL_TMP_NAME);
    let tmp = storage.create(WAL_TMP_NAME)?;
    tmp.write_all_at(&bytes, 0)?;
    tmp.sync_data()?;
    storage.rename(WAL_TMP_NAME, WAL_FILE_NAME)?;
    storage.sync_dir()?;
    Ok((tmp, salt, bytes.len() as u64, first_seq + groups))
}

impl Wal {
    /// Opens (or creates) the WAL in `storage`, replays it, cuts a torn
    /// tail durably (or refuses damage), rewrites a version-1 file as
    /// version 2, and starts the writer thread.
    pub fn open(storage: Arc<dyn Storage>) -> Result<Arc<Wal>, WalOpenError> {
        Self::open_with(storage, REWRITE_BYTES_MIN)
    }

    /// [`Wal::open`] with the rewrite threshold given (tests).
    pub fn open_with(
        storage: Arc<dyn Storage>,
        rewrite_bytes_min: u64,
    ) -> Result<Arc<Wal>, WalOpenError> {
        storage.lock()?;
        match storage.remove(WAL_TMP_NAME) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        let file = match storage.open(WAL_FILE_NAME) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let f = storage.create(WAL_FILE_NAME)?;
                storage.sync_dir()?;
                f
            }
            Err(e) => return Err(e.into()),
        };
        let len = file.len()?;
        let len = usize::try_from(len).map_err(|_| {
            io::Error::other(format!(
                "the raft WAL is {len} bytes, more than memory can hold"
            ))
        })?;
        let mut bytes = vec![0u8; len];
        file.read_exact_at(&mut bytes, 0)?;
        let mutation = crate::mutation::current();
        let cut_damage = mutated!(mutation, WalCutsDamage);
        let mut replayed = codec::replay(&bytes, cut_damage).map_err(WalOpenError::Damaged)?;
        let mut shards: HashMap<ShardId, ShardLog> = HashMap::new();
        for rec in std::mem::take(&mut replayed.records) {
            shards.entry(rec.shard()).or_default().apply(rec);
        }
        let shards: Vec<(ShardId, Arc<Mutex<ShardLog>>)> = shards
            .into_iter()
            .map(|(k, v)| (k, Arc::new(Mutex::new(v))))
            .collect();
        let (at, cut_bytes) = Self::position(storage.as_ref(), (file, &bytes), &replayed, &shards)?;
        let shards = shards.into_iter().collect();
        Ok(Self::start(
            storage,
            at,
            shards,
            cut_bytes,
            (rewrite_bytes_min, mutation),
        )?)
    }

    /// Where the writer starts after replay, and the bytes cut: a version-2
    /// file cut after its valid groups (if its tail is not zeros), its
    /// groups no sync was known to cover written again, and synced; an
    /// empty or version-1 file written afresh as version 2 (version 1's
    /// torn tail, if any, is left behind with the old file).
    fn position(
        storage: &dyn Storage,
        (file, bytes): (Arc<dyn StorageFile>, &[u8]),
        replayed: &codec::Replayed,
        shards: &[(ShardId, Arc<Mutex<ShardLog>>)],
    ) -> io::Result<(At, u64)> {
        let (len, valid) = (file.len()?, replayed.valid as u64);
        let cut_bytes = if replayed.zero_tail { 0 } else { len - valid };
        if replayed.version != WAL_VERSION {
            if replayed.version == codec::WAL_VERSION_V1 {
                tracing::info!(bytes = valid, "raft WAL: version 1 rewritten as version 2");
            }
            drop(file);
            let (file, salt, end, next_seq) = write_fresh(storage, shards, 0)?;
            let at = At {
                file,
                salt,
                next_seq,
                end,
                allocated: end,
            };
            return Ok((at, cut_bytes));
        }
        if cut_bytes > 0 {
            tracing::warn!(cut_bytes, "raft WAL: cut a torn last group");
            file.truncate(valid)?;
        }
        // Also when nothing was cut: a killed node's last groups may be in
        // the page cache alone, and every group written from now on says
        // all before it is durable. Those no sync was known to cover are
        // written again first (identical bytes): if the last process's
        // sync failed, Linux may have marked their pages clean unwritten,
        // and a sync alone would not reach them.
        let unsynced = &bytes[replayed.unsynced_from..replayed.valid];
        if !unsynced.is_empty() {
            file.write_all_at(unsynced, replayed.unsynced_from as u64)?;
        }
        file.sync_data()?;
        let allocated = if replayed.zero_tail { len } else { valid };
        let at = At {
            file,
            salt: replayed.salt,
            next_seq: replayed.next_seq,
            end: valid,
            allocated,
        };
        Ok((at, cut_bytes))
    }

    fn start(
        storage: Arc<dyn Storage>,
        at: At,
        shards: HashMap<ShardId, Arc<Mutex<ShardLog>>>,
        cut_bytes: u64,
        (rewrite_bytes_min, mutation): (u64, Switch),
    ) -> io::Result<Arc<Wal>> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let poisoned = Arc::new(OnceLock::new());
        let fsyncs = Arc::new(AtomicU64::new(0));
        let shards: Shards = Arc::new(Mutex::new(shards));
        let writer = Writer {
            storage: storage.clone(),
            file: at.file,
            end: at.end,
            allocated: at.allocated,
            salt: at.salt,
            next_seq: at.next_seq,
            // Everything replayed is synced by now (see `open_with`).
            durable_below: at.next_seq,
            shards: shards.clone(),
            poisoned: poisoned.clone(),
            fsyncs: fsyncs.clone(),
            rewritten_len: at.end,
            rewrite_bytes_min,
            mutation,
            payload: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name("fencelog-raft-wal".into())
            .spawn(move || writer.run(rx))?;
        Ok(Arc::new(Wal {
            tx: Mutex::new(Some(tx)),
            shards,
            poisoned,
            fsyncs,
            thread: Mutex::new(Some(thread)),
            storage: Mutex::new(Some(storage)),
            cut_bytes,
        }))
    }

    /// One shard's log (empty for a shard the WAL has never seen).
    pub fn shard(&self, shard: ShardId) -> Arc<Mutex<ShardLog>> {
        let mut shards = self.shards.lock().expect(UNPOISONED);
        shards.entry(shard).or_default().clone()
    }

    /// Queues a record; `done` hears after the sync that covers it. A
    /// record for [`Done::Nobody`] (the committed id) is written in file
    /// order but synced only by the next group someone waits for.
    pub fn submit(&self, rec: &WalRecord, done: Done) {
        let msg = Msg {
            bytes: encode_record(rec),
            synced: !matches!(done, Done::Nobody),
            done,
            vote: matches!(rec, WalRecord::Vote { .. }),
        };
        let tx = self.tx.lock().expect(UNPOISONED);
        let unsent = match tx.as_ref() {
            Some(tx) => tx.send(msg).err().map(|e| e.0),
            None => Some(msg),
        };
        if let Some(msg) = unsent {
            msg.done.complete(&Err("the raft WAL is closed".into()));
        }
    }

    /// Queues a record and waits until it is durable.
    pub async fn submit_and_wait(&self, rec: &WalRecord) -> io::Result<()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(rec, Done::Oneshot(tx));
        rx.await
            .map_err(|_| io::Error::other("the raft WAL writer is gone"))?
    }

    /// The failure that poisoned the WAL, if any.
    pub fn poisoned(&self) -> Option<String> {
        self.poisoned.get().cloned()
    }

    /// Syncs done so far.
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// Stops the writer after what is queued (a clean stop; a crash is the
    /// same minus the queue).
    pub fn close(&self) {
        self.tx.lock().expect(UNPOISONED).take();
        if let Some(t) = self.thread.lock().expect(UNPOISONED).take() {
            let _ = t.join();
        }
        self.storage.lock().expect(UNPOISONED).take();
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.tx.lock().expect(UNPOISONED).take();
    }
}

/// Where the writer starts: the open file and its position.
struct At {
    file: Arc<dyn StorageFile>,
    salt: u64,
    next_seq: u64,
    end: u64,
    allocated: u64,
}

/// The writer thread's state.
struct Writer {
    storage: Arc<dyn Storage>,
    file: Arc<dyn StorageFile>,
    end: u64,
    /// The file's length: `end` plus zeros written ahead.
    allocated: u64,
    /// The file's salt (see [`codec`]).
    salt: u64,
    /// The number the next group takes.
    next_seq: u64,
    /// Every group numbered below this is synced: what the next group's
    /// header says, so replay can tell damage from a torn tail.
    durable_below: u64,
    /// The group payload being packed (kept for its capacity).
    payload: Vec<u8>,
    shards: Shards,
    poisoned: Arc<OnceLock<String>>,
    fsyncs: Arc<AtomicU64>,
    /// The file's length after the last rewrite (or at open).
    rewritten_len: u64,
    rewrite_bytes_min: u64,
    /// A deliberate bug for the tests of the tests (see `wal_crash.rs`).
    mutation: Switch,
}

/// Every shard's in-memory log, shared by the stores and the writer.
type Shards = Arc<Mutex<HashMap<ShardId, Arc<Mutex<ShardLog>>>>>;

impl Writer {
    fn run(mut self, rx: mpsc::Receiver<Msg>) {
        let mut buf = Vec::new();
        while let Ok(first) = rx.recv() {
            let mut group = vec![first];
            while let Ok(m) = rx.try_recv() {
                group.push(m);
            }
            if mutated!(self.mutation, WalAckBeforeSync) {
                for m in &mut group {
                    std::mem::replace(&mut m.done, Done::Nobody).complete(&Ok(()));
                }
            }
            let result = self.commit(&group, &mut buf);
            for m in group {
                m.done.complete(&result);
            }
            if result.is_ok()
                && self.end >= self.rewrite_bytes_min
                && self.end >= 2 * self.rewritten_len
            {
                if let Err(e) = self.rewrite() {
                    self.poison(format!("raft WAL rewrite failed: {e}"));
                }
            }
        }
    }

    fn poison(&self, msg: String) {
        tracing::error!("{msg}; the node's Raft groups stop");
        let _ = self.poisoned.set(msg);
    }

    /// Writes one group, and syncs it unless nobody waits for any of its
    /// records: a group of committed ids alone (one per shard per entry on
    /// every node, as each commit index moves) is written and left for the
    /// next waited-for group's sync to cover, so it costs a write, not an
    /// fdatasync. Sound because the committed id is advisory (a lost one
    /// only makes a restart wait for the leader's next commit index) and
    /// replay stops at the first group that does not read whole: a
    /// committed id whose earlier groups did not all reach the disk is
    /// never read.
    fn commit(&mut self, group: &[Msg], buf: &mut Vec<u8>) -> Result<(), String> {
        if let Some(p) = self.poisoned.get() {
            return Err(format!("the raft WAL is poisoned: {p}"));
        }
        buf.clear();
        let mut payload = std::mem::take(&mut self.payload);
        let groups = put_groups(
            buf,
            &mut payload,
            group.iter().map(|m| m.bytes.as_slice()),
            (self.salt, self.next_seq, self.durable_below),
        );
        self.payload = payload;
        let vote_unsynced =
            mutated!(self.mutation, WalVoteUnsynced) && group.iter().all(|m| m.vote);
        let sync = group.iter().any(|m| m.synced) && !vote_unsynced;
        self.preallocate(self.end + buf.len() as u64);
        let r = self
            .file
            .write_all_at(buf, self.end)
            .and_then(|()| match sync {
                true => self.file.sync_data(),
                false => Ok(()),
            });
        match r {
            Ok(()) => {
                self.end += buf.len() as u64;
                self.next_seq += groups;
                if sync {
                    self.fsyncs.fetch_add(1, Ordering::Relaxed);
                    self.durable_below = self.next_seq;
                }
                Ok(())
            }
            Err(e) => {
                // Never retried: the kernel may have dropped the pages.
                let msg = format!("raft WAL write or fdatasync failed: {e}");
                self.poison(msg.clone());
                Err(msg)
            }
        }
    }

    /// Makes sure zeros reach past `data_end` (where the group about to be
    /// written ends), [`PREALLOC_BYTES`] ahead, before the group is written
    /// and inside its sync. A failure here lost nothing (no record was
    /// written): the group is written anyway, growing the file as before
    /// preallocation, and zeros a failed call left behind are a valid
    /// tail.
    fn preallocate(&mut self, data_end: u64) {
        static ZEROS: [u8; ZEROS_BYTES] = [0; ZEROS_BYTES];
        if data_end <= self.allocated {
            return;
        }
        let target = data_end + PREALLOC_BYTES;
        let mut at = self.allocated.max(self.end);
        while at < target {
            let n = usize::try_from(target - at).map_or(ZEROS_BYTES, |n| n.min(ZEROS_BYTES));
            if let Err(e) = self.file.write_all_at(&ZEROS[..n], at) {
                tracing::warn!(error = %e, "raft WAL: could not preallocate; writing on");
                return;
            }
            at += n as u64;
        }
        self.allocated = target;
    }

    /// Replaces the file by one holding only what every shard's log holds
    /// now (purged entries gone): temp file, sync, rename, directory sync.
    /// The in-memory logs never lag the file (every store changes memory
    /// before its record is durable), and records still queued are written
    /// after this and replay idempotently, so nothing durable is lost.
    fn rewrite(&mut self) -> io::Result<()> {
        let shards: Vec<_> = self
            .shards
            .lock()
            .expect(UNPOISONED)
            .iter()
            .map(|(k, l)| (*k, l.clone()))
            .collect();
        let (file, salt, len, next_seq) =
            write_fresh(self.storage.as_ref(), &shards, self.next_seq)?;
        tracing::info!(from_bytes = self.end, to_bytes = len, "raft WAL rewritten");
        (self.file, self.end, self.allocated, self.rewritten_len) = (file, len, len, len);
        (self.salt, self.next_seq, self.durable_below) = (salt, next_seq, next_seq);
        Ok(())
    }
}
