//! `RaftStateMachine` for one shard over its fencelog engine. The fencing
//! rule runs in `apply` — the engine's `apply_batch` plans every op through
//! `fence.rs` against pending state, in log order, at the leader's
//! timestamp — and each entry's Applied marker lands in the same group as
//! its effects. So `applied_state()` after a restart is exactly the last
//! entry whose effects survived: never applied twice, never skipped.
//!
//! The shard engine runs in `Durability::OnFlush` (no fsync per apply:
//! the entry is already durable in the node's Raft WAL, fsynced before it
//! counted towards commit). A crash may lose the groups after the last
//! flush; recovery keeps a prefix of them, so the applied position only
//! rewinds, and openraft applies the entries after it again at startup
//! from the WAL, with the same answers (apply is deterministic). That
//! needs the WAL to keep every entry after the flushed position: openraft
//! purges only entries a snapshot covers, and `build_snapshot` flushes
//! before it reads the files, so the purge point never passes a flush
//! (and a node whose applied position is below its purge point refuses
//! to start, `node.rs`).
//!
//! Snapshots are physical: the engine directory's files, captured into a
//! snapshot directory (links, and a copy of the active segment,
//! [`crate::snapshot::dir`]) while the apply gate is held (the engine runs
//! without background reclamation, so nothing but apply changes its
//! files), which makes them exactly the state at the snapshot's LogId. No
//! snapshot's bytes are ever held in memory.

use super::types::{
    BatchResult, Entry, LogId, OpResult, Snapshot, SnapshotMeta, StorageError, StoredMembership,
    TypeConfig,
};
use crate::ids::NodeId;
use crate::snapshot::dir::{
    capture, Active, Chunk, Manifest, Receiving, ShardSnapshot, SnapDir, SnapFile,
};
use crate::snapshot::shard_dir::ShardDir;
use fencelog_engine::{AppliedState, Config, Durability, Engine, WriteOp};
use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, StorageIOError};
use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

/// The engine a shard currently runs on (replaced by snapshot installs);
/// readers take a clone.
pub type EngineSlot = Arc<RwLock<Engine>>;

/// A state machine's std locks (its directory, engine slot, current
/// snapshot and transfers being received) are held for a lookup, a clone,
/// a swap or one file operation whose failure is an error, not a panic.
const UNPOISONED: &str = "no thread panics while holding a shard state machine's lock";

/// One shard's state machine. Clones share everything (one is the
/// snapshot builder).
#[derive(Clone)]
pub struct ShardSm {
    dir: Arc<Mutex<ShardDir>>,
    engine: EngineSlot,
    config: Config,
    /// Held by each apply and by snapshot capture and install.
    gate: Arc<tokio::sync::Mutex<()>>,
    current: Arc<Mutex<Option<(SnapshotMeta, ShardSnapshot)>>>,
    /// Snapshot directories made so far (built or received), naming the
    /// next one.
    built: Arc<std::sync::atomic::AtomicU64>,
    /// Unique to this open of the shard, in every snapshot id: `built`
    /// starts again at each start, and a receiver resumes a transfer by
    /// its id, so an id must never name two different captures.
    boot: Arc<str>,
    /// The snapshots being received, one per sending node (so a deposed
    /// leader's late chunk does not restart the new leader's transfer).
    receiving: Arc<Mutex<HashMap<NodeId, Receiving>>>,
    /// How captures treat the active segment (read from the mutation
    /// switch at open: captures run on blocking threads).
    capture_active: Active,
    /// A reclamation pass is queued (at most one per shard).
    reclaiming: Arc<std::sync::atomic::AtomicBool>,
    /// [`ShardSm::shutdown`] ran: no snapshot is installed after it (that
    /// would open an engine nobody stops, holding the shard's lock).
    closed: Arc<std::sync::atomic::AtomicBool>,
}

/// The engine configuration of a shard, from the node's: no background
/// reclamation on the engine's own timer (its files change only under the
/// apply gate, which snapshots rely on: [`ShardSm::reclaim_soon`] runs the
/// pass there instead), no retention of its own (a retention trim decided
/// by each replica's clock would make replicas differ: the shard leader
/// proposes retention trims as entries instead, [`crate::retention`]) and
/// no disk budget (apply must not refuse on local limits; the leader
/// checks them before proposing), groups synced on flush only (see the
/// module comment), and writers that sleep at once between groups: a node
/// runs one writer per shard, and that many polling writers would take the
/// cores the Raft groups need (an apply waits on the Raft path anyway, not
/// on the writer's wake-up).
pub fn shard_engine_config(base: &Config) -> Config {
    Config {
        durability: Durability::OnFlush,
        writer_spin_us: 0,
        reclaim_interval_ms: 0,
        data_bytes_max: None,
        retention_age_s: None,
        retention_bytes: None,
        retention_in_reclaim: false,
        ..base.clone()
    }
}

