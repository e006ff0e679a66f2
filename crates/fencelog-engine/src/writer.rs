//! The single writer: the only code that orders writes, owns the active
//! segment's end, and publishes durable state.
//!
//! One loop iteration is one group: take everything waiting (up to the group
//! limits), apply the fencing rule in arrival order against pending state,
//! encode all accepted frames into one buffer, write it, `sync_data` once,
//! publish, then answer. Nobody hears "ok" — or "stale" decided against
//! pending state — before the sync returns. Requests that queue while a sync
//! runs form the next group, which is the whole of group commit: no timers.

use crate::codec::{encode_frame, frame_len, set_last_in_group, FrameKind, FrameSpec};
use crate::error::{StorageFailure, WriteError};
use crate::fence::{self, FenceState, Refusal};
use crate::locks;
use crate::segment::{create_segment, segment_name, Segment};
use crate::shared::Shared;
use crate::stream::{StreamShared, StreamState};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};

/// What a successful append returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// Seq of the batch's first record.
    pub first_seq: u64,
    /// Seq of the batch's last record.
    pub last_seq: u64,
    /// The stream's `next_seq` right after the batch.
    pub next_seq: u64,
    /// The token the batch was accepted with.
    pub fencing_token: u64,
    /// The timestamp every record of the batch carries (Unix ms).
    pub timestamp_ms: u64,
}

pub(crate) enum Op {
    Append {
        records: Vec<Bytes>,
        match_seq_num: Option<u64>,
        reply: oneshot::Sender<Result<Ack, WriteError>>,
    },
    Fence {
        reply: oneshot::Sender<Result<StreamState, WriteError>>,
    },
}

pub(crate) struct Request {
    pub stream: Box<str>,
    pub token: u64,
    pub op: Op,
}

pub(crate) enum Msg {
    Write(Request),
    /// Commit everything queued so far, then stop.
    Shutdown(oneshot::Sender<()>),
}

impl Request {
    fn encoded_len(&self) -> usize {
        match &self.op {
            Op::Append { records, .. } => frame_len(&self.stream, records),
            Op::Fence { .. } => frame_len::<&[u8]>(&self.stream, &[]),
        }
    }
}

/// A request's answer, held until the group is durable.
enum Answer {
    Append(
        oneshot::Sender<Result<Ack, WriteError>>,
        Result<Ack, WriteError>,
    ),
    Fence(
        oneshot::Sender<Result<StreamState, WriteError>>,
        Result<StreamState, WriteError>,
    ),
}

impl Answer {
    fn send(self) {
        // A caller that gave up (dropped its future) is not an error: the
        // write happened or not regardless of who listens.
        match self {
            Answer::Append(tx, r) => {
                let _ = tx.send(r);
            }
            Answer::Fence(tx, r) => {
                let _ = tx.send(r);
            }
        }
    }

    fn fail(self, err: WriteError) {
        match self {
            Answer::Append(tx, _) => {
                let _ = tx.send(Err(err));
            }
            Answer::Fence(tx, _) => {
                let _ = tx.send(Err(err));
            }
        }
    }
}

#[derive(Clone)]
struct Pending {
    fence: FenceState,
    last_timestamp_ms: u64,
    shared: Option<Arc<StreamShared>>,
    /// A frame for this stream is already planned in this group.
    planned: bool,
}

/// A frame of the current group, to index once durable.
struct Planned {
    stream: Box<str>,
    kind: FrameKind,
    offset_in_buf: usize,
    first_seq: u64,
    count: u32,
}

/// Longest gap between arrivals the writer waits out while callers of the
/// last group come back (see [`Writer::run`]).
const LINGER_QUIET_MAX: Duration = Duration::from_micros(30);

/// What the last group tells the next one about who is coming back.
struct Linger {
    /// Requests already queued when the last group was answered, plus the
    /// ones it answered.
    expected: usize,
    /// How long the last group's commit took: bounds the wait.
    last_sync: Duration,
}

