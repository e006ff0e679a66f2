//! A cluster node's HTTP API on the client port: the Raft RPCs under
//! `/_cluster/`, every write through Raft (appends, fences, trims, seals,
//! deletes here; config changes, cursor commits, batches and the merged
//! stream listing in [`crate::http_ops`]), and every other read served by
//! the stream's shard engine through the single-node handlers (after a
//! read-index, so tail answers are linearizable). Who may call what is
//! [`crate::http_auth`]'s.

use crate::http_auth::{self, guarded, ClusterAuth};
use crate::network::RpcKind;
use crate::node::{Node, WriteOutcome};
use crate::types::{ClusterOp, ConfigView, ShardId};
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put, MethodRouter};
use axum::{Extension, Json, Router};
use bytes::Bytes;
use fencelog_api::{AppendAck, ErrorCode, Field, StreamInfo};
use fencelog_engine::{validate_stream_config, validate_stream_name, Applied, Header, WriteError};
use fencelog_server::append_route::{AppendRoute, AppendSink, SinkFuture};
use fencelog_server::audit::Audit;
use fencelog_server::auth::Caller;
use fencelog_server::body::Upload;
use fencelog_server::budget::MemoryBudget;
use fencelog_server::error::write_error;
use fencelog_server::error::Answer;
use fencelog_server::http_metrics::HttpMetrics;
use fencelog_server::lifecycle;
use fencelog_server::{ApiError, AppState, AppendBody, HttpLimits, Routes, Shutdown};
use std::sync::Arc;
use tower::ServiceExt;

/// The header naming shard leader as `id=addr`.
pub const LEADER_HEADER: &str = fencelog_api::header::LEADER;
/// Largest Raft RPC body (a whole snapshot travels in one, v1).
pub const RPC_BODY_BYTES_MAX: usize = 256 << 20;

/// What every handler of the node shares. The single-node parts (auth,
/// audit, memory budget, HTTP metrics) are one per node, whichever shard
/// a request reaches.
#[derive(Clone)]
pub(crate) struct ClusterState {
    pub(crate) node: Arc<Node>,
    limits: HttpLimits,
    pub(crate) shutdown: Shutdown,
    pub(crate) access: ClusterAuth,
    audit: Arc<Audit>,
    budget: MemoryBudget,
    http_metrics: Arc<HttpMetrics>,
}

/// The node's router: every route (the membership admin routes of
/// [`crate::admin`] included; the 307 redirect sits inside each write
/// route's scope check, see [`redirecting`]), then
/// [`http_auth::guard`] over all of them (the `/_cluster/` prefix), added
/// last so it covers every route.
pub fn app(node: Arc<Node>, access: ClusterAuth, limits: HttpLimits, shutdown: Shutdown) -> Router {
    serving(node, access, limits, shutdown).router
}

/// [`app`], and in front of it the append route's fast path
/// ([`fencelog_server::append_route`]) with the cluster's append behind
/// it, as a node serves them. Without the fast path with
/// `--cluster-redirect`: the 307 is a layer of the router's route.
pub fn serving(
    node: Arc<Node>,
    access: ClusterAuth,
    limits: HttpLimits,
    shutdown: Shutdown,
) -> Routes {
    let admin = crate::admin::routes(node.clone());
    let state = ClusterState {
        node,
        limits,
        shutdown,
        access: access.clone(),
        audit: Arc::default(),
        budget: MemoryBudget::default(),
        http_metrics: Arc::default(),
    };
    let append = (!state.node.options().redirect).then(|| {
        // Shard 0's state for what is the node's (limits, auth, budget,
        // metrics); the sink picks the stream's shard.
        let sink = Arc::new(FastAppend(state.clone()));
        Arc::new(AppendRoute::with_sink(state.shard_state(0), sink))
    });
    let router =
        routes(&state)
            .with_state(state)
            .merge(admin)
            .layer(axum::middleware::from_fn_with_state(
                access,
                http_auth::guard,
            ));
    Routes { router, append }
}

/// The cluster's append behind the front's fast path: what [`append`]
/// does once the route's checks and the body's decoding are done.
struct FastAppend(ClusterState);

impl AppendSink for FastAppend {
    fn check_name(&self, stream: &str) -> Result<(), ApiError> {
        valid_name(stream)
    }

    fn append<'a>(
        &'a self,
        caller: Caller,
        stream: &'a str,
        upload: Upload,
        body: AppendBody,
    ) -> SinkFuture<'a> {
        Box::pin(async move {
            match self.0.append_decoded(&caller, stream, upload, body).await {
                Ok(resp) => Answer::Response(resp),
                Err(e) => Answer::Response(e.into_response()),
            }
        })
    }
}