/// This open's part of snapshot ids: the clock in ns (another start of
/// the node is at another instant) and the opens before it in this
/// process (two shards, or a test's nodes, opened in one instant).
fn boot_nonce() -> String {
    static OPENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let opens = OPENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{nanos:x}.{opens}")
}

/// Snapshot transfers received at once at most (one per sending node; a
/// cluster has a handful).
const RECEIVING_MAX: usize = 16;

fn sm_err(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_state_machine(&io::Error::other(e.to_string())).into()
}

fn log_id_of(a: &AppliedState) -> LogId {
    LogId::new(openraft::CommittedLeaderId::new(a.term, a.node_id), a.index)
}

impl ShardSm {
    /// Opens the shard whose directory is `root` with engine `config`.
    pub fn open(root: &Path, config: Config) -> io::Result<ShardSm> {
        let dir = ShardDir::open(root)?;
        let engine = Engine::open_with(dir.engine_dir(), config.clone())
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(ShardSm {
            dir: Arc::new(Mutex::new(dir)),
            engine: Arc::new(RwLock::new(engine)),
            config,
            gate: Arc::new(tokio::sync::Mutex::new(())),
            current: Arc::new(Mutex::new(None)),
            built: Arc::new(0.into()),
            boot: boot_nonce().into(),
            receiving: Arc::new(Mutex::new(HashMap::new())),
            capture_active: match mutated!(crate::mutation::current(), SnapshotLinksActiveSegment) {
                true => Active::Linked,
                false => Active::Copied,
            },
            reclaiming: Arc::new(false.into()),
            closed: Arc::new(false.into()),
        })
    }

    /// Stops the shard's engine once no apply, snapshot capture or install
    /// is running (each holds the gate): a node that stops in the middle
    /// of a snapshot install stops the engine the install opened, not the
    /// one it had already stopped. Nothing is installed after this.
    pub async fn shutdown(&self) {
        let _gate = self.gate.lock().await;
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.engine().shutdown().await;
    }

    /// The current engine's directory.
    pub fn engine_dir(&self) -> std::path::PathBuf {
        self.dir.lock().expect(UNPOISONED).engine_dir()
    }

    /// The engine slot readers use.
    pub fn engine_slot(&self) -> EngineSlot {
        self.engine.clone()
    }

    /// The current engine.
    pub fn engine(&self) -> Engine {
        self.engine.read().expect(UNPOISONED).clone()
    }

    fn applied_now(&self) -> (Option<LogId>, StoredMembership) {
        match self.engine().applied() {
            None => (None, StoredMembership::default()),
            Some(a) => {
                let m = postcard::from_bytes(&a.membership).unwrap_or_default();
                (Some(log_id_of(&a)), m)
            }
        }
    }

    /// What the engine applies for `entry`: its marker, the leader's
    /// timestamp and its ops.
    fn to_apply(entry: Entry) -> Result<(AppliedState, u64, Vec<WriteOp>), postcard::Error> {
        let id = entry.log_id;
        let mut at = AppliedState {
            term: id.leader_id.term,
            node_id: id.leader_id.node_id,
            index: id.index,
            membership: Vec::new(),
        };
        let (ts, ops) = match entry.payload {
            EntryPayload::Blank => (0, Vec::new()),
            EntryPayload::Normal(batch) => (batch.leader_ts_ms, batch.ops),
            EntryPayload::Membership(m) => {
                let stored = StoredMembership::new(Some(id), m);
                at.membership = postcard::to_allocvec(&stored)?;
                (0, Vec::new())
            }
        };
        Ok((at, ts, ops))
    }

    /// Applies `entries` (consecutive, committed) through the engine in
    /// one hand-off: those that reach the writer together share a group.
    async fn apply_all(&self, entries: Vec<Entry>) -> Result<Vec<BatchResult>, StorageError> {
        let inputs = entries
            .into_iter()
            .map(Self::to_apply)
            .collect::<Result<Vec<_>, _>>()
            .map_err(sm_err)?;
        let all = self.engine().apply_entries(inputs).await.map_err(sm_err)?;
        let mut out = Vec::with_capacity(all.len());
        for results in &all {
            let mut ops = Vec::with_capacity(results.len());
            for r in results {
                ops.push(OpResult::of(r).ok_or_else(|| sm_err(format!("{r:?}")))?);
            }
            out.push(BatchResult(ops));
        }
        Ok(out)
    }

