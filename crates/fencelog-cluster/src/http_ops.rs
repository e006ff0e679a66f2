//! The cluster's cursor commits, multi-stream batches and stream listing:
//! the single node's body parsers and answer shapes around a replicated
//! op (or, for the listing, a merge of every shard's applied state).
//!
//! A batch is atomic because it is one op of one Raft entry, planned all
//! or nothing by its shard engine's writer. Streams in different shards
//! are in different Raft groups, and making one batch atomic across them
//! would take a two-phase commit over the groups; the cluster does not do
//! that, so such a batch is refused with a 400 that names each stream's
//! shard, before anything is proposed.

use crate::http::{caller_of, stream_of, ClusterState};
use crate::types::{BatchOpView, ClusterOp, ShardId};
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use fencelog_api::ErrorCode;
use fencelog_engine::{validate_short_name, Applied, BatchAck, StreamState, WriteError};
use fencelog_server::auth::Caller;
use fencelog_server::params::QueryParams;
use fencelog_server::producers::{batch_answer, batch_body, cursor_answer, cursor_body};
use fencelog_server::streams::list_page;
use fencelog_server::ApiError;
use std::collections::{BTreeSet, HashMap};

/// `PUT /v1/streams/{stream}/cursors/{name}`, replicated: the cursor rule
/// decides in apply on every replica.
pub(crate) async fn cursor(
    State(s): State<ClusterState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let Path((stream, name)) = path.map_err(|e| ApiError::bad_request(format!("bad path: {e}")))?;
    let stream = stream_of(Ok(Path(stream)))?;
    let k = s.node.shard_of(&stream);
    let (token, seq) = cursor_body(&s.shard_state(k), &headers, body).await?;
    // The engine's checks before its writer, in its order.
    let early = match validate_short_name("cursor name", &name) {
        Ok(()) if token == 0 => Err(WriteError::ZeroToken),
        r => r,
    };
    if let Err(e) = early {
        return Ok(cursor_answer(&stream, &name, Err(e)).into_response());
    }
    let op = ClusterOp::Cursor {
        stream: stream.clone(),
        name: name.clone(),
        token,
        seq,
    };
    let r = match s.decide(k, op).await {
        Ok(r) => r.and_then(|a| match a {
            Applied::Cursor(c) => Ok(c),
            other => Err(WriteError::BadInput(format!(
                "a cursor commit answered {other:?}"
            ))),
        }),
        Err(unavailable) => return Ok(unavailable),
    };
    Ok(s.with_leader(k, cursor_answer(&stream, &name, r).into_response()))
}

/// `POST /v1/batch`, replicated when every stream is in one shard.
pub(crate) async fn batch(
    State(s): State<ClusterState>,
    caller: Option<Extension<Caller>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = caller_of(caller);
    // Shard 0's state only for the body's limits and budget, the node's.
    let state = s.shard_state(0);
    let (ops, not_after_ms) = batch_body(&state, &caller, &headers, body).await?;
    let streams: Vec<String> = ops.iter().map(|o| o.stream.clone()).collect();
    if let Err(e) = state.engine.check_batch_ops(&ops) {
        return Ok(batch_answer(&streams, Err(e)).into_response());
    }
    let shards: Vec<ShardId> = streams.iter().map(|st| s.node.shard_of(st)).collect();
    let k = shards[0];
    if shards.iter().any(|x| *x != k) {
        return Err(cross_shard(&streams, &shards));
    }
    let op = ClusterOp::Batch {
        ops: ops.iter().map(BatchOpView::of).collect(),
        not_after_ms,
    };
    let r = match s.decide(k, op).await {
        Ok(r) => r.and_then(|a| match a {
            Applied::Batch(acks) => Ok(acks),
            other => Err(WriteError::BadInput(format!("a batch answered {other:?}"))),
        }),
        Err(unavailable) => return Ok(unavailable),
    };
    let answer: Result<Vec<BatchAck>, WriteError> = r;
    Ok(s.with_leader(k, batch_answer(&streams, answer).into_response()))
}

/// The 400 of a batch whose streams are in more than one shard.
fn cross_shard(streams: &[String], shards: &[ShardId]) -> ApiError {
    let mut seen = BTreeSet::new();
    let placed: Vec<String> = streams
        .iter()
        .zip(shards)
        .filter(|(st, _)| seen.insert(st.as_str()))
        .map(|(st, k)| format!("{st} is in shard {k}"))
        .collect();
    ApiError::new(
        ErrorCode::BadRequest,
        format!(
            "a batch in cluster mode must keep all its streams in one shard: atomicity across shards would need a two-phase commit, which fencelog does not do ({}); nothing was changed",
            placed.join(", ")
        ),
    )
}

/// `GET /v1/streams`: every shard's applied state after a read-index on
/// each, merged in name order and paged as on a single node (each shard
/// gives at most `limit + 1` names after `start_after`, so the first
/// `limit + 1` of the merge are the global ones).
pub(crate) async fn list(
    State(s): State<ClusterState>,
    caller: Option<Extension<Caller>>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let caller = caller_of(caller);
    let q = QueryParams::from_extractor(query)?;
    let shards = s.node.shard_count();
    for k in 0..shards {
        if let Err(m) = s.node.read_barrier(k).await {
            let e = ApiError::new(
                ErrorCode::Unavailable,
                format!("no read index for shard {k}: {m}"),
            );
            return Ok(s.with_leader(k, e.into_response()));
        }
    }
    let engines: Vec<_> = (0..shards).map(|k| s.node.engine(k)).collect();
    let page = list_page(&caller, &q, |prefix, after, n| {
        let mut all: Vec<StreamState> = engines
            .iter()
            .flat_map(|e| e.list_streams(prefix, after, n))
            .collect();
        all.sort_by(|a, b| a.stream.cmp(&b.stream));
        all.truncate(n);
        all
    })?;
    Ok(page.into_response())
}
