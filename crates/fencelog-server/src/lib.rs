//! The HTTP API: producers append with fencing tokens, consumers read,
//! long-poll and tail over Server-Sent Events, operators probe health and
//! scrape metrics. serde lives only in this layer; the engine knows nothing
//! about JSON.
//!
//! Routes:
//! - `POST /v1/streams/{stream}/records` append ([`records`])
//! - `GET  /v1/streams/{stream}/records` read, long-poll, or live tail ([`records`], [`sse`])
//! - `POST /v1/streams/{stream}/fence` raise the highest token without writing ([`streams`])
//! - `GET  /v1/streams/{stream}` stream state ([`streams`])
//! - `GET  /v1/streams` list streams in name order ([`streams`])
//! - `GET  /healthz`, `GET /metrics` ([`ops`])
//! - `GET  /v1/openapi.json` this list as an OpenAPI 3 document ([`openapi`])
//!
//! The list lives once, in [`openapi::ROUTES`]: the router is built from it
//! and the OpenAPI document describes it, so neither can drift.
//!
//! [`app`] builds the router so tests can drive it without a socket;
//! [`server`] binds it with the connection-level protections.

pub mod body;
pub mod error;
mod fast_json;
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz;
pub mod openapi;
pub mod ops;
pub mod params;
pub mod records;
pub mod server;
pub mod sse;
pub mod streams;

use axum::routing::{get, post};
use axum::Router;
use fencelog_engine::Config;
use fencelog_engine::Engine;
use std::time::Duration;
use tokio::sync::watch;

pub use error::ApiError;
pub use server::{serve, ServerConfig};

/// Request-level limits of the HTTP layer. Connection-level ones (header
/// read timeout, drain time) are in [`ServerConfig`].
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
/// is not run by [`serve`].
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
}

impl AppState {
    /// State with limits derived from the engine's configuration.
    pub fn new(engine: Engine) -> Self {
        let limits = HttpLimits::for_config(engine.config());
        AppState {
            engine,
            limits,
            shutdown: Shutdown::never(),
        }
    }

    pub fn with_limits(mut self, limits: HttpLimits) -> Self {
        self.limits = limits;
        self
    }
}

/// The whole API as a router, built from [`openapi::ROUTES`].
pub fn app(state: AppState) -> Router {
    let mut router = Router::new();
    for route in openapi::ROUTES {
        router = router.route(route.path, handler(route.operation_id));
    }
    router
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .with_state(state)
}

/// The handler of each operation in the route table. A table entry without
/// a handler here fails every test that builds the router.
fn handler(operation_id: &str) -> axum::routing::MethodRouter<AppState> {
    match operation_id {
        "append" => post(records::append),
        "read" => get(records::read),
        "fence" => post(streams::fence),
        "state" => get(streams::state),
        "list" => get(streams::list),
        "healthz" => get(ops::healthz),
        "metrics" => get(ops::metrics),
        "openapi" => get(openapi::serve),
        other => panic!("route table names operation {other:?} but no handler serves it"),
    }
}