    fn next_dir_number(&self) -> u64 {
        self.built
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    }

    /// Writes one chunk of a snapshot another node sends (blocking: the
    /// caller runs it off the runtime). A chunk of another transfer than
    /// the one under way from the same node starts a new one, and the
    /// unfinished one's directory goes.
    pub fn receive_chunk(&self, chunk: &Chunk) -> io::Result<()> {
        let mut slots = self.receiving.lock().expect(UNPOISONED);
        let fresh = !slots
            .get(&chunk.from)
            .is_some_and(|r| r.is(chunk.from, &chunk.snapshot_id));
        if fresh {
            slots.remove(&chunk.from);
            if slots.len() >= RECEIVING_MAX {
                return Err(io::Error::other(format!(
                    "snapshots from {RECEIVING_MAX} nodes are being received already"
                )));
            }
            let path = self
                .dir
                .lock()
                .expect(UNPOISONED)
                .receive_path(self.next_dir_number());
            let r = Receiving::start(chunk.from, &chunk.snapshot_id, path)?;
            slots.insert(chunk.from, r);
        }
        let r = slots[&chunk.from].write(chunk);
        if r.is_err() {
            // The sender starts the whole transfer again.
            slots.remove(&chunk.from);
        }
        r
    }

    /// The files of snapshot `snapshot_id` received from `from` so far,
    /// with their lengths (none if that is not the transfer under way
    /// from it): where a new attempt of the same transfer resumes.
    /// Blocking, like [`ShardSm::receive_chunk`].
    pub fn received_so_far(&self, from: NodeId, snapshot_id: &str) -> io::Result<Vec<SnapFile>> {
        let slots = self.receiving.lock().expect(UNPOISONED);
        match slots.get(&from) {
            Some(r) if r.is(from, snapshot_id) => r.files(),
            _ => Ok(Vec::new()),
        }
    }

    /// The snapshot whose chunks arrived, checked against its manifest.
    pub fn received(&self, snapshot_id: &str, manifest: &Manifest) -> io::Result<ShardSnapshot> {
        let mut slots = self.receiving.lock().expect(UNPOISONED);
        match slots.remove(&manifest.from) {
            Some(r) if r.is(manifest.from, snapshot_id) => {
                let (dir, files) = r.finish(manifest)?;
                Ok(ShardSnapshot {
                    dir: Some(dir),
                    files,
                })
            }
            other => {
                if let Some(r) = other {
                    slots.insert(manifest.from, r);
                }
                Err(io::Error::other(format!(
                    "no chunks of snapshot {snapshot_id} from node {} arrived",
                    manifest.from
                )))
            }
        }
    }
}

/// Whether an entry trims or deletes (so segments may have died).
fn frees_space(entry: &Entry) -> bool {
    let EntryPayload::Normal(batch) = &entry.payload else {
        return false;
    };
    batch.ops.iter().any(|op| {
        matches!(
            op,
            WriteOp::Trim { .. } | WriteOp::Delete { .. } | WriteOp::Retain { .. }
        )
    })
}

impl ShardSm {
    /// Queues one reclamation pass (compaction, checkpoint, segment
    /// deletion) after the current apply: it runs under the apply
    /// gate, so no snapshot reads the files while it changes them, and the
    /// checkpoint it writes carries the applied position and every fence,
    /// so a reclaimed segment takes no token with it.
    fn reclaim_soon(&self) {
        use std::sync::atomic::Ordering;
        if self.reclaiming.swap(true, Ordering::AcqRel) {
            return;
        }
        let sm = self.clone();
        tokio::spawn(async move {
            let gate = sm.gate.lock().await;
            sm.reclaiming.store(false, Ordering::Release);
            let engine = sm.engine();
            match engine.reclaim().await {
                Ok(report) if !report.deleted.is_empty() => sm.recapture().await,
                Ok(_) => {}
                // The engine answers its own failure to the next apply.
                Err(e) => tracing::warn!(error = %e, "a shard's reclamation pass failed"),
            }
            drop(gate);
        });
    }

