//! Shared by the engine_* integration tests: a `Storage` over a real
//! directory whose `sync_data` can be held at a gate or made to fail, so a
//! test can decide exactly which requests share a group and which group's
//! fdatasync fails.

use bytes::Bytes;
use fencelog_engine::sim::{HookedCall, HookedStorage};
use fencelog_engine::{Config, DirStorage, Engine};
use futures_util::FutureExt;
use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

pub fn recs(items: &[&str]) -> Vec<Bytes> {
    items.iter().map(|s| Bytes::from(s.to_string())).collect()
}

pub fn bodies(batch: &fencelog_engine::ReadBatch) -> Vec<Bytes> {
    batch.records.iter().map(|r| r.body.clone()).collect()
}

/// Polls once with a no-op waker. Used to push a request into the writer's
/// queue (the first poll of `append` enqueues it when the queue has room) and
/// to observe that an answer has or has not been sent yet.
pub fn poll_once<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    f.now_or_never()
}

#[derive(Default)]
struct GateState {
    /// The next sync_data blocks.
    hold: bool,
    /// A sync_data is blocked right now.
    held: bool,
}

/// The switches a test flips; shared by the storage and its files.
#[derive(Default)]
pub struct Control {
    gate: Mutex<GateState>,
    cv: Condvar,
    fail_syncs: AtomicBool,
    syncs: AtomicU64,
}

/// A bound on every wait, so a broken engine fails the test instead of
/// hanging it.
const GATE_WAIT: Duration = Duration::from_secs(20);

impl Control {
    /// Makes the next `sync_data` (of any file) block until [`Self::release`].
    pub fn hold_next_sync(&self) {
        self.gate.lock().unwrap().hold = true;
    }

    /// Blocks the calling thread until a `sync_data` is held at the gate.
    pub fn wait_until_held(&self) {
        let g = self.gate.lock().unwrap();
        let (g, timeout) = self
            .cv
            .wait_timeout_while(g, GATE_WAIT, |g| !g.held)
            .unwrap();
        assert!(
            !timeout.timed_out() || g.held,
            "no sync_data reached the gate"
        );
    }

    /// Lets the held `sync_data` go on.
    pub fn release(&self) {
        let mut g = self.gate.lock().unwrap();
        assert!(g.held, "release without a held sync");
        g.held = false;
        self.cv.notify_all();
    }

    /// While on, every `sync_data` fails (after the gate, without syncing).
    pub fn fail_syncs(&self, on: bool) {
        self.fail_syncs.store(on, Ordering::SeqCst);
    }

    /// Successful and failed `sync_data` calls so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }

    fn on_sync(&self) -> io::Result<()> {
        {
            let mut g = self.gate.lock().unwrap();
            if g.hold {
                g.hold = false;
                g.held = true;
                self.cv.notify_all();
                let (g, timeout) = self
                    .cv
                    .wait_timeout_while(g, GATE_WAIT, |g| g.held)
                    .unwrap();
                assert!(!timeout.timed_out() || !g.held, "held sync never released");
            }
        }
        self.syncs.fetch_add(1, Ordering::SeqCst);
        if self.fail_syncs.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fdatasync failure"));
        }
        Ok(())
    }
}

/// Opens an engine on `dir` through a [`HookedStorage`] whose `sync_data`
/// calls go through `Control` (held at a gate, or failed).
pub fn open_controlled(dir: &Path, config: Config) -> (Engine, Arc<Control>) {
    let ctl = Arc::new(Control::default());
    let hook_ctl = ctl.clone();
    let storage = HookedStorage::new(DirStorage::new(dir).unwrap(), move |call| match call {
        HookedCall::SyncData => hook_ctl.on_sync(),
        _ => Ok(()),
    });
    let engine = Engine::open_storage(Arc::new(storage), config).unwrap();
    (engine, ctl)
}

/// Runs a blocking gate wait without stalling the runtime the test runs on.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// Waits (off the runtime's thread) until a `sync_data` is held at the gate.
pub async fn until_held(ctl: &Arc<Control>) {
    let c = ctl.clone();
    blocking(move || c.wait_until_held()).await
}
