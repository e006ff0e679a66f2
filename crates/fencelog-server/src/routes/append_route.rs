//! The append route served in front of the router: the request a producer
//! (and a flood of stale ones) sends most, `POST /v1/streams/{stream}/records`,
//! taken straight from the connection to [`crate::routes::records::append_to`].
//!
//! Why: through axum, each request pays for the route match, the
//! middleware's boxed futures, a clone of the service stack, the path
//! extractors and an extension map; callgrind counted ~19k instructions of
//! the ~52k a stale rejection cost on the server there (BENCHMARKS.md).
//! Here the same steps run as plain calls, in the same order
//! the router takes them:
//!
//! 1. [`crate::state::HttpLimits::headers_over_limit`] (what the router's one middleware,
//!    `track` in [`crate::routes::router`], does first);
//! 2. [`crate::auth::admit`] with the route's declared [`Access`] (what [`crate::auth::check`] does);
//! 3. [`crate::decode::params::valid_stream_name`] (what the handler's path extractor leads to);
//! 4. [`crate::routes::records::append_to`], the handler's own body;
//!
//! and the answer is counted under the route's metrics series. A backend
//! that redirects writes answers 307 between steps 3 and 4, as the
//! router's route layer does ([`crate::routes::writes::redirect_writes`]), so a
//! cluster node serves the route here too. Anything
//! that is not plainly this route — another method, a percent-encoded or
//! empty segment, a different path — goes to the router, which stays the
//! one definition of the API; `server/append_route_tests.rs` checks that both
//! ways answer alike, byte for byte.

use crate::auth::{self, Access};
use crate::decode::header_view::HeaderView;
use crate::decode::params;
use crate::error::Answer;
use crate::routes::body::Incoming;
use crate::routes::records;
use crate::state::http_metrics::APPEND_ROUTE;
use crate::state::AppState;
use axum::body::Body;
use axum::http::{Method, Request};
use axum::response::{IntoResponse, Response};
use std::time::Instant;

/// The fast path's share of the server: the state the router serves and
/// the access the route table declares for the append route.
#[derive(Clone)]
pub struct AppendRoute {
    state: AppState,
    access: Access,
}

impl AppendRoute {
    pub fn new(state: AppState) -> Self {
        let access = crate::routes::table::ROUTES
            .iter()
            .find(|r| r.path == APPEND_ROUTE && r.operation_id == "append")
            .map(|r| r.access)
            .expect("the route table has the append route");
        AppendRoute { state, access }
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
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        self.serve_parts(target.as_bytes(), stream, &parts.headers, body.into())
            .await
            .into_response()
    }

    /// Answers a request of this route, given as its target (path and
    /// query, read as text only for a redirect), its stream segment (as
    /// [`AppendRoute::matches`] found it), headers and body.
    pub async fn serve_parts<H: HeaderView + Sync + ?Sized>(
        &self,
        target: &[u8],
        stream: &str,
        headers: &H,
        body: Incoming,
    ) -> Answer {
        let started = Instant::now();
        let answer = match self.state.limits.headers_over_limit(headers.size_bytes()) {
            Some(refused) => Answer::Response(refused.into_response()),
            None => self.admitted(target, stream, headers, body).await,
        };
        self.state
            .http_metrics
            .answered_append(answer.status().as_u16(), started);
        answer
    }

    async fn admitted<H: HeaderView + Sync + ?Sized>(
        &self,
        target: &[u8],
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
        if let Err(e) = params::valid_stream_name(stream) {
            return Answer::Response(e.into_response());
        }
        if let Some(r) = self.state.backend.redirect(stream) {
            let target = std::str::from_utf8(target).unwrap_or("/");
            return Answer::Response(crate::routes::writes::redirect(&r, target));
        }
        records::append_from(&self.state, &caller, stream, headers, body).await
    }
}
