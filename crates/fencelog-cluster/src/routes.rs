//! The cluster's own routes on a node's client port, beside the API the
//! server serves: the Raft RPCs and the peer stream under `/_cluster/raft/`
//! (peer secret), and the admin routes under `/_cluster/admin/` (an
//! `admin` token). One layer checks every path under `/_cluster/`
//! ([`http_auth::guard`]), an unknown one too, so a route added there
//! later is covered without saying so.

use crate::http_auth::{self, ClusterAuth};
use crate::ids::ShardId;
use crate::node::Node;
use crate::peer::serve::Peers;
use crate::rpc::{RpcKind, RPC_BODY_BYTES_MAX};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use fencelog_api::ErrorCode;
use fencelog_server::server::Shutdown;
use fencelog_server::ApiError;
use std::sync::Arc;

/// The node's `/_cluster/` routes, each behind [`http_auth::guard`].
pub fn routes(node: Arc<Node>, access: ClusterAuth, shutdown: Shutdown) -> Router {
    let admin = crate::admin::api::routes(node.clone());
    Router::new()
        .route(
            "/_cluster/raft/{shard}/{kind}",
            post(raft_rpc).layer(DefaultBodyLimit::max(RPC_BODY_BYTES_MAX)),
        )
        .route(
            crate::peer::stream::STREAM_PATH,
            get(crate::peer::serve::open),
        )
        .route("/_cluster/admin/status", get(status))
        .route("/_cluster", any(no_such_route))
        .route("/_cluster/{*rest}", any(no_such_route))
        .with_state(Peers { node, shutdown })
        .merge(admin)
        .layer(axum::middleware::from_fn_with_state(
            access,
            http_auth::guard,
        ))
}

async fn raft_rpc(
    State(s): State<Peers>,
    Path((shard, kind)): Path<(ShardId, String)>,
    body: Bytes,
) -> Response {
    let Some(kind) = RpcKind::parse(&kind) else {
        return (StatusCode::NOT_FOUND, "no such RPC").into_response();
    };
    match crate::peer::answer(&s.node, shard, kind, &body).await {
        Ok(bytes) => bytes.into_response(),
        Err(m) => (StatusCode::BAD_REQUEST, m).into_response(),
    }
}

/// `GET /_cluster/admin/status`: this node's view of every shard.
async fn status(State(s): State<Peers>) -> Json<serde_json::Value> {
    Json(crate::admin::api::status(&s.node))
}

/// A `/_cluster/` path with no route (once the guard let it through).
async fn no_such_route() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such route")
}
