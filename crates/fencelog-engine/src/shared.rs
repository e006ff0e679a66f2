//! The state the engine handle, the writer thread and readers share.

use crate::config::Config;
use crate::error::StorageFailure;
use crate::locks;
use crate::metrics::Metrics;
use crate::segment::Segments;
use crate::storage::Storage;
use crate::stream::{StreamMap, StreamShared};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use tokio::sync::Notify;

/// State shared by the handle, the writer thread and readers.
pub(crate) struct Shared {
    pub config: Config,
    pub storage: Arc<dyn Storage>,
    pub streams: RwLock<StreamMap>,
    pub segments: RwLock<Segments>,
    /// Set once, by the writer, on the first write or sync failure (or
    /// writer panic).
    pub poisoned: OnceLock<Arc<StorageFailure>>,
    pub shutting_down: AtomicBool,
    /// Streams someone is waiting on; entries live only while waited on, so
    /// idle streams cost no memory here.
    pub waiters: Mutex<HashMap<Box<str>, Arc<Notify>>>,
    /// Frames of the active segment that some reader holds right now, so
    /// concurrent readers of one frame (a thousand live tails) share one
    /// copy of it instead of reading their own.
    pub active_frames: Mutex<crate::reader::FrameCache>,
    pub metrics: Metrics,
}

impl Shared {
    /// The state a freshly recovered log starts from.
    pub(crate) fn new(
        config: Config,
        storage: Arc<dyn Storage>,
        streams: StreamMap,
        segments: Segments,
    ) -> Self {
        Shared {
            config,
            storage,
            streams: RwLock::new(streams),
            segments: RwLock::new(segments),
            poisoned: OnceLock::new(),
            shutting_down: AtomicBool::new(false),
            waiters: Mutex::new(HashMap::new()),
            active_frames: Mutex::default(),
            metrics: Metrics::default(),
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
