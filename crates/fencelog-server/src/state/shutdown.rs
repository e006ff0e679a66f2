//! The server's end, as the parts that must notice it see it: the signal
//! long-polls, live tails and append sessions end on ([`Shutdown`]), and
//! what a connection holds so the drain waits for it ([`ConnHold`]).
//! Below the routes and the connection front alike, which both take them.

use std::sync::Arc;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit};

/// Resolves once the server starts shutting down; never, for a router that
/// is not run by [`crate::server::serve`].
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// A signal that never fires, plus nothing to fire it with.
    pub fn never() -> Self {
        let (_tx, rx) = watch::channel(false);
        Shutdown(rx)
    }

    pub fn new() -> (watch::Sender<bool>, Self) {
        let (tx, rx) = watch::channel(false);
        (tx, Shutdown(rx))
    }

    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    pub async fn wait(&mut self) {
        // A dropped sender means nobody can ever shut us down.
        if self.0.wait_for(|down| *down).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A connection's slot under the connection cap and in the shutdown
/// drain. An upgrade request carries a clone (an extension), so an append
/// session (`crate::routes::session`), which outlives the HTTP connection it
/// upgraded, still counts against both.
#[derive(Clone)]
pub struct ConnHold(
    #[allow(
        dead_code,
        reason = "held only to be dropped: the last clone's drop frees the slot and ends the drain's wait"
    )]
    Arc<(OwnedSemaphorePermit, mpsc::Sender<()>)>,
);

impl ConnHold {
    /// Holds `permit` (the slot under the cap) and `alive` (the drain
    /// waits until every sender is gone) for as long as a clone lives.
    pub(crate) fn new(permit: OwnedSemaphorePermit, alive: mpsc::Sender<()>) -> Self {
        ConnHold(Arc::new((permit, alive)))
    }
}
