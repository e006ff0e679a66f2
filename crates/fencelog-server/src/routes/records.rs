//! Appending records and reading them back (plain and long-poll). Live
//! tailing shares the read route and lives in [`crate::routes::sse`].

use crate::auth::Caller;
use crate::decode::append_body::{body_kind, AppendBody, BodyKind};
use crate::decode::header_view::{visible_ascii, HeaderView};
use crate::decode::json_append;
use crate::decode::params::{
    header_str, names, refuse_raw_headers, seq_from_header, stream_name, token_from_header,
    QueryParams, ReadParams,
};
use crate::error::{json_response, read_error, write_error, Answer, ApiError};
use crate::routes::body::{read_capped, Incoming, Upload};
use crate::routes::chunked::{self, Framed, Source};
use crate::routes::{sse, start, writes};
use crate::state::AppState;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use bytes::Bytes;
use fencelog_api::read::param;
use fencelog_api::read_batch::{self, RecordFrames};
use fencelog_api::{batch, fixed_json, header as wire, next_start_seq, AppendAck, Field};
use fencelog_engine::{
    validate_headers, Ack, Applied, Header, HeaderError, ReadBatch, ReadError, RecordIn,
    WriteError, HEADERS_PER_RECORD_MAX, HEADER_BYTES_PER_RECORD_MAX,
};
use std::collections::HashMap;

/// `POST /v1/streams/{stream}/records`. JSON when `Content-Type` is
/// `application/json`; length-prefixed records when it is
/// `application/vnd.fencelog.batch` ([`batch`], version 2 with record
/// headers); any other type makes the raw body one record. The last two
/// take the token in `Fencing-Token` and an optional `Match-Seq-Num`
/// header; a JSON append takes neither header. Every error names the
/// stream.
pub async fn append(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    path: Result<Path<String>, PathRejection>,
    request: Request,
) -> Result<Response, Response> {
    let caller = caller.map(|Extension(c)| c).unwrap_or_default();
    let stream = stream_name(path)?;
    append_to(&state, &caller, &stream, request).await
}

/// The append route after its path is decoded and validated and its
/// caller admitted: what both the router's handler ([`append`]) and the
/// fast path in front of the router (`crate::routes::append_route`) run.
pub async fn append_to(
    state: &AppState,
    caller: &Caller,
    stream: &str,
    request: Request,
) -> Result<Response, Response> {
    let (parts, body) = request.into_parts();
    match append_from(state, caller, stream, &parts.headers, body.into()).await {
        Answer::Json { status, body } if status.is_success() => Ok(json_response(status, body)),
        other => Err(other.into_response()),
    }
}

/// [`append_to`] on a request's headers and body, however they came:
/// the front ([`crate::routes::append_route`]) reads them from its buffer. An
/// ack and a stale refusal come back as their JSON bytes.
pub async fn append_from<H: HeaderView + Sync + ?Sized>(
    state: &AppState,
    caller: &Caller,
    stream: &str,
    headers: &H,
    body: Incoming,
) -> Answer {
    // Held until the backend has answered: the records are slices of it.
    let decoded = decode_append_from(state, stream, headers, body).await;
    let (upload, op) = match decoded {
        Ok((upload, body)) => (upload, body.into_op(stream)),
        Err(e) => return Answer::Response(e.on_stream(stream).into_response()),
    };
    let answer = writes::write(state, caller, stream, "append", op).await;
    drop(upload);
    let answer = match answer {
        Ok(applied) => {
            let ack = AppendAck::new(stream.to_string(), applied_ack(applied));
            let mut body = Vec::with_capacity(fixed_json::append_ack_bytes(ack.stream.len()));
            fixed_json::write_append_ack(&mut body, &ack);
            Answer::Json {
                status: StatusCode::OK,
                body,
            }
        }
        Err(r) => writes::refused(state, caller, stream, r),
    };
    writes::hinted(state, stream, answer)
}

/// An append's ack: a backend answers an append with nothing else.
fn applied_ack(applied: Applied) -> Ack {
    match applied {
        Applied::Appended(ack) => ack,
        other => unreachable!("an append answered {other:?}"),
    }
}

