//! fencelog: a fenced append-only log storage engine.
//!
//! Producers append records to named streams with a fencing token; the
//! engine remembers the highest token it has accepted per stream and
//! rejects anything older, atomically with the write and durably. An
//! acknowledgement always means "durable and fenced". See ARCHITECTURE.md
//! for the bird's-eye view and the invariants.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use bytes::Bytes;
//! let engine = fencelog_engine::Engine::open("./fencelog-data")?;
//! let ack = engine.append("orders", 41, vec![Bytes::from("hello")], None).await?;
//! assert_eq!(ack.first_seq, 0);
//! let stale = engine.append("orders", 40, vec![Bytes::from("late")], None).await;
//! assert!(matches!(stale, Err(fencelog_engine::WriteError::StaleToken { .. })));
//! # Ok(()) }
//! ```

#[macro_use]
mod mutation;

pub mod codec;
pub mod config;
pub mod error;
pub mod fence;
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz;
pub mod index;
pub mod metrics;
pub mod name;
pub mod recovery;
pub mod segment;
#[cfg(feature = "sim")]
pub mod sim;
pub mod storage;
pub mod stream;
mod writer;

#[cfg(feature = "mutations")]
pub use mutation::{set_mutation, Mutation};
pub use name::{validate_stream_name, NameError};

pub use config::Config;
pub use error::{Corruption, OpenError, ReadError, StorageFailure, WriteError};
pub use recovery::RecoveryReport;
pub use storage::{DirStorage, Storage, StorageFile};
pub use stream::StreamState;
pub use writer::Ack;

use crate::codec::{decode_frame, frame_bodies, peek_frame_len};
use crate::index::FrameLoc;
use crate::metrics::Metrics;
use crate::recovery::StreamMap;
use crate::segment::Segments;
use crate::stream::StreamShared;
use crate::writer::{Msg, Op, Request, Writer};
use bytes::Bytes;
use std::collections::HashMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, Notify};

/// One record as a reader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub fencing_token: u64,
    pub timestamp_ms: u64,
    /// A zero-copy slice of the segment where the segment is memory-mapped.
    pub body: Bytes,
}

/// The answer to a read: durable records from `start_seq` on, and the
/// stream's durable `next_seq` at the time of the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBatch {
    pub records: Vec<Record>,
    pub next_seq: u64,
}

