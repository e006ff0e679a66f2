//! Appending records and reading them back (plain and long-poll). Live
//! tailing shares the read route and lives in [`crate::sse`].

use crate::body::read_capped;
use crate::error::{read_error, write_error, ApiError};
use crate::params::{
    seq_from_header, seq_from_json, stream_name, token_from_header, token_from_json, QueryParams,
};
use crate::{fast_json, sse, AppState};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use fencelog_api::batch;
use fencelog_engine::{Ack, Record, WriteError};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// Records per read when `count` is not given.
pub const READ_COUNT_DEFAULT: u64 = 1000;
/// Most records one read returns, whatever `count` asks for.
pub const READ_COUNT_CAP: u64 = 10_000;
/// Body bytes per read when `bytes` is not given (1 MiB).
pub const READ_BYTES_DEFAULT: u64 = 1 << 20;
/// Most body bytes one read returns (8 MiB), except that the first record
/// is always returned whole so a reader can make progress.
pub const READ_BYTES_CAP: u64 = 8 << 20;
/// Longest a long-poll waits (60 s); `wait_ms` defaults to 0 (no wait).
pub const WAIT_MS_CAP: u64 = 60_000;

#[derive(Serialize)]
pub struct AppendOk {
    pub stream: String,
    pub first_seq: u64,
    pub last_seq: u64,
    pub next_seq: u64,
    pub fencing_token: u64,
    pub timestamp_ms: u64,
}

impl AppendOk {
    fn new(stream: String, ack: Ack) -> Self {
        AppendOk {
            stream,
            first_seq: ack.first_seq,
            last_seq: ack.last_seq,
            next_seq: ack.next_seq,
            fencing_token: ack.fencing_token,
            timestamp_ms: ack.timestamp_ms,
        }
    }
}

/// A record as clients see it: `body` when the bytes are UTF-8 text,
/// `body_base64` otherwise, so text stays readable and binary stays exact.
#[derive(Serialize)]
pub struct RecordJson<'a> {
    pub seq: u64,
    pub fencing_token: u64,
    pub timestamp_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
}

impl<'a> RecordJson<'a> {
    pub fn new(r: &'a Record) -> Self {
        let (body, body_base64) = match std::str::from_utf8(&r.body) {
            Ok(text) => (Some(text), None),
            Err(_) => (None, Some(BASE64.encode(&r.body))),
        };
        RecordJson {
            seq: r.seq,
            fencing_token: r.fencing_token,
            timestamp_ms: r.timestamp_ms,
            body,
            body_base64,
        }
    }

    pub fn all(records: &'a [Record]) -> Vec<Self> {
        records.iter().map(Self::new).collect()
    }
}

#[derive(Serialize)]
struct ReadOk<'a> {
    records: Vec<RecordJson<'a>>,
    next_seq: u64,
}

/// How an append body is encoded, from its `Content-Type` essence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyKind {
    Json,
    Batch,
    /// Anything else: the body is one record.
    Raw,
}

fn body_kind(headers: &HeaderMap) -> BodyKind {
    let Some(v) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return BodyKind::Raw;
    };
    let essence = v.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        BodyKind::Json
    } else if essence.eq_ignore_ascii_case(batch::CONTENT_TYPE) {
        BodyKind::Batch
    } else {
        BodyKind::Raw
    }
}

/// A JSON append: token, records and optional `match_seq_num`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct JsonAppend {
    pub(crate) token: u64,
    pub(crate) records: Vec<Bytes>,
    pub(crate) match_seq_num: Option<u64>,
}

/// Parses a JSON append body: the typed fast path when it can decide, the
/// `Value` parser (and its error messages) otherwise.
pub(crate) fn parse_json_append(body: &Bytes) -> Result<JsonAppend, ApiError> {
    match fast_json::parse(body) {
        Some(append) => Ok(append),
        None => parse_json_append_value(body),
    }
}

/// The reference JSON append parser: every rule and every error message of
/// the JSON body lives here. Also a fuzz target
/// (`fuzz_targets::http_append_body`), which checks the fast path against it.
pub(crate) fn parse_json_append_value(bytes: &[u8]) -> Result<JsonAppend, ApiError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    let token = token_from_json(obj.get("fencing_token"))?;
    let match_seq_num = seq_from_json("match_seq_num", obj.get("match_seq_num"))?;
    let items = match obj.get("records") {
        None | Some(Value::Null) => return Err(ApiError::bad_request("records is required")),
        Some(Value::Array(items)) if items.is_empty() => {
            return Err(ApiError::bad_request("records must not be empty"))
        }
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ApiError::bad_request("records must be an array")),
    };
    let mut records = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        records.push(parse_record(i, item)?);
    }
    Ok(JsonAppend {
        token,
        records,
        match_seq_num,
    })
}

fn parse_record(i: usize, item: &Value) -> Result<Bytes, ApiError> {
    let bad = |what: &str| ApiError::bad_request(format!("records[{i}] {what}"));
    let Value::Object(obj) = item else {
        return Err(bad("must be an object"));
    };
    if obj.len() != 1 {
        return Err(bad("must have exactly one field: body or body_base64"));
    }
    match (obj.get("body"), obj.get("body_base64")) {
        (Some(Value::String(text)), None) => Ok(Bytes::copy_from_slice(text.as_bytes())),
        (None, Some(Value::String(b64))) => BASE64
            .decode(b64)
            .map(Bytes::from)
            .map_err(|e| bad(&format!("body_base64 is not valid base64: {e}"))),
        (Some(_), None) | (None, Some(_)) => Err(bad("body must be a string")),
        _ => Err(bad("must have exactly one field: body or body_base64")),
    }
}

