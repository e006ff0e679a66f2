//! How the engine and the writer talk to the reclaimer thread: nudges
//! (the writer made work), requests for a pass, answered with its
//! [`ReclaimReport`], and stop. The engine's shared state holds the
//! signal; the reclaimer ([`crate::reclaim`]) waits on it.

use crate::error::WriteError;
use crate::locks;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

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

pub(crate) type Waiter = oneshot::Sender<Result<ReclaimReport, WriteError>>;

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
    nudges: AtomicBool,
}

impl Signal {
    /// Whether the writer's nudges start passes: not when the reclaimer
    /// runs only on request (the tests' deterministic mode).
    pub(crate) fn set_nudges(&self, on: bool) {
        self.nudges.store(on, Ordering::Relaxed);
    }

    /// The writer has made work (a trim, a delete, a copy).
    pub(crate) fn nudge(&self) {
        if self.nudges.load(Ordering::Relaxed) {
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
    pub(crate) fn wait(
        &self,
        interval: Option<Duration>,
        not_before: Instant,
    ) -> Option<Vec<Waiter>> {
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
    pub(crate) fn sleep(&self, d: Duration) -> bool {
        let s = locks::lock(&self.state);
        let (s, _) = self
            .cv
            .wait_timeout_while(s, d, |s| !s.stop)
            .unwrap_or_else(|e| e.into_inner());
        s.stop
    }

    pub(crate) fn stopping(&self) -> bool {
        locks::lock(&self.state).stop
    }

    pub(crate) fn stopped(&self) {
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
