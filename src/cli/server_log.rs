//! The server's log writer. While serving, request handlers (every stale
//! rejection logs a line) only format a line and queue it; one thread
//! writes the queue to stderr, so a slow terminal, pipe or journal never
//! stalls a request. That phase is lossy: a full queue drops and counts new
//! lines rather than block a handler.
//!
//! Startup and shutdown are not lossy (a line waits for room), and
//! [`ServerLog::sync`] returns only once everything queued before it is
//! written and flushed. `serve` syncs before it prints `listening on` and
//! before it exits, so whoever acts on either — a supervisor, a script, a
//! test that SIGKILLs the server the moment it is ready — finds those lines
//! in the log. (A queue whose thread flushes "soon" lost them: the flush
//! raced the kill.)

use super::LogFormat;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

/// Lines the server may have formatted but not yet written to stderr:
/// several seconds of stale-rejection lines at the highest rate measured
/// (~75k/s) if stderr stalls. The queue's slots are allocated up front,
/// 32 bytes each (8 MiB resident from startup); a queued line adds its own
/// buffer of a few hundred bytes.
pub const LOG_QUEUE_LINES: usize = 256 * 1024;
/// Bytes the writer thread gathers before a write to stderr, so a burst is
/// one write instead of one per line; it flushes whenever the queue runs
/// empty.
const STDERR_BUFFER_BYTES: usize = 64 << 10;

enum Msg {
    Line(Vec<u8>),
    /// Flush, then answer: everything queued before it is on stderr.
    Sync(SyncSender<()>),
}

// A queue slot is a `Msg` plus the channel's 8-byte stamp: 32 bytes, as
// LOG_QUEUE_LINES's memory figure says.
const _: () = assert!(std::mem::size_of::<Msg>() <= 24);

struct Shared {
    queue: SyncSender<Msg>,
    lossy: AtomicBool,
    dropped_lines: AtomicUsize,
}

/// A handle on the log queue: the `MakeWriter` the subscriber writes
/// through, and the controls `serve` uses. Cheap to clone.
#[derive(Clone)]
pub struct ServerLog {
    shared: Arc<Shared>,
}

/// Syncs the log when dropped, so every way out of `serve` — including an
/// early error return — leaves its last lines on stderr.
pub struct LogGuard {
    log: ServerLog,
}

impl std::ops::Deref for LogGuard {
    type Target = ServerLog;
    fn deref(&self) -> &ServerLog {
        &self.log
    }
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        self.log.set_lossy(false);
        self.log.sync();
    }
}

/// Installs the server's logging with `filter` (which lines); it starts
/// out not lossy (startup).
pub fn init(format: LogFormat, filter: tracing_subscriber::EnvFilter) -> io::Result<LogGuard> {
    let (queue, lines) = mpsc::sync_channel(LOG_QUEUE_LINES);
    std::thread::Builder::new()
        .name("fencelog-log".into())
        .spawn(move || write_out(lines))?;
    let log = ServerLog {
        shared: Arc::new(Shared {
            queue,
            lossy: AtomicBool::new(false),
            dropped_lines: AtomicUsize::new(0),
        }),
    };
    super::install_logging(format, filter, log.clone());
    Ok(LogGuard { log })
}

/// The writer thread: everything it can take without waiting goes into one
/// buffer, flushed when the queue runs empty or a sync asks. Write errors
/// are dropped: stderr is where they would be reported.
fn write_out(lines: Receiver<Msg>) {
    let mut out = io::BufWriter::with_capacity(STDERR_BUFFER_BYTES, io::stderr());
    while let Ok(first) = lines.recv() {
        let mut next = Some(first);
        while let Some(msg) = next {
            match msg {
                Msg::Line(line) => {
                    let _ = out.write_all(&line);
                }
                Msg::Sync(done) => {
                    let _ = out.flush();
                    let _ = done.send(());
                }
            }
            next = lines.try_recv().ok();
        }
        let _ = out.flush();
    }
}

impl ServerLog {
    /// Lossy while serving; not lossy during startup and shutdown, whose
    /// lines must not be dropped.
    pub fn set_lossy(&self, lossy: bool) {
        self.shared.lossy.store(lossy, Ordering::Release);
    }

    /// Returns once every line queued before the call is written to stderr
    /// and flushed. Waits as long as stderr does, like any blocking write.
    pub fn sync(&self) {
        let (done, flushed) = mpsc::sync_channel(1);
        if self.shared.queue.send(Msg::Sync(done)).is_ok() {
            // An error means the writer thread is gone: nothing to wait for.
            let _ = flushed.recv();
        }
    }

    /// Lines discarded because the queue was full (stderr slower than the
    /// server for longer than the queue covers).
    pub fn dropped_lines(&self) -> usize {
        self.shared.dropped_lines.load(Ordering::Relaxed)
    }

    fn push(&self, line: Vec<u8>) {
        if self.shared.lossy.load(Ordering::Acquire) {
            if let Err(TrySendError::Full(_)) = self.shared.queue.try_send(Msg::Line(line)) {
                self.shared.dropped_lines.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            let _ = self.shared.queue.send(Msg::Line(line));
        }
    }
}

/// One event's line: the subscriber formats the whole line and hands it
/// over in a single `write_all`.
pub struct QueuedLine<'a> {
    log: &'a ServerLog,
}

impl io::Write for QueuedLine<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.log.push(buf.to_vec());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ServerLog {
    type Writer = QueuedLine<'a>;

    fn make_writer(&'a self) -> QueuedLine<'a> {
        QueuedLine { log: self }
    }
}
