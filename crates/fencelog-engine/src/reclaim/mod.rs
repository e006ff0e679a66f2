//! The reclaimer: a background thread that gives disk space back without
//! ever forgetting a fence (docs/design.md, "The reclamation protocol").
//! One pass, in order:
//!
//! 1. [`retention`]: trims the front of streams whose retention (by age or
//!    size) says so, through the writer.
//! 2. [`live`]: walks every stream's index for the live bytes per segment.
//! 3. [`compact`]: copies the live frames of sealed segments under 80% live
//!    forward through the writer, in requests of at most 1 MiB, at a
//!    limited rate.
//! 4. [`checkpoint`]: if a segment that holds no live frame has groups the
//!    current checkpoint does not cover, writes a new checkpoint first.
//! 5. [`delete`]: drops those segments from the MANIFEST, then unlinks them.
//!
//! It never blocks the writer for long: it reads segments and captures
//! streams one lock at a time, and what it writes to the log goes through
//! the writer in bounded requests like any other write. A storage failure
//! in a pass poisons the engine like a failed write (after a failed fsync
//! nothing written since is trusted).
//!
//! It holds the engine only weakly while it waits, so dropping the last
//! handle lets the engine go; [`crate::Engine::reclaim`] asks for a pass
//! now and waits for it.

mod checkpoint;
mod compact;
mod delete;
mod live;
pub(crate) mod retention;

use crate::config::Durability;
use crate::error::{StorageFailure, WriteError};
use crate::locks;
use crate::shared::Shared;
use crate::writer::Msg;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Shortest time between two passes the writer's nudges start, so a busy
/// stream of trims does not turn into a busy reclaimer.
const NUDGE_GAP: Duration = Duration::from_millis(100);

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReclaimReport {
    /// Retention trims the pass made.
    pub retention_trims: u64,
    /// Segments compacted.
    pub compacted: u64,
    /// Frames copied forward.
    pub frames_copied: u64,
    /// Bytes copied forward.
    pub bytes_copied: u64,
    /// Frames that died (trimmed or deleted) before the writer copied them.
    pub dead_on_arrival: u64,
    /// Frames whose CRC failed: their segment is kept, and reads of them
    /// report the corruption.
    pub corrupt_frames: u64,
    /// The checkpoint generation written, if one was.
    pub checkpoint: Option<u64>,
    /// Segments deleted.
    pub deleted: Vec<u64>,
    /// Bytes those segments held.
    pub reclaimed_bytes: u64,
}

type Waiter = oneshot::Sender<Result<ReclaimReport, WriteError>>;

#[derive(Default)]
struct State {
    wanted: bool,
    stop: bool,
    waiters: Vec<Waiter>,
    /// Answered once the thread has stopped.
    stopped: Vec<oneshot::Sender<()>>,
    /// The thread has stopped: nobody is left to answer a request or a
    /// stop, so they are answered at once (a second `Engine::shutdown`,
    /// or a pass asked for after the first, must not wait forever).
    exited: bool,
}

/// How the engine wakes the reclaimer.
#[derive(Default)]
pub(crate) struct Signal {
    state: Mutex<State>,
    cv: Condvar,
    /// Nudges from the writer start passes (not in the tests'
    /// deterministic mode, where only requests do).
    nudges: std::sync::atomic::AtomicBool,
}

impl Signal {
    /// The writer has made work (a trim, a delete, a copy).
    pub(crate) fn nudge(&self) {
        if self.nudges.load(std::sync::atomic::Ordering::Relaxed) {
            locks::lock(&self.state).wanted = true;
            self.cv.notify_all();
        }
    }

    /// Asks for a pass; `reply` gets its report.
    pub(crate) fn request(&self, reply: Waiter) {
        let mut s = locks::lock(&self.state);
        if s.exited {
            let _ = reply.send(Err(WriteError::ShuttingDown));
            return;
        }
        s.wanted = true;
        s.waiters.push(reply);
        self.cv.notify_all();
    }

    /// Asks the thread to stop after the pass it is in; `done` is answered
    /// when it has.
    pub(crate) fn stop(&self, done: Option<oneshot::Sender<()>>) {
        let mut s = locks::lock(&self.state);
        s.stop = true;
        match (s.exited, done) {
            (true, Some(done)) => {
                let _ = done.send(());
            }
            (false, done) => s.stopped.extend(done),
            (true, None) => {}
        }
        self.cv.notify_all();
    }

