//! The write seam: [`Backend`], what every route asks to write a stream
//! and where it reads one. The HTTP layer — parsing, auth, limits, the
//! audit log, error mapping — is this crate's, once; a backend only
//! decides writes and says where a stream's data is. A single node is
//! [`EngineBackend`] (its engine); a cluster node implements the trait in
//! `fencelog-cluster` over its Raft write path (forwarding, early refusal
//! from applied state, the shard rules and leader hints stay there).
//!
//! A write is a [`WriteOp`] from the route that parsed it to the engine's
//! plan; a backend answers it with a [`Pending`]: decided now, the
//! engine's answer to come (no allocation on a single node's hot path), or
//! a future of its own.

mod engine;

pub use engine::EngineBackend;

use crate::error::ApiError;
use fencelog_engine::{Applied, Config, Engine, PendingWrite, StreamState, WriteError, WriteOp};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A boxed future a backend answers with when its answer is not ready.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What serves the API's writes and reads: a single node's engine or a
/// cluster node. Every write route calls [`Backend::write`] (an append
/// session [`Backend::open_session`]), every read of a stream
/// [`Backend::read`].
pub trait Backend: Send + Sync + 'static {
    /// The engine limits requests are held to (batch records and bytes).
    fn config(&self) -> &Config;

    /// Checks `op` and starts it: refused at once, or the answer to come.
    /// Whatever is answered is what the single node's engine would answer
    /// for the same op and state, or [`Refused::Api`] for what only this
    /// backend can refuse (a cluster with no leader: 503 `unavailable`).
    fn write(&self, op: WriteOp) -> Pending;

    /// An append session's sink on `stream`, whose appends must be written
    /// in the order they are given; or where the session must go instead.
    fn open_session(&self, stream: &str) -> Result<Box<dyn SessionWrites>, Elsewhere>;

    /// Where a write of `stream` must be sent instead, if this backend
    /// redirects writes (checked after the caller is admitted, before the
    /// body is read).
    fn redirect(&self, _stream: &str) -> Option<Redirect> {
        None
    }

    /// The `fencelog-leader` hint (`id=addr`) to send with an answer to a
    /// write of `stream`, if any.
    fn leader_hint(&self, _stream: &str) -> Option<String> {
        None
    }

    /// The engine that holds `stream`'s records, once a read of it sees
    /// every write acknowledged before the call.
    fn read(&self, stream: &str) -> Soon<'_, Result<Engine, ApiError>>;

    /// Up to `limit` streams whose names start with `prefix`, after
    /// `start_after`, in name order, tombstones left out.
    fn list_streams<'a>(
        &'a self,
        prefix: &'a str,
        start_after: Option<&'a str>,
        limit: usize,
    ) -> Soon<'a, Result<Vec<StreamState>, ApiError>>;

    /// The stream's highest accepted token now (0 for a new stream): what
    /// the audit log reports a rise from.
    fn highest_token(&self, stream: &str) -> u64;

    /// `Ok` while writes are accepted; else the `/healthz` refusal.
    fn health(&self) -> Result<(), ApiError>;

    /// The OpenMetrics text of `/metrics`: `http_families` (the HTTP
    /// layer's, without `# EOF`) and the backend's own, ending `# EOF`.
    fn metrics(&self, http_families: String) -> String;

    /// Makes everything acknowledged durable and stops, once the server
    /// has drained.
    fn shutdown(&self) -> BoxFuture<'_, ()>;
}

/// Why a write was not accepted.
#[derive(Debug)]
pub enum Refused {
    /// The engine's refusal, answered as a single node answers it.
    Write(WriteError),
    /// An answer of the backend's own, as it is.
    Api(ApiError),
}

impl From<WriteError> for Refused {
    fn from(e: WriteError) -> Refused {
        Refused::Write(e)
    }
}

impl From<ApiError> for Refused {
    fn from(e: ApiError) -> Refused {
        Refused::Api(e)
    }
}