/// State shared by the handle, the writer thread and readers.
pub(crate) struct Shared {
    pub config: Config,
    pub storage: Arc<dyn Storage>,
    pub streams: RwLock<StreamMap>,
    pub segments: RwLock<Segments>,
    /// Set once, by the writer, on the first write or sync failure.
    pub poisoned: OnceLock<Arc<StorageFailure>>,
    pub shutting_down: AtomicBool,
    /// Streams someone is waiting on; entries live only while waited on, so
    /// idle streams cost no memory here.
    pub waiters: Mutex<HashMap<Box<str>, Arc<Notify>>>,
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
            metrics: Metrics::default(),
        }
    }

    pub(crate) fn notify_streams<'a>(&self, names: impl Iterator<Item = &'a str>) {
        let mut waiters = self.waiters.lock().unwrap();
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
        for n in self.waiters.lock().unwrap().values() {
            n.notify_waiters();
        }
    }
}

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
        let mut waiters = self.shared.waiters.lock().unwrap();
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
        let writer = Writer::new(
            shared.clone(),
            rx,
            recovered.next_group_id,
            recovered.active_len,
        );
        std::thread::Builder::new()
            .name("fencelog-writer".into())
            .spawn({
                let mutation = mutation::inherit();
                move || {
                    mutation::adopt(mutation);
                    writer.run()
                }
            })
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

    pub fn config(&self) -> &Config {
        &self.shared().config
    }

    pub fn metrics(&self) -> &Metrics {
        &self.shared().metrics
    }

    /// Requests waiting for the writer right now.
    pub fn queue_depth(&self) -> usize {
        self.inner.tx.max_capacity() - self.inner.tx.capacity()
    }

    /// The storage failure that poisoned the engine, if any.
    pub fn poisoned(&self) -> Option<Arc<StorageFailure>> {
        self.shared().poisoned.get().cloned()
    }

    /// Whether writes are being accepted.
    pub fn is_healthy(&self) -> bool {
        self.shared().poisoned.get().is_none()
            && !self.shared().shutting_down.load(Ordering::Acquire)
    }

    fn stream(&self, name: &str) -> Option<Arc<StreamShared>> {
        self.shared().streams.read().unwrap().get(name).cloned()
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
        let streams = self.shared().streams.read().unwrap();
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

    async fn submit(&self, req: Request) -> Result<(), WriteError> {
        self.inner
            .tx
            .send(Msg::Write(req))
            .await
            .map_err(|_| WriteError::ShuttingDown)
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
        self.stream(stream)
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
        let streams = self.shared().streams.read().unwrap();
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
        validate_stream_name(stream).map_err(ReadError::InvalidStreamName)?;
        let s = self.stream(stream).ok_or(ReadError::NotFound)?;
        let next_seq = s.next_seq();
        if start_seq > next_seq {
            return Err(ReadError::OutOfRange {
                start_seq,
                next_seq,
            });
        }
        let mut records = Vec::new();
        if start_seq == next_seq || max_records == 0 {
            return Ok(ReadBatch { records, next_seq });
        }
        // Collect frame locations under the index lock, read them without it.
        let mut locs: Vec<FrameLoc> = Vec::new();
        {
            let idx = s.index.lock().unwrap();
            let mut cur = idx.find(start_seq);
            let mut covered = 0usize;
            while let Some((i, loc)) = cur {
                if loc.first_seq >= next_seq || covered >= max_records {
                    break;
                }
                covered += (loc.first_seq + loc.record_count as u64)
                    .saturating_sub(start_seq.max(loc.first_seq))
                    as usize;
                locs.push(loc);
                cur = idx.next_after(i, &loc);
            }
        }
        let mut bytes = 0usize;
        'frames: for loc in locs {
            let (buf, start, file) = self.frame_bytes(&loc)?;
            let frame = decode_frame(&buf[start..]).map_err(|e| {
                ReadError::Corrupt(Corruption {
                    file: file.clone(),
                    offset: loc.offset,
                    reason: e.to_string(),
                })
            })?;
            if frame.name != stream
                || frame.header.first_seq != loc.first_seq
                || frame.header.record_count != loc.record_count
            {
                return Err(ReadError::Corrupt(Corruption {
                    file,
                    offset: loc.offset,
                    reason: format!(
                        "index points at a frame of {} seq {}, wanted {stream} seq {}",
                        frame.name, frame.header.first_seq, loc.first_seq
                    ),
                }));
            }
            for (k, body) in frame_bodies(&buf, &frame, start).into_iter().enumerate() {
                let seq = loc.first_seq + k as u64;
                if seq < start_seq {
                    continue;
                }
                if seq >= next_seq
                    || records.len() >= max_records
                    || (!records.is_empty() && bytes + body.len() > max_bytes)
                {
                    break 'frames;
                }
                bytes += body.len();
                records.push(Record {
                    seq,
                    fencing_token: frame.header.fencing_token,
                    timestamp_ms: frame.header.timestamp_ms,
                    body,
                });
            }
        }
        Ok(ReadBatch { records, next_seq })
    }

    /// The bytes holding the frame at `loc`: a buffer and the frame's start.
    fn frame_bytes(&self, loc: &FrameLoc) -> Result<(Bytes, usize, String), ReadError> {
        let seg = self
            .shared()
            .segments
            .read()
            .unwrap()
            .get(loc.segment)
            .cloned()
            .ok_or_else(|| ReadError::Io(format!("segment {} is not open", loc.segment)))?;
        let corrupt = |reason: String| {
            ReadError::Corrupt(Corruption {
                file: seg.name.clone(),
                offset: loc.offset,
                reason,
            })
        };
        if let Some(map) = &seg.sealed {
            let at = loc.offset as usize;
            if at >= map.len() {
                return Err(corrupt("offset past the end of the segment".into()));
            }
            return Ok((map.clone(), at, seg.name.clone()));
        }
        let mut head = [0u8; 12];
        seg.file
            .read_exact_at(&mut head, loc.offset)
            .map_err(|e| ReadError::Io(format!("reading {}: {e}", seg.name)))?;
        let len = peek_frame_len(&head).map_err(|e| corrupt(e.to_string()))?;
        let mut buf = vec![0u8; len];
        seg.file
            .read_exact_at(&mut buf, loc.offset)
            .map_err(|e| ReadError::Io(format!("reading {}: {e}", seg.name)))?;
        Ok((Bytes::from(buf), 0, seg.name.clone()))
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
        let notify = shared
            .waiters
            .lock()
            .unwrap()
            .entry(stream.into())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone();
        let guard = WaiterGuard {
            shared,
            name: stream,
            notify: Some(notify.clone()),
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let next = loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next = self.stream(stream).map(|s| s.next_seq()).unwrap_or(0);
            if next > seq || !self.is_healthy() {
                break next;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break self.stream(stream).map(|s| s.next_seq()).unwrap_or(0);
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