    /// Waits for work: a request (at once), a nudge (not before
    /// `not_before`), the interval, or stop. Returns the waiters to answer,
    /// or `None` to stop.
    fn wait(&self, interval: Option<Duration>, not_before: Instant) -> Option<Vec<Waiter>> {
        let mut s = locks::lock(&self.state);
        let periodic = interval.map(|i| Instant::now() + i);
        loop {
            if s.stop {
                return None;
            }
            let now = Instant::now();
            let due = !s.waiters.is_empty()
                || (s.wanted && now >= not_before)
                || periodic.is_some_and(|p| now >= p);
            if due {
                s.wanted = false;
                return Some(std::mem::take(&mut s.waiters));
            }
            let wake = match (periodic, s.wanted) {
                (Some(p), true) => Some(p.min(not_before)),
                (p, true) => p.or(Some(not_before)),
                (p, false) => p,
            };
            s = match wake {
                None => self.cv.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(w) => {
                    self.cv
                        .wait_timeout(s, w.saturating_duration_since(now))
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    /// Sleeps `d` or until stop; returns whether stopping.
    fn sleep(&self, d: Duration) -> bool {
        let s = locks::lock(&self.state);
        let (s, _) = self
            .cv
            .wait_timeout_while(s, d, |s| !s.stop)
            .unwrap_or_else(|e| e.into_inner());
        s.stop
    }

    fn stopping(&self) -> bool {
        locks::lock(&self.state).stop
    }

    fn stopped(&self) {
        let mut s = locks::lock(&self.state);
        s.exited = true;
        for w in s.waiters.drain(..) {
            let _ = w.send(Err(WriteError::ShuttingDown));
        }
        for d in s.stopped.drain(..) {
            let _ = d.send(());
        }
    }
}

/// Starts the reclaimer of a freshly opened engine. It adopts the opening
/// thread's mutation switch, like the writer.
pub(crate) fn spawn(shared: &Arc<Shared>, tx: &mpsc::Sender<Msg>) -> std::io::Result<()> {
    let interval = match shared.config.reclaim_interval_ms {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    };
    let signal = shared.reclaim.clone();
    signal
        .nudges
        .store(interval.is_some(), std::sync::atomic::Ordering::Relaxed);
    let weak = Arc::downgrade(shared);
    let tx = tx.downgrade();
    let mutation = crate::mutation::inherit();
    std::thread::Builder::new()
        .name("fencelog-reclaim".into())
        .spawn(move || {
            crate::mutation::adopt(mutation);
            run(&signal, &weak, &tx, interval);
            signal.stopped();
        })
        .map(drop)
}

fn run(
    signal: &Signal,
    weak: &Weak<Shared>,
    tx: &mpsc::WeakSender<Msg>,
    interval: Option<Duration>,
) {
    let mut not_before = Instant::now();
    while let Some(waiters) = signal.wait(interval, not_before) {
        let (Some(shared), Some(tx)) = (weak.upgrade(), tx.upgrade()) else {
            for w in waiters {
                let _ = w.send(Err(WriteError::ShuttingDown));
            }
            return;
        };
        let result = pass(&shared, &tx, signal);
        if let Err(e) = &result {
            tracing::warn!(error = %e, "reclamation pass stopped");
        }
        for w in waiters {
            let _ = w.send(result.clone());
        }
        not_before = Instant::now() + NUDGE_GAP;
    }
}

/// The writer's side of one request the reclaimer makes, and the signal
/// that says when to stop.
pub(super) struct Writer<'a> {
    tx: &'a mpsc::Sender<Msg>,
    signal: &'a Signal,
}

impl Writer<'_> {
    /// Sleeps `d` (the copy rate limit), or less if the engine is stopping.
    fn sleep(&self, d: Duration) {
        self.signal.sleep(d);
    }

    /// The engine is stopping: finish the step, start no more.
    fn stopping(&self) -> bool {
        self.signal.stopping()
    }

    /// In [`Durability::OnFlush`], makes every group written so far
    /// durable: before a checkpoint is named (it may cover them) and
    /// before segments are deleted (compaction's copies of their live
    /// frames are such groups). In the other mode they already are.
    fn flush(&self, shared: &Shared) -> Result<(), WriteError> {
        if shared.config.durability != Durability::OnFlush {
            return Ok(());
        }
        let (reply, rx) = oneshot::channel();
        self.tx
            .blocking_send(Msg::Flush(reply))
            .map_err(|_| WriteError::ShuttingDown)?;
        rx.blocking_recv().map_err(|_| WriteError::ShuttingDown)?
    }

    /// Sends `op` for `stream` and waits for the writer's answer.
    fn request<T>(
        &self,
        stream: &str,
        op: impl FnOnce(crate::writer::Reply<T>) -> crate::writer::Op,
    ) -> Result<T, WriteError> {
        let (reply, rx) = oneshot::channel();
        let req = crate::writer::Request {
            stream: stream.into(),
            op: op(reply),
        };
        self.tx
            .blocking_send(Msg::Write(req))
            .map_err(|_| WriteError::ShuttingDown)?;
        rx.blocking_recv().map_err(|_| WriteError::ShuttingDown)?
    }
}

/// A reclamation step's storage failure: the engine is poisoned.
fn failed(shared: &Shared, f: StorageFailure) -> WriteError {
    WriteError::StorageFailed(shared.poison(f))
}

/// One pass (see the module comment).
fn pass(
    shared: &Shared,
    tx: &mpsc::Sender<Msg>,
    signal: &Signal,
) -> Result<ReclaimReport, WriteError> {
    if let Some(f) = shared.poisoned.get() {
        return Err(WriteError::Poisoned(f.clone()));
    }
    let writer = Writer { tx, signal };
    let mut report = ReclaimReport::default();
    retention::run(shared, &writer, &mut report)?;
    let live = live::walk(shared);
    compact::run(shared, &writer, &live, &mut report)?;
    let live = live::walk(shared);
    let dead = live.deletable();
    if mutated!(DeleteBeforeCheckpoint) {
        writer.flush(shared)?;
        delete::run(shared, &dead, &mut report).map_err(|f| failed(shared, f))?;
        if !dead.is_empty() {
            checkpoint::write(shared, &writer, &mut report)?;
        }
    } else {
        let covered = shared.manifest.get().checkpoint_covered_group;
        if dead.iter().any(|d| d.last_group > covered) {
            checkpoint::write(shared, &writer, &mut report)?;
        }
        if !dead.is_empty() {
            writer.flush(shared)?;
        }
        delete::run(shared, &dead, &mut report).map_err(|f| failed(shared, f))?;
    }
    live.publish_gauges(shared);
    Ok(report)
}
