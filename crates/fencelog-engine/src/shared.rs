//! The state the engine handle, the writer thread, the reclaimer and
//! readers share.

use crate::config::Config;
use crate::error::StorageFailure;
use crate::files::ManifestFile;
use crate::frame_cache::FrameCache;
use crate::locks;
use crate::metrics::Metrics;
use crate::reclaim_signal::Signal;
use crate::segment::Segments;
use crate::storage::Storage;
use crate::stream::{StreamMap, StreamShared};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use tokio::sync::Notify;

/// State shared by the handle, the writer thread, the reclaimer and readers.
pub(crate) struct Shared {
    pub config: Config,
    pub storage: Arc<dyn Storage>,
    pub streams: RwLock<StreamMap>,
    /// The segment list; readers pair index entries with segments under
    /// its read lock, deletion takes the write lock.
    pub segments: RwLock<Segments>,
    pub manifest: ManifestFile,
    /// The last group whose effects are published (a checkpoint covers at
    /// least the groups up to it when it starts).
    pub published_group: AtomicU64,
    /// Bytes of the sealed segments' files.
    sealed_bytes: AtomicU64,
    /// Bytes of the active segment's file (data and preallocated zeros).
    active_allocated: AtomicU64,
    /// Bytes of the current checkpoint.
    checkpoint_bytes: AtomicU64,
    /// Set once, by the writer or the reclaimer, on the first write or sync
    /// failure (or writer panic).
    pub poisoned: OnceLock<Arc<StorageFailure>>,
    pub shutting_down: AtomicBool,
    /// Streams someone is waiting on; entries live only while waited on, so
    /// idle streams cost no memory here.
    pub waiters: Mutex<HashMap<Box<str>, Arc<Notify>>>,
    /// The last applied Raft position (cluster mode), carried by checkpoints.
    pub applied: Mutex<Option<crate::codec::checkpoint::AppliedState>>,
    /// Wakes the reclaimer: the writer (trims, deletes, retention, copies),
    /// [`crate::Engine::reclaim`] and shutdown.
    pub reclaim: Arc<Signal>,
    /// Frames of the active segment that some reader holds right now, so
    /// concurrent readers of one frame (a thousand live tails) share one
    /// copy of it instead of reading their own.
    pub active_frames: Mutex<FrameCache>,
    pub metrics: Metrics,
}

/// What a freshly recovered log starts from.
pub(crate) struct Start {
    pub config: Config,
    pub storage: Arc<dyn Storage>,
    pub streams: StreamMap,
    pub segments: Segments,
    pub manifest: crate::codec::manifest::Manifest,
    pub published_group: u64,
    pub active_len: u64,
    /// Bytes of the sealed segments.
    pub sealed_bytes: u64,
    /// Bytes of the current checkpoint.
    pub checkpoint_bytes: u64,
    pub applied: Option<crate::codec::checkpoint::AppliedState>,
}

impl Shared {
    /// The state a freshly recovered log starts from.
    pub(crate) fn new(s: Start) -> Self {
        Shared {
            config: s.config,
            storage: s.storage,
            streams: RwLock::new(s.streams),
            segments: RwLock::new(s.segments),
            manifest: ManifestFile::new(s.manifest),
            published_group: AtomicU64::new(s.published_group),
            sealed_bytes: AtomicU64::new(s.sealed_bytes),
            active_allocated: AtomicU64::new(s.active_len),
            checkpoint_bytes: AtomicU64::new(s.checkpoint_bytes),
            applied: Mutex::new(s.applied),
            reclaim: Arc::new(Signal::default()),
            poisoned: OnceLock::new(),
            shutting_down: AtomicBool::new(false),
            waiters: Mutex::new(HashMap::new()),
            active_frames: Mutex::default(),
            metrics: Metrics::default(),
        }
    }

    /// Calls `f` on every stream in name order, taking the map's read lock
    /// for a bounded chunk at a time, so a walk of many streams never
    /// holds off the writer (which takes the write lock to create one).
    pub(crate) fn each_stream(&self, mut f: impl FnMut(&str, &Arc<StreamShared>)) {
        const CHUNK: usize = 1024;
        let mut after: Option<Box<str>> = None;
        loop {
            let chunk: Vec<(Box<str>, Arc<StreamShared>)> = {
                let map = locks::read(&self.streams);
                let lower = match &after {
                    Some(a) => std::ops::Bound::Excluded(&**a),
                    None => std::ops::Bound::Unbounded,
                };
                map.range::<str, _>((lower, std::ops::Bound::Unbounded))
                    .take(CHUNK)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            };
            for (name, s) in &chunk {
                f(name, s);
            }
            if chunk.len() < CHUNK {
                return;
            }
            after = chunk.into_iter().last().map(|(k, _)| k);
        }
    }

    /// The stream's durable state, if it exists.
    pub(crate) fn stream(&self, name: &str) -> Option<Arc<StreamShared>> {
        locks::read(&self.streams).get(name).cloned()
    }

    /// Whether writes are being accepted.
    pub(crate) fn is_healthy(&self) -> bool {
        self.poisoned.get().is_none() && !self.shutting_down.load(Ordering::Acquire)
    }

    /// Poisons the engine with `failure` (unless something already did),
    /// logs it, and wakes everyone waiting. Returns `failure`.
    pub(crate) fn poison(&self, failure: StorageFailure) -> Arc<StorageFailure> {
        let failure = Arc::new(failure);
        tracing::error!(error = %failure, "storage failure; engine poisoned, no further writes until reopened");
        let _ = self.poisoned.set(failure.clone());
        self.wake_all_waiters();
        self.nudge_reclaimer();
        failure
    }

    /// Bytes of the data directory's files, as the engine accounts them.
    pub(crate) fn disk_bytes(&self) -> u64 {
        self.disk_bytes_sealed() + self.active_allocated.load(Ordering::Acquire)
    }

    /// The same without the active segment.
    pub(crate) fn disk_bytes_sealed(&self) -> u64 {
        self.sealed_bytes.load(Ordering::Acquire)
            + self.checkpoint_bytes.load(Ordering::Acquire)
            + self.manifest.bytes()
    }

    pub(crate) fn set_active_allocated(&self, bytes: u64) {
        self.active_allocated.store(bytes, Ordering::Release);
    }

    /// A segment of `bytes` was sealed (`+`) or deleted (`-`).
    pub(crate) fn add_sealed_bytes(&self, bytes: u64) {
        self.sealed_bytes.fetch_add(bytes, Ordering::AcqRel);
    }

    pub(crate) fn sub_sealed_bytes(&self, bytes: u64) {
        self.sealed_bytes.fetch_sub(bytes, Ordering::AcqRel);
    }

    pub(crate) fn set_checkpoint_bytes(&self, bytes: u64) {
        self.checkpoint_bytes.store(bytes, Ordering::Release);
    }

    /// Asks the reclaimer to look for work now (it ignores nudges when it
    /// runs only on request).
    pub(crate) fn nudge_reclaimer(&self) {
        self.reclaim.nudge();
    }

    pub(crate) fn notify_streams<'a>(&self, names: impl Iterator<Item = &'a str>) {
        let mut waiters = locks::lock(&self.waiters);
        if waiters.is_empty() {
            return;
        }
        for name in names {
            if let Some(n) = waiters.get(name) {
                n.notify_waiters();
                if Arc::strong_count(n) == 1 {
                    waiters.remove(name);
                }
            }
        }
    }

    pub(crate) fn wake_all_waiters(&self) {
        for n in locks::lock(&self.waiters).values() {
            n.notify_waiters();
        }
    }
}
