//! The append session (`GET /v1/streams/{stream}/session`, the single
//! node's WebSocket protocol, `fencelog_api::session`) in cluster mode. It
//! is served on the leader of the stream's shard: each append goes to the
//! shard's proposer the moment it is read (`Node::enqueue_session_op`, a
//! synchronous enqueue, so the session's appends enter the log in the
//! order sent), and its answer is its own apply result — accepted, or the
//! single-request route's 409/412 for that append alone — sent in order
//! by the single node's session code.
//!
//! Once one of a session's appends is not applied (this node stopped
//! leading, the outcome is unknown), the session's gate closes: every
//! later append of it is answered 503 `unavailable` "not proposed" instead
//! of being proposed, so no later append of a session is ever applied
//! without an earlier one (a leader that lost and regained leadership
//! would otherwise propose n+1 after refusing n). The client learns each
//! append's fate and opens a new session on the new leader.
//!
//! A follower answers the upgrade with 307 to the leader (`Location` and
//! the `fencelog-leader` hint), which the Rust client follows: appends
//! forwarded one by one on separate connections would have no order.

use crate::http::{ClusterState, LEADER_HEADER};
use crate::node::Node;
use crate::proposer::{leadership, Proposed, SessionGate};
use crate::types::{ClusterOp, ShardId};
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequestParts, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use fencelog_api::session::SessionAppend;
use fencelog_api::{ErrorCode, Field};
use fencelog_engine::{validate_stream_name, Applied, WriteError};
use fencelog_server::auth::{Caller, Scope};
use fencelog_server::error::{write_error, ApiError};
use fencelog_server::server::ConnHold;
use fencelog_server::session::{Answer, Refused, SessionSink};
use std::sync::Arc;

/// `GET .../session` on a cluster node: the route's own check (scope
/// `append` on the stream, the single node's 401/403), then the session
/// here if this node leads the stream's shard, 307 to the leader if
/// another node does, 503 while none does.
pub(crate) async fn open(s: &ClusterState, request: Request, stream: &str) -> Response {
    let who = s.access.auth.authenticate(request.headers());
    let who = match who {
        Ok(p) => p.cloned(),
        Err(e) => return fencelog_server::auth::with_challenge(e),
    };
    if let Err(e) = fencelog_server::auth::authorize(who.as_ref(), Scope::Append, Some(stream)) {
        return e.into_response();
    }
    if let Err(e) = validate_stream_name(stream) {
        return write_error(stream, WriteError::InvalidStreamName(e)).into_response();
    }
    let k = s.node.shard_of(stream);
    match leadership(s.node.raft(k), s.node.id()) {
        Ok(()) => serve(s, request, stream, k, Caller(who)).await,
        Err(Some(leader)) => to_leader(&s.node, &request, k, leader, stream),
        Err(None) => ApiError::new(
            ErrorCode::Unavailable,
            format!("shard {k} has no leader now: no append session can open; try again"),
        )
        .with(Field::OutcomeUnknown, false)
        .on_stream(stream)
        .into_response(),
    }
}

async fn serve(
    s: &ClusterState,
    request: Request,
    stream: &str,
    k: ShardId,
    caller: Caller,
) -> Response {
    let (mut parts, _body) = request.into_parts();
    let hold = parts.extensions.get::<ConnHold>().cloned().map(Extension);
    let ws = WebSocketUpgrade::from_request_parts(&mut parts, &()).await;
    let state = s.shard_state(k);
    let sink = Arc::new(ShardSink {
        node: s.node.clone(),
        state: state.clone(),
        k,
        gate: SessionGate::default(),
    });
    match fencelog_server::session::upgrade(state, caller, hold, stream.into(), ws, Some(sink))
        .await
    {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// 307 to the shard leader's same URL, with the leader hint.
fn to_leader(node: &Node, request: &Request, k: ShardId, leader: u64, stream: &str) -> Response {
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let Some(addr) = node.addr_of(k, leader) else {
        return ApiError::new(
            ErrorCode::Unavailable,
            format!("shard {k}'s leader, node {leader}, has no known address; try again"),
        )
        .with(Field::OutcomeUnknown, false)
        .on_stream(stream)
        .into_response();
    };
    let scheme = node.transport().scheme();
    let mut resp = StatusCode::TEMPORARY_REDIRECT.into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("{scheme}://{addr}{path}")) {
        h.insert(header::LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("{leader}={addr}")) {
        h.insert(LEADER_HEADER, v);
    }
    resp
}

/// Where a session's appends go on a shard leader.
struct ShardSink {
    node: Arc<Node>,
    /// The shard engine's single-node state (its limits).
    state: fencelog_server::state::AppState,
    k: ShardId,
    gate: SessionGate,
}

impl SessionSink for ShardSink {
    fn queue(&self, stream: &str, append: SessionAppend) -> Answer {
        let records = [append.body];
        let checked =
            crate::http::check_append(&self.state, stream, append.fencing_token, &records, &[]);
        if let Err(e) = checked {
            return Answer::Known(Err(Refused::Api(e)));
        }
        let [body] = records;
        let op = ClusterOp::Append {
            stream: stream.to_string(),
            token: append.fencing_token,
            match_seq: append.match_seq_num,
            records: vec![body.to_vec()],
            headers: Vec::new(),
            producer: None,
            not_after_ms: None,
        };
        let k = self.k;
        match self.node.enqueue_session_op(k, op, self.gate.clone()) {
            Err(p) => Answer::Known(answer_of(k, p)),
            Ok(rx) => Answer::Remote(Box::pin(async move {
                match rx.await {
                    Ok(p) => answer_of(k, p),
                    Err(_) => Err(unavailable("the shard's proposer stopped".into(), true)),
                }
            })),
        }
    }
}

fn unavailable(message: String, outcome_unknown: bool) -> Refused {
    Refused::Api(
        ApiError::new(ErrorCode::Unavailable, message).with(Field::OutcomeUnknown, outcome_unknown),
    )
}

/// A proposal's outcome as the session answers it.
fn answer_of(k: ShardId, p: Proposed) -> Result<fencelog_engine::Ack, Refused> {
    match p {
        Proposed::Applied(r) => match r.to_engine() {
            Ok(Applied::Appended(ack)) => Ok(ack),
            Ok(other) => Err(unavailable(
                format!("an append was answered {other:?}"),
                true,
            )),
            Err(e) => Err(Refused::Write(e)),
        },
        Proposed::NotLeader(_) => Err(unavailable(
            format!("this node no longer leads shard {k}: not proposed; open a new session"),
            false,
        )),
        Proposed::NotProposed(m) => Err(unavailable(m, false)),
        Proposed::Unknown(m) => Err(unavailable(m, true)),
    }
}
