//! Stream-level operations: state, listing, and fencing without data.

use crate::body::read_capped;
use crate::error::{read_error, write_error, ApiError};
use crate::params::{seq_from_json, stream_name, token_from_json, QueryParams};
use crate::state::AppState;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::Json;
use fencelog_api::stream::{LIST_LIMIT_CAP, LIST_LIMIT_DEFAULT};
use fencelog_api::{StreamInfo, StreamList};
use fencelog_engine::ReadError;
use serde_json::Value;
use std::collections::HashMap;

/// `GET /v1/streams/{stream}`: durable state, or 404 `stream_not_found`
/// (also for a deleted stream: its tombstone keeps only the token).
pub async fn state(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<StreamInfo>, ApiError> {
    let stream = stream_name(path)?;
    match state.engine.state(&stream) {
        Ok(s) if s.deleted => Err(read_error(&stream, ReadError::NotFound)),
        Ok(s) => Ok(Json(s.into())),
        Err(e) => Err(read_error(&stream, e)),
    }
}

/// `GET /v1/streams?prefix=P&limit=L&start_after=NAME`: streams whose names
/// start with `prefix`, in name order, after `start_after`. `limit`
/// defaults to 100 and is clamped to 1000.
pub async fn list(
    State(state): State<AppState>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<StreamList>, ApiError> {
    let q = QueryParams::from_extractor(query)?;
    let limit = q.positive_capped("limit", LIST_LIMIT_DEFAULT, LIST_LIMIT_CAP)? as usize;
    let prefix = q.str("prefix").unwrap_or("");
    // One extra tells whether another page exists without a second call.
    let mut page = state
        .engine
        .list_streams(prefix, q.str("start_after"), limit + 1);
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

/// `POST /v1/streams/{stream}/fence` with `{"fencing_token": T}`: raises the
/// stream's highest token (creating the stream if needed) and answers with
/// its state once that is durable. Same 409 as an append when stale.
pub async fn fence(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<StreamInfo>, ApiError> {
    let stream = stream_name(path)?;
    let bytes = read_capped(&headers, body, &state.limits).await?;
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    let token = token_from_json(obj.get("fencing_token"))?;
    let not_after_ms = seq_from_json("not_after_ms", obj.get("not_after_ms"))?;
    match state.engine.fence_with(&stream, token, not_after_ms).await {
        Ok(s) => Ok(Json(s.into())),
        Err(e) => Err(write_error(&stream, e)),
    }
}
