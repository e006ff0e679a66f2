//! A simulated disk behind the [`crate::storage::Storage`] seam, for crash
//! and fault tests.
//!
//! The model follows what ALICE and CrashMonkey found real filesystems do,
//! and is deliberately harsher than most of them:
//! - every file has two images: what was written (what reads see, the page
//!   cache) and what is durable (what survives power loss);
//! - every write, truncation, creation and removal that no sync has covered
//!   yet is a *pending* operation; [`SimStorage::crash`] decides the fate of
//!   each one: kept, dropped, torn at any byte, zero-filled, garbage, or kept
//!   sector by sector, applied in any order;
//! - a new name is durable only after [`Storage::sync_dir`]; until then a
//!   crash may make the file vanish, and a removed file may come back;
//! - a failed `sync_data` leaves its pages in limbo: no later sync can make
//!   them durable, only a crash decides what survives (the fsync-gate
//!   behaviour of Linux, where a failed fsync marks dirty pages clean).
//!
//! A crash also kills the engine that was running: every handle from before
//! the crash fails from then on, so a zombie writer cannot touch the disk
//! the next engine recovers from.
//!
//! Every storage call gets a number from one counter, so a test can run a
//! workload once to count calls and then cut the power at call `i`
//! ([`SimStorage::crash_at`]) or make call `i` fail ([`SimStorage::inject`]).

use crate::storage::{Storage, StorageFile};
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// A small, self-contained, seedable PRNG (splitmix64). Deterministic on
/// every platform, so a printed seed replays a failure exactly.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator that replays the same numbers for the same seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`; `n` must be positive.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        // Modulo bias is irrelevant at test sizes.
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// Overwrites `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }

    /// Uniform in `0..n` as an index: the same draw as [`Self::below`].
    pub fn index(&mut self, n: usize) -> usize {
        usize::try_from(self.below(n as u64)).expect("below n, a usize")
    }

    /// Puts `v` in a random order (Fisher-Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.index(i + 1);
            v.swap(i, j);
        }
    }
}

/// How an injected fault fails an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// EIO: nothing happens. A failed sync puts its pages in limbo.
    Eio,
    /// ENOSPC: like EIO, with the "disk full" error kind.
    NoSpace,
    /// A write persists (to the page cache) only a prefix of its buffer,
    /// then reports ENOSPC. On any other operation it acts like EIO.
    ShortWrite,
}

/// Fail storage call number `at_op`; if `persistent`, also every later call
/// that changes the disk (reads keep working, as they do on a full disk).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The number of the call to fail (see [`SimStorage::op_count`]).
    pub at_op: u64,
    /// How it fails.
    pub kind: FaultKind,
    /// Whether every later call that changes the disk fails too.
    pub persistent: bool,
}

/// How [`SimStorage::crash`] resolves the operations no sync has covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Everything unsynced survives whole (what a clean power-off might do).
    KeepAll,
    /// Nothing unsynced survives.
    DropAll,
    /// Pending operation `k` (in issue order) survives whole iff bit `k` is
    /// set; the others vanish. Enumerating masks covers every subset.
    Subset(u64),
    /// Each pending operation gets a random fate (kept, dropped, torn at a
    /// random byte, zero-filled, garbage, or sector by sector), and file
    /// contents are applied in a random order.
    Random(u64),
}

#[derive(Debug, Clone)]
enum PendingOp {
    Write {
        file: u64,
        offset: u64,
        bytes: Vec<u8>,
        /// Its sync failed: only a crash decides its fate.
        limbo: bool,
    },
    Truncate {
        file: u64,
        len: u64,
        limbo: bool,
    },
    Link {
        name: String,
        file: u64,
    },
    Unlink {
        name: String,
        file: u64,
    },
    /// `from` (holding `file`) becomes `to`, replacing whatever `to` was:
    /// one directory operation, all or nothing.
    Rename {
        from: String,
        to: String,
        file: u64,
    },
}

