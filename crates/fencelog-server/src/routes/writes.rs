//! What every write route does once it has its op: the op through the
//! backend ([`crate::backend::Backend::write`]), an accepted token rise
//! and a stale refusal into the audit log, and the backend's leader hint
//! on the answer. So a write is answered the same way whichever route
//! and whichever backend it took.

use crate::auth::Caller;
use crate::backend::{Redirect, Refused};
use crate::error::Answer;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fencelog_api::header as wire;
use fencelog_api::StreamInfo;
use fencelog_engine::{Applied, WriteOp};
use std::future::Future;

/// `op`, a write of `stream` by `caller`, through the backend; an accepted
/// op that raised the stream's token is logged as `what`.
///
/// The op goes to the backend when this is called, not when the future is
/// first polled: the future holds the answer to come, never the op.
pub(crate) fn write<'a>(
    state: &'a AppState,
    caller: &'a Caller,
    stream: &'a str,
    what: &'a str,
    op: WriteOp,
) -> impl Future<Output = Result<Applied, Refused>> + 'a {
    let before = state.token_before(stream);
    let pending = state.backend.write(op);
    async move {
        let answer = pending.await;
        if let Ok(applied) = &answer {
            state.written(caller, stream, what, before, token_of(applied));
        }
        answer
    }
}

/// The token an accepted op leaves on its stream (0: none of its own).
fn token_of(applied: &Applied) -> u64 {
    match applied {
        Applied::Appended(a) => a.fencing_token,
        Applied::State(s) => s.highest_token,
        Applied::Cursor(_) | Applied::Batch(_) => 0,
    }
}

/// A refused write's answer: the engine's refusal as every write route
/// answers it (a stale token as its prepared bytes, counted in the
/// aggregated stale log), or the backend's own answer as it is.
pub(crate) fn refused(state: &AppState, caller: &Caller, stream: &str, r: Refused) -> Answer {
    match r {
        Refused::Write(e) => state.write_refused_answer(caller, stream, e),
        Refused::Api(e) => Answer::Response(e.into_response()),
    }
}

/// `answer` with the backend's leader hint for `stream`, if it has one.
pub(crate) fn hinted(state: &AppState, stream: &str, answer: impl Into<Answer>) -> Answer {
    let answer = answer.into();
    let Some(hint) = state.backend.leader_hint(stream) else {
        return answer;
    };
    let mut response = answer.into_response();
    if let Ok(v) = HeaderValue::from_str(&hint) {
        response.headers_mut().insert(wire::LEADER, v);
    }
    Answer::Response(response)
}

/// A fence's, trim's, seal's, delete's or config's whole answer: the
/// stream's state once durable, or the refusal; with the leader hint.
pub(crate) async fn state_answer(
    state: &AppState,
    caller: &Caller,
    stream: &str,
    what: &str,
    op: WriteOp,
) -> Response {
    let answer = match write(state, caller, stream, what, op).await {
        Ok(Applied::State(s)) => Json(StreamInfo::from(s)).into_response().into(),
        Ok(other) => unreachable!("a state change answered {other:?}"),
        Err(r) => refused(state, caller, stream, r),
    };
    hinted(state, stream, answer).into_response()
}

/// `307` to the same path and query on `r.origin`, with the leader hint:
/// 307 keeps the method and the body, so the client sends the very
/// request to the node that serves it; nothing was done here.
pub(crate) fn redirect(r: &Redirect, path_and_query: &str) -> Response {
    let mut resp = StatusCode::TEMPORARY_REDIRECT.into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("{}{path_and_query}", r.origin)) {
        h.insert(header::LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&r.leader) {
        h.insert(wire::LEADER, v);
    }
    resp
}

/// The route layer of the writes a backend may redirect
/// ([`crate::routes::table::REDIRECTED`]), inside the route's scope check: a
/// caller without a valid token is answered by the node it reached and
/// learns no other node's address.
pub(crate) async fn redirect_writes(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let uri = request.uri();
    let target = stream_of(uri.path()).and_then(|stream| state.backend.redirect(stream));
    match target {
        Some(r) => redirect(&r, uri.path_and_query().map_or("/", |p| p.as_str())),
        None => next.run(request).await,
    }
}

/// The stream a `/v1/streams/{stream}...` path names, if it is a valid
/// name as it stands (a percent-encoded one is left to the route).
fn stream_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v1/streams/")?;
    let stream = rest.split('/').next().unwrap_or(rest);
    fencelog_engine::validate_stream_name(stream)
        .is_ok()
        .then_some(stream)
}
