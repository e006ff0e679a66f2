//! What every handler shares: the backend (the write seam), the
//! request-level limits, and the shutdown signal that ends long-polls and
//! live tails.

use crate::audit::Audit;
use crate::auth::{Auth, Caller};
use crate::backend::{Backend, EngineBackend};
use crate::budget::MemoryBudget;
use crate::error::{write_error, Answer, ApiError};
use crate::http_metrics::HttpMetrics;
use crate::shutdown::Shutdown;
use axum::response::{IntoResponse, Response};
use fencelog_api::ErrorCode;
use fencelog_engine::{Config, Engine, SessionMutation, WriteError};
use std::sync::Arc;
use std::time::Duration;

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
    /// Appends one append session may have read but not yet answered; at
    /// the bound the session stops reading until answers go out.
    pub session_appends_max: usize,
    /// Bytes of append messages one session may have read but not yet
    /// answered (the same rule; one message may take it past the bound).
    pub session_bytes_max: usize,
}

/// Header bytes one request may carry by default (32 KiB).
pub const HEADER_BYTES_MAX_DEFAULT: usize = 32 << 10;

/// Unanswered appends per session by default: at 150k appends/s this is
/// 27 ms of appends, far more than one group commit takes, and a quarter
/// of the writer's default queue, so one session alone never fills it.
pub const SESSION_APPENDS_MAX_DEFAULT: usize = 4096;
/// Unanswered append bytes per session by default (2 MiB).
pub const SESSION_BYTES_MAX_DEFAULT: usize = 2 << 20;

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
            session_appends_max: SESSION_APPENDS_MAX_DEFAULT,
            session_bytes_max: SESSION_BYTES_MAX_DEFAULT,
        }
    }

    /// The 431 for a request whose header names and values take `bytes`,
    /// when that is over [`HttpLimits::header_bytes_max`] (hyper's own
    /// buffer limit is a backstop further out, see `conn_io`). The
    /// router's one middleware and the append route in front of it check
    /// it first, so the refusal is counted like any other answer.
    pub(crate) fn headers_over_limit(&self, bytes: usize) -> Option<ApiError> {
        let limit = self.header_bytes_max;
        (bytes > limit).then(|| {
            ApiError::new(
                ErrorCode::HeadersTooLarge,
                format!(
                    "the request headers are {bytes} bytes, over the server's limit of {limit}"
                ),
            )
        })
    }
}

/// Everything a handler needs. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// Where writes go and reads are served: this node's engine, or a
    /// cluster node.
    pub backend: Arc<dyn Backend>,
    pub limits: HttpLimits,
    pub shutdown: Shutdown,
    /// Who may do what; [`Auth::Open`] unless tokens are configured.
    pub auth: Auth,
    pub audit: Arc<Audit>,
    /// Bytes of responses and uploads in flight, for every connection.
    pub budget: MemoryBudget,
    pub http_metrics: Arc<HttpMetrics>,
    /// The append session's deliberate bug (tests only; see
    /// `fencelog_engine::SessionMutation`), read when the state is made.
    pub session_mutation: SessionMutation,
}

impl AppState {
    /// A single node's state: `engine` as the backend, with limits derived
    /// from its configuration.
    pub fn new(engine: Engine) -> Self {
        Self::with_backend(Arc::new(EngineBackend::new(engine)))
    }

    /// State over any backend, with limits derived from its configuration.
    pub fn with_backend(backend: Arc<dyn Backend>) -> Self {
        let limits = HttpLimits::for_config(backend.config());
        AppState {
            backend,
            limits,
            shutdown: Shutdown::never(),
            auth: Auth::Open,
            audit: Arc::default(),
            budget: MemoryBudget::default(),
            http_metrics: Arc::default(),
            session_mutation: fencelog_engine::session_mutation(),
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
        self.backend.highest_token(stream)
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
        self.write_refused_answer(caller, stream, err)
            .into_response()
    }

    /// [`AppState::write_refused`] as an [`Answer`]: a stale refusal as
    /// its prepared bytes.
    pub fn write_refused_answer(&self, caller: &Caller, stream: &str, err: WriteError) -> Answer {
        if matches!(err, WriteError::StaleToken { .. }) {
            let (_, body) = self.write_refused_body(caller, stream, err);
            let status = crate::error::status(ErrorCode::StaleFencingToken);
            return Answer::Json { status, body };
        }
        Answer::Response(write_error(stream, err).into_response())
    }

    /// [`AppState::write_refused`] as a status and the body's bytes, for
    /// an append session, which answers inside its own messages.
    pub fn write_refused_body(
        &self,
        caller: &Caller,
        stream: &str,
        err: WriteError,
    ) -> (u16, Vec<u8>) {
        if let WriteError::StaleToken {
            presented,
            highest,
            next_seq,
        } = err
        {
            self.audit.stale(caller.name(), stream, presented, highest);
            let body = crate::error::stale_body(stream, presented, highest, next_seq);
            return (ErrorCode::StaleFencingToken.status(), body);
        }
        let e = write_error(stream, err);
        (e.code().status(), e.to_json())
    }
}
