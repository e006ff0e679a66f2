//! [`Engine`]: the cloneable handle an embedder holds. It opens a log
//! (recovery, then the writer thread), runs the checks that cost no writer
//! time, hands writes to the writer, and serves reads and waits from
//! published (durable) state.

use crate::config::Config;
use crate::error::{OpenError, ReadError, StorageFailure, WriteError};
use crate::locks;
use crate::metrics::Metrics;
use crate::name::validate_stream_name;
use crate::reader::{self, ReadBatch};
use crate::recovery::{self, RecoveryReport};
use crate::shared::Shared;
use crate::storage::{DirStorage, Storage};
use crate::stream::StreamState;
use crate::writer::{self, Ack, Msg, Op, Request};
use bytes::Bytes;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, Notify};

struct Inner {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Msg>,
    report: RecoveryReport,
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
        let notify = self.notify.take().unwrap();
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
        let recovered = recovery::recover(&*storage)?;
        let (tx, rx) = mpsc::channel(config.queue_depth_max);
        let shared = Arc::new(Shared::new(
            config,
            storage,
            recovered.streams,
            recovered.segments,
        ));
        writer::spawn(
            shared.clone(),
            rx,
            recovered.next_group_id,
            recovered.active_len,
        )
        .map_err(|e| OpenError::io("starting the writer thread", e))?;
        Ok(Engine {
            inner: Arc::new(Inner {
                shared,
                tx,
                report: recovered.report,
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

    /// Checks that cost no writer time: limits, and the token against the
    /// stream's durable highest token (the rejection fast path).
    fn precheck(&self, stream: &str, token: u64) -> Result<(), WriteError> {
        validate_stream_name(stream).map_err(WriteError::InvalidStreamName)?;
        if token == 0 {
            return Err(WriteError::ZeroToken);
        }
        if let Some(f) = self.shared().poisoned.get() {
            return Err(WriteError::Poisoned(f.clone()));
        }
        if self.shared().shutting_down.load(Ordering::Acquire) {
            return Err(WriteError::ShuttingDown);
        }
        let streams = locks::read(&self.shared().streams);
        if let Some(s) = streams.get(stream) {
            let highest = s.highest_token();
            if token < highest {
                let next_seq = s.next_seq();
                drop(streams);
                self.shared().metrics.stale_rejections.inc();
                return Err(WriteError::StaleToken {
                    presented: token,
                    highest,
                    next_seq,
                });
            }
        }
        Ok(())
    }

    fn check_batch(&self, records: &[Bytes]) -> Result<(), WriteError> {
        let c = &self.shared().config;
        if records.is_empty() {
            return Err(WriteError::EmptyBatch);
        }
        if records.len() > c.batch_records_max {
            return Err(WriteError::TooLarge {
                what: "records in the batch",
                limit: c.batch_records_max as u64,
                actual: records.len() as u64,
            });
        }
        let bytes: usize = records.iter().map(|r| r.len()).sum();
        if bytes > c.batch_bytes_max {
            return Err(WriteError::TooLarge {
                what: "bytes in the batch",
                limit: c.batch_bytes_max as u64,
                actual: bytes as u64,
            });
        }
        Ok(())
    }

    /// Queues a request for the writer, or refuses it at once when the
    /// queue is full: an overloaded writer answers "later" instead of
    /// letting callers pile up without bound. Nothing of a refused request
    /// was applied.
    async fn submit(&self, req: Request) -> Result<(), WriteError> {
        use tokio::sync::mpsc::error::TrySendError;
        match self.inner.tx.try_send(Msg::Write(req)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                self.shared().metrics.overload_rejections.inc();
                Err(WriteError::Overloaded {
                    queue_depth_max: self.shared().config.queue_depth_max,
                })
            }
            Err(TrySendError::Closed(_)) => Err(WriteError::ShuttingDown),
        }
    }

    /// Appends a batch atomically. Answers once the batch is durable, or
    /// with the reason it was refused.
    pub async fn append(
        &self,
        stream: &str,
        fencing_token: u64,
        records: Vec<Bytes>,
        match_seq_num: Option<u64>,
    ) -> Result<Ack, WriteError> {
        self.precheck(stream, fencing_token)?;
        self.check_batch(&records)?;
        let (reply, rx) = oneshot::channel();
        self.submit(Request {
            stream: stream.into(),
            token: fencing_token,
            op: Op::Append {
                records,
                match_seq_num,
                reply,
            },
        })
        .await?;
        rx.await.map_err(|_| WriteError::ShuttingDown)?
    }

    /// Raises the stream's highest token without writing a record, durably.
    /// Creates the stream if it does not exist.
    pub async fn fence(&self, stream: &str, fencing_token: u64) -> Result<StreamState, WriteError> {
        self.precheck(stream, fencing_token)?;
        let (reply, rx) = oneshot::channel();
        self.submit(Request {
            stream: stream.into(),
            token: fencing_token,
            op: Op::Fence { reply },
        })
        .await?;
        rx.await.map_err(|_| WriteError::ShuttingDown)?
    }

    /// The stream's durable state.
    pub fn state(&self, stream: &str) -> Result<StreamState, ReadError> {
        validate_stream_name(stream).map_err(ReadError::InvalidStreamName)?;
        self.shared()
            .stream(stream)
            .map(|s| s.snapshot(stream))
            .ok_or(ReadError::NotFound)
    }

    /// Streams whose names start with `prefix`, in name order, starting
    /// after `start_after` (for pagination), at most `limit` of them.
    pub fn list_streams(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Vec<StreamState> {
        let streams = locks::read(&self.shared().streams);
        let lower = match start_after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        streams
            .range::<str, _>((lower, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, s)| s.snapshot(k))
            .collect()
    }

    /// Reads durable records from `start_seq`: at most `max_records`, and at
    /// most `max_bytes` of bodies except that the first record is always
    /// returned whole so a reader can make progress.
    pub fn read(
        &self,
        stream: &str,
        start_seq: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<ReadBatch, ReadError> {
        reader::read(self.shared(), stream, start_seq, max_records, max_bytes)
    }

    /// Waits until the stream's durable `next_seq` passes `seq` (a record at
    /// `seq` exists), the timeout elapses, or the engine stops accepting
    /// writes. Returns the durable `next_seq` then. No polling: the writer
    /// wakes waiters of the streams each group touched.
    pub async fn wait_for(
        &self,
        stream: &str,
        seq: u64,
        timeout: Duration,
    ) -> Result<u64, ReadError> {
        validate_stream_name(stream).map_err(ReadError::InvalidStreamName)?;
        let shared = self.shared();
        let notify = locks::lock(&shared.waiters)
            .entry(stream.into())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone();
        let guard = WaiterGuard {
            shared,
            name: stream,
            notify: Some(notify.clone()),
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let durable_next = || shared.stream(stream).map(|s| s.next_seq()).unwrap_or(0);
        let next = loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next = durable_next();
            if next > seq || !self.is_healthy() {
                break next;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break durable_next();
            }
        };
        drop(notify);
        drop(guard);
        Ok(next)
    }

    /// Stops accepting writes, commits and syncs everything already queued,
    /// and stops the writer. Reads keep working.
    pub async fn shutdown(&self) {
        self.shared().shutting_down.store(true, Ordering::Release);
        let (tx, rx) = oneshot::channel();
        if self.inner.tx.send(Msg::Shutdown(tx)).await.is_ok() {
            let _ = rx.await;
        }
        self.shared().wake_all_waiters();
    }
}
