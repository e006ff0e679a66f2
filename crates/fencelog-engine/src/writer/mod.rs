//! The single writer: the only code that orders writes, owns the active
//! segment's end, and publishes durable state.
//!
//! One loop iteration is one group, in phases, each in its own module:
//! [`collect`] takes everything waiting (up to the group limits, lingering
//! briefly for callers about to come back); [`group`] applies the fencing
//! rule in arrival order against pending state and encodes all accepted
//! frames into one buffer (pure: each request through [`plan`], a
//! multi-stream batch through [`batch`], a committed Raft entry through
//! [`apply`]); [`persist`] writes it and calls `sync_data` once;
//! [`publish`] makes it visible, then answers and wakes readers. Nobody
//! hears "ok" — or "stale" decided against pending state — before the
//! sync returns. Requests that queue while a sync runs form the next
//! group, which is the whole of group commit: no timers. Between groups
//! the writer polls its queue briefly before it sleeps
//! ([`collect::next_request`]), so a caller coming straight back is not
//! also kept waiting for a wake-up.
//!
//! A storage failure or a panic while committing a group poisons the
//! engine; the thread keeps running and answers every later request with
//! [`WriteError::Poisoned`] until the engine is dropped.

mod apply;
mod batch;
mod collect;
mod group;
mod persist;
mod plan;
mod protocol;
mod publish;
mod request;

pub(crate) use protocol::{ApplyEntry, Msg, Op, Relocation, Reply, Request};
pub use request::PendingWrite;

use crate::error::{StorageFailure, WriteError};
use crate::locks;
use crate::shared::Shared;
use crate::stream::StreamShared;
use collect::{collect, next_request, Control, GroupLimits, Linger};
use fencelog_types::StreamConfig;
use persist::{PersistError, Tail};
use plan::{Budget, Context, Defaults, Durable, Lookup, Plan};
use protocol::Answer;
use std::any::Any;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

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

pub(crate) struct Writer {
    shared: Arc<Shared>,
    rx: mpsc::Receiver<Msg>,
    next_group_id: u64,
    tail: Tail,
    /// The group being committed: requests not planned yet...
    requests: VecDeque<Request>,
    /// ...and the answers of those that are. Owned here rather than by
    /// `commit` so that a panic in the middle leaves every one of them to
    /// answer (see [`Writer::commit_guarded`]).
    answers: Vec<Answer>,
    /// The group's encoded frames.
    buf: Vec<u8>,
}

/// Wall-clock milliseconds since the Unix epoch; 0 for a clock set before
/// it.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Durable state as the planner sees it.
struct Published<'a>(&'a Shared);

impl Lookup<Arc<StreamShared>> for Published<'_> {
    fn stream(&mut self, name: &str) -> Option<Durable<Arc<StreamShared>>> {
        locks::read(&self.0.streams).get(name).map(|s| Durable {
            fence: s.fence_state(),
            last_timestamp_ms: s.last_timestamp_ms(),
            handle: s.clone(),
        })
    }

    fn points_at(&mut self, name: &str, first_seq: u64, at: (u64, u64)) -> bool {
        let Some(s) = self.0.stream(name) else {
            return false;
        };
        let inner = locks::lock(&s.inner);
        matches!(inner.index.find(first_seq), Some((_, loc)) if loc.first_seq == first_seq && (loc.segment, loc.offset) == at)
    }

    fn carried(&mut self, name: &str) -> crate::carried::Carried {
        let Some(s) = self.0.stream(name) else {
            return Default::default();
        };
        let inner = locks::lock(&s.inner);
        inner.carried().cloned().unwrap_or_default()
    }

    fn config(&mut self, name: &str) -> StreamConfig {
        let Some(s) = self.0.stream(name) else {
            return Default::default();
        };
        let inner = locks::lock(&s.inner);
        inner.config()
    }
}

