//! [`Engine`]: the cloneable handle an embedder holds. It opens a log
//! (recovery, then the writer thread), runs the checks that cost no writer
//! time, hands writes to the writer ([`writes`], and [`records`] for records
//! with headers), and serves reads and waits from published (durable)
//! state ([`reads`]).

mod cursors;
mod reads;
mod records;
mod replicated;
mod writes;

use crate::config::Config;
use crate::error::{OpenError, StorageFailure, WriteError};
use crate::locks;
use crate::metrics::Metrics;
use crate::recovery::{self, RecoveryReport};
use crate::shared::Shared;
use crate::storage::{DirStorage, Storage};
use crate::writer::{self, Msg};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Notify};

struct Inner {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Msg>,
    report: RecoveryReport,
    /// The deliberate bug switched on where the engine was opened, for
    /// the checks callers' threads run (`mutated_as!`).
    mutation: crate::mutation::Inherited,
}

impl Drop for Inner {
    /// The last handle is gone: the writer stops when its queue closes,
    /// and the reclaimer (which holds the engine only weakly) is told to.
    fn drop(&mut self) {
        self.shared.reclaim.stop(None);
    }
}

/// A handle to an open log. Cheap to clone; all clones share one writer.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

/// Removes a stream's waiter entry when its last waiter leaves.
struct WaiterGuard<'a> {
    shared: &'a Shared,
    name: &'a str,
    notify: Option<Arc<Notify>>,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        let mut waiters = locks::lock(&self.shared.waiters);
        let notify = self
            .notify
            .take()
            .expect("set when the guard is made, taken only here");
        // Two owners left: the map and us.
        if Arc::strong_count(&notify) == 2 {
            waiters.remove(self.name);
        }
    }
}

impl Engine {
    /// Opens (or creates) a log in a directory with default limits.
    pub fn open(dir: impl AsRef<Path>) -> Result<Engine, OpenError> {
        Self::open_with(dir, Config::default())
    }

    /// Opens (or creates) a log in a directory with the given limits.
    pub fn open_with(dir: impl AsRef<Path>, config: Config) -> Result<Engine, OpenError> {
        let dir = dir.as_ref();
        let storage = DirStorage::new(dir)
            .map_err(|e| OpenError::io(format!("creating {}", dir.display()), e))?;
        Self::open_storage(Arc::new(storage), config)
    }

    /// Opens a log on any [`Storage`], e.g. a simulated disk.
    pub fn open_storage(storage: Arc<dyn Storage>, config: Config) -> Result<Engine, OpenError> {
        config.validate().map_err(OpenError::Config)?;
        storage
            .lock()
            .map_err(|e| OpenError::io("locking the data directory", e))?;
        let recovered = recovery::recover(&*storage, &config)?;
        let (tx, rx) = mpsc::channel(config.queue_depth_max);
        let (next_group_id, active_len) = (recovered.next_group_id, recovered.active_len);
        let report = recovered.report.clone();
        let shared = Arc::new(Shared::new(recovered.into_start(config, storage)));
        writer::spawn(shared.clone(), rx, next_group_id, active_len)
            .map_err(|e| OpenError::io("starting the writer thread", e))?;
        crate::reclaim::spawn(&shared, &tx)
            .map_err(|e| OpenError::io("starting the reclaimer thread", e))?;
        Ok(Engine {
            inner: Arc::new(Inner {
                shared,
                tx,
                report,
                mutation: crate::mutation::inherit(),
            }),
        })
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// What recovery found and did when this log was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.report
    }

    /// Bytes of the data directory's files, as the disk budget counts them
    /// (segments including preallocated space, MANIFEST, checkpoint).
    pub fn disk_bytes(&self) -> u64 {
        self.shared().disk_bytes()
    }

    /// The limits this log was opened with.
    pub fn config(&self) -> &Config {
        &self.shared().config
    }

    /// The engine's counters and histograms (Prometheus text via
    /// [`Metrics::encode`]).
    pub fn metrics(&self) -> &Metrics {
        &self.shared().metrics
    }

    /// Requests waiting for the writer right now.
    pub fn queue_depth(&self) -> usize {
        self.inner.tx.max_capacity() - self.inner.tx.capacity()
    }

    /// The storage failure (or writer panic) that poisoned the engine, if
    /// any.
    pub fn poisoned(&self) -> Option<Arc<StorageFailure>> {
        self.shared().poisoned.get().cloned()
    }

    /// Whether writes are being accepted.
    pub fn is_healthy(&self) -> bool {
        self.shared().is_healthy()
    }

    /// Runs a reclamation pass now (retention, compaction, checkpoint,
    /// segment deletion) and answers what it did. The reclaimer also runs
    /// on its own, every `Config::reclaim_interval_ms` and soon after trims
    /// and deletes; with an interval of 0 it runs only when asked here.
    pub async fn reclaim(&self) -> Result<crate::ReclaimReport, WriteError> {
        if let Some(f) = self.shared().poisoned.get() {
            return Err(WriteError::Poisoned(f.clone()));
        }
        let (tx, rx) = oneshot::channel();
        self.shared().reclaim.request(tx);
        rx.await.map_err(|_| WriteError::ShuttingDown)?
    }

    /// Makes every write answered so far durable. In
    /// [`crate::Durability::OnFlush`] the writer answers groups once
    /// written and syncs here; in the default mode every answer already
    /// was durable and this returns at once after the queue ahead of it.
    /// A failed sync poisons the engine (answered groups may be lost) and
    /// is never retried.
    pub async fn flush(&self) -> Result<(), WriteError> {
        if let Some(f) = self.shared().poisoned.get() {
            return Err(WriteError::Poisoned(f.clone()));
        }
        let (tx, rx) = oneshot::channel();
        self.inner
            .tx
            .send(Msg::Flush(tx))
            .await
            .map_err(|_| WriteError::ShuttingDown)?;
        rx.await.map_err(|_| WriteError::ShuttingDown)?
    }

    /// Stops accepting writes, commits and syncs everything already queued,
    /// and stops the writer. Reads keep working.
    pub async fn shutdown(&self) {
        // The reclaimer first: it writes through the writer.
        let (done, stopped) = oneshot::channel();
        self.shared().reclaim.stop(Some(done));
        let _ = stopped.await;
        self.shared().shutting_down.store(true, Ordering::Release);
        let (tx, rx) = oneshot::channel();
        if self.inner.tx.send(Msg::Shutdown(tx)).await.is_ok() {
            let _ = rx.await;
        }
        self.shared().wake_all_waiters();
    }
}