/// `Producer-Id` and `Producer-Seq` of a raw or binary append: both or
/// neither.
fn producer_from_headers<H: HeaderView + ?Sized>(
    headers: &H,
) -> Result<Option<(String, u64)>, ApiError> {
    let seq = seq_from_header(headers, &names::PRODUCER_SEQ)?;
    let id = header_str(headers, &names::PRODUCER_ID)?.map(str::to_string);
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

/// The append a request carries, with its headers checked against the
/// limits, so nothing over them reaches the writer; and the upload its
/// records are slices of, which holds their share of the memory budget.
pub async fn decode_append_from<H: HeaderView + Sync + ?Sized>(
    state: &AppState,
    stream: &str,
    headers: &H,
    body: Incoming,
) -> Result<(Upload, AppendBody), ApiError> {
    let kind = body_kind(headers);
    let upload;
    let req = if kind == BodyKind::Json {
        refuse_raw_headers(headers)?;
        upload = read_capped(headers, body, &state.limits, &state.budget).await?;
        json_append::parse(&upload.bytes)?
    } else {
        // Header errors first: no point reading a body we will refuse.
        let token = token_from_header(headers)?;
        let match_seq_num = seq_from_header(headers, &names::MATCH_SEQ_NUM)?;
        let not_after_ms = seq_from_header(headers, &names::NOT_AFTER_MS)?;
        let producer = producer_from_headers(headers)?;
        let version = match kind {
            BodyKind::Batch => batch_version(headers)?,
            _ => 0,
        };
        upload = read_capped(headers, body, &state.limits, &state.budget).await?;
        let bytes = &upload.bytes;
        let mut req = match version {
            1 => AppendBody {
                token,
                records: batch_records(stream, state, bytes)?,
                headers: None,
                match_seq_num,
                producer: None,
                not_after_ms: None,
            },
            2 => AppendBody::with_headers(
                token,
                batch_records_v2(stream, state, bytes)?,
                match_seq_num,
            ),
            _ => AppendBody {
                token,
                records: vec![bytes.clone()],
                headers: None,
                match_seq_num,
                producer: None,
                not_after_ms: None,
            },
        };
        req.producer = producer;
        req.not_after_ms = not_after_ms;
        req
    };
    if let Some(headers) = &req.headers {
        check_headers(headers)?;
    }
    Ok((upload, req))
}

/// Every record's headers against the engine's limits: 413 over a size
/// limit, 400 for a malformed header, naming the record.
fn check_headers(headers: &[Vec<Header>]) -> Result<(), ApiError> {
    for (i, h) in headers.iter().enumerate() {
        if let Err(e) = validate_headers(h) {
            let message = format!("records[{i}]: {e}");
            return Err(match e {
                HeaderError::TooMany { count } => ApiError::too_large(message)
                    .with(Field::Limit, HEADERS_PER_RECORD_MAX as u64)
                    .with(Field::Actual, count as u64),
                HeaderError::TooManyBytes { bytes } => ApiError::too_large(message)
                    .with(Field::Limit, HEADER_BYTES_PER_RECORD_MAX as u64)
                    .with(Field::Actual, bytes as u64),
                HeaderError::EmptyName { .. } | HeaderError::NameTooLong { .. } => {
                    ApiError::bad_request(message)
                }
            });
        }
    }
    Ok(())
}

fn batch_version<H: HeaderView + ?Sized>(headers: &H) -> Result<u8, ApiError> {
    let ct = headers
        .first(&header::CONTENT_TYPE)
        .and_then(visible_ascii)
        .unwrap_or("");
    batch::version(ct).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// Refuses a batch of more records than the engine takes, before any
/// per-record storage is set aside; the answer is the engine's own 413.
fn check_batch_count(stream: &str, state: &AppState, count: usize) -> Result<(), ApiError> {
    let limit = state.backend.config().batch_records_max;
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
    Ok(())
}

/// The records of a binary batch body. The count is checked against the
/// engine's limit before the records are split out, so a body of many tiny
/// records costs no allocation beyond what the engine would accept.
fn batch_records(stream: &str, state: &AppState, body: &Bytes) -> Result<Vec<Bytes>, ApiError> {
    let count = batch::count_records(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    check_batch_count(stream, state, count)?;
    batch::split_records(body).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// [`batch_records`] for a version 2 body (records with headers).
fn batch_records_v2(
    stream: &str,
    state: &AppState,
    body: &Bytes,
) -> Result<Vec<RecordIn>, ApiError> {
    let count = batch::count_records_v2(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    check_batch_count(stream, state, count)?;
    batch::split_records_v2(body).map_err(|e| ApiError::bad_request(e.to_string()))
}

fn wants_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains(wire::EVENT_STREAM))
}

/// `GET /v1/streams/{stream}/records`
///
/// - Where to start, at most one of: `start_seq` (default 0),
///   `tail_offset=N` (N records before the tail, never before the
///   stream's first seq), `start_timestamp_ms=T` (the first record at or
///   after T, found by a binary search over the index; the tail when there
///   is none). A start past `next_seq`, or below `first_seq` (trimmed), is
///   416 with both.
/// - `clamp=true`: below `first_seq`, start at `first_seq` instead of 416.
/// - `until_timestamp_ms=T`: only records before T; a page that stops
///   there is shorter than `count` (plain reads only, 400 on a tail).
/// - `count`: most records (default 1000, clamped to 10000; 0 is 400).
/// - `bytes`: most body bytes (default 1 MiB, clamped to 8 MiB; 0 is 400),
///   except that the first record always comes whole.
/// - `wait_ms`: when the start is the tail, wait up to this long for a
///   record to arrive instead of answering empty (default 0, clamped to
///   60000). The wait ends as soon as the record is durable.
/// - `wait_for_stream=true`: a stream that does not exist yet is waited
///   for (within `wait_ms`, then a record in what is left of it) instead
///   of a 404 at once; still 404 if it did not appear in time.
/// - A sealed stream answers at once, with `"sealed": true`.
/// - `follow=true` or `Accept: text/event-stream`: live tail instead; see
///   [`crate::routes::sse`].
///
/// The page's `next_start_seq` is where the next page starts; `next_seq`
/// is the tail.
pub async fn read(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let stream = stream_name(path)?;
    read_stream(state, &stream, &headers, query)
        .await
        .map_err(|e| e.on_stream(&stream))
}

async fn read_stream(
    state: AppState,
    stream: &str,
    headers: &HeaderMap,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = QueryParams::from_extractor(query)?;
    let mut params = ReadParams::parse(&q)?;
    let engine = state.backend.read(stream).await?;
    if let Some(name) = q.str("cursor") {
        params.start = start::cursor_start(&engine, stream, name, &q)?;
    }
    if params.follow || wants_event_stream(headers) {
        if params.until_timestamp_ms.is_some() {
            return Err(ApiError::bad_request(format!(
                "{} applies to reads, not to live tails",
                param::UNTIL_TIMESTAMP_MS
            )));
        }
        let resume = seq_from_header(headers, &names::LAST_EVENT_ID)?;
        return sse::tail(state, engine, stream.to_string(), resume, &params);
    }
    let engine = &engine;
    let deadline = tokio::time::Instant::now() + params.wait;
    if params.wait_for_stream && !params.wait.is_zero() {
        waiting(&state, engine.wait_for_stream(stream, params.wait)).await?;
    }
    let start_seq = start::resolve(engine, stream, params.start, params.clamp)?;
    let read_now = || match params.until_timestamp_ms {
        None => engine.read(stream, start_seq, params.count, params.bytes),
        Some(until) => engine.read_until(stream, start_seq, params.count, params.bytes, until),
    };
    let mut batch = read_now().map_err(|e| read_error(stream, e))?;
    // A sealed stream answers at once: nothing more can come.
    let at_tail = batch.records.is_empty() && start_seq == batch.next_seq && !batch.sealed;
    if at_tail && engine.is_healthy() {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if !left.is_zero() {
            waiting(&state, engine.wait_for(stream, start_seq, left)).await?;
            batch = read_now().map_err(|e| read_error(stream, e))?;
        }
    }
    state.http_metrics.read(&batch.records);
    page_response(&state, batch, start_seq, wants_binary(headers)).await
}

fn wants_binary(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(read_batch::accepts)
}

/// A page of records read from `start_seq`: the `ReadPage` JSON, or with
/// `binary` the binary read format with the page's positions in headers.
async fn page_response(
    state: &AppState,
    batch: ReadBatch,
    start_seq: u64,
    binary: bool,
) -> Result<Response, ApiError> {
    let next_start = next_start_seq(batch.records.last().map(|r| r.seq), start_seq);
    if binary {
        let source = Source::Binary(RecordFrames::new(batch.records));
        let mut r =
            chunked::records_response(source, &state.budget, state.limits.write_timeout).await?;
        let h = r.headers_mut();
        h.insert(read_batch::NEXT_START_SEQ, HeaderValue::from(next_start));
        h.insert(read_batch::NEXT_SEQ, HeaderValue::from(batch.next_seq));
        if batch.sealed {
            h.insert(read_batch::SEALED, HeaderValue::from_static("true"));
        }
        return Ok(r);
    }
    // The `ReadPage` JSON, streamed in pieces leased from the memory
    // budget: `{"records":[...],"next_start_seq":N,"next_seq":T}`, and
    // `"sealed":true` when sealed (as `ReadPage` serialises it).
    let sealed = if batch.sealed { ",\"sealed\":true" } else { "" };
    let framed = Framed::new(
        b"{\"records\":".to_vec(),
        batch.records,
        format!(
            ",\"next_start_seq\":{next_start},\"next_seq\":{}{sealed}}}",
            batch.next_seq
        )
        .into_bytes(),
    );
    chunked::records_response(framed.into(), &state.budget, state.limits.write_timeout).await
}

/// Waits for `wait`, or until the server starts draining: a server that
/// is shutting down answers long-polls now, empty or not.
async fn waiting<T>(
    state: &AppState,
    wait: impl std::future::Future<Output = Result<T, ReadError>>,
) -> Result<(), ApiError> {
    let mut shutdown = state.shutdown.clone();
    tokio::select! {
        waited = wait => {
            waited.map_err(|e| read_error("", e))?;
        }
        _ = shutdown.wait() => {}
    }
    Ok(())
}
