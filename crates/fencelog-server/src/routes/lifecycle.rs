//! A stream's lifecycle: trim, seal, delete and its retention settings.
//! Each is fenced like an append (the engine's rule decides), answers the
//! stream's state once durable, and refuses bad input with a 400 that
//! changes nothing.

use crate::auth::Caller;
use crate::decode::params::{
    names, required_seq, retention_from_json, seq_from_json, stream_name, token_from_header,
    token_from_json,
};
use crate::error::ApiError;
use crate::routes::body::{json_object, read_capped};
use crate::routes::writes;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Extension;
use fencelog_engine::{StreamConfig, WriteOp};
use serde_json::Value;

/// `POST /v1/streams/{stream}/trim` with `{"fencing_token": T,
/// "trim_seq": N}`: records below `min(N, next_seq)` become unreadable;
/// the trim point never moves back. Answers the stream's state.
pub async fn trim(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let stream = stream_name(path)?;
    let (token, trim_seq, not_after_ms) = trim_body(&state, &headers, body).await?;
    let op = WriteOp::Trim {
        stream: stream.clone(),
        token,
        trim_seq,
        not_after_ms,
    };
    Ok(writes::state_answer(&state, &caller_of(caller), &stream, "trim", op).await)
}

/// `POST /v1/streams/{stream}/seal` with `{"fencing_token": T}`: no more
/// appends, fences or trims, ever; reads keep working.
pub async fn seal(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let stream = stream_name(path)?;
    let (token, not_after_ms) = seal_body(&state, &headers, body).await?;
    let op = WriteOp::Seal {
        stream: stream.clone(),
        token,
        not_after_ms,
    };
    Ok(writes::state_answer(&state, &caller_of(caller), &stream, "seal", op).await)
}

/// `DELETE /v1/streams/{stream}` with `{"fencing_token": T}` or the
/// `Fencing-Token` header: the records become unreadable and their space
/// is reclaimed; a tombstone keeps the token, so only a higher one can
/// create the stream again. Answers the tombstone (`"deleted": true`).
pub async fn delete(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let stream = stream_name(path)?;
    let token = delete_token(&state, &headers, body).await?;
    let op = WriteOp::Delete {
        stream: stream.clone(),
        token,
    };
    Ok(writes::state_answer(&state, &caller_of(caller), &stream, "delete", op).await)
}

/// Who made the request, as the route's check found (open: nobody).
fn caller_of(caller: Option<Extension<Caller>>) -> Caller {
    caller.map(|Extension(c)| c).unwrap_or_default()
}

/// A trim body's `(fencing_token, trim_seq, not_after_ms)`.
async fn trim_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(u64, u64, Option<u64>), ApiError> {
    let known = ["fencing_token", "trim_seq", "not_after_ms"];
    let obj = json_object(state, headers, body, &known).await?;
    let token = token_from_json(obj.get("fencing_token"))?;
    let trim_seq = required_seq("trim_seq", obj.get("trim_seq"))?;
    let not_after_ms = seq_from_json("not_after_ms", obj.get("not_after_ms"))?;
    Ok((token, trim_seq, not_after_ms))
}

/// A seal body's `(fencing_token, not_after_ms)`.
async fn seal_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(u64, Option<u64>), ApiError> {
    let obj = json_object(state, headers, body, &["fencing_token", "not_after_ms"]).await?;
    let token = token_from_json(obj.get("fencing_token"))?;
    let not_after_ms = seq_from_json("not_after_ms", obj.get("not_after_ms"))?;
    Ok((token, not_after_ms))
}

/// A delete's token: from `{"fencing_token": T}` or the `Fencing-Token`
/// header, not both.
async fn delete_token(state: &AppState, headers: &HeaderMap, body: Body) -> Result<u64, ApiError> {
    let upload = read_capped(headers, body, &state.limits, &state.budget).await?;
    let bytes = &upload.bytes;
    let from_header = headers.contains_key(&names::FENCING_TOKEN);
    let token = match (bytes.is_empty(), from_header) {
        (true, true) => token_from_header(headers)?,
        (true, false) => {
            return Err(ApiError::bad_request(
                "a delete needs {\"fencing_token\": T} or the Fencing-Token header",
            ))
        }
        (false, true) => {
            return Err(ApiError::bad_request(
                "give the fencing token in the body or in the Fencing-Token header, not both",
            ))
        }
        (false, false) => {
            let value: Value = serde_json::from_slice(bytes)
                .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
            match value {
                Value::Object(obj) if obj.keys().all(|k| k == "fencing_token") => {
                    token_from_json(obj.get("fencing_token"))?
                }
                _ => {
                    return Err(ApiError::bad_request(
                        "the body must be {\"fencing_token\": T}",
                    ))
                }
            }
        }
    };
    Ok(token)
}

const CONFIG_FIELDS: [&str; 4] = [
    "fencing_token",
    "retention_age_s",
    "retention_bytes",
    "retention_respect_cursors",
];

/// `PUT /v1/streams/{stream}/config` with `{"retention_age_s"?,
/// "retention_bytes"?, "retention_respect_cursors"?, "fencing_token"?}`:
/// replaces the stream's retention settings durably (a setting left out,
/// or `null`, is the server's default; `"unlimited"` has no limit). With a
/// token the change is fenced.
pub async fn config(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let stream = stream_name(path)?;
    let (token, config) = config_body(&state, &headers, body).await?;
    let op = WriteOp::Config {
        stream: stream.clone(),
        token,
        config,
    };
    Ok(writes::state_answer(&state, &caller_of(caller), &stream, "config", op).await)
}

/// A config body's `(fencing_token, settings)`.
async fn config_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Option<u64>, StreamConfig), ApiError> {
    let obj = json_object(state, headers, body, &CONFIG_FIELDS).await?;
    let token = match obj.get("fencing_token") {
        None | Some(Value::Null) => None,
        v => Some(token_from_json(v)?),
    };
    let respect_cursors = match obj.get("retention_respect_cursors") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "retention_respect_cursors must be true or false, got {other}"
            )))
        }
    };
    let config = StreamConfig {
        retention_age_s: retention_from_json("retention_age_s", obj.get("retention_age_s"))?,
        retention_bytes: retention_from_json("retention_bytes", obj.get("retention_bytes"))?,
        respect_cursors,
    };
    Ok((token, config))
}