/// Where a request must go instead of this node: `307` to `origin` (and
/// the same path), with the leader hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// `scheme://host:port` of the node to ask.
    pub origin: String,
    /// The `fencelog-leader` hint, `id=addr`.
    pub leader: String,
}

/// Why an append session does not open here.
#[derive(Debug)]
pub enum Elsewhere {
    /// Another node serves it.
    Redirect(Redirect),
    /// Nobody can now, or the request is refused.
    Refused(ApiError),
}

/// Where an append session's appends go, in the order they are read.
pub trait SessionWrites: Send + Sync {
    /// Starts one append (a [`WriteOp::Append`]); appends started one
    /// after another are written in that order.
    fn append(&self, op: WriteOp) -> Pending;
}

/// A write's answer: decided, the engine's to come, or a backend's own
/// future. A future itself (resolving once), and pollable without waiting
/// ([`Pending::try_answer`]).
pub enum Pending {
    /// Decided (taken once answered).
    Now(Option<Result<Applied, Refused>>),
    /// The engine's answer, when durable.
    Engine(PendingWrite),
    /// A backend's answer.
    Later(BoxFuture<'static, Result<Applied, Refused>>),
}

impl Pending {
    /// Decided now.
    pub fn now(r: Result<Applied, Refused>) -> Pending {
        Pending::Now(Some(r))
    }

    /// The answer if it is known, without waiting.
    pub fn try_answer(&mut self) -> Option<Result<Applied, Refused>> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match Pin::new(self).poll(&mut cx) {
            Poll::Ready(answer) => Some(answer),
            Poll::Pending => None,
        }
    }
}

impl From<Result<PendingWrite, WriteError>> for Pending {
    fn from(queued: Result<PendingWrite, WriteError>) -> Pending {
        match queued {
            Ok(pending) => Pending::Engine(pending),
            Err(e) => Pending::now(Err(Refused::Write(e))),
        }
    }
}

impl Future for Pending {
    type Output = Result<Applied, Refused>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Pending::Now(answer) => {
                Poll::Ready(answer.take().expect("a pending answer is taken once"))
            }
            Pending::Engine(pending) => Pin::new(pending)
                .poll(cx)
                .map(|r| r.map_err(Refused::Write)),
            Pending::Later(future) => future.as_mut().poll(cx),
        }
    }
}

/// An answer now, or a future of it.
pub enum Soon<'a, T> {
    /// Known (taken once answered).
    Now(Option<T>),
    /// To come.
    Later(BoxFuture<'a, T>),
}

impl<T> Soon<'_, T> {
    /// Known now.
    pub fn now(t: T) -> Self {
        Soon::Now(Some(t))
    }
}

// `T` is only ever moved out, never pinned.
impl<T> Unpin for Soon<'_, T> {}

impl<T> Future for Soon<'_, T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match self.get_mut() {
            Soon::Now(t) => Poll::Ready(t.take().expect("an answer is taken once")),
            Soon::Later(future) => future.as_mut().poll(cx),
        }
    }
}

/// `/healthz`'s verdict on one engine: `Ok` while it accepts writes, 503
/// once storage has failed (with whether space ran out) or shutdown began.
pub fn engine_health(engine: &Engine) -> Result<(), ApiError> {
    use fencelog_api::{ErrorCode, Field};
    if engine.is_healthy() {
        return Ok(());
    }
    Err(match engine.poisoned() {
        Some(failure) => ApiError::new(
            ErrorCode::Unavailable,
            format!("storage failed; writes are refused until restart: {failure}"),
        )
        .with(Field::NoSpace, failure.is_no_space()),
        None => ApiError::new(ErrorCode::Unavailable, "shutting down"),
    })
}

/// One engine's metric families, its gauges sampled now, ending `# EOF`.
pub fn engine_metrics(engine: &Engine) -> String {
    // The gauges are sampled here rather than kept live by the writer: only
    // a scrape needs them, and the channel already knows its length.
    engine
        .metrics()
        .queue_depth
        .set(engine.queue_depth() as i64);
    engine.metrics().healthy.set(i64::from(engine.is_healthy()));
    engine.metrics().encode()
}
