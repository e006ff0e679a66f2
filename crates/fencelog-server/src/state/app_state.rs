//! [`AppState`], what every handler is given: the backend (the write
//! seam), who may do what, the request-level limits, the memory budget,
//! the metrics and the audit log, and the shutdown signal that ends
//! long-polls and live tails; and how a refused write is answered and
//! logged, the same way by every write route.

use crate::auth::{Auth, Caller};
use crate::backend::{Backend, EngineBackend};
use crate::error::{write_error, Answer};
use crate::state::audit::Audit;
use crate::state::budget::MemoryBudget;
use crate::state::http_metrics::HttpMetrics;
use crate::state::limits::HttpLimits;
use crate::state::shutdown::Shutdown;
use axum::response::IntoResponse;
use fencelog_api::ErrorCode;
use fencelog_engine::{Engine, WriteError};
use std::sync::Arc;

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
    pub(crate) audit: Arc<Audit>,
    /// Bytes of responses and uploads in flight, for every connection.
    pub budget: MemoryBudget,
    pub http_metrics: Arc<HttpMetrics>,
    /// The append session's deliberate bug (tests only; see
    /// `crate::mutation`), read when the state is made.
    pub(crate) mutation: crate::mutation::Switch,
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
            mutation: crate::mutation::current(),
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
    pub(crate) fn token_before(&self, stream: &str) -> u64 {
        self.backend.highest_token(stream)
    }

    /// Logs an accepted write that raised the stream's token.
    pub(crate) fn written(&self, caller: &Caller, stream: &str, op: &str, before: u64, after: u64) {
        if after > before {
            self.audit
                .token_raised(caller.name(), stream, op, before, after);
        }
    }

    /// The answer to a refused write, with the refusal in the aggregated
    /// stale log when it is one. Every write route refuses through here
    /// (`routes/writes.rs`); a stale token, the answer a flood of stale
    /// writers gets, skips the general error body for the same bytes
    /// written directly (an [`Answer::Json`]).
    pub(crate) fn write_refused_answer(
        &self,
        caller: &Caller,
        stream: &str,
        err: WriteError,
    ) -> Answer {
        if matches!(err, WriteError::StaleToken { .. }) {
            let (_, body) = self.write_refused_body(caller, stream, err);
            let status = crate::error::status(ErrorCode::StaleFencingToken);
            return Answer::Json { status, body };
        }
        Answer::Response(write_error(stream, err).into_response())
    }

    /// [`AppState::write_refused_answer`] as a status and the body's bytes, for
    /// an append session, which answers inside its own messages.
    pub(crate) fn write_refused_body(
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