impl Writer {
    fn new(
        shared: Arc<Shared>,
        rx: mpsc::Receiver<Msg>,
        next_group_id: u64,
        active_len: u64,
    ) -> Self {
        Writer {
            shared,
            rx,
            next_group_id,
            tail: Tail::new(active_len),
            requests: VecDeque::new(),
            answers: Vec::new(),
            buf: Vec::new(),
        }
    }

    fn run(mut self) {
        let limits = GroupLimits::of(&self.shared.config);
        let mut control = Control::default();
        let mut linger = Linger::NONE;
        let spin = std::time::Duration::from_micros(self.shared.config.writer_spin_us);
        while let Some(first) = next_request(&mut self.rx, spin) {
            collect(
                &mut self.rx,
                Some(first),
                limits,
                &linger,
                &mut self.requests,
                &mut control,
            );
            self.shared.metrics.queue_depth.set(self.rx.len() as i64);
            if !self.requests.is_empty() {
                let answered = self.requests.len();
                let started = Instant::now();
                self.commit_guarded();
                linger = Linger {
                    expected: self.rx.len() + answered,
                    last_sync: started.elapsed(),
                };
            }
            self.answer_flushes(&mut control.flushes);
            if !control.shutdown.is_empty() {
                self.drain(limits, &mut control);
                break;
            }
        }
        // What is written is synced before the writer stops, so a clean
        // shutdown in `OnFlush` mode loses nothing either.
        if self.shared.poisoned.get().is_none() {
            if let Err(f) = self.tail.sync_unsynced(&self.shared) {
                self.shared.poison(f);
            }
        }
        self.shared.wake_all_waiters();
        // The directory lock lives as long as `Shared`. Let go of the
        // writer's reference before `shutdown()` returns, so dropping the
        // engine right after it frees the lock and a reopen succeeds.
        drop(self);
        for tx in control.shutdown {
            let _ = tx.send(());
        }
    }

    /// Everything sent before the shutdown request is in the queue ahead of
    /// it: commit all of it, in groups with the usual bounds, so a later
    /// `shutdown()` waits for the same end as the first.
    fn drain(&mut self, limits: GroupLimits, control: &mut Control) {
        self.rx.close();
        loop {
            collect(
                &mut self.rx,
                None,
                limits,
                &Linger::NONE,
                &mut self.requests,
                control,
            );
            if self.requests.is_empty() {
                self.answer_flushes(&mut control.flushes);
                return;
            }
            self.commit_guarded();
            self.answer_flushes(&mut control.flushes);
        }
    }

    /// Syncs what was written unsynced and answers the flushes waiting for
    /// it. A failed sync poisons, as on the write path: groups already
    /// answered may be lost, and it is never retried.
    fn answer_flushes(&mut self, flushes: &mut Vec<Reply<()>>) {
        if flushes.is_empty() {
            return;
        }
        let result = match self.shared.poisoned.get() {
            Some(f) => Err(WriteError::Poisoned(f.clone())),
            None => self
                .tail
                .sync_unsynced(&self.shared)
                .map_err(|f| WriteError::StorageFailed(self.shared.poison(f))),
        };
        for tx in flushes.drain(..) {
            let _ = tx.send(result.clone());
        }
    }

