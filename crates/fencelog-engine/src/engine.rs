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
use crate::seek;
use crate::shared::Shared;
use crate::storage::{DirStorage, Storage};
use crate::stream::{StreamShared, StreamState};
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
    pub(crate) fn precheck(&self, stream: &str, token: u64) -> Result<(), WriteError> {
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

    pub(crate) fn check_batch(&self, records: &[Bytes]) -> Result<(), WriteError> {
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
        reader::read(
            self.shared(),
            stream,
            start_seq,
            max_records,
            max_bytes,
            None,
        )
    }

    /// [`Engine::read`] that stops before the first record whose timestamp
    /// is at or after `until_timestamp_ms` (the first record is not exempt:
    /// a read that starts there returns nothing).
    pub fn read_until(
        &self,
        stream: &str,
        start_seq: u64,
        max_records: usize,
        max_bytes: usize,
        until_timestamp_ms: u64,
    ) -> Result<ReadBatch, ReadError> {
        reader::read(
            self.shared(),
            stream,
            start_seq,
            max_records,
            max_bytes,
            Some(until_timestamp_ms),
        )
    }

    /// The seq of the first durable record whose timestamp is at or after
    /// `timestamp_ms`, or the stream's `next_seq` when there is none (so a
    /// read from it returns what arrives next). Timestamps never decrease
    /// within a stream, so this is a binary search: at most
    /// `⌈log2(n + 1)⌉` checksum-verified frame reads for `n` records.
    pub fn seq_at_timestamp(&self, stream: &str, timestamp_ms: u64) -> Result<u64, ReadError> {
        seek::seq_at_timestamp(self.shared(), stream, timestamp_ms)
    }

    /// Waits until the stream's durable `next_seq` passes `seq` (a record at
    /// `seq` exists), the timeout elapses, or the engine stops accepting
    /// writes. Returns the durable `next_seq` then (0 for a stream that does
    /// not exist). No polling: the writer wakes waiters of the streams each
    /// group touched.
    pub async fn wait_for(
        &self,
        stream: &str,
        seq: u64,
        timeout: Duration,
    ) -> Result<u64, ReadError> {
        let durable_next = |s: Option<&StreamShared>| s.map(|s| s.next_seq()).unwrap_or(0);
        self.wait_until(stream, timeout, |s| durable_next(s) > seq)
            .await
            .map(|s| durable_next(s.as_deref()))
    }

    /// Waits until the stream exists (an append or a fence created it), the
    /// timeout elapses, or the engine stops accepting writes; returns
    /// whether it exists then. Like [`Engine::wait_for`], without polling.
    pub async fn wait_for_stream(
        &self,
        stream: &str,
        timeout: Duration,
    ) -> Result<bool, ReadError> {
        self.wait_until(stream, timeout, |s| s.is_some())
            .await
            .map(|s| s.is_some())
    }

    /// Waits until `ready` holds for the stream's durable state (`None`
    /// while it does not exist), the timeout elapses, or the engine stops
    /// accepting writes (nothing more can arrive); returns the state then.
    async fn wait_until(
        &self,
        stream: &str,
        timeout: Duration,
        ready: impl Fn(Option<&StreamShared>) -> bool,
    ) -> Result<Option<Arc<StreamShared>>, ReadError> {
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
        let state = loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Checked after enabling the wake-up, so a publish between the
            // check and the wait is not missed.
            let state = shared.stream(stream);
            if ready(state.as_deref()) || !self.is_healthy() {
                break state;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break shared.stream(stream);
            }
        };
        drop(notify);
        drop(guard);
        Ok(state)
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