/// `route`, a replicated write of one stream, answered 307 by a node that
/// does not lead the stream's shard when `--cluster-redirect` is on
/// ([`crate::redirect`]). Inside the route's scope check: a caller without
/// a valid token gets the 401/403 of the node it reached, never the
/// leader's address (and the leader would only check it again).
fn redirecting(s: &ClusterState, route: MethodRouter<ClusterState>) -> MethodRouter<ClusterState> {
    let layer =
        axum::middleware::from_fn_with_state(s.node.clone(), crate::redirect::redirect_writes);
    route.route_layer(layer)
}

/// Every route. A client route the cluster serves itself carries the
/// single node's scope check for it ([`guarded`]); the rest reach the
/// single node's router, checks included ([`to_shard`]).
fn routes(s: &ClusterState) -> Router<ClusterState> {
    let a = &s.access;
    let r = |route| redirecting(s, route);
    let records = "/v1/streams/{stream}/records";
    let stream = "/v1/streams/{stream}";
    let fence_path = "/v1/streams/{stream}/fence";
    let trim_path = "/v1/streams/{stream}/trim";
    let seal_path = "/v1/streams/{stream}/seal";
    let config_path = "/v1/streams/{stream}/config";
    let cursor_path = "/v1/streams/{stream}/cursors/{name}";
    Router::new()
        .route(
            "/_cluster/raft/{shard}/{kind}",
            post(raft_rpc).layer(DefaultBodyLimit::max(RPC_BODY_BYTES_MAX)),
        )
        .route(
            crate::peer_stream::STREAM_PATH,
            get(crate::peer_serve::open),
        )
        .route("/_cluster/admin/status", get(status))
        .route(
            "/metrics",
            guarded(a, Method::GET, "/metrics", get(node_metrics)),
        )
        .route(
            records,
            guarded(a, Method::POST, records, r(post(append))).get(to_shard),
        )
        .route(
            fence_path,
            guarded(a, Method::POST, fence_path, r(post(fence))),
        )
        .route(
            trim_path,
            guarded(a, Method::POST, trim_path, r(post(trim))),
        )
        .route(
            seal_path,
            guarded(a, Method::POST, seal_path, r(post(seal))),
        )
        .route(
            stream,
            guarded(a, Method::DELETE, stream, r(delete(remove))).fallback(to_shard),
        )
        .route(
            config_path,
            guarded(a, Method::PUT, config_path, put(config)),
        )
        .route(
            cursor_path,
            guarded(a, Method::PUT, cursor_path, put(crate::http_ops::cursor)).get(to_shard),
        )
        .route(
            "/v1/batch",
            guarded(a, Method::POST, "/v1/batch", post(crate::http_ops::batch)),
        )
        .route(
            "/v1/streams",
            guarded(a, Method::GET, "/v1/streams", get(crate::http_ops::list)),
        )
        .fallback(to_shard)
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
    /// The single-node state of shard `k`'s engine (its limits, tokens,
    /// audit log and budget are the node's).
    pub(crate) fn shard_state(&self, k: ShardId) -> AppState {
        AppState {
            engine: self.node.engine(k),
            limits: self.limits.clone(),
            shutdown: self.shutdown.clone(),
            auth: self.access.auth.clone(),
            audit: self.audit.clone(),
            budget: self.budget.clone(),
            http_metrics: self.http_metrics.clone(),
            session_mutation: fencelog_engine::session_mutation(),
        }
    }

    pub(crate) fn leader_header(&self, k: ShardId, headers: &mut HeaderMap) {
        let Some(l) = self.node.leader_of(k) else {
            return;
        };
        let addr = self.node.addr_of(k, l).unwrap_or_default();
        if let Ok(v) = HeaderValue::from_str(&format!("{l}={addr}")) {
            headers.insert(LEADER_HEADER, v);
        }
    }

    /// Proposes `op` (or forwards it): the decided result, or the 503 of
    /// a write whose outcome is none (`unavailable`) or unknown.
    pub(crate) async fn decide(
        &self,
        k: ShardId,
        op: ClusterOp,
    ) -> Result<Result<Applied, WriteError>, Response> {
        match self.node.write(op).await {
            WriteOutcome::Decided(r) => Ok(r.to_engine()),
            WriteOutcome::Unavailable(m) => {
                let e = ApiError::new(ErrorCode::Unavailable, m).with(Field::OutcomeUnknown, false);
                Err(self.with_leader(k, e.into_response()))
            }
            WriteOutcome::Unknown(m) => {
                let e = ApiError::new(ErrorCode::Unavailable, m).with(Field::OutcomeUnknown, true);
                Err(self.with_leader(k, e.into_response()))
            }
        }
    }

    pub(crate) fn with_leader(&self, k: ShardId, mut resp: Response) -> Response {
        self.leader_header(k, resp.headers_mut());
        resp
    }

    /// Proposes a one-stream `op` and shapes the answer as the single
    /// node's route does: `ok` renders an accepted op; a token rise goes
    /// to the audit log and a stale refusal to its aggregate, under the
    /// caller's name.
    async fn write(
        &self,
        caller: &Caller,
        k: ShardId,
        what: &str,
        op: ClusterOp,
        ok: fn(&str, Applied) -> Response,
    ) -> Response {
        let stream = op.stream().to_string();
        let state = self.shard_state(k);
        let before = state.token_before(&stream);
        let resp = match self.decide(k, op).await {
            Ok(Ok(applied)) => {
                state.written(caller, &stream, what, before, token_of(&applied));
                ok(&stream, applied)
            }
            Ok(Err(e)) => state.write_refused(caller, &stream, e),
            Err(unavailable) => return unavailable,
        };
        self.with_leader(k, resp)
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

/// Who made the request, as the route's check found (open: nobody).
pub(crate) fn caller_of(caller: Option<Extension<Caller>>) -> Caller {
    caller.map(|Extension(c)| c).unwrap_or_default()
}

pub(crate) fn stream_of(
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<String, ApiError> {
    let Path(stream) = path.map_err(|e| ApiError::bad_request(e.to_string()))?;
    valid_name(&stream)?;
    Ok(stream)
}

/// A write route's refusal of a stream name (it names the stream).
fn valid_name(stream: &str) -> Result<(), ApiError> {
    validate_stream_name(stream).map_err(|e| write_error(stream, WriteError::InvalidStreamName(e)))
}

/// The checks a single node's engine makes before its writer, made here
/// before proposing so apply never refuses on local limits.
pub(crate) fn check_append(
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
    caller: Option<Extension<Caller>>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let stream = stream_of(path)?;
    let state = s.shard_state(s.node.shard_of(&stream));
    // Every error names the stream, as the single node's route answers.
    let (upload, body) = fencelog_server::records::decode_append(&state, &stream, request)
        .await
        .map_err(|e| e.on_stream(&stream))?;
    s.append_decoded(&caller_of(caller), &stream, upload, body)
        .await
}

impl ClusterState {
    /// A decoded append: checked, proposed (or forwarded) and answered.
    async fn append_decoded(
        &self,
        caller: &Caller,
        stream: &str,
        upload: Upload,
        body: AppendBody,
    ) -> Result<Response, ApiError> {
        let k = self.node.shard_of(stream);
        let state = self.shard_state(k);
        // `decode_append` checked each record's headers (413 / 400 as on a
        // single node); the batch's byte limit counts them here.
        let headers = body.headers.unwrap_or_default();
        check_append(&state, stream, body.token, &body.records, &headers)?;
        let op = ClusterOp::Append {
            stream: stream.to_string(),
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
        Ok(self
            .write(caller, k, "append", op, |stream, applied| match applied {
                Applied::Appended(ack) => {
                    Json(AppendAck::new(stream.to_string(), ack)).into_response()
                }
                _ => unreachable!("an append answers an ack"),
            })
            .await)
    }
}

async fn fence(
    State(s): State<ClusterState>,
    caller: Option<Extension<Caller>>,
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
    let caller = caller_of(caller);
    Ok(s.write(&caller, k, "fence", op, state_answer).await)
}

/// A fence's, trim's, seal's or delete's answer: the stream's state.
fn state_answer(_: &str, applied: Applied) -> Response {
    match applied {
        Applied::State(st) => Json(StreamInfo::from(st)).into_response(),
        _ => unreachable!("a state change answers a state"),
    }
}

type StreamPath = Result<Path<String>, axum::extract::rejection::PathRejection>;

/// A trim, seal or delete: the single node's body parser on shard `k`'s
/// state, then `op` from the stream and what it parsed, proposed or
/// forwarded like a fence.
async fn state_change<T, F>(
    s: &ClusterState,
    (caller, what): (Option<Extension<Caller>>, &str),
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
    let op = op(stream, parsed);
    Ok(s.write(&caller_of(caller), k, what, op, state_answer).await)
}

/// `POST /v1/streams/{stream}/trim`, replicated: the single node's body,
/// decided in apply on every replica.
async fn trim(
    State(s): State<ClusterState>,
    caller: Option<Extension<Caller>>,
    path: StreamPath,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let parse = |st: AppState| async move { lifecycle::trim_body(&st, &headers, body).await };
    state_change(
        &s,
        (caller, "trim"),
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
    caller: Option<Extension<Caller>>,
    path: StreamPath,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let parse = |st: AppState| async move { lifecycle::seal_body(&st, &headers, body).await };
    state_change(
        &s,
        (caller, "seal"),
        path,
        parse,
        |stream, (token, not_after_ms)| ClusterOp::Seal {
            stream,
            token,
            not_after_ms,
        },
    )
    .await
}

/// `DELETE /v1/streams/{stream}`, replicated: a tombstone on every replica.
async fn remove(
    State(s): State<ClusterState>,
    caller: Option<Extension<Caller>>,
    path: StreamPath,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let parse = |st: AppState| async move { lifecycle::delete_token(&st, &headers, body).await };
    state_change(&s, (caller, "delete"), path, parse, |stream, token| {
        ClusterOp::Delete { stream, token }
    })
    .await
}

/// `PUT /v1/streams/{stream}/config`, replicated: the single node's body
/// and checks (token 0, then the settings' ranges) before proposing; the
/// fencing rule decides in apply on every replica.
async fn config(
    State(s): State<ClusterState>,
    caller: Option<Extension<Caller>>,
    path: StreamPath,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let stream = stream_of(path)?;
    let k = s.node.shard_of(&stream);
    // As on a single node, a body error does not name the stream.
    let (token, config) = lifecycle::config_body(&s.shard_state(k), &headers, body).await?;
    let checked = match token {
        Some(0) => Err(WriteError::ZeroToken),
        _ => validate_stream_config(&config),
    };
    checked.map_err(|e| write_error(&stream, e))?;
    let op = ClusterOp::Config {
        stream,
        token,
        config: ConfigView::of(&config),
    };
    Ok(s.write(&caller_of(caller), k, "config", op, state_answer)
        .await)
}

/// The stream a `/v1/streams/{stream}...` path names.
fn path_stream(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v1/streams/")?;
    Some(rest.split('/').next().unwrap_or(rest)).filter(|s| !s.is_empty())
}

/// Every other request: reads of one stream go to its shard's engine after
/// a read-index; node-wide GETs (health, metrics, the API document) to
/// shard 0's. Every write route is the cluster's own, so any other method
/// is answered as the single node's router answers an unknown route or
/// method, and never reaches a shard engine directly.
async fn to_shard(State(s): State<ClusterState>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    let read = request.method() == Method::GET || request.method() == Method::HEAD;
    if !read {
        return match known_path(&path) {
            true => fencelog_server::ops::method_not_allowed().await,
            false => fencelog_server::ops::not_found().await,
        }
        .into_response();
    }
    if let Some(stream) = path_stream(&path).filter(|_| path.ends_with("/session")) {
        let stream = stream.to_string();
        return crate::session::open(&s, request, &stream).await;
    }
    let k = match path_stream(&path) {
        Some(stream) => {
            let k = s.node.shard_of(stream);
            // No read-index round for a caller without a valid token.
            if let Some(resp) = http_auth::unauthenticated(&s.access, &request) {
                return resp;
            }
            if let Err(m) = s.node.read_barrier(k).await {
                let e = ApiError::new(
                    ErrorCode::Unavailable,
                    format!("no read index for shard {k}: {m}"),
                );
                return s.with_leader(k, e.into_response());
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

/// Whether some route of the single node's table has `path`'s shape
/// (`{name}` matches any one segment).
fn known_path(path: &str) -> bool {
    fencelog_server::openapi::ROUTES.iter().any(|r| {
        let (mut want, mut got) = (r.path.split('/'), path.split('/'));
        loop {
            match (want.next(), got.next()) {
                (None, None) => return true,
                (Some(w), Some(g)) if w == g || (w.starts_with('{') && !g.is_empty()) => {}
                _ => return false,
            }
        }
    })
}

/// `GET /metrics`: every shard engine's families labelled by shard, and
/// the Raft groups' ([`crate::node_metrics`]).
async fn node_metrics(State(s): State<ClusterState>) -> Response {
    let text = crate::node_metrics::encode(&s.node, s.http_metrics.encode_without_eof());
    let content_type = fencelog_server::ops::METRICS_CONTENT_TYPE;
    ([(axum::http::header::CONTENT_TYPE, content_type)], text).into_response()
}

/// `GET /_cluster/admin/status`: this node's view of every shard.
async fn status(State(s): State<ClusterState>) -> Json<serde_json::Value> {
    Json(crate::admin::status(&s.node))
}
