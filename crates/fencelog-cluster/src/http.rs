//! A cluster node's HTTP API on the client port: the Raft RPCs under
//! `/_cluster/`, appends and fences through Raft, and every other read
//! served by the stream's shard engine through the single-node handlers
//! (after a read-index, so tail answers are linearizable). Trim, seal and
//! delete go through Raft like a fence. Writes the cluster does not
//! replicate yet (config, cursor commits, batches) are refused rather than
//! applied to one replica.

use crate::network::RpcKind;
use crate::node::{Node, WriteOutcome};
use crate::types::{ClusterOp, ShardId};
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use bytes::Bytes;
use fencelog_api::{AppendAck, ErrorCode, Field, StreamInfo};
use fencelog_engine::{validate_stream_name, Applied, Header, WriteError};
use fencelog_server::error::write_error;
use fencelog_server::lifecycle;
use fencelog_server::{ApiError, AppState, HttpLimits, Shutdown};
use std::sync::Arc;
use tower::ServiceExt;

/// The header naming shard leader as `id=addr`.
pub const LEADER_HEADER: &str = "fencelog-leader";
/// Largest Raft RPC body (a whole snapshot travels in one, v1).
pub const RPC_BODY_BYTES_MAX: usize = 256 << 20;

#[derive(Clone)]
struct ClusterState {
    node: Arc<Node>,
    limits: HttpLimits,
    shutdown: Shutdown,
}

/// The node's router.
pub fn app(node: Arc<Node>, limits: HttpLimits, shutdown: Shutdown) -> Router {
    let admin = crate::admin::routes(node.clone());
    let redirect =
        axum::middleware::from_fn_with_state(node.clone(), crate::redirect::redirect_writes);
    let state = ClusterState {
        node,
        limits,
        shutdown,
    };
    Router::new()
        .route(
            "/_cluster/raft/{shard}/{kind}",
            post(raft_rpc).layer(DefaultBodyLimit::max(RPC_BODY_BYTES_MAX)),
        )
        .route("/_cluster/admin/status", get(status))
        .route("/v1/streams/{stream}/records", post(append).get(to_shard))
        .route("/v1/streams/{stream}/fence", post(fence))
        .route("/v1/streams/{stream}/trim", post(trim))
        .route("/v1/streams/{stream}/seal", post(seal))
        .route("/v1/streams/{stream}", delete(remove).fallback(to_shard))
        .fallback(to_shard)
        .layer(redirect)
        .with_state(state)
        .merge(admin)
}

async fn raft_rpc(
    State(s): State<ClusterState>,
    Path((shard, kind)): Path<(ShardId, String)>,
    body: Bytes,
) -> Response {
    let Some(kind) = RpcKind::parse(&kind) else {
        return (StatusCode::NOT_FOUND, "no such RPC").into_response();
    };
    match s.node.handle_rpc(shard, kind, &body).await {
        Ok(bytes) => bytes.into_response(),
        Err(m) => (StatusCode::BAD_REQUEST, m).into_response(),
    }
}

impl ClusterState {
    /// The single-node state of shard `k`'s engine (its limits are ours).
    fn shard_state(&self, k: ShardId) -> AppState {
        let mut state = AppState::new(self.node.engine(k)).with_limits(self.limits.clone());
        state.shutdown = self.shutdown.clone();
        state
    }

    fn leader_header(&self, k: ShardId, headers: &mut HeaderMap) {
        let Some(l) = self.node.leader_of(k) else {
            return;
        };
        let addr = self.node.addr_of(k, l).unwrap_or_default();
        if let Ok(v) = HeaderValue::from_str(&format!("{l}={addr}")) {
            headers.insert(LEADER_HEADER, v);
        }
    }

    /// Proposes `op` and shapes the answer; `ok` renders an accepted op.
    async fn write(
        &self,
        k: ShardId,
        stream: &str,
        op: ClusterOp,
        ok: fn(&str, Applied) -> Response,
    ) -> Response {
        let mut resp = match self.node.write(op).await {
            WriteOutcome::Decided(r) => match r.to_engine() {
                Ok(applied) => ok(stream, applied),
                Err(e) => write_error(stream, e).into_response(),
            },
            WriteOutcome::Unavailable(m) => ApiError::new(ErrorCode::Unavailable, m)
                .with(Field::OutcomeUnknown, false)
                .into_response(),
            WriteOutcome::Unknown(m) => ApiError::new(ErrorCode::Unavailable, m)
                .with(Field::OutcomeUnknown, true)
                .into_response(),
        };
        self.leader_header(k, resp.headers_mut());
        resp
    }
}

