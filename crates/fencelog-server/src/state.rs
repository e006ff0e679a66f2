//! What every handler shares: the engine, the request-level limits, and the
//! shutdown signal that ends long-polls and live tails.

use crate::audit::Audit;
use crate::auth::{Auth, Caller};
use crate::budget::MemoryBudget;
use crate::error::write_error;
use crate::http_metrics::HttpMetrics;
use axum::response::{IntoResponse, Response};
use fencelog_engine::{Config, Engine, WriteError};
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
    /// How long a response chunk may wait for the memory budget once the
    /// response has started (the connection is dropped past it); the
    /// server's write timeout.
    pub write_timeout: Duration,
    /// Most bytes of header names and values in one request (431 past it).
    pub header_bytes_max: usize,
}

/// Header bytes one request may carry by default (32 KiB).
pub const HEADER_BYTES_MAX_DEFAULT: usize = 32 << 10;

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
            write_timeout: Duration::from_secs(30),
            header_bytes_max: HEADER_BYTES_MAX_DEFAULT,
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
    /// Who may do what; [`Auth::Open`] unless tokens are configured.
    pub auth: Auth,
    pub audit: Arc<Audit>,
    /// Bytes of responses and uploads in flight, for every connection.
    pub budget: MemoryBudget,
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
            auth: Auth::Open,
            audit: Arc::default(),
            budget: MemoryBudget::default(),
            http_metrics: Arc::default(),
        }
    }

    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    pub fn with_budget(mut self, budget: MemoryBudget) -> Self {
        self.budget = budget;
        self
    }

    pub fn with_limits(mut self, limits: HttpLimits) -> Self {
        self.limits = limits;
        self
    }
}

impl AppState {
    /// The stream's highest accepted token now (0 for a new stream): what
    /// the audit log reports a rise from. Read before the write is sent,
    /// so with concurrent rises on one stream it may be older than the
    /// token the writer replaced.
    pub fn token_before(&self, stream: &str) -> u64 {
        self.engine.highest_token(stream)
    }

    /// Logs an accepted write that raised the stream's token.
    pub fn written(&self, caller: &Caller, stream: &str, op: &str, before: u64, after: u64) {
        if after > before {
            self.audit
                .token_raised(caller.name(), stream, op, before, after);
        }
    }

    /// The answer to a refused write, with the refusal in the aggregated
    /// stale log when it is one. Every write handler refuses through here;
    /// a stale token, the answer a flood of stale writers gets, skips the
    /// general error body for the same bytes written directly.
    pub fn write_refused(&self, caller: &Caller, stream: &str, err: WriteError) -> Response {
        if let WriteError::StaleToken {
            presented,
            highest,
            next_seq,
        } = err
        {
            self.audit.stale(caller.name(), stream, presented, highest);
            return crate::error::stale_response(stream, presented, highest, next_seq);
        }
        write_error(stream, err).into_response()
    }
}