pub(crate) struct Writer {
    pub shared: Arc<Shared>,
    pub rx: mpsc::Receiver<Msg>,
    pub next_group_id: u64,
    pub active_len: u64,
    /// Length of the active segment file: `active_len` plus zero-filled
    /// space written ahead (see [`crate::config::PREALLOC_BYTES_DEFAULT`]).
    allocated_len: u64,
    buf: Vec<u8>,
}

/// Starts the writer thread of a freshly recovered log. The thread adopts
/// the opening thread's mutation switch (see `crate::mutation`).
pub(crate) fn spawn(
    shared: Arc<Shared>,
    rx: mpsc::Receiver<Msg>,
    next_group_id: u64,
    active_len: u64,
) -> std::io::Result<()> {
    let writer = Writer::new(shared, rx, next_group_id, active_len);
    let mutation = crate::mutation::inherit();
    std::thread::Builder::new()
        .name("fencelog-writer".into())
        .spawn(move || {
            crate::mutation::adopt(mutation);
            writer.run()
        })
        .map(drop)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn refusal_error(r: Refusal) -> WriteError {
    match r {
        Refusal::ZeroToken => WriteError::ZeroToken,
        Refusal::Stale {
            presented,
            highest,
            next_seq,
        } => WriteError::StaleToken {
            presented,
            highest,
            next_seq,
        },
        Refusal::SeqMismatch { expected, next_seq } => {
            WriteError::SeqMismatch { expected, next_seq }
        }
    }
}

impl Writer {
    pub fn new(
        shared: Arc<Shared>,
        rx: mpsc::Receiver<Msg>,
        next_group_id: u64,
        active_len: u64,
    ) -> Self {
        Writer {
            shared,
            rx,
            next_group_id,
            active_len,
            // Recovery leaves the active segment exactly as long as its data.
            allocated_len: active_len,
            buf: Vec::new(),
        }
    }

    pub fn run(mut self) {
        let mut group: Vec<Request> = Vec::new();
        let mut shutdown: Vec<oneshot::Sender<()>> = Vec::new();
        let mut linger = Linger {
            expected: 0,
            last_sync: Duration::ZERO,
        };
        loop {
            let Some(first) = self.rx.blocking_recv() else {
                break;
            };
            let mut bytes = 0;
            let mut push = |m: Msg, group: &mut Vec<Request>, bytes: &mut usize| match m {
                Msg::Write(r) => {
                    *bytes += r.encoded_len();
                    group.push(r);
                }
                Msg::Shutdown(tx) => shutdown.push(tx),
            };
            push(first, &mut group, &mut bytes);
            let full = |group: &Vec<Request>, bytes: usize| {
                group.len() >= self.shared.config.group_requests_max
                    || bytes >= self.shared.config.group_bytes_max
            };
            // Callers answered by the last group usually send again within
            // microseconds. Starting the sync before they arrive splits them
            // into two cohorts that alternate, each waiting two syncs per
            // append. So wait for them, but only while they keep arriving
            // (a quiet gap ends it) and never long next to a sync.
            let expected = linger.expected;
            let quiet = (linger.last_sync / 16).min(LINGER_QUIET_MAX);
            let give_up = Instant::now() + linger.last_sync / 2;
            let mut last_arrival = Instant::now();
            while !full(&group, bytes) {
                match self.rx.try_recv() {
                    Ok(m) => {
                        push(m, &mut group, &mut bytes);
                        last_arrival = Instant::now();
                    }
                    Err(mpsc::error::TryRecvError::Empty)
                        if group.len() < expected
                            && last_arrival.elapsed() < quiet
                            && Instant::now() < give_up =>
                    {
                        std::thread::yield_now()
                    }
                    Err(_) => break,
                }
            }
            self.shared.metrics.queue_depth.set(self.rx.len() as i64);
            if !group.is_empty() {
                let answered = group.len();
                let started = Instant::now();
                self.commit(std::mem::take(&mut group));
                linger = Linger {
                    expected: self.rx.len() + answered,
                    last_sync: started.elapsed(),
                };
            }
            if !shutdown.is_empty() {
                // Everything sent before the shutdown request is in the
                // queue ahead of it; commit all of it, then stop.
                // Same group bounds as above, and a later shutdown() waits
                // for the same end as the first.
                self.rx.close();
                let mut bytes = 0;
                while let Ok(m) = self.rx.try_recv() {
                    match m {
                        Msg::Write(r) => {
                            bytes += r.encoded_len();
                            group.push(r);
                        }
                        Msg::Shutdown(tx) => shutdown.push(tx),
                    }
                    if group.len() >= self.shared.config.group_requests_max
                        || bytes >= self.shared.config.group_bytes_max
                    {
                        self.commit(std::mem::take(&mut group));
                        bytes = 0;
                    }
                }
                if !group.is_empty() {
                    self.commit(std::mem::take(&mut group));
                }
                break;
            }
        }
        self.shared.wake_all_waiters();
        // The directory lock lives as long as `Shared`. Let go of the
        // writer's reference before `shutdown()` returns, so dropping the
        // engine right after it frees the lock and a reopen succeeds.
        drop(self);
        for tx in shutdown {
            let _ = tx.send(());
        }
    }

    fn lookup(&self, name: &str) -> Pending {
        match locks::read(&self.shared.streams).get(name) {
            Some(s) => Pending {
                fence: s.fence_state(),
                last_timestamp_ms: s.last_timestamp_ms(),
                shared: Some(s.clone()),
                planned: false,
            },
            None => Pending {
                fence: FenceState::default(),
                last_timestamp_ms: 0,
                shared: None,
                planned: false,
            },
        }
    }

    fn commit(&mut self, group: Vec<Request>) {
        if let Some(f) = self.shared.poisoned.get() {
            for r in group {
                let err = Err(WriteError::Poisoned(f.clone()));
                match r.op {
                    Op::Append { reply, .. } => Answer::Append(reply, err).send(),
                    Op::Fence { reply } => {
                        Answer::Fence(reply, Err(WriteError::Poisoned(f.clone()))).send()
                    }
                }
            }
            return;
        }
        let now = now_ms();
        let group_id = self.next_group_id;
        let mut pending: HashMap<Box<str>, Pending> = HashMap::new();
        let mut planned: Vec<Planned> = Vec::new();
        let mut answers: Vec<Answer> = Vec::with_capacity(group.len());
        let mut stale = 0u64;
        let mut mismatched = 0u64;
        let mut appends = 0u64;
        let mut fences = 0u64;
        let mut records_total = 0u64;
        self.buf.clear();

        for req in group {
            if !pending.contains_key(&req.stream) {
                let p = self.lookup(&req.stream);
                pending.insert(req.stream.clone(), p);
            }
            let p = pending.get_mut(&req.stream).unwrap();
            match req.op {
                Op::Append {
                    records,
                    match_seq_num,
                    reply,
                } => match fence::check_append(p.fence, req.token, match_seq_num) {
                    Err(r) => {
                        match r {
                            Refusal::Stale { .. } => stale += 1,
                            Refusal::SeqMismatch { .. } => mismatched += 1,
                            Refusal::ZeroToken => {}
                        }
                        answers.push(Answer::Append(reply, Err(refusal_error(r))));
                    }
                    Ok(()) => {
                        let ts = now.max(p.last_timestamp_ms);
                        let first_seq = p.fence.next_seq;
                        let count = records.len() as u32;
                        let offset_in_buf = encode_frame(
                            &mut self.buf,
                            &FrameSpec {
                                kind: FrameKind::Records,
                                last_in_group: false,
                                group_id,
                                first_seq,
                                fencing_token: req.token,
                                timestamp_ms: ts,
                                name: &req.stream,
                            },
                            &records,
                        );
                        p.fence.next_seq += count as u64;
                        p.fence.highest_token = req.token;
                        p.last_timestamp_ms = ts;
                        p.planned = true;
                        planned.push(Planned {
                            stream: req.stream,
                            kind: FrameKind::Records,
                            offset_in_buf,
                            first_seq,
                            count,
                        });
                        appends += 1;
                        records_total += count as u64;
                        answers.push(Answer::Append(
                            reply,
                            Ok(Ack {
                                first_seq,
                                last_seq: first_seq + count as u64 - 1,
                                next_seq: first_seq + count as u64,
                                fencing_token: req.token,
                                timestamp_ms: ts,
                            }),
                        ));
                    }
                },
                Op::Fence { reply } => match fence::check_fence(p.fence, req.token) {
                    Err(r) => {
                        if matches!(r, Refusal::Stale { .. }) {
                            stale += 1;
                        }
                        answers.push(Answer::Fence(reply, Err(refusal_error(r))));
                    }
                    Ok(()) => {
                        let exists = p.shared.is_some() || p.planned;
                        if fence::fence_needs_frame(p.fence, req.token, exists) {
                            let offset_in_buf = encode_frame::<&[u8]>(
                                &mut self.buf,
                                &FrameSpec {
                                    kind: FrameKind::Fence,
                                    last_in_group: false,
                                    group_id,
                                    first_seq: p.fence.next_seq,
                                    fencing_token: req.token,
                                    timestamp_ms: now.max(p.last_timestamp_ms),
                                    name: &req.stream,
                                },
                                &[],
                            );
                            p.fence.highest_token = req.token;
                            p.planned = true;
                            planned.push(Planned {
                                stream: req.stream.clone(),
                                kind: FrameKind::Fence,
                                offset_in_buf,
                                first_seq: p.fence.next_seq,
                                count: 0,
                            });
                            fences += 1;
                        }
                        let state = StreamState {
                            stream: req.stream.to_string(),
                            first_seq: 0,
                            next_seq: p.fence.next_seq,
                            highest_token: p.fence.highest_token,
                            last_timestamp_ms: p.last_timestamp_ms,
                        };
                        answers.push(Answer::Fence(reply, Ok(state)));
                    }
                },
            }
        }

        let shared = self.shared.clone();
        let m = &shared.metrics;
        if planned.is_empty() {
            // Every decision was made against durable state: answer now.
            m.stale_rejections.inc_by(stale);
            m.seq_mismatches.inc_by(mismatched);
            answers.into_iter().for_each(Answer::send);
            return;
        }
        let last_at = planned.last().unwrap().offset_in_buf;
        set_last_in_group(&mut self.buf[last_at..], true);

        let started = Instant::now();
        let write = self.write_group();
        let placed = match write {
            Ok(p) => p,
            Err(failure) => return self.fail_group(failure, answers),
        };
        m.fsync_seconds.observe(started.elapsed().as_secs_f64());
        self.next_group_id += 1;

        // Durable: publish in log order, then answer, then wake readers.
        let (segment, base) = placed;
        let mut touched: Vec<(Box<str>, Pending)> = Vec::with_capacity(pending.len());
        for f in &planned {
            let p = pending.get_mut(&f.stream).unwrap();
            if p.shared.is_none() {
                let s = Arc::new(StreamShared::default());
                locks::write(&self.shared.streams).insert(f.stream.clone(), s.clone());
                p.shared = Some(s);
            }
            if f.kind == FrameKind::Records {
                let s = p.shared.as_ref().unwrap();
                locks::lock(&s.index).push(
                    f.first_seq,
                    segment,
                    base + f.offset_in_buf as u64,
                    f.count,
                );
            }
        }
        for (name, p) in pending {
            if let Some(s) = &p.shared {
                s.publish(p.fence.highest_token, p.fence.next_seq, p.last_timestamp_ms);
                touched.push((name, p));
            }
        }
        m.appends_accepted.inc_by(appends);
        m.fences_accepted.inc_by(fences);
        m.records_written.inc_by(records_total);
        m.bytes_written.inc_by(self.buf.len() as u64);
        m.stale_rejections.inc_by(stale);
        m.seq_mismatches.inc_by(mismatched);
        m.groups_committed.inc();
        m.group_records.observe(records_total as f64);
        if mutated!(ServeUnsynced) {
            if let Err(f) = self.sync_active() {
                return self.fail_group(f, answers);
            }
        }
        answers.into_iter().for_each(Answer::send);
        if mutated!(AckBeforeSync) {
            if let Err(f) = self.sync_active() {
                let _ = self.shared.poisoned.set(Arc::new(f));
            }
        }
        self.shared
            .notify_streams(touched.iter().map(|(n, _)| &**n));
        if self.buf.capacity() > 4 * self.shared.config.group_bytes_max {
            self.buf = Vec::new();
        }
    }

    /// Writes and syncs the encoded group, rolling first if it would not
    /// fit. Returns the segment and offset it landed at.
    fn write_group(&mut self) -> Result<(u64, u64), StorageFailure> {
        let header = crate::codec::SEGMENT_HEADER_BYTES as u64;
        if self.active_len > header
            && self.active_len + self.buf.len() as u64 > self.shared.config.segment_bytes_max
        {
            self.roll()?;
        }
        let seg = locks::read(&self.shared.segments).active().clone();
        let at = self.active_len;
        seg.file
            .write_all_at(&self.buf, at)
            .map_err(|e| StorageFailure::new("write", &seg.name, &e))?;
        self.active_len = at + self.buf.len() as u64;
        if self.active_len > self.allocated_len {
            self.preallocate(&seg)?;
        }
        if !(mutated!(AckBeforeSync) || mutated!(ServeUnsynced)) {
            self.sync_active()?;
        }
        Ok((seg.index, at))
    }

    /// The only fsync on the write path. On failure we never retry it: the
    /// kernel may have dropped the pages (see ARCHITECTURE.md).
    fn sync_active(&self) -> Result<(), StorageFailure> {
        let seg = locks::read(&self.shared.segments).active().clone();
        match seg.file.sync_data() {
            Err(_) if mutated!(IgnoreSyncError) => Ok(()),
            r => r.map_err(|e| StorageFailure::new("fdatasync", &seg.name, &e)),
        }
    }

    /// The group in flight failed to become durable: poison the engine and
    /// tell every request in it that its outcome is unknown.
    fn fail_group(&self, failure: StorageFailure, answers: Vec<Answer>) {
        let failure = Arc::new(failure);
        tracing::error!(error = %failure, "storage failure; engine poisoned, no further writes until reopened");
        let _ = self.shared.poisoned.set(failure.clone());
        for a in answers {
            a.fail(WriteError::StorageFailed(failure.clone()));
        }
        self.shared.wake_all_waiters();
    }

    /// Zero-fills the active segment ahead of the data, inside the same
    /// sync as the group that needed it. Real zeros, not `fallocate`: on
    /// ext4 an fallocated extent is "unwritten" and the first write into it
    /// is again a metadata change the sync must commit.
    fn preallocate(&mut self, seg: &Segment) -> Result<(), StorageFailure> {
        /// Zeros written per call, so the buffer stays small.
        const ZEROS_BYTES: usize = 64 << 10;
        static ZEROS: [u8; ZEROS_BYTES] = [0; ZEROS_BYTES];
        let cap = self.shared.config.segment_bytes_max.max(self.active_len);
        let target = (self.active_len + self.shared.config.prealloc_bytes).min(cap);
        let mut at = self.active_len;
        while at < target {
            let n = ((target - at) as usize).min(ZEROS_BYTES);
            seg.file
                .write_all_at(&ZEROS[..n], at)
                .map_err(|e| StorageFailure::new("preallocate", &seg.name, &e))?;
            at += n as u64;
        }
        self.allocated_len = target.max(self.active_len);
        Ok(())
    }

    fn roll(&mut self) -> Result<(), StorageFailure> {
        let old = locks::read(&self.shared.segments).active().clone();
        // A sealed segment ends exactly at its last group: recovery refuses
        // anything after that in any segment but the last. Cut the zeros
        // before the next segment exists.
        if self.allocated_len > self.active_len {
            old.file
                .truncate(self.active_len)
                .and_then(|()| old.file.sync_data())
                .map_err(|e| StorageFailure::new("truncate preallocation", &old.name, &e))?;
            self.allocated_len = self.active_len;
        }
        let index = old.index + 1;
        if index > crate::index::SEGMENT_INDEX_MAX {
            return Err(StorageFailure {
                op: "roll",
                file: segment_name(index),
                kind: std::io::ErrorKind::StorageFull,
                message: "segment index space exhausted".into(),
            });
        }
        let name = segment_name(index);
        let file = create_segment(&*self.shared.storage, index, self.next_group_id)
            .map_err(|e| StorageFailure::new("create segment", &name, &e))?;
        // Sealing is for read speed only; if the map fails, readers keep
        // using positional reads.
        let sealed = old.file.view(self.active_len).ok();
        let mut segs = locks::write(&self.shared.segments);
        let last = segs.list.last_mut().unwrap();
        last.sealed = sealed;
        segs.list.push(Segment {
            index,
            name,
            file,
            sealed: None,
        });
        drop(segs);
        tracing::debug!(segment = index, "rolled to a new segment");
        self.active_len = crate::codec::SEGMENT_HEADER_BYTES as u64;
        self.allocated_len = self.active_len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::sim::SimStorage;
    use crate::storage::Storage;

    /// A writer over a fresh simulated disk, driven on the test's thread.
    fn writer(config: Config, queue: usize) -> (Writer, mpsc::Sender<Msg>) {
        let storage: Arc<dyn Storage> = Arc::new(SimStorage::new());
        let recovered = crate::recovery::recover(&*storage).unwrap();
        let shared = Arc::new(Shared::new(
            config,
            storage,
            recovered.streams,
            recovered.segments,
        ));
        let (tx, rx) = mpsc::channel(queue);
        let w = Writer::new(shared, rx, recovered.next_group_id, recovered.active_len);
        (w, tx)
    }

    fn append(stream: &str, body: usize) -> (Msg, oneshot::Receiver<Result<Ack, WriteError>>) {
        let (reply, rx) = oneshot::channel();
        let msg = Msg::Write(Request {
            stream: stream.into(),
            token: 1,
            op: Op::Append {
                records: vec![Bytes::from(vec![b'x'; body])],
                match_seq_num: None,
                reply,
            },
        });
        (msg, rx)
    }

    /// Requests that slip into the queue behind a shutdown (they passed the
    /// precheck just before the flag was set) are committed by the drain.
    /// The drain must keep the same per-group byte bound as every other
    /// group: one unbounded group could put frame offsets past the index's
    /// 32-bit field and panic the writer after its sync.
    #[test]
    fn shutdown_drain_keeps_the_group_byte_bound() {
        let config = Config {
            group_bytes_max: 4096,
            ..Config::default()
        };
        let (w, tx) = writer(config, 64);
        let shared = w.shared.clone();
        let (done_tx, mut done_rx) = oneshot::channel();
        tx.try_send(Msg::Shutdown(done_tx)).ok().unwrap();
        let mut replies = Vec::new();
        for _ in 0..16 {
            let (m, rx) = append("s", 2000);
            tx.try_send(m).ok().unwrap();
            replies.push(rx);
        }
        w.run();
        done_rx.try_recv().unwrap();
        for mut r in replies {
            r.try_recv().unwrap().unwrap();
        }
        // 16 frames of ~2 KiB under a 4 KiB bound: at least 8 groups.
        let groups = shared.metrics.groups_committed.get();
        assert!(groups >= 8, "16 × 2 KiB committed in {groups} groups");
    }

    /// A second `shutdown()` whose message the drain takes must also wait
    /// for the writer to finish, not be dropped (which returns at once).
    #[test]
    fn a_shutdown_taken_by_the_drain_is_answered_after_the_writer_stops() {
        let config = Config {
            group_requests_max: 2,
            ..Config::default()
        };
        let (w, tx) = writer(config, 64);
        let shared = Arc::downgrade(&w.shared);
        let (first_tx, mut first_rx) = oneshot::channel();
        let (second_tx, mut second_rx) = oneshot::channel();
        tx.try_send(Msg::Shutdown(first_tx)).ok().unwrap();
        // Enough writes that the linger loop stops before the second
        // shutdown and the drain meets it.
        let mut replies = Vec::new();
        for _ in 0..4 {
            let (m, rx) = append("s", 10);
            tx.try_send(m).ok().unwrap();
            replies.push(rx);
        }
        tx.try_send(Msg::Shutdown(second_tx)).ok().unwrap();
        w.run();
        assert_eq!(first_rx.try_recv(), Ok(()));
        assert_eq!(second_rx.try_recv(), Ok(()));
        assert!(shared.upgrade().is_none());
    }
}