    /// Replaces the current snapshot, if any, by one of the state now, so
    /// the segments the pass just deleted do not keep their disk space
    /// through the old snapshot's links until the next scheduled one (on
    /// an idle shard, for ever). A newer snapshot serves every purpose of
    /// the old: openraft purged its log only up to the old one. The caller
    /// holds the gate.
    async fn recapture(&self) {
        if self.current.lock().expect(UNPOISONED).is_none() {
            return;
        }
        match self.capture().await {
            Ok((meta, data)) => *self.current.lock().expect(UNPOISONED) = Some((meta, data)),
            // The old snapshot stays current: correct, only larger on disk.
            Err(e) => tracing::warn!(error = %e, "a shard's snapshot was not captured again"),
        }
    }

    /// Captures the engine's state as a snapshot; the caller holds the
    /// gate. Flushed first: durable before openraft may purge the log up
    /// to it.
    async fn capture(&self) -> Result<(SnapshotMeta, ShardSnapshot), StorageError> {
        self.engine().flush().await.map_err(sm_err)?;
        let (last_log_id, last_membership) = self.applied_now();
        let n = self.next_dir_number();
        let (src, dst) = {
            let dir = self.dir.lock().expect(UNPOISONED);
            (dir.engine_dir(), dir.snapshot_path(n))
        };
        // Owned before it is made, so a failed capture leaves nothing.
        let owned = Arc::new(SnapDir::own(dst.clone()));
        let how = self.capture_active;
        let files = tokio::task::spawn_blocking(move || capture(&src, &dst, false, how))
            .await
            .map_err(sm_err)?
            .map_err(sm_err)?;
        let boot = &self.boot;
        let snapshot_id = match last_log_id {
            Some(l) => format!(
                "{}-{}-{}-{n}-{boot}",
                l.leader_id.term, l.leader_id.node_id, l.index
            ),
            None => format!("none-{n}-{boot}"),
        };
        let meta = SnapshotMeta {
            last_log_id,
            last_membership,
            snapshot_id,
        };
        let data = ShardSnapshot {
            dir: Some(owned),
            files,
        };
        Ok((meta, data))
    }
}

impl RaftSnapshotBuilder<TypeConfig> for ShardSm {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let gate = self.gate.lock().await;
        let (meta, data) = self.capture().await?;
        // Under the gate, so a recapture (which also holds it) is never
        // replaced by this older snapshot.
        *self.current.lock().expect(UNPOISONED) = Some((meta.clone(), data.clone()));
        drop(gate);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(data),
        })
    }
}

impl RaftStateMachine<TypeConfig> for ShardSm {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok(self.applied_now())
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<BatchResult>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let _gate = self.gate.lock().await;
        let entries: Vec<Entry> = entries.into_iter().collect();
        let frees = entries.iter().any(frees_space);
        let out = self.apply_all(entries).await?;
        if frees {
            self.reclaim_soon();
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<ShardSnapshot>, StorageError> {
        Ok(Box::default())
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<ShardSnapshot>,
    ) -> Result<(), StorageError> {
        let _gate = self.gate.lock().await;
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(sm_err("the shard is shutting down"));
        }
        let src = snapshot
            .dir
            .as_ref()
            .ok_or_else(|| sm_err("an empty snapshot handle"))?
            .path()
            .to_path_buf();
        let old = self.engine();
        old.shutdown().await;
        let mut dir = self.dir.lock().expect(UNPOISONED).clone();
        let dir = tokio::task::spawn_blocking(move || dir.install(&src).map(|()| dir))
            .await
            .map_err(sm_err)?
            .map_err(sm_err)?;
        let engine_dir = dir.engine_dir();
        *self.dir.lock().expect(UNPOISONED) = dir;
        let engine = Engine::open_with(&engine_dir, self.config.clone()).map_err(sm_err)?;
        if let Some(name) = &engine.recovery_report().removed_segment {
            // It would make a linked (shared) segment active again.
            return Err(sm_err(format!(
                "snapshot {} opened with segment {name} removed",
                meta.snapshot_id
            )));
        }
        let got = engine.applied().map(|a| log_id_of(&a));
        if got != meta.last_log_id {
            return Err(sm_err(format!(
                "snapshot {} holds applied {got:?}, its meta says {:?}",
                meta.snapshot_id, meta.last_log_id
            )));
        }
        *self.engine.write().expect(UNPOISONED) = engine;
        drop(old);
        self.dir
            .lock()
            .expect(UNPOISONED)
            .remove_previous()
            .map_err(sm_err)?;
        *self.current.lock().expect(UNPOISONED) = Some((meta.clone(), *snapshot));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        Ok(self
            .current
            .lock()
            .expect(UNPOISONED)
            .clone()
            .map(|(meta, data)| Snapshot {
                meta,
                snapshot: Box::new(data),
            }))
    }
}