impl PendingOp {
    fn is_dir_op(&self) -> bool {
        matches!(
            self,
            PendingOp::Link { .. } | PendingOp::Unlink { .. } | PendingOp::Rename { .. }
        )
    }
}

#[derive(Debug, Clone, Default)]
struct FileData {
    written: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Debug, Clone, Default)]
struct State {
    epoch: u64,
    ops: u64,
    crash_at: Option<u64>,
    halted: bool,
    faults: Vec<Fault>,
    fired: Vec<(u64, &'static str)>,
    by_name: BTreeMap<&'static str, u64>,
    files: HashMap<u64, FileData>,
    next_file: u64,
    dir: BTreeMap<String, u64>,
    durable_dir: BTreeMap<String, u64>,
    pending: Vec<PendingOp>,
    locked_epoch: Option<u64>,
}

/// What a storage call is, for fault matching.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Read,
    Write,
    Mutate,
}

fn power_lost() -> io::Error {
    io::Error::other("simulated power loss: the disk is gone until crash()")
}

fn fault_error(kind: FaultKind) -> io::Error {
    match kind {
        FaultKind::Eio => io::Error::from_raw_os_error(5),
        FaultKind::NoSpace | FaultKind::ShortWrite => io::Error::from_raw_os_error(28),
    }
}

/// An offset or length in a simulated file as an index into its bytes:
/// simulated files live in memory, so what the engine asks of them fits.
fn mem(n: u64) -> usize {
    usize::try_from(n).expect("a simulated file's offsets and lengths fit in memory")
}

fn write_into(buf: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let end = mem(offset) + bytes.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[mem(offset)..end].copy_from_slice(bytes);
}

impl State {
    /// Numbers the call and decides whether it may run. `Ok(Some(fault))`
    /// means an injected fault fires on it.
    fn enter(
        &mut self,
        epoch: u64,
        kind: OpKind,
        name: &'static str,
    ) -> io::Result<Option<FaultKind>> {
        if epoch != self.epoch {
            return Err(io::Error::other(
                "storage handle from before a simulated crash or restart",
            ));
        }
        if self.halted {
            return Err(power_lost());
        }
        let n = self.ops;
        self.ops += 1;
        *self.by_name.entry(name).or_default() += 1;
        if self.crash_at == Some(n) {
            self.halted = true;
            return Err(power_lost());
        }
        let hit = self
            .faults
            .iter()
            .find(|f| f.at_op == n || (f.persistent && n > f.at_op && kind != OpKind::Read));
        if let Some(f) = hit {
            self.fired.push((n, name));
            return Ok(Some(f.kind));
        }
        Ok(None)
    }

