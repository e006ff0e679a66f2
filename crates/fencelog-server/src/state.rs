//! What every handler shares: the engine, the request-level limits, and the
//! shutdown signal that ends long-polls and live tails.

use crate::http_metrics::HttpMetrics;
use fencelog_engine::{Config, Engine};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Request-level limits of the HTTP layer. Connection-level ones (header
/// read timeout, drain time) are in [`crate::ServerConfig`].
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Largest request body accepted; checked against `Content-Length`
    /// before reading and enforced while streaming, so an oversized body is
    /// never buffered whole.
    pub body_bytes_max: usize,
    /// A request body must arrive completely within this time of the
    /// handler starting to read it, so a client trickling bytes cannot hold
    /// a connection and a buffer indefinitely.
    pub body_read_timeout: Duration,
    /// How long a live tail may stay silent before it sends `event: ping`.
    pub ping_interval: Duration,
}

/// Room for JSON framing around the batch: base64 inflates by 4/3 and each
/// record object adds a few dozen bytes, so twice the batch plus slack lets
/// every batch the engine would accept through, and nothing much larger.
const BODY_SLACK_BYTES: usize = 64 << 10;

impl HttpLimits {
    /// Limits that fit the engine's batch limits.
    pub fn for_config(config: &Config) -> Self {
        HttpLimits {
            body_bytes_max: config.batch_bytes_max.saturating_mul(2) + BODY_SLACK_BYTES,
            body_read_timeout: Duration::from_secs(30),
            ping_interval: Duration::from_secs(15),
        }
    }
}

/// Resolves once the server starts shutting down; never, for a router that
/// is not run by [`crate::serve`].
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

/// Everything a handler needs. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub limits: HttpLimits,
    pub shutdown: Shutdown,
    pub http_metrics: Arc<HttpMetrics>,
}

impl AppState {
    /// State with limits derived from the engine's configuration.
    pub fn new(engine: Engine) -> Self {
        let limits = HttpLimits::for_config(engine.config());
        AppState {
            engine,
            limits,
            shutdown: Shutdown::never(),
            http_metrics: Arc::default(),
        }
    }

    pub fn with_limits(mut self, limits: HttpLimits) -> Self {
        self.limits = limits;
        self
    }
}