fn stream_of(
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<String, ApiError> {
    let Path(stream) = path.map_err(|e| ApiError::bad_request(e.to_string()))?;
    validate_stream_name(&stream)
        .map_err(|e| write_error(&stream, WriteError::InvalidStreamName(e)))?;
    Ok(stream)
}

/// The checks a single node's engine makes before its writer, made here
/// before proposing so apply never refuses on local limits.
fn check_append(
    state: &AppState,
    stream: &str,
    token: u64,
    records: &[Bytes],
    headers: &[Vec<Header>],
) -> Result<(), ApiError> {
    let c = state.engine.config();
    // Header names and values count like body bytes, as on a single node.
    let bytes: usize = records.iter().map(|r| r.len()).sum::<usize>()
        + headers
            .iter()
            .flatten()
            .map(|h| h.name.len() + h.value.len())
            .sum::<usize>();
    let err = if token == 0 {
        WriteError::ZeroToken
    } else if records.is_empty() {
        WriteError::EmptyBatch
    } else if records.len() > c.batch_records_max {
        WriteError::TooLarge {
            what: "records in the batch",
            limit: c.batch_records_max as u64,
            actual: records.len() as u64,
        }
    } else if bytes > c.batch_bytes_max {
        WriteError::TooLarge {
            what: "bytes in the batch",
            limit: c.batch_bytes_max as u64,
            actual: bytes as u64,
        }
    } else {
        return Ok(());
    };
    Err(write_error(stream, err))
}

async fn append(
    State(s): State<ClusterState>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let stream = stream_of(path)?;
    let k = s.node.shard_of(&stream);
    let state = s.shard_state(k);
    // Every error names the stream, as the single node's route answers.
    let (upload, body) = fencelog_server::records::decode_append(&state, &stream, request)
        .await
        .map_err(|e| e.on_stream(&stream))?;
    // `decode_append` checked each record's headers (413 / 400 as on a
    // single node); the batch's byte limit counts them here.
    let headers = body.headers.unwrap_or_default();
    check_append(&state, &stream, body.token, &body.records, &headers)?;
    let op = ClusterOp::Append {
        stream: stream.clone(),
        token: body.token,
        match_seq: body.match_seq_num,
        records: body.records.iter().map(|r| r.to_vec()).collect(),
        headers: headers
            .iter()
            .map(|h| {
                h.iter()
                    .map(|h| (h.name.to_vec(), h.value.to_vec()))
                    .collect()
            })
            .collect(),
        producer: body.producer,
        not_after_ms: body.not_after_ms,
    };
    // The records are copied into the op: the upload's budget share goes.
    drop(upload);
    Ok(s.write(k, &stream, op, |stream, applied| match applied {
        Applied::Appended(ack) => Json(AppendAck::new(stream.to_string(), ack)).into_response(),
        Applied::State(_) => unreachable!("an append answers an ack"),
    })
    .await)
}

async fn fence(
    State(s): State<ClusterState>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let stream = stream_of(path)?;
    let k = s.node.shard_of(&stream);
    let (token, not_after_ms) =
        fencelog_server::streams::fence_token(&s.shard_state(k), &headers, body)
            .await
            .map_err(|e| e.on_stream(&stream))?;
    if token == 0 {
        return Err(write_error(&stream, WriteError::ZeroToken));
    }
    let op = ClusterOp::Fence {
        stream: stream.clone(),
        token,
        not_after_ms,
    };
    Ok(s.write(k, &stream, op, state_answer).await)
}

/// A fence's, trim's, seal's or delete's answer: the stream's state.
fn state_answer(_: &str, applied: Applied) -> Response {
    match applied {
        Applied::State(st) => Json(StreamInfo::from(st)).into_response(),
        Applied::Appended(_) => unreachable!("a state change answers a state"),
    }
}

type StreamPath = Result<Path<String>, axum::extract::rejection::PathRejection>;

/// A trim, seal or delete: the single node's body parser on shard `k`'s
/// state, then `op` from the stream and what it parsed, proposed or
/// forwarded like a fence.
async fn state_change<T, F>(
    s: &ClusterState,
    path: StreamPath,
    parse: impl FnOnce(AppState) -> F,
    op: impl FnOnce(String, T) -> ClusterOp,
) -> Result<Response, ApiError>
where
    F: std::future::Future<Output = Result<T, ApiError>>,
{
    let stream = stream_of(path)?;
    let k = s.node.shard_of(&stream);
    let parsed = parse(s.shard_state(k))
        .await
        .map_err(|e| e.on_stream(&stream))?;
    let op = op(stream.clone(), parsed);
    Ok(s.write(k, &stream, op, state_answer).await)
}

/// `POST /v1/streams/{stream}/trim`, replicated: the single node's body,
/// decided in apply on every replica.
async fn trim(
    State(s): State<ClusterState>,
    path: StreamPath,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let parse = |st: AppState| async move { lifecycle::trim_body(&st, &headers, body).await };
    state_change(
        &s,
        path,
        parse,
        |stream, (token, trim_seq, not_after_ms)| ClusterOp::Trim {
            stream,
            token,
            trim_seq,
            not_after_ms,
        },
    )
    .await
}

/// `POST /v1/streams/{stream}/seal`, replicated.
async fn seal(
    State(s): State<ClusterState>,
    path: StreamPath,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let parse = |st: AppState| async move { lifecycle::seal_body(&st, &headers, body).await };
    state_change(&s, path, parse, |stream, (token, not_after_ms)| {
        ClusterOp::Seal {
            stream,
            token,
            not_after_ms,
        }
    })
    .await
}

/// `DELETE /v1/streams/{stream}`, replicated: a tombstone on every replica.
async fn remove(
    State(s): State<ClusterState>,
    path: StreamPath,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let parse = |st: AppState| async move { lifecycle::delete_token(&st, &headers, body).await };
    state_change(&s, path, parse, |stream, token| ClusterOp::Delete {
        stream,
        token,
    })
    .await
}

/// The stream a `/v1/streams/{stream}...` path names.
fn path_stream(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v1/streams/")?;
    Some(rest.split('/').next().unwrap_or(rest)).filter(|s| !s.is_empty())
}

/// Every other request: reads of one stream go to its shard's engine after
/// a read-index; node-wide GETs (health, metrics, the API document) to
/// shard 0's; writes that are not replicated yet are refused.
async fn to_shard(State(s): State<ClusterState>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    let read = request.method() == Method::GET || request.method() == Method::HEAD;
    if !read {
        return not_replicated(request.method(), &path).into_response();
    }
    if path == "/v1/streams" {
        return ApiError::bad_request("listing streams is not supported in cluster mode yet")
            .into_response();
    }
    let k = match path_stream(&path) {
        Some(stream) => {
            let k = s.node.shard_of(stream);
            if let Err(m) = s.node.read_barrier(k).await {
                let mut resp = ApiError::new(
                    ErrorCode::Unavailable,
                    format!("no read index for shard {k}: {m}"),
                )
                .into_response();
                s.leader_header(k, resp.headers_mut());
                return resp;
            }
            k
        }
        None => 0,
    };
    // The outer router's path parameters must not reach the inner one.
    let (mut parts, body) = request.into_parts();
    parts.extensions = Default::default();
    let app = fencelog_server::app(s.shard_state(k));
    match app.oneshot(Request::from_parts(parts, body)).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// A write the cluster does not replicate yet (config, cursor commits,
/// multi-stream batches): refused before anything is
/// applied anywhere, never applied to one replica only. A stream route's
/// refusal names its stream, as every stream route's error does.
fn not_replicated(method: &Method, path: &str) -> ApiError {
    let m = format!("{method} {path} is not replicated in cluster mode yet; nothing was changed");
    let e = ApiError::bad_request(m);
    match path_stream(path) {
        Some(stream) => e.on_stream(stream),
        None => e,
    }
}

/// `GET /_cluster/admin/status`: this node's view of every shard.
async fn status(State(s): State<ClusterState>) -> Json<serde_json::Value> {
    Json(crate::admin::status(&s.node))
}