    fn file(&mut self, id: u64) -> io::Result<&mut FileData> {
        self.files
            .get_mut(&id)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "file is gone"))
    }

    /// Everything issued for `file` so far becomes durable, except pages in
    /// limbo from an earlier failed sync.
    fn sync_file(&mut self, file: u64) {
        let mut keep = Vec::with_capacity(self.pending.len());
        let mut apply = Vec::new();
        for op in self.pending.drain(..) {
            match &op {
                PendingOp::Write {
                    file: f,
                    limbo: false,
                    ..
                }
                | PendingOp::Truncate {
                    file: f,
                    limbo: false,
                    ..
                } if *f == file => apply.push(op),
                _ => keep.push(op),
            }
        }
        // A write that failed its sync and is now wholly overwritten by a
        // write that did sync is history: whatever it left on the media
        // happened before the newer bytes landed on top of it.
        let covered = |offset: u64, len: usize| {
            apply.iter().any(|op| match op {
                PendingOp::Write {
                    offset: o, bytes, ..
                } => *o <= offset && offset + len as u64 <= *o + bytes.len() as u64,
                _ => false,
            })
        };
        keep.retain(|op| match op {
            PendingOp::Write {
                file: f,
                offset,
                bytes,
                limbo: true,
            } if *f == file => !covered(*offset, bytes.len()),
            _ => true,
        });
        self.pending = keep;
        let data = self.files.get_mut(&file).expect("synced file exists");
        for op in apply {
            match op {
                PendingOp::Write { offset, bytes, .. } => {
                    write_into(&mut data.durable, offset, &bytes)
                }
                PendingOp::Truncate { len, .. } => data.durable.resize(mem(len), 0),
                _ => unreachable!(),
            }
        }
    }

    fn fail_sync(&mut self, file: u64) {
        for op in &mut self.pending {
            match op {
                PendingOp::Write { file: f, limbo, .. }
                | PendingOp::Truncate { file: f, limbo, .. }
                    if *f == file =>
                {
                    *limbo = true
                }
                _ => {}
            }
        }
    }

    fn resolve(&mut self, resolution: Resolution) {
        let pending = std::mem::take(&mut self.pending);
        let mut rng = match resolution {
            Resolution::Random(seed) => Some(Rng::new(seed)),
            _ => None,
        };
        let keep = |k: usize, rng: &mut Option<Rng>| match resolution {
            Resolution::KeepAll => true,
            Resolution::DropAll => false,
            Resolution::Subset(mask) => k < 64 && mask & (1 << k) != 0,
            Resolution::Random(_) => rng
                .as_mut()
                .expect("a random resolution has an rng")
                .chance(1, 2),
        };
        let mut content = self.resolve_dir_ops(pending, keep, &mut rng);
        if let Some(r) = rng.as_mut() {
            r.shuffle(&mut content);
        }
        for (k, op) in content {
            match op {
                PendingOp::Truncate { file, len, .. } => {
                    if keep(k, &mut rng) {
                        if let Some(f) = self.files.get_mut(&file) {
                            f.durable.resize(mem(len), 0);
                        }
                    }
                }
                PendingOp::Write {
                    file,
                    offset,
                    bytes,
                    ..
                } => {
                    let Some(f) = self.files.get_mut(&file) else {
                        continue;
                    };
                    match rng.as_mut() {
                        None => {
                            if keep(k, &mut rng) {
                                write_into(&mut f.durable, offset, &bytes);
                            }
                        }
                        Some(r) => random_fate_of_rewrite(r, &mut f.durable, offset, &bytes),
                    }
                }
                _ => unreachable!(),
            }
        }
        self.files
            .retain(|id, _| self.durable_dir.values().any(|v| v == id));
        for f in self.files.values_mut() {
            f.written = f.durable.clone();
        }
        self.dir = self.durable_dir.clone();
    }

    /// Lands or drops each directory operation, in issue order (a journal
    /// keeps them ordered); each one independently made it or not. Returns
    /// the content operations, numbered as `keep` knows them.
    fn resolve_dir_ops(
        &mut self,
        pending: Vec<PendingOp>,
        keep: impl Fn(usize, &mut Option<Rng>) -> bool,
        rng: &mut Option<Rng>,
    ) -> Vec<(usize, PendingOp)> {
        let mut content = Vec::new();
        for (k, op) in pending.into_iter().enumerate() {
            match op {
                PendingOp::Link { name, file } => {
                    if keep(k, rng) {
                        self.durable_dir.insert(name, file);
                    }
                }
                PendingOp::Unlink { name, file } => {
                    if keep(k, rng) && self.durable_dir.get(&name) == Some(&file) {
                        self.durable_dir.remove(&name);
                    }
                }
                PendingOp::Rename { from, to, file } => {
                    if keep(k, rng) {
                        apply_rename(&mut self.durable_dir, &from, &to, file);
                    }
                }
                other => content.push((k, other)),
            }
        }
        content
    }

    fn new_epoch(&mut self) {
        self.epoch += 1;
        self.halted = false;
        self.crash_at = None;
        self.faults.clear();
        self.locked_epoch = None;
    }
}

/// A rename landing in the durable directory: `to` names `file` now, and
/// `from` is gone if it still named it. (If `from`'s own creation never
/// became durable the file still arrives under `to`: the rename carries
/// the inode, not the old name.)
fn apply_rename(dir: &mut BTreeMap<String, u64>, from: &str, to: &str, file: u64) {
    if dir.get(from) == Some(&file) {
        dir.remove(from);
    }
    dir.insert(to.to_string(), file);
}

