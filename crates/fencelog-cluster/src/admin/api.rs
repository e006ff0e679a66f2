//! The admin API under `/_cluster/admin/` on every node: `status` (this
//! node's view of every shard: leader, term, voters, learners, indexes,
//! the preferred leader, and which shards each node leads), and the
//! membership operations of [`super::membership`] — `add`, `remove`,
//! `transfer` — which any node runs for the whole cluster. Bodies are JSON
//! with unknown fields refused; errors are the API's `{"error", "message"}`.

use super::call::AdminError;
use super::membership::{add_node, remove_node};
use super::voters::{members, newest_voters, preferred};
use crate::ids::{NodeId, ShardId};
use crate::node::Node;
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use fencelog_api::ErrorCode;
use fencelog_server::ApiError;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long an admin operation may take when the request does not say.
pub const ADMIN_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);
/// The longest an admin request may ask for.
pub const ADMIN_TIMEOUT_MAX: Duration = Duration::from_secs(600);

/// The membership routes (`status` is served with the node's other routes).
pub fn routes(node: Arc<Node>) -> Router {
    Router::new()
        .route("/_cluster/admin/add", post(add))
        .route("/_cluster/admin/remove", post(remove))
        .route("/_cluster/admin/transfer", post(transfer))
        .with_state(node)
}

/// `GET /_cluster/admin/status`: this node's view of every shard.
pub fn status(node: &Node) -> Value {
    let mut leaders: BTreeMap<NodeId, Vec<ShardId>> = BTreeMap::new();
    let shards: Vec<Value> = (0..node.shard_count())
        .map(|k| {
            let m = node.raft(k).metrics().borrow().clone();
            let voters = newest_voters(&m.membership_config);
            let all = members(node, k);
            for v in &voters {
                leaders.entry(*v).or_default();
            }
            if let Some(l) = m.current_leader {
                leaders.entry(l).or_default().push(k);
            }
            json!({
                "shard": k,
                "state": format!("{:?}", m.state),
                "leader": m.current_leader,
                "preferred_leader": preferred(k, &voters),
                "term": m.current_term,
                "voters": voters,
                "learners": all.difference(&voters).collect::<Vec<_>>(),
                "last_log_index": m.last_log_index,
                "applied_index": m.last_applied.map(|l| l.index),
                "snapshot_index": m.snapshot.map(|l| l.index),
                "purged_index": m.purged.map(|l| l.index),
                // On the shard's leader: since a majority last answered it
                // (a leader cut off from its followers still leads here).
                "quorum_ack_ms": crate::node_metrics::leads(&m, node.id())
                    .then_some(m.millis_since_quorum_ack)
                    .flatten(),
            })
        })
        .collect();
    json!({
        "node_id": node.id(),
        "healthy": node.wal().poisoned().is_none(),
        // fdatasyncs of the Raft WAL since start: with the appends served,
        // the fsyncs per append per node.
        "wal_fsyncs": node.wal().fsyncs(),
        "shards": shards,
        "leaders": leaders,
    })
}

fn refusal(e: AdminError) -> Response {
    let (code, m) = match e {
        AdminError::BadRequest(m) => (ErrorCode::BadRequest, m),
        AdminError::Unavailable(m) => (ErrorCode::Unavailable, m),
    };
    ApiError::new(code, m).into_response()
}

fn deadline(timeout_ms: Option<u64>) -> Instant {
    let t = timeout_ms.map_or(ADMIN_TIMEOUT_DEFAULT, Duration::from_millis);
    Instant::now() + t.min(ADMIN_TIMEOUT_MAX)
}

fn body<T>(parsed: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    parsed
        .map(|Json(t)| t)
        .map_err(|e| ApiError::bad_request(e.body_text()))
}

fn answer<T: serde::Serialize>(done: Result<T, AdminError>) -> Response {
    match done {
        Ok(t) => Json(t).into_response(),
        Err(e) => refusal(e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddBody {
    node_id: NodeId,
    addr: String,
    timeout_ms: Option<u64>,
}

/// `POST /_cluster/admin/add {"node_id", "addr", "timeout_ms"?}`.
async fn add(
    State(node): State<Arc<Node>>,
    parsed: Result<Json<AddBody>, JsonRejection>,
) -> Response {
    let b = match body(parsed) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    answer(add_node(&node, b.node_id, &b.addr, deadline(b.timeout_ms)).await)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveBody {
    node_id: NodeId,
    timeout_ms: Option<u64>,
}

/// `POST /_cluster/admin/remove {"node_id", "timeout_ms"?}`.
async fn remove(
    State(node): State<Arc<Node>>,
    parsed: Result<Json<RemoveBody>, JsonRejection>,
) -> Response {
    let b = match body(parsed) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    answer(remove_node(&node, b.node_id, deadline(b.timeout_ms)).await)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TransferBody {
    shard: ShardId,
    to: NodeId,
    timeout_ms: Option<u64>,
}

/// `POST /_cluster/admin/transfer {"shard", "to", "timeout_ms"?}`.
async fn transfer(
    State(node): State<Arc<Node>>,
    parsed: Result<Json<TransferBody>, JsonRejection>,
) -> Response {
    let b = match body(parsed) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    answer(super::transfer::transfer(&node, b.shard, b.to, deadline(b.timeout_ms)).await)
}
