//! "Did my write land?" (`GET .../producers/{id}`), the fence history
//! (`GET .../fences`), fenced consumer cursors (`PUT`/`GET
//! .../cursors/{name}`, `GET .../cursors`) and atomic multi-stream batches
//! (`POST /v1/batch`).

use crate::auth::{authorize, Caller, Scope};
use crate::backend::Refused;
use crate::decode::json_append::parse_record;
use crate::decode::params::{
    required_seq, seq_from_json, stream_name, token_from_json, QueryParams,
};
use crate::error::{read_error, write_error, ApiError};
use crate::routes::body::{json_object, read_capped};
use crate::routes::start::cursor_not_found;
use crate::routes::writes;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use fencelog_api::producer::FENCES_LIMIT_DEFAULT;
use fencelog_api::{
    AppendAck, CursorInfo, CursorList, ErrorCode, FenceJson, FenceList, Field, ProducerInfo,
    StreamInfo,
};
use fencelog_engine::{Applied, BatchAck, BatchAction, BatchOp, Engine, WriteError, WriteOp};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// `{stream}` and a second path segment (a producer id or cursor name).
fn two_names(
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(String, String), ApiError> {
    let Path((stream, name)) = path.map_err(|e| ApiError::bad_request(format!("bad path: {e}")))?;
    stream_name(Ok(Path(stream))).map(|s| (s, name))
}

/// `GET /v1/streams/{stream}/producers/{producer_id}`: the producer's last
/// applied append, or 404 `producer_not_found` (never seen, or evicted).
pub async fn producer(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<ProducerInfo>, ApiError> {
    let (stream, id) = two_names(path)?;
    let engine = state.backend.read(&stream).await?;
    refuse_tombstone(&engine, &stream)?;
    match engine.producer(&stream, &id) {
        Ok(Some(p)) => Ok(Json(p.into())),
        Ok(None) => Err(ApiError::new(
            ErrorCode::ProducerNotFound,
            format!("stream {stream} does not remember producer {id:?}"),
        )
        .with(Field::Stream, stream)
        .with(Field::ProducerId, id)),
        Err(e) => Err(read_error(&stream, e)),
    }
}

/// The tombstone contract of every read: a deleted stream answers 404
/// `stream_not_found` (as `GET /v1/streams/{stream}` does), though the
/// engine keeps its token and history; a higher token recreates it, and
/// its history then shows the delete.
fn refuse_tombstone(engine: &Engine, stream: &str) -> Result<(), ApiError> {
    match engine.state(stream) {
        Ok(s) if s.deleted => Err(read_error(stream, fencelog_engine::ReadError::NotFound)),
        Ok(_) => Ok(()),
        Err(e) => Err(read_error(stream, e)),
    }
}

/// `GET /v1/streams/{stream}/fences?limit=N`: the tokens that took effect,
/// newest first (the last 64 are kept).
pub async fn fences(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<FenceList>, ApiError> {
    let stream = stream_name(path)?;
    let q = QueryParams::from_extractor(query)?;
    let limit = q.positive_capped("limit", FENCES_LIMIT_DEFAULT, FENCES_LIMIT_DEFAULT)?;
    let engine = state.backend.read(&stream).await?;
    refuse_tombstone(&engine, &stream)?;
    let history = engine
        .fence_history(&stream)
        .map_err(|e| read_error(&stream, e))?;
    let fences = history
        .into_iter()
        .rev()
        .take(limit)
        .map(FenceJson::from)
        .collect();
    Ok(Json(FenceList { stream, fences }))
}

/// `PUT /v1/streams/{stream}/cursors/{name}` with `{"fencing_token": T,
/// "seq": N}`: commits the cursor durably, fenced by its own token.
pub async fn put_cursor(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (stream, name) = two_names(path)?;
    let (token, seq) = cursor_body(&state, &headers, body).await?;
    let op = WriteOp::Cursor {
        stream: stream.clone(),
        name: name.clone(),
        token,
        seq,
    };
    let answer = match state.backend.write(op).await {
        Ok(Applied::Cursor(c)) => Json(CursorInfo::new(&stream, c)).into_response(),
        Ok(other) => unreachable!("a cursor commit answered {other:?}"),
        Err(Refused::Write(e)) => write_error(&stream, e)
            .with(Field::Cursor, name)
            .into_response(),
        Err(Refused::Api(e)) => e.into_response(),
    };
    Ok(writes::hinted(&state, &stream, answer).into_response())
}

/// A cursor commit's `(fencing_token, seq)`.
async fn cursor_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(u64, u64), ApiError> {
    let obj = json_object(state, headers, body, &["fencing_token", "seq"]).await?;
    let token = token_from_json(obj.get("fencing_token"))?;
    let seq = required_seq("seq", obj.get("seq"))?;
    Ok((token, seq))
}

/// `GET /v1/streams/{stream}/cursors/{name}`.
pub async fn get_cursor(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<CursorInfo>, ApiError> {
    let (stream, name) = two_names(path)?;
    let engine = state.backend.read(&stream).await?;
    match engine.cursor(&stream, &name) {
        Ok(Some(c)) => Ok(Json(CursorInfo::new(&stream, c))),
        Ok(None) => Err(cursor_not_found(&stream, &name)),
        Err(e) => Err(read_error(&stream, e)),
    }
}

/// `GET /v1/streams/{stream}/cursors`: every cursor, in name order.
pub async fn list_cursors(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<CursorList>, ApiError> {
    let stream = stream_name(path)?;
    let engine = state.backend.read(&stream).await?;
    let cursors = engine
        .cursors(&stream)
        .map_err(|e| read_error(&stream, e))?
        .into_iter()
        .map(|c| CursorInfo::new(&stream, c))
        .collect();
    Ok(Json(CursorList { stream, cursors }))
}

/// `POST /v1/batch` with `{"ops": [{"stream", "fencing_token", "records"?,
/// "match_seq_num"?, "fence"?: true}, ...], "not_after_ms"?}`: all of it
/// or none, durable as one unit. 200 `{"ops": [ack...]}` (an append's ack
/// or a fence's stream state per op); a refused batch answers the first
/// refusal's code and status with `ops`: every op's outcome, an ack or an
/// error body.
pub async fn batch(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = caller.map(|Extension(c)| c).unwrap_or_default();
    let (ops, not_after_ms) = batch_body(&state, &caller, &headers, body).await?;
    let streams: Vec<String> = ops.iter().map(|o| o.stream.clone()).collect();
    let answer = match state
        .backend
        .write(WriteOp::Batch { ops, not_after_ms })
        .await
    {
        Ok(Applied::Batch(acks)) => batch_answer(&streams, Ok(acks)),
        Ok(other) => unreachable!("a batch answered {other:?}"),
        Err(Refused::Write(e)) => batch_answer(&streams, Err(e)),
        Err(Refused::Api(e)) => Err(e),
    };
    let answer = answer.into_response();
    Ok(match streams.first() {
        Some(stream) => writes::hinted(&state, stream, answer).into_response(),
        None => answer,
    })
}

/// A batch body's ops and deadline, each op authorized for its own scope
/// on its own stream.
async fn batch_body(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Vec<BatchOp>, Option<u64>), ApiError> {
    let upload = read_capped(headers, body, &state.limits, &state.budget).await?;
    let value: Value = serde_json::from_slice(&upload.bytes)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    let not_after_ms = seq_from_json("not_after_ms", obj.get("not_after_ms"))?;
    let items = match obj.get("ops") {
        Some(Value::Array(items)) => items,
        None | Some(Value::Null) => return Err(ApiError::bad_request("ops is required")),
        Some(_) => return Err(ApiError::bad_request("ops must be an array")),
    };
    let ops = items
        .iter()
        .enumerate()
        .map(|(i, v)| batch_op(i, v))
        .collect::<Result<Vec<_>, _>>()?;
    // The route needs a token with the append scope; each op also needs
    // its own scope on its own stream, as a single request would.
    for op in &ops {
        let scope = match op.action {
            BatchAction::Append { .. } => Scope::Append,
            BatchAction::Fence => Scope::Fence,
        };
        authorize(caller.0.as_ref(), scope, Some(&op.stream))?;
    }
    Ok((ops, not_after_ms))
}

/// A batch's answer: every op's ack, or the refusal with every outcome.
fn batch_answer(
    streams: &[String],
    r: Result<Vec<BatchAck>, WriteError>,
) -> Result<Json<Value>, ApiError> {
    match r {
        Ok(acks) => {
            let out = acks
                .into_iter()
                .zip(streams)
                .map(|(a, s)| ack_json(s, a))
                .collect();
            Ok(Json(Value::Object(Map::from_iter([(
                "ops".to_string(),
                Value::Array(out),
            )]))))
        }
        Err(WriteError::BatchRefused(outcomes)) => Err(refused(streams, outcomes)),
        Err(e) => Err(write_error(streams.first().map_or("", |s| s), e)),
    }
}

fn ack_json(stream: &str, ack: BatchAck) -> Value {
    let v = match ack {
        BatchAck::Append(a) => serde_json::to_value(AppendAck::new(stream.to_string(), a)),
        BatchAck::Fence(s) => serde_json::to_value(StreamInfo::from(s)),
    };
    v.expect("acks serialise")
}

/// The answer of a refused batch: the first refusal's code and fields,
/// every op's outcome in `ops`.
fn refused(streams: &[String], outcomes: Vec<Result<BatchAck, WriteError>>) -> ApiError {
    let mut first: Option<ApiError> = None;
    let mut ops = Vec::with_capacity(outcomes.len());
    for (o, stream) in outcomes.into_iter().zip(streams) {
        match o {
            Ok(ack) => ops.push(ack_json(stream, ack)),
            Err(e) => {
                let err = write_error(stream, e);
                ops.push(err.body.to_value());
                first.get_or_insert(err);
            }
        }
    }
    let first = first.expect("a refused batch has a refusal");
    let refused = ops.iter().filter(|o| o.get("error").is_some()).count();
    let message = format!(
        "{refused} of the batch's {} operations were refused; none was applied",
        ops.len()
    );
    // The first refusal's fields (so a client reads it like a single
    // op's answer), the batch's message, and every outcome.
    let mut top = first;
    top.body.message = message;
    top.with(Field::Ops, Value::Array(ops))
}

const OP_FIELDS: [&str; 5] = [
    "stream",
    "fencing_token",
    "records",
    "match_seq_num",
    "fence",
];

/// One op of a batch body; errors name the op.
fn batch_op(i: usize, v: &Value) -> Result<BatchOp, ApiError> {
    let bad = |m: String| ApiError::bad_request(format!("ops[{i}]: {m}"));
    let Value::Object(op) = v else {
        return Err(bad("must be an object".into()));
    };
    if let Some(k) = op.keys().find(|k| !OP_FIELDS.contains(&k.as_str())) {
        return Err(bad(format!("unknown field {k:?}")));
    }
    let stream = match op.get("stream") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(bad("stream must be a string".into())),
    };
    let fencing_token =
        token_from_json(op.get("fencing_token")).map_err(|e| bad(e.body.message))?;
    let fence = match op.get("fence") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(other) => return Err(bad(format!("fence must be true or false, got {other}"))),
    };
    let match_seq_num =
        seq_from_json("match_seq_num", op.get("match_seq_num")).map_err(|e| bad(e.body.message))?;
    let action = match (op.get("records"), fence) {
        (None | Some(Value::Null), true) if match_seq_num.is_none() => BatchAction::Fence,
        (Some(Value::Array(items)), false) => BatchAction::Append {
            records: items
                .iter()
                .enumerate()
                .map(|(j, r)| {
                    let raw = serde_json::value::to_raw_value(r).expect("a Value serialises");
                    let record = parse_record(j, &raw)?;
                    // Like a single append: never stored without its headers.
                    match record.headers.is_empty() {
                        true => Ok(record.body),
                        false => Err(ApiError::bad_request(format!(
                            "records[{j}] has headers, which this build does not store yet"
                        ))),
                    }
                })
                .collect::<Result<_, _>>()
                .map_err(|e| bad(e.body.message))?,
            match_seq_num,
        },
        (None | Some(Value::Null), false) => {
            return Err(bad("needs records or \"fence\": true".into()))
        }
        (Some(Value::Array(_)), true) | (_, true) => {
            return Err(bad(
                "a fence carries neither records nor match_seq_num".into()
            ))
        }
        (Some(_), false) => return Err(bad("records must be an array".into())),
    };
    Ok(BatchOp {
        stream,
        fencing_token,
        action,
    })
}