/// The fate of one unsynced write, chosen at random.
/// [`random_fate`], except that bytes the write would rewrite with the very
/// same bytes stay as they are: whatever the write's fate, each sector ends
/// old or new, and both are equal.
fn random_fate_of_rewrite(rng: &mut Rng, durable: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let before = durable.clone();
    random_fate(rng, durable, offset, bytes);
    for (i, &b) in bytes.iter().enumerate() {
        let at = mem(offset) + i;
        if before.get(at) == Some(&b) && at < durable.len() {
            durable[at] = b;
        }
    }
}

fn random_fate(rng: &mut Rng, durable: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    const SECTOR: usize = 512;
    match rng.below(6) {
        0 => write_into(durable, offset, bytes),
        1 => {}
        2 => {
            let cut = rng.index(bytes.len() + 1);
            write_into(durable, offset, &bytes[..cut]);
        }
        3 => write_into(durable, offset, &vec![0; bytes.len()]),
        4 => {
            let mut junk = vec![0; bytes.len()];
            rng.fill(&mut junk);
            write_into(durable, offset, &junk);
        }
        _ => {
            // Sector by sector, each with its own fate: out-of-order
            // persistence inside one write.
            let mut at = 0;
            while at < bytes.len() {
                let sector_end = ((mem(offset) + at) / SECTOR + 1) * SECTOR;
                let end = (sector_end - mem(offset)).min(bytes.len());
                let chunk = &bytes[at..end];
                let pos = offset + at as u64;
                match rng.below(4) {
                    0 => write_into(durable, pos, chunk),
                    1 => {}
                    2 => write_into(durable, pos, &vec![0; chunk.len()]),
                    _ => {
                        let mut junk = vec![0; chunk.len()];
                        rng.fill(&mut junk);
                        write_into(durable, pos, &junk);
                    }
                }
                at = end;
            }
        }
    }
}

/// An in-memory disk with power loss and fault injection. Cloning shares
/// the disk; [`SimStorage::fork`] copies it.
#[derive(Clone, Default)]
pub struct SimStorage {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock_state();
        f.debug_struct("SimStorage")
            .field("epoch", &s.epoch)
            .field("ops", &s.ops)
            .field("files", &s.dir.keys().collect::<Vec<_>>())
            .field("pending", &s.pending.len())
            .finish()
    }
}

impl SimStorage {
    /// An empty disk.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the disk from the report.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An independent copy of the whole disk, pending state included.
    pub fn fork(&self) -> SimStorage {
        SimStorage {
            state: Arc::new(Mutex::new(self.lock_state().clone())),
        }
    }

    /// Storage calls numbered so far (the next call gets this number).
    pub fn op_count(&self) -> u64 {
        self.lock_state().ops
    }

    /// Cuts the power at call number `op`: that call and every later one
    /// fail until [`Self::crash`].
    pub fn crash_at(&self, op: u64) {
        self.lock_state().crash_at = Some(op);
    }

    /// Whether the power is cut (a `crash_at` point was reached).
    pub fn halted(&self) -> bool {
        self.lock_state().halted
    }

    /// Arms a fault; it fires when its call number comes up.
    pub fn inject(&self, fault: Fault) {
        self.lock_state().faults.push(fault);
    }

    /// Disarms every fault (the disk is healthy again).
    pub fn clear_faults(&self) {
        self.lock_state().faults.clear();
    }

    /// How many calls an injected fault has failed.
    pub fn faults_fired(&self) -> u64 {
        self.lock_state().fired.len() as u64
    }

