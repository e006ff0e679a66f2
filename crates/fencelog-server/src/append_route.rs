//! The append route served in front of the router: the request a producer
//! (and a flood of stale ones) sends most, `POST /v1/streams/{stream}/records`,
//! taken straight from the connection to [`crate::records::append_to`].
//!
//! Why: through axum, each request pays for the route match, the
//! middleware's boxed futures, a clone of the service stack, the path
//! extractors and an extension map; callgrind counted ~19k instructions of
//! the ~52k a stale rejection cost on the server there (BENCHMARKS.md,
//! issue 13). Here the same steps run as plain calls, in the same order
//! the router takes them:
//!
//! 1. [`crate::ops::headers_over_limit`] (what [`crate::http_metrics::track`] does first);
//! 2. [`crate::auth::admit`] with the route's declared [`Access`] (what [`crate::auth::check`] does);
//! 3. [`crate::params::valid_stream_name`] (what the handler's path extractor leads to);
//! 4. [`crate::records::append_to`], the handler's own body;
//!
//! and the answer is counted under the route's metrics series. A cluster
//! node (issue 14) serves the same route with an [`AppendSink`] in place
//! of step 4's engine: the decoded body goes to the stream's shard, and
//! the sink refuses names and answers as the node's router route does
//! (`tests/it/cluster_fast_append.rs`). Anything
//! that is not plainly this route — another method, a percent-encoded or
//! empty segment, a different path — goes to the router, which stays the
//! one definition of the API; `tests/it/append_route.rs` checks that both
//! ways answer alike, byte for byte.

use crate::append_body::AppendBody;
use crate::auth::{self, Access};
use crate::body::{Incoming, Upload};
use crate::error::{Answer, ApiError};
use crate::header_view::HeaderView;
use crate::http_metrics::APPEND_ROUTE;
use crate::state::AppState;
use crate::{ops, params, records};
use axum::body::Body;
use axum::http::{Method, Request};
use axum::response::{IntoResponse, Response};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

/// The fast path's share of the server: the state the router serves and
/// the access the route table declares for the append route.
#[derive(Clone)]
pub struct AppendRoute {
    state: AppState,
    access: Access,
    /// Where admitted, decoded appends go instead of `state`'s engine.
    sink: Option<Arc<dyn AppendSink>>,
}

/// A future an [`AppendSink`] answers with.
pub type SinkFuture<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// Where an append goes once this route has checked its headers, its
/// caller and its stream name and decoded its body, when it is not this
/// server's engine: a cluster node proposes it to the stream's shard
/// (issue 14), answering exactly as its router's route would.
pub trait AppendSink: Send + Sync + 'static {
    /// Refuses a stream name as the sink's own route would; by default as
    /// this server's route does.
    fn check_name(&self, stream: &str) -> Result<(), ApiError> {
        params::valid_stream_name(stream)
    }

    /// Answers the append of `body` to `stream` by `caller`; `upload`
    /// holds the bytes `body`'s records are slices of.
    fn append<'a>(
        &'a self,
        caller: auth::Caller,
        stream: &'a str,
        upload: Upload,
        body: AppendBody,
    ) -> SinkFuture<'a>;
}

impl AppendRoute {
    pub fn new(state: AppState) -> Self {
        let access = crate::openapi::ROUTES
            .iter()
            .find(|r| r.path == APPEND_ROUTE && r.operation_id == "append")
            .map(|r| r.access)
            .expect("the route table has the append route");
        AppendRoute {
            state,
            access,
            sink: None,
        }
    }

    /// The route over `state`'s limits, auth and metrics, its appends
    /// answered by `sink`.
    pub fn with_sink(state: AppState, sink: Arc<dyn AppendSink>) -> Self {
        AppendRoute {
            sink: Some(sink),
            ..AppendRoute::new(state)
        }
    }

    /// The stream segment when `request` is this route and nothing about
    /// it needs the router: a POST to exactly the route's shape whose
    /// segment decodes to itself.
    pub fn matches<B>(request: &Request<B>) -> Option<&str> {
        Self::matches_path(request.method(), request.uri().path())
    }

    /// [`AppendRoute::matches`] on a request's method and path.
    pub fn matches_path<'a>(method: &Method, path: &'a str) -> Option<&'a str> {
        if method != Method::POST {
            return None;
        }
        let stream = path
            .strip_prefix("/v1/streams/")?
            .strip_suffix("/records")?;
        let plain = !stream.is_empty() && !stream.bytes().any(|b| b == b'/' || b == b'%');
        plain.then_some(stream)
    }

    /// Answers `request`, which [`AppendRoute::matches`] accepted.
    pub async fn serve(&self, request: Request<Body>) -> Response {
        let (parts, body) = request.into_parts();
        let stream = Self::matches_path(&parts.method, parts.uri.path());
        let stream = stream.expect("matched before serving");
        self.serve_parts(stream, &parts.headers, body.into())
            .await
            .into_response()
    }

    /// Answers a request of this route, given as its stream segment (as
    /// [`AppendRoute::matches`] found it), headers and body.
    pub async fn serve_parts<H: HeaderView + Sync + ?Sized>(
        &self,
        stream: &str,
        headers: &H,
        body: Incoming,
    ) -> Answer {
        let started = Instant::now();
        let answer = match ops::headers_over_limit(&self.state, headers) {
            Some(refused) => Answer::Response(refused),
            None => self.admitted(stream, headers, body).await,
        };
        self.state
            .http_metrics
            .answered_append(answer.status().as_u16(), started);
        answer
    }

    async fn admitted<H: HeaderView + Sync + ?Sized>(
        &self,
        stream: &str,
        headers: &H,
        body: Incoming,
    ) -> Answer {
        let caller = match self.access {
            Access::Open => auth::Caller::default(),
            Access::Scope(scope) => {
                match auth::admit(&self.state.auth, scope, headers, Ok(Some(stream))) {
                    Ok(caller) => caller,
                    Err(refused) => return Answer::Response(refused),
                }
            }
        };
        let named = match &self.sink {
            Some(sink) => sink.check_name(stream),
            None => params::valid_stream_name(stream),
        };
        if let Err(e) = named {
            return Answer::Response(e.into_response());
        }
        let Some(sink) = &self.sink else {
            return records::append_from(&self.state, &caller, stream, headers, body).await;
        };
        match records::decode_append_from(&self.state, stream, headers, body).await {
            Ok((upload, body)) => sink.append(caller, stream, upload, body).await,
            Err(e) => Answer::Response(e.on_stream(stream).into_response()),
        }
    }
}