/// `POST /v1/streams/{stream}/records`. JSON when `Content-Type` is
/// `application/json`; length-prefixed records when it is
/// `application/vnd.fencelog.batch` ([`batch`]); any other type makes the
/// raw body one record. The last two take the token in `Fencing-Token` and
/// an optional `Match-Seq-Num` header.
pub async fn append(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    request: Request,
) -> Result<Json<AppendOk>, ApiError> {
    let stream = stream_name(path)?;
    // The whole request rather than a `HeaderMap` extractor, which would
    // clone every header on each append.
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let kind = body_kind(headers);
    let req = if kind == BodyKind::Json {
        let bytes = read_capped(headers, body, &state.limits).await?;
        parse_json_append(&bytes)?
    } else {
        // Header errors first: no point reading a body we will refuse.
        let token = token_from_header(headers)?;
        let match_seq_num = seq_from_header(headers, "match-seq-num")?;
        let bytes = read_capped(headers, body, &state.limits).await?;
        let records = if kind == BodyKind::Batch {
            batch_records(&stream, &state, &bytes)?
        } else {
            vec![bytes]
        };
        JsonAppend {
            token,
            records,
            match_seq_num,
        }
    };
    match state
        .engine
        .append(&stream, req.token, req.records, req.match_seq_num)
        .await
    {
        Ok(ack) => Ok(Json(AppendOk::new(stream, ack))),
        Err(e) => Err(write_error(&stream, e)),
    }
}

/// The records of a binary batch body. The count is checked against the
/// engine's limit before the records are split out, so a body of many tiny
/// records costs no allocation beyond what the engine would accept; the
/// answer is the engine's own 413.
fn batch_records(stream: &str, state: &AppState, body: &Bytes) -> Result<Vec<Bytes>, ApiError> {
    let count = batch::count_records(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let limit = state.engine.config().batch_records_max;
    if count > limit {
        return Err(write_error(
            stream,
            WriteError::TooLarge {
                what: "records in the batch",
                limit: limit as u64,
                actual: count as u64,
            },
        ));
    }
    batch::split_records(body).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// Read parameters shared by plain reads and live tails.
pub struct ReadParams {
    pub start_seq: u64,
    pub count: usize,
    pub bytes: usize,
    pub wait: Duration,
    pub follow: bool,
}

impl ReadParams {
    fn parse(q: &QueryParams) -> Result<Self, ApiError> {
        Ok(ReadParams {
            start_seq: q.u64("start_seq")?.unwrap_or(0),
            count: q.positive_capped("count", READ_COUNT_DEFAULT, READ_COUNT_CAP)? as usize,
            bytes: q.positive_capped("bytes", READ_BYTES_DEFAULT, READ_BYTES_CAP)? as usize,
            wait: Duration::from_millis(q.u64("wait_ms")?.unwrap_or(0).min(WAIT_MS_CAP)),
            follow: q.bool("follow")?,
        })
    }
}

fn wants_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream"))
}

/// `GET /v1/streams/{stream}/records?start_seq=N&count=M&bytes=B&wait_ms=W`
///
/// - `start_seq`: first seq to return (default 0); past `next_seq` is 416.
/// - `count`: most records (default 1000, clamped to 10000; 0 is 400).
/// - `bytes`: most body bytes (default 1 MiB, clamped to 8 MiB; 0 is 400),
///   except that the first record always comes whole.
/// - `wait_ms`: when `start_seq` is the tail, wait up to this long for a
///   record to arrive instead of answering empty (default 0, clamped to
///   60000). The wait ends as soon as the record is durable. A stream
///   that does not exist yet is 404 at once, waiting or not; a consumer
///   that starts before any producer can create it with a fence.
/// - `follow=true` or `Accept: text/event-stream`: live tail instead; see
///   [`crate::sse`].
pub async fn read(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let stream = stream_name(path)?;
    let params = ReadParams::parse(&QueryParams::from_extractor(query)?)?;
    if params.follow || wants_event_stream(&headers) {
        let resume = seq_from_header(&headers, "last-event-id")?;
        return sse::tail(state, stream, resume.unwrap_or(params.start_seq), &params);
    }
    let engine = &state.engine;
    let read_now = || {
        engine
            .read(&stream, params.start_seq, params.count, params.bytes)
            .map_err(|e| read_error(&stream, e))
    };
    let mut batch = read_now()?;
    if batch.records.is_empty() && !params.wait.is_zero() && engine.is_healthy() {
        let mut shutdown = state.shutdown.clone();
        tokio::select! {
            waited = engine.wait_for(&stream, params.start_seq, params.wait) => {
                waited.map_err(|e| read_error(&stream, e))?;
            }
            // A server that is draining answers long-polls now, empty or not.
            _ = shutdown.wait() => {}
        }
        batch = read_now()?;
    }
    Ok(Json(ReadOk {
        records: RecordJson::all(&batch.records),
        next_seq: batch.next_seq,
    })
    .into_response())
}