    /// Calls made so far, by operation name ("write", "sync_data", ...).
    pub fn op_counts(&self) -> BTreeMap<&'static str, u64> {
        self.lock_state().by_name.clone()
    }

    /// Every call an injected fault failed: its number and operation name.
    pub fn fired(&self) -> Vec<(u64, &'static str)> {
        self.lock_state().fired.clone()
    }

    /// Operations no sync has covered yet (what [`Resolution::Subset`]
    /// masks range over).
    pub fn unsynced_ops(&self) -> usize {
        self.lock_state().pending.len()
    }

    /// Power loss: resolves every unsynced operation, then starts a new
    /// epoch (old handles fail, faults are cleared, the lock is free).
    pub fn crash(&self, resolution: Resolution) {
        let mut s = self.lock_state();
        s.resolve(resolution);
        s.new_epoch();
    }

    /// The process dies but the machine does not (kill -9): the page cache
    /// survives, nothing is resolved, old handles fail.
    pub fn restart(&self) {
        self.lock_state().new_epoch();
    }

    /// Names in the (volatile) directory, sorted.
    pub fn file_names(&self) -> Vec<String> {
        self.lock_state().dir.keys().cloned().collect()
    }

    /// What reads of `name` see now.
    pub fn contents(&self, name: &str) -> Option<Vec<u8>> {
        let s = self.lock_state();
        let id = s.dir.get(name)?;
        Some(s.files[id].written.clone())
    }

    /// Replaces a file's bytes durably, as if edited at rest (creating it
    /// if needed). For corruption tests.
    pub fn set_contents(&self, name: &str, bytes: &[u8]) {
        let mut s = self.lock_state();
        assert!(s.pending.is_empty(), "set_contents needs a quiescent disk");
        let id = match s.dir.get(name) {
            Some(id) => *id,
            None => {
                let id = s.next_file;
                s.next_file += 1;
                s.dir.insert(name.to_string(), id);
                s.durable_dir.insert(name.to_string(), id);
                id
            }
        };
        s.files.insert(
            id,
            FileData {
                written: bytes.to_vec(),
                durable: bytes.to_vec(),
            },
        );
    }

    /// Removes a file durably, as if deleted at rest.
    pub fn delete(&self, name: &str) {
        let mut s = self.lock_state();
        if let Some(id) = s.dir.remove(name) {
            s.durable_dir.remove(name);
            s.files.remove(&id);
        }
    }
}

impl Storage for SimStorage {
    fn list(&self) -> io::Result<Vec<String>> {
        let mut s = self.lock_state();
        let epoch = s.epoch;
        if let Some(k) = s.enter(epoch, OpKind::Read, "list")? {
            return Err(fault_error(k));
        }
        Ok(s.dir.keys().cloned().collect())
    }

