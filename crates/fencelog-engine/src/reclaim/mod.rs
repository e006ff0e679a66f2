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
use crate::reclaim_signal::{ReclaimReport, Signal};
use crate::shared::Shared;
use crate::writer::Msg;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Shortest time between two passes the writer's nudges start, so a busy
/// stream of trims does not turn into a busy reclaimer.
const NUDGE_GAP: Duration = Duration::from_millis(100);

/// Starts the reclaimer of a freshly opened engine. It adopts the opening
/// thread's mutation switch, like the writer.
pub(crate) fn spawn(shared: &Arc<Shared>, tx: &mpsc::Sender<Msg>) -> std::io::Result<()> {
    let interval = match shared.config.reclaim_interval_ms {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    };
    let signal = shared.reclaim.clone();
    signal.set_nudges(interval.is_some());
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
