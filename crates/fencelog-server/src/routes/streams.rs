//! Stream-level operations: state, listing, and fencing without data.

use crate::auth::Caller;
use crate::decode::append_body::{body_kind, BodyKind};
use crate::decode::params::{stream_name, QueryParams};
use crate::decode::strict_json;
use crate::error::{read_error, ApiError};
use crate::routes::body::read_capped;
use crate::routes::writes;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::{Extension, Json};
use fencelog_api::stream::{LIST_LIMIT_CAP, LIST_LIMIT_DEFAULT};
use fencelog_api::{ErrorCode, StreamInfo, StreamList};
use fencelog_engine::{ReadError, WriteOp};
use std::collections::HashMap;

/// `GET /v1/streams/{stream}`: durable state, or 404 `stream_not_found`
/// (also for a deleted stream: its tombstone keeps only the token).
pub async fn state(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<StreamInfo>, ApiError> {
    let stream = stream_name(path)?;
    let engine = state.backend.read(&stream).await?;
    match engine.state(&stream) {
        Ok(s) if s.deleted => Err(read_error(&stream, ReadError::NotFound)),
        Ok(s) => Ok(Json(s.into())),
        Err(e) => Err(read_error(&stream, e)),
    }
}

/// The prefix both the query and the caller's token allow: the longer of
/// the two when one extends the other, else none (`None`: nothing matches).
fn effective_prefix<'a>(asked: &'a str, allowed: &'a str) -> Option<&'a str> {
    if asked.starts_with(allowed) {
        Some(asked)
    } else if allowed.starts_with(asked) {
        Some(allowed)
    } else {
        None
    }
}

/// `GET /v1/streams?prefix=P&limit=L&start_after=NAME`: streams whose names
/// start with `prefix`, in name order, after `start_after`. `limit`
/// defaults to 100 and is clamped to 1000. A token with a stream prefix
/// sees only the streams under it.
pub async fn list(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<StreamList>, ApiError> {
    let caller = caller.map(|Extension(c)| c).unwrap_or_default();
    let q = QueryParams::from_extractor(query)?;
    let limit = q.positive_capped("limit", LIST_LIMIT_DEFAULT, LIST_LIMIT_CAP)?;
    let Some(prefix) = effective_prefix(q.str("prefix").unwrap_or(""), caller.stream_prefix())
    else {
        return Ok(Json(StreamList {
            streams: Vec::new(),
            next_start_after: None,
        }));
    };
    // One extra tells whether another page exists without a second call.
    let listed = state
        .backend
        .list_streams(prefix, q.str("start_after"), limit + 1);
    let mut page = listed.await?;
    let next_start_after = if page.len() > limit {
        page.truncate(limit);
        page.last().map(|s| s.stream.clone())
    } else {
        None
    };
    Ok(Json(StreamList {
        streams: page.into_iter().map(StreamInfo::from).collect(),
        next_start_after,
    }))
}

/// `POST /v1/streams/{stream}/fence` with `{"fencing_token": T}` (and
/// `Content-Type: application/json`, else 415): raises the stream's highest
/// token (creating the stream if needed) and answers with its state once
/// that is durable. Same 409 as an append when stale.
pub async fn fence(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let caller = caller.map(|Extension(c)| c).unwrap_or_default();
    let stream = stream_name(path)?;
    let (token, not_after_ms) = fence_token(&state, &headers, body)
        .await
        .map_err(|e| e.on_stream(&stream))?;
    let op = WriteOp::Fence {
        stream: stream.clone(),
        token,
        not_after_ms,
    };
    Ok(writes::state_answer(&state, &caller, &stream, "fence", op).await)
}

/// The token of a fence request's body: JSON, one object with exactly
/// `fencing_token` and optionally `not_after_ms` (a deadline), read once.
async fn fence_token(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(u64, Option<u64>), ApiError> {
    if body_kind(headers) != BodyKind::Json {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "a fence body is JSON: send Content-Type: application/json",
        ));
    }
    let upload = read_capped(headers, body, &state.limits, &state.budget).await?;
    let obj = strict_json::object(
        strict_json::document(&upload.bytes)?,
        "the body",
        &["fencing_token", "not_after_ms"],
    )?;
    let token = strict_json::token(&obj, "fencing_token")?;
    Ok((token, strict_json::seq(&obj, "not_after_ms")?))
}
