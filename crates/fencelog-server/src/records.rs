//! Appending records and reading them back (plain and long-poll). Live
//! tailing shares the read route and lives in [`crate::sse`].

use crate::append_body::{body_kind, AppendBody, BodyKind};
use crate::auth::Caller;
use crate::body::read_capped;
use crate::chunked::{self, Framed};
use crate::error::{read_error, write_error, ApiError};
use crate::params::{
    refuse_raw_headers, seq_from_header, stream_name, token_from_header, QueryParams, ReadParams,
};
use crate::state::AppState;
use crate::{json_append, sse};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap};
use axum::response::Response;
use axum::Extension;
use axum::Json;
use bytes::Bytes;
use fencelog_api::{batch, header as wire, AppendAck};
use fencelog_engine::{AppendOptions, Engine, ProducerSeq, ReadError, WriteError};
use std::collections::HashMap;

/// `POST /v1/streams/{stream}/records`. JSON when `Content-Type` is
/// `application/json`; length-prefixed records when it is
/// `application/vnd.fencelog.batch` ([`batch`]); any other type makes the
/// raw body one record. The last two take the token in `Fencing-Token` and
/// an optional `Match-Seq-Num` header; a JSON append takes neither header.
pub async fn append(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    path: Result<Path<String>, PathRejection>,
    request: Request,
) -> Result<Json<AppendAck>, ApiError> {
    let caller = caller.map(|Extension(c)| c).unwrap_or_default();
    let stream = stream_name(path)?;
    // The whole request rather than a `HeaderMap` extractor, which would
    // clone every header on each append.
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let kind = body_kind(headers);
    // Held until the engine has answered: the records are slices of it.
    let upload;
    let req = if kind == BodyKind::Json {
        refuse_raw_headers(headers)?;
        upload = read_capped(headers, body, &state.limits, &state.budget).await?;
        json_append::parse(&upload.bytes)?
    } else {
        // Header errors first: no point reading a body we will refuse.
        let token = token_from_header(headers)?;
        let match_seq_num = seq_from_header(headers, wire::MATCH_SEQ_NUM)?;
        let not_after_ms = seq_from_header(headers, wire::NOT_AFTER_MS)?;
        let producer = producer_from_headers(headers)?;
        upload = read_capped(headers, body, &state.limits, &state.budget).await?;
        let records = if kind == BodyKind::Batch {
            batch_records(&stream, &state, &upload.bytes)?
        } else {
            vec![upload.bytes.clone()]
        };
        AppendBody {
            token,
            records,
            match_seq_num,
            producer,
            not_after_ms,
        }
    };
    let before = state.token_before(&stream);
    let options = AppendOptions {
        match_seq_num: req.match_seq_num,
        producer: req.producer.map(|(id, seq)| ProducerSeq { id, seq }),
        not_after_ms: req.not_after_ms,
    };
    let result = state
        .engine
        .append_with(&stream, req.token, req.records, options)
        .await;
    drop(upload);
    match result {
        Ok(ack) => {
            state.written(&caller, &stream, "append", before, ack.fencing_token);
            Ok(Json(AppendAck::new(stream, ack)))
        }
        Err(e) => Err(state.write_refused(&caller, &stream, e)),
    }
}

/// `Producer-Id` and `Producer-Seq` of a raw or binary append: both or
/// neither.
fn producer_from_headers(headers: &HeaderMap) -> Result<Option<(String, u64)>, ApiError> {
    let seq = seq_from_header(headers, wire::PRODUCER_SEQ)?;
    let id = match headers.get(wire::PRODUCER_ID) {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ApiError::bad_request("header Producer-Id is not ASCII"))?
                .trim()
                .to_string(),
        ),
    };
    match (id, seq) {
        (Some(id), Some(seq)) => Ok(Some((id, seq))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(ApiError::bad_request(
            "header Producer-Id needs Producer-Seq",
        )),
        (None, Some(_)) => Err(ApiError::bad_request(
            "header Producer-Seq needs Producer-Id",
        )),
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

/// Where `cursor=NAME` says a read or tail starts; with `start_seq` too it
/// is a 400 (which one?).
fn cursor_seq(engine: &Engine, stream: &str, name: &str, q: &QueryParams) -> Result<u64, ApiError> {
    if q.str("start_seq").is_some() {
        return Err(ApiError::bad_request("give start_seq or cursor, not both"));
    }
    match engine.cursor(stream, name) {
        Ok(Some(c)) => Ok(c.seq),
        Ok(None) => Err(crate::producers::cursor_not_found(stream, name)),
        Err(e) => Err(read_error(stream, e)),
    }
}

fn wants_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains(wire::EVENT_STREAM))
}

