//! `--cluster-redirect`: a follower answers a write for a shard it does
//! not lead with 307 and the leader's address (`Location`, and the
//! `fencelog-leader` hint) instead of forwarding it. 307 keeps the method
//! and the body, so the client resends the very request to the leader.
//! Nothing is proposed here, so a redirect is always safe to follow. With
//! no known leader the request goes on as usual (`Node::write` waits for
//! one, and answers 503 `unavailable` without proposing if none comes).
//!
//! The layer runs inside each write route's scope check
//! (`http::redirecting`): a caller without a valid token for the write is
//! answered 401/403 by the node it reached and learns no leader address.

use crate::http::LEADER_HEADER;
use crate::node::Node;
use crate::proposer::leadership;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use fencelog_engine::validate_stream_name;
use std::sync::Arc;

/// The stream a write names, if the request is a replicated write:
/// `POST /v1/streams/{s}/{records,fence,trim,seal}` or `DELETE /v1/streams/{s}`.
fn written_stream<'a>(method: &Method, path: &'a str) -> Option<&'a str> {
    let rest = path.strip_prefix("/v1/streams/")?;
    let (stream, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let write = match *method {
        Method::POST => matches!(tail, "records" | "fence" | "trim" | "seal"),
        Method::DELETE => tail.is_empty(),
        _ => false,
    };
    (write && validate_stream_name(stream).is_ok()).then_some(stream)
}

/// Where a write should go instead, if this node redirects and does not
/// lead the stream's shard: (`id=addr` hint, `Location`).
fn redirect_to(node: &Node, req: &Request) -> Option<(String, String)> {
    let stream = written_stream(req.method(), req.uri().path())?;
    let k = node.shard_of(stream);
    let leader = leadership(node.raft(k), node.id()).err()??;
    let addr = node.addr_of(k, leader)?;
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let scheme = node.transport().scheme();
    Some((
        format!("{leader}={addr}"),
        format!("{scheme}://{addr}{path}"),
    ))
}

/// The middleware: 307 for a write this node does not lead, when enabled.
pub async fn redirect_writes(State(node): State<Arc<Node>>, req: Request, next: Next) -> Response {
    if !node.options().redirect {
        return next.run(req).await;
    }
    let Some((hint, location)) = redirect_to(&node, &req) else {
        return next.run(req).await;
    };
    let (Ok(hint), Ok(location)) = (
        HeaderValue::from_str(&hint),
        HeaderValue::from_str(&location),
    ) else {
        return next.run(req).await;
    };
    let mut resp = StatusCode::TEMPORARY_REDIRECT.into_response();
    resp.headers_mut().insert(header::LOCATION, location);
    resp.headers_mut().insert(LEADER_HEADER, hint);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_replicated_writes_are_redirected() {
        let post = Method::POST;
        assert_eq!(written_stream(&post, "/v1/streams/a/records"), Some("a"));
        assert_eq!(written_stream(&post, "/v1/streams/a/fence"), Some("a"));
        assert_eq!(written_stream(&Method::DELETE, "/v1/streams/a"), Some("a"));
        assert_eq!(written_stream(&Method::GET, "/v1/streams/a/records"), None);
        assert_eq!(written_stream(&post, "/v1/streams/a/cursors/c"), None);
        assert_eq!(written_stream(&post, "/v1/streams/a%20b/records"), None);
        assert_eq!(written_stream(&post, "/_cluster/admin/add"), None);
    }
}