    fn create(&self, name: &str) -> io::Result<Arc<dyn StorageFile>> {
        let mut s = self.lock_state();
        let epoch = s.epoch;
        if let Some(k) = s.enter(epoch, OpKind::Mutate, "create")? {
            return Err(fault_error(k));
        }
        if s.dir.contains_key(name) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, name));
        }
        let id = s.next_file;
        s.next_file += 1;
        s.files.insert(id, FileData::default());
        s.dir.insert(name.to_string(), id);
        s.pending.push(PendingOp::Link {
            name: name.to_string(),
            file: id,
        });
        Ok(Arc::new(SimFile {
            state: self.state.clone(),
            id,
            epoch,
        }))
    }

    fn open(&self, name: &str) -> io::Result<Arc<dyn StorageFile>> {
        let mut s = self.lock_state();
        let epoch = s.epoch;
        if let Some(k) = s.enter(epoch, OpKind::Read, "open")? {
            return Err(fault_error(k));
        }
        let id = *s
            .dir
            .get(name)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, name.to_string()))?;
        Ok(Arc::new(SimFile {
            state: self.state.clone(),
            id,
            epoch,
        }))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut s = self.lock_state();
        let epoch = s.epoch;
        if let Some(k) = s.enter(epoch, OpKind::Mutate, "remove")? {
            return Err(fault_error(k));
        }
        let id = s
            .dir
            .remove(name)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, name.to_string()))?;
        s.pending.push(PendingOp::Unlink {
            name: name.to_string(),
            file: id,
        });
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut s = self.lock_state();
        let epoch = s.epoch;
        if let Some(k) = s.enter(epoch, OpKind::Mutate, "sync_dir")? {
            return Err(fault_error(k));
        }
        let (dir_ops, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut s.pending)
            .into_iter()
            .partition(PendingOp::is_dir_op);
        s.pending = rest;
        for op in dir_ops {
            match op {
                PendingOp::Link { name, file } => {
                    s.durable_dir.insert(name, file);
                }
                PendingOp::Unlink { name, .. } => {
                    s.durable_dir.remove(&name);
                }
                PendingOp::Rename { from, to, file } => {
                    apply_rename(&mut s.durable_dir, &from, &to, file)
                }
                _ => unreachable!(),
            }
        }
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut s = self.lock_state();
        let epoch = s.epoch;
        if let Some(k) = s.enter(epoch, OpKind::Mutate, "rename")? {
            return Err(fault_error(k));
        }
        let id = s
            .dir
            .remove(from)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, from.to_string()))?;
        s.dir.insert(to.to_string(), id);
        s.pending.push(PendingOp::Rename {
            from: from.to_string(),
            to: to.to_string(),
            file: id,
        });
        Ok(())
    }

    fn lock(&self) -> io::Result<()> {
        let mut s = self.lock_state();
        let epoch = s.epoch;
        if let Some(k) = s.enter(epoch, OpKind::Read, "lock")? {
            return Err(fault_error(k));
        }
        if s.locked_epoch == Some(epoch) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "simulated data directory is already locked",
            ));
        }
        s.locked_epoch = Some(epoch);
        Ok(())
    }
}

struct SimFile {
    state: Arc<Mutex<State>>,
    id: u64,
    epoch: u64,
}