    /// Commits the group in `self.requests`; a panic poisons the engine
    /// exactly like a storage failure instead of killing the thread.
    ///
    /// Why `AssertUnwindSafe` is sound here, that is, why nothing observes
    /// a broken invariant after a panic is caught:
    /// - The writer's own state (`tail`, `next_group_id`, `buf`) may be
    ///   half updated, but it is never used for writing again: the engine
    ///   is poisoned before this returns, and `commit` refuses every later
    ///   group before it plans, writes or publishes anything.
    /// - The group's requests are either still in `self.requests` (not
    ///   planned yet) or their answers are in `self.answers` (not sent
    ///   yet): `plan` moves them one at a time and answers are taken out
    ///   only to be sent. All of them are failed with `StorageFailed`:
    ///   outcome unknown, which is the truth whether the panic came before
    ///   the write, between write and sync, or after the sync.
    /// - Shared state readers see changes only after the group's sync
    ///   (`publish` runs after `persist` returned), so whatever was
    ///   published before the panic point is durable. What was not
    ///   published yet stays invisible until a reopen recovers it from the
    ///   log. Each shared structure is changed by single operations that
    ///   check their assertions before mutating (the stream map insert,
    ///   `StreamIndex::push`, `StreamShared::publish`, the segment list),
    ///   so a panic leaves none of them half changed.
    /// - Locks the panic unwound through are poisoned; every lock in the
    ///   engine is taken through `crate::locks`, which ignores that, so
    ///   reads of durable data keep working.
    ///
    /// This relies on unwinding: with `panic = "abort"` the process ends
    /// instead, which loses nothing acknowledged either.
    fn commit_guarded(&mut self) {
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| self.commit())) {
            self.poison_after_panic(payload.as_ref());
        }
    }

    fn poison_after_panic(&mut self, payload: &(dyn Any + Send)) {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        tracing::error!(panic = %message, "the writer panicked; engine poisoned, no further writes until reopened");
        let failure = self.shared.poison(StorageFailure {
            op: "writer panic",
            file: String::new(),
            kind: std::io::ErrorKind::Other,
            message,
        });
        let err = WriteError::StorageFailed(failure);
        for a in self.answers.drain(..) {
            a.fail(err.clone());
        }
        publish::refuse_all(&mut self.requests, &err);
    }

    /// The disk budget as this group starts: what appends may still add.
    fn budget(&self) -> Option<Budget> {
        let limit = self.shared.config.data_bytes_max?;
        let used = self.shared.disk_bytes();
        // Preallocated zeros count as used, but appends may fill them.
        let data = self.shared.disk_bytes_sealed() + self.tail.active_len();
        Some(Budget {
            limit,
            used,
            room: limit.saturating_sub(data),
        })
    }

    /// One group, phase by phase.
    fn commit(&mut self) {
        if let Some(f) = self.shared.poisoned.get() {
            return publish::refuse_all(&mut self.requests, &WriteError::Poisoned(f.clone()));
        }
        let shared = &*self.shared;
        let ctx = Context {
            group_id: self.next_group_id,
            now_ms: now_ms(),
            defaults: Defaults {
                age_s: shared.config.retention_age_s,
                bytes: shared.config.retention_bytes,
            },
            budget: self.budget(),
            producers_max: shared.config.producers_per_stream_max,
        };
        let Plan {
            streams,
            frames,
            counts,
            applied,
        } = group::plan(
            &mut self.requests,
            &mut self.answers,
            &mut self.buf,
            ctx,
            &mut Published(shared),
        );
        if frames.is_empty() {
            // Every decision was made against durable state: answer now.
            publish::count_refusals(&shared.metrics, &counts);
            return publish::answer(shared, &mut self.answers);
        }
        let started = Instant::now();
        let placed = match self.tail.write_group(shared, &self.buf, self.next_group_id) {
            Ok(placed) => placed,
            Err(PersistError::NotWritten(failure)) => {
                return publish::refuse_group(shared, failure, &mut self.answers)
            }
            Err(PersistError::Failed(failure)) => {
                return publish::fail_group(shared, failure, &mut self.answers)
            }
        };
        shared
            .metrics
            .fsync_seconds
            .observe(started.elapsed().as_secs_f64());
        let group_id = self.next_group_id;
        self.next_group_id += 1;
        shared.set_active_allocated(self.tail.allocated_len());
        let touched = publish::publish(shared, streams, &frames, placed, group_id, applied);
        publish::count_committed(&shared.metrics, &counts, self.buf.len());
        if counts.trims + counts.deletes + counts.retention_trims + counts.relocated > 0 {
            shared.nudge_reclaimer();
        }
        if mutated!(ServeUnsynced) {
            // The bug at its most visible: readers are woken and given a
            // moment to read what is not durable yet. Without the pause,
            // whether a protocol-simulation run saw it depended on thread
            // timing (it once survived 60 seeds at load average 12).
            shared.notify_streams(touched.iter().map(|n| &**n));
            std::thread::sleep(std::time::Duration::from_millis(1));
            if let Err(f) = persist::sync_active(shared) {
                return publish::fail_group(shared, f, &mut self.answers);
            }
        }
        publish::answer(shared, &mut self.answers);
        if mutated!(AckBeforeSync) {
            if let Err(f) = persist::sync_active(shared) {
                let _ = shared.poisoned.set(Arc::new(f));
            }
        }
        shared.notify_streams(touched.iter().map(|n| &**n));
        if self.buf.capacity() > 4 * shared.config.group_bytes_max {
            self.buf = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::sim::SimStorage;
    use crate::storage::Storage;
    use bytes::Bytes;
    use fencelog_types::Ack;
    use tokio::sync::oneshot;

    /// A writer over a fresh simulated disk, driven on the test's thread.
    fn writer(config: Config, queue: usize) -> (Writer, mpsc::Sender<Msg>) {
        writer_on(SimStorage::new(), config, queue)
    }

    fn writer_on(sim: SimStorage, config: Config, queue: usize) -> (Writer, mpsc::Sender<Msg>) {
        let storage: Arc<dyn Storage> = Arc::new(sim);
        let recovered = crate::recovery::recover(&*storage, &config).unwrap();
        let (next_group_id, active_len) = (recovered.next_group_id, recovered.active_len);
        let start = recovered.into_start(config, storage);
        let shared = Arc::new(Shared::new(start));
        let (tx, rx) = mpsc::channel(queue);
        let w = Writer::new(shared, rx, next_group_id, active_len);
        (w, tx)
    }

    fn append(stream: &str, body: usize) -> (Msg, oneshot::Receiver<Result<Ack, WriteError>>) {
        let (reply, rx) = oneshot::channel();
        let msg = Msg::Write(Request {
            stream: stream.into(),
            op: Op::Append {
                token: 1,
                records: vec![Bytes::from(vec![b'x'; body])],
                match_seq_num: None,
                extra: None,
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

    /// In `OnFlush` groups are answered without a sync, a flush syncs what
    /// they wrote once (and is answered after the group queued before it),
    /// and a flush with nothing written does not sync at all.
    #[test]
    fn on_flush_answers_groups_unsynced_and_a_flush_syncs_them_once() {
        let config = Config {
            durability: crate::config::Durability::OnFlush,
            group_requests_max: 1,
            ..Config::default()
        };
        let sim = SimStorage::new();
        let (w, tx) = writer_on(sim.clone(), config, 64);
        let syncs = || sim.op_counts().get("sync_data").copied().unwrap_or(0);
        let before = syncs();
        let mut replies = Vec::new();
        for _ in 0..3 {
            let (m, rx) = append("s", 10);
            tx.try_send(m).ok().unwrap();
            replies.push(rx);
        }
        let (first, mut first_rx) = oneshot::channel();
        let (second, mut second_rx) = oneshot::channel();
        tx.try_send(Msg::Flush(first)).ok().unwrap();
        tx.try_send(Msg::Flush(second)).ok().unwrap();
        drop(tx);
        w.run();
        for mut r in replies {
            r.try_recv().unwrap().unwrap();
        }
        assert_eq!(first_rx.try_recv().unwrap(), Ok(()));
        assert_eq!(second_rx.try_recv().unwrap(), Ok(()));
        assert_eq!(syncs() - before, 1, "three groups and two flushes");
        assert_eq!(sim.unsynced_ops(), 0);
    }
}