/// `GET /v1/streams/{stream}/records?start_seq=N&count=M&bytes=B&wait_ms=W`
///
/// - `start_seq`: first seq to return (default 0); past `next_seq`, or
///   below `first_seq` (trimmed), is 416 with both.
/// - `clamp=true`: below `first_seq`, start at `first_seq` instead of 416.
/// - `count`: most records (default 1000, clamped to 10000; 0 is 400).
/// - `bytes`: most body bytes (default 1 MiB, clamped to 8 MiB; 0 is 400),
///   except that the first record always comes whole.
/// - `wait_ms`: when `start_seq` is the tail, wait up to this long for a
///   record to arrive instead of answering empty (default 0, clamped to
///   60000). The wait ends as soon as the record is durable. A stream
///   that does not exist yet is 404 at once, waiting or not; a consumer
///   that starts before any producer can create it with a fence. A sealed
///   stream answers at once, with `"sealed": true`.
/// - `follow=true` or `Accept: text/event-stream`: live tail instead; see
///   [`crate::sse`].
pub async fn read(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let stream = stream_name(path)?;
    let q = QueryParams::from_extractor(query)?;
    let mut params = ReadParams::parse(&q)?;
    if let Some(name) = q.str("cursor") {
        params.start_seq = cursor_seq(&state.engine, &stream, name, &q)?;
    }
    if params.follow || wants_event_stream(&headers) {
        let resume = seq_from_header(&headers, wire::LAST_EVENT_ID)?;
        let start = start_at(
            &state.engine,
            &stream,
            resume.unwrap_or(params.start_seq),
            params.clamp,
        )?;
        return sse::tail(state, stream, start, &params);
    }
    let engine = &state.engine;
    let start_seq = start_at(engine, &stream, params.start_seq, params.clamp)?;
    let read_now = || {
        engine
            .read(&stream, start_seq, params.count, params.bytes)
            .map_err(|e| read_error(&stream, e))
    };
    let mut batch = read_now()?;
    // A sealed stream answers at once: nothing more can come.
    if batch.records.is_empty() && !batch.sealed && !params.wait.is_zero() && engine.is_healthy() {
        let mut shutdown = state.shutdown.clone();
        tokio::select! {
            waited = engine.wait_for(&stream, start_seq, params.wait) => {
                waited.map_err(|e| read_error(&stream, e))?;
            }
            // A server that is draining answers long-polls now, empty or not.
            _ = shutdown.wait() => {}
        }
        batch = read_now()?;
    }
    // The `ReadPage` JSON, streamed: `{"records":[...],"next_seq":N}`, and
    // `"sealed":true` when sealed (as `ReadPage` serialises it).
    let sealed = if batch.sealed { ",\"sealed\":true" } else { "" };
    let framed = Framed::new(
        b"{\"records\":".to_vec(),
        batch.records,
        format!(",\"next_seq\":{}{sealed}}}", batch.next_seq).into_bytes(),
    );
    chunked::json_response(framed, &state.budget, state.limits.write_timeout).await
}

/// Where a read starts: `start_seq`, or with `clamp=true` the stream's
/// `first_seq` when `start_seq` is below it (trimmed).
pub(crate) fn start_at(
    engine: &Engine,
    stream: &str,
    start_seq: u64,
    clamp: bool,
) -> Result<u64, ApiError> {
    if !clamp {
        return Ok(start_seq);
    }
    match engine.state(stream) {
        Ok(s) if !s.deleted => Ok(start_seq.max(s.first_seq)),
        Ok(_) => Err(read_error(stream, ReadError::NotFound)),
        Err(e) => Err(read_error(stream, e)),
    }
}