impl SimFile {
    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl StorageFile for SimFile {
    fn len(&self) -> io::Result<u64> {
        let mut s = self.lock_state();
        if let Some(k) = s.enter(self.epoch, OpKind::Read, "len")? {
            return Err(fault_error(k));
        }
        Ok(s.file(self.id)?.written.len() as u64)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut s = self.lock_state();
        if let Some(k) = s.enter(self.epoch, OpKind::Read, "read")? {
            return Err(fault_error(k));
        }
        let data = &s.file(self.id)?.written;
        let end = mem(offset) + buf.len();
        if end > data.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of a simulated file",
            ));
        }
        buf.copy_from_slice(&data[mem(offset)..end]);
        Ok(())
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut s = self.lock_state();
        let fault = s.enter(self.epoch, OpKind::Write, "write")?;
        let bytes = match fault {
            None => buf,
            Some(FaultKind::ShortWrite) => &buf[..buf.len() / 2],
            Some(k) => return Err(fault_error(k)),
        };
        write_into(&mut s.file(self.id)?.written, offset, bytes);
        s.pending.push(PendingOp::Write {
            file: self.id,
            offset,
            bytes: bytes.to_vec(),
            limbo: false,
        });
        match fault {
            Some(k) => Err(fault_error(k)),
            None => Ok(()),
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut s = self.lock_state();
        if let Some(k) = s.enter(self.epoch, OpKind::Mutate, "sync_data")? {
            s.fail_sync(self.id);
            return Err(fault_error(k));
        }
        s.file(self.id)?;
        s.sync_file(self.id);
        Ok(())
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        let mut s = self.lock_state();
        if let Some(k) = s.enter(self.epoch, OpKind::Mutate, "truncate")? {
            return Err(fault_error(k));
        }
        s.file(self.id)?.written.resize(mem(len), 0);
        s.pending.push(PendingOp::Truncate {
            file: self.id,
            len,
            limbo: false,
        });
        Ok(())
    }

    fn view(&self, len: u64) -> io::Result<Bytes> {
        let mut s = self.lock_state();
        if let Some(k) = s.enter(self.epoch, OpKind::Read, "view")? {
            return Err(fault_error(k));
        }
        let data = &s.file(self.id)?.written;
        if mem(len) > data.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "view past the end of a simulated file",
            ));
        }
        Ok(Bytes::copy_from_slice(&data[..mem(len)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_file(sim: &SimStorage, name: &str, bytes: &[u8]) -> Arc<dyn StorageFile> {
        let f = sim.create(name).unwrap();
        f.write_all_at(bytes, 0).unwrap();
        f
    }

    #[test]
    fn unsynced_writes_and_names_can_vanish() {
        let sim = SimStorage::new();
        let f = write_file(&sim, "a", b"hello");
        f.sync_data().unwrap();
        let lost = sim.fork();
        lost.crash(Resolution::DropAll);
        assert!(lost.file_names().is_empty(), "name was never dir-synced");
        sim.sync_dir().unwrap();
        f.write_all_at(b" world", 5).unwrap();
        let cut = sim.fork();
        cut.crash(Resolution::DropAll);
        assert_eq!(cut.contents("a").unwrap(), b"hello");
        sim.crash(Resolution::KeepAll);
        assert_eq!(sim.contents("a").unwrap(), b"hello world");
        assert!(f.len().is_err(), "handles die with the crash");
    }

    #[test]
    fn subsets_cover_each_pending_op() {
        let sim = SimStorage::new();
        let f = write_file(&sim, "a", b"0123");
        f.sync_data().unwrap();
        sim.sync_dir().unwrap();
        f.write_all_at(b"45", 4).unwrap();
        f.write_all_at(b"67", 6).unwrap();
        assert_eq!(sim.unsynced_ops(), 2);
        let seen: Vec<Vec<u8>> = (0..4)
            .map(|m| {
                let s = sim.fork();
                s.crash(Resolution::Subset(m));
                s.contents("a").unwrap()
            })
            .collect();
        assert_eq!(seen[0], b"0123");
        assert_eq!(seen[1], b"012345");
        assert_eq!(
            seen[2], b"0123\x00\x0067",
            "a later write can land without an earlier one"
        );
        assert_eq!(seen[3], b"01234567");
    }

    #[test]
    fn failed_sync_is_never_made_durable_by_a_later_sync() {
        let sim = SimStorage::new();
        let f = write_file(&sim, "a", b"");
        sim.sync_dir().unwrap();
        f.write_all_at(b"lost?", 0).unwrap();
        sim.inject(Fault {
            at_op: sim.op_count(),
            kind: FaultKind::Eio,
            persistent: false,
        });
        assert!(f.sync_data().is_err());
        f.sync_data().unwrap();
        sim.crash(Resolution::DropAll);
        assert_eq!(sim.contents("a").unwrap(), b"");
    }

    #[test]
    fn crash_at_cuts_power_at_that_call() {
        let sim = SimStorage::new();
        sim.crash_at(2);
        let f = sim.create("a").unwrap();
        f.write_all_at(b"x", 0).unwrap();
        assert!(f.sync_data().is_err());
        assert!(sim.halted());
        assert!(sim.list().is_err());
        sim.crash(Resolution::KeepAll);
        assert_eq!(sim.contents("a").unwrap(), b"x");
    }

    #[test]
    fn short_write_keeps_a_prefix_and_fails() {
        let sim = SimStorage::new();
        let f = sim.create("a").unwrap();
        sim.inject(Fault {
            at_op: sim.op_count(),
            kind: FaultKind::ShortWrite,
            persistent: false,
        });
        let e = f.write_all_at(b"abcdef", 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        assert_eq!(f.len().unwrap(), 3);
    }

    #[test]
    fn random_resolutions_replay_from_their_seed() {
        let build = || {
            let sim = SimStorage::new();
            let f = write_file(&sim, "a", &[7u8; 3000]);
            sim.sync_dir().unwrap();
            f.write_all_at(&[9u8; 2000], 3000).unwrap();
            sim
        };
        for seed in 0..20 {
            let (a, b) = (build(), build());
            a.crash(Resolution::Random(seed));
            b.crash(Resolution::Random(seed));
            assert_eq!(a.contents("a"), b.contents("a"));
        }
    }
}
