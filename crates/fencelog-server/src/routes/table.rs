//! The route table: every route of the API with its handler, its access
//! and its description. [`crate::routes::router::app`] routes exactly
//! [`ROUTES`], and the OpenAPI 3 document served at
//! `GET /v1/openapi.json` is rendered from the same entries, so the
//! document lists exactly what the server answers.

use crate::auth::{Access, Scope};
use crate::routes::openapi;
use crate::routes::route::{Answer, Param, RequestBody, Route, Schema};
use crate::routes::{console, lifecycle, ops, producers, records, session, streams};
use axum::routing::{delete, get, post, put};
use axum::Json;
use fencelog_api::ErrorCode;
use serde_json::Value;

const STALE: Answer = Answer::Error(
    ErrorCode::StaleFencingToken,
    "the stream accepted a higher token",
);
const BAD: Answer = Answer::Error(ErrorCode::BadRequest, "");
const UNAVAILABLE: Answer =
    Answer::Error(ErrorCode::Unavailable, "storage failed or shutting down");
const FULL: Answer = Answer::Error(ErrorCode::InsufficientStorage, "disk full");
const SEALED: Answer = Answer::Error(
    ErrorCode::StreamSealed,
    "the stream is sealed; carries first_seq, next_seq, highest_token",
);
const PRODUCER_FENCED: Answer = Answer::Error(
    ErrorCode::ProducerFenced,
    "an unknown producer with a token below the stream's producer_token_floor",
);
const DEADLINE: Answer = Answer::Error(
    ErrorCode::DeadlineExceeded,
    "the writer's timestamp would be past not_after_ms; carries writer_ms; nothing changed",
);
const GONE: Answer = Answer::Error(
    ErrorCode::StreamNotFound,
    "no such stream, or it was deleted",
);

/// The writes a backend that redirects writes answers with 307 to the node
/// that serves them (by `operation_id`): appends, fences, trims, seals and
/// deletes. The others it takes where they arrive.
pub const REDIRECTED: &[&str] = &["append", "fence", "trim", "seal", "delete"];

pub const ROUTES: &[Route] = &[
    Route {
        method: "post",
        path: "/v1/streams/{stream}/records",
        operation_id: "append",
        access: Access::Scope(Scope::Append),
        summary: "Append records with a fencing token (JSON body; a binary batch of u32 little-endian length-prefixed records as application/vnd.fencelog.batch, or records with headers as application/vnd.fencelog.batch; version=2; or one raw record), the last two with a Fencing-Token header",
        handler: || post(records::append),
        query: &[],
        headers: &[
            Param::new("Fencing-Token", "raw and binary-batch appends only: the fencing token", Schema::IntegerFrom(1)),
            Param::new("Match-Seq-Num", "raw and binary-batch appends only: append only if next_seq equals it", Schema::IntegerFrom(0)),
            Param::new("Producer-Id", "raw and binary-batch appends only: an idempotent producer's id (needs Producer-Seq)", Schema::String),
            Param::new("Producer-Seq", "raw and binary-batch appends only: the producer's seq for this append", Schema::IntegerFrom(0)),
            Param::new("Not-After-Ms", "raw and binary-batch appends only: accept only if the writer's timestamp is at most this (Unix ms)", Schema::IntegerFrom(0)),
        ],
        request_body: Some(RequestBody::Append),
        responses: &[
            Answer::Ok(200, "appended and durable; or, for a producer's retry of its last applied append, that append's original ack with duplicate: true (nothing written)", "AppendAck"),
            BAD,
            STALE,
            PRODUCER_FENCED,
            Answer::Error(ErrorCode::ProducerSeqStale, "producer_seq is below the producer's last applied one; carries last_producer_seq"),
            Answer::Error(ErrorCode::ProducerSeqGap, "producer_seq skips ahead; carries expected_producer_seq"),
            DEADLINE,
            Answer::Error(ErrorCode::SeqMismatch, "match_seq_num is not the stream's next_seq"),
            Answer::Error(ErrorCode::TooLarge, "over the batch or body limits, or a record's header count or header bytes; nothing changed"),
            UNAVAILABLE,
            Answer::Error(ErrorCode::InsufficientStorage, "disk full, or the data directory is at its --data-bytes-max budget (then nothing was written and outcome_unknown is false)"),
        ],
    },
    Route {
        method: "get",
        path: "/v1/streams/{stream}/session",
        operation_id: "appendSession",
        access: Access::Scope(Scope::Append),
        summary: "The pipelined append session: a WebSocket (subprotocol fencelog.append.v1) of binary messages, one append of one record per message (kind u8 = 1, flags u8 (bit 0: match_seq_num applies), fencing_token u64, match_seq_num u64, then the body; little-endian), each answered in the order sent once durable: kind 1 accepted (n, first_seq, last_seq, next_seq, fencing_token, timestamp_ms, u64 each), kind 2 refused (n u64, status u16, the append route's JSON error body), kind 3 session error (n u64 = the first append not applied, status u16, JSON error body; a close follows). Unanswered appends are bounded by the Fencelog-Session-Appends-Max and Fencelog-Session-Bytes-Max the upgrade answers with: at either bound the server stops reading until answers go out (docs/clients.md)",
        handler: || get(session::open),
        query: &[],
        headers: &[],
        request_body: None,
        responses: &[
            Answer::Ok(101, "switching to the session (WebSocket)", ""),
            Answer::Error(ErrorCode::BadRequest, "not a WebSocket upgrade, or a bad stream name"),
            Answer::Error(ErrorCode::Overloaded, "the server's upload memory budget has no room for another session"),
        ],
    },
    Route {
        method: "get",
        path: "/v1/streams/{stream}/records",
        operation_id: "read",
        access: Access::Scope(Scope::Read),
        summary: "Read durable records, one page at a time: continue from the page's next_start_seq (next_seq is the tail). Long-poll with wait_ms; live tail over SSE with Accept: text/event-stream or follow=true (events: records with id = the next seq, caught_up whenever the consumer reaches the tail, ping when idle, sealed once a sealed stream's last record was sent, error). Accept: application/vnd.fencelog.batch asks for the page in the binary read format instead of JSON",
        handler: || get(records::read),
        query: &[
            Param::new("start_seq", "first seq to read (default 0); at most one of start_seq, tail_offset, start_timestamp_ms", Schema::Integer),
            Param::new("tail_offset", "start this many records before the tail (never before the stream's first seq)", Schema::Integer),
            Param::new("start_timestamp_ms", "start at the first record whose timestamp is at or after this (Unix ms; the tail when none is); a binary search over the stream's index, one checksum-verified frame read per step", Schema::Integer),
            Param::new("until_timestamp_ms", "plain reads only: return only records whose timestamp is before this (Unix ms)", Schema::Integer),
            Param::new("count", "most records (default 1000, capped at 10000)", Schema::Integer),
            Param::new("bytes", "most body bytes (default 1 MiB, capped at 8 MiB; the first record always comes whole)", Schema::Integer),
            Param::new("wait_ms", "long-poll: when the start is the tail, wait up to this long for a record (capped at 60000)", Schema::Integer),
            Param::new("follow", "true: live tail over Server-Sent Events", Schema::Boolean),
            Param::new("wait_for_stream", "true: a stream that does not exist yet is waited for instead of a 404 (a tail sends pings until it exists; a long-poll waits within wait_ms)", Schema::Boolean),
            Param::new("clamp", "true: below first_seq (trimmed), start at first_seq instead of 416", Schema::Boolean),
            Param::new("cursor", "start at this cursor's seq (instead of start_seq)", Schema::String),
        ],
        headers: &[Param::new("Last-Event-ID", "SSE resume: the next seq to read", Schema::Integer)],
        request_body: None,
        responses: &[
            Answer::Ok(200, "records from the start (or an SSE stream of records, caught_up, ping and sealed events; or, with Accept: application/vnd.fencelog.batch, the binary read format with the page's positions in the Next-Start-Seq, Next-Seq and Stream-Sealed headers). Refusals are JSON whatever Accept says", "ReadResult"),
            BAD,
            GONE,
            Answer::Error(ErrorCode::OutOfRange, "start_seq is past next_seq or below first_seq; carries both"),
            Answer::Error(ErrorCode::CursorNotFound, "cursor= names no cursor of the stream"),
        ],
    },
    Route {
        method: "post",
        path: "/v1/streams/{stream}/fence",
        operation_id: "fence",
        access: Access::Scope(Scope::Fence),
        summary: "Raise the stream's highest accepted token without writing a record",
        handler: || post(streams::fence),
        query: &[],
        headers: &[],
        request_body: Some(RequestBody::Json("FenceRequest", true)),
        responses: &[
            Answer::Ok(200, "fenced and durable", "StreamState"),
            BAD,
            STALE,
            SEALED,
            DEADLINE,
            UNAVAILABLE,
            FULL,
        ],
    },
    Route {
        method: "post",
        path: "/v1/streams/{stream}/trim",
        operation_id: "trim",
        access: Access::Scope(Scope::Trim),
        summary: "Make the records below trim_seq unreadable (first_seq = min(trim_seq, next_seq), never back); fenced like an append",
        handler: || post(lifecycle::trim),
        query: &[],
        headers: &[],
        request_body: Some(RequestBody::Json("TrimRequest", true)),
        responses: &[
            Answer::Ok(200, "trimmed and durable", "StreamState"),
            BAD,
            GONE,
            STALE,
            SEALED,
            DEADLINE,
            UNAVAILABLE,
            FULL,
        ],
    },
    Route {
        method: "post",
        path: "/v1/streams/{stream}/seal",
        operation_id: "seal",
        access: Access::Scope(Scope::Seal),
        summary: "Refuse every later append, fence and trim, whatever its token; reads keep working",
        handler: || post(lifecycle::seal),
        query: &[],
        headers: &[],
        request_body: Some(RequestBody::Json("FenceRequest", true)),
        responses: &[
            Answer::Ok(200, "sealed and durable (sealing again with the highest token is idempotent; a higher one raises it)", "StreamState"),
            BAD,
            GONE,
            STALE,
            DEADLINE,
            UNAVAILABLE,
            FULL,
        ],
    },
    Route {
        method: "delete",
        path: "/v1/streams/{stream}",
        operation_id: "delete",
        access: Access::Scope(Scope::Delete),
        summary: "Delete the stream's records; a tombstone keeps its highest token, so only a higher token creates it again",
        handler: || delete(lifecycle::delete),
        query: &[],
        headers: &[Param::new("Fencing-Token", "the fencing token, when the body is empty", Schema::IntegerFrom(1))],
        request_body: Some(RequestBody::Json("FenceRequest", false)),
        responses: &[
            Answer::Ok(200, "deleted and durable", "StreamState"),
            BAD,
            GONE,
            STALE,
            UNAVAILABLE,
            FULL,
        ],
    },
    Route {
        method: "put",
        path: "/v1/streams/{stream}/config",
        operation_id: "config",
        access: Access::Scope(Scope::Config),
        summary: "Replace the stream's retention settings (durable); fenced when a token is given",
        handler: || put(lifecycle::config),
        query: &[],
        headers: &[],
        request_body: Some(RequestBody::Json("ConfigRequest", true)),
        responses: &[
            Answer::Ok(200, "changed and durable", "StreamState"),
            BAD,
            GONE,
            STALE,
            SEALED,
            UNAVAILABLE,
            FULL,
        ],
    },
    Route {
        method: "get",
        path: "/v1/streams/{stream}",
        operation_id: "state",
        access: Access::Scope(Scope::Read),
        summary: "A stream's durable state",
        handler: || get(streams::state),
        query: &[],
        headers: &[],
        request_body: None,
        responses: &[Answer::Ok(200, "the state", "StreamState"), BAD, GONE],
    },
    Route {
        method: "get",
        path: "/v1/streams",
        operation_id: "list",
        access: Access::Scope(Scope::Read),
        summary: "Streams in name order, paginated (prefix, start_after, limit)",
        handler: || get(streams::list),
        query: &[
            Param::new("prefix", "only names starting with this", Schema::String),
            Param::new("start_after", "the previous page's next_start_after", Schema::String),
            Param::new("limit", "most streams per page (capped)", Schema::Integer),
        ],
        headers: &[],
        request_body: None,
        responses: &[Answer::Ok(200, "one page", "StreamList"), BAD],
    },
    Route {
        method: "get",
        path: "/v1/streams/{stream}/producers/{producer_id}",
        operation_id: "producer",
        summary: "Did my write land? An idempotent producer's last applied append on the stream",
        access: Access::Scope(Scope::Read),
        handler: || get(producers::producer),
        query: &[],
        headers: &[],
        request_body: None,
        responses: &[
            Answer::Ok(200, "its last applied append", "ProducerInfo"),
            BAD,
            GONE,
            Answer::Error(ErrorCode::ProducerNotFound, "the stream never saw this producer, or evicted it"),
        ],
    },
    Route {
        method: "get",
        path: "/v1/streams/{stream}/fences",
        operation_id: "fences",
        summary: "The tokens that took effect on the stream, newest first (the last 64 are kept)",
        access: Access::Scope(Scope::Read),
        handler: || get(producers::fences),
        query: &[Param::new("limit", "most entries (capped at 64)", Schema::Integer)],
        headers: &[],
        request_body: None,
        responses: &[Answer::Ok(200, "the fence history", "FenceList"), BAD, GONE],
    },
    Route {
        method: "put",
        path: "/v1/streams/{stream}/cursors/{name}",
        operation_id: "put_cursor",
        summary: "Commit a named consumer cursor, fenced by its own token: lower tokens are stale; it moves back only with a strictly higher token",
        access: Access::Scope(Scope::Append),
        handler: || put(producers::put_cursor),
        query: &[],
        headers: &[],
        request_body: Some(RequestBody::Json("CursorRequest", true)),
        responses: &[
            Answer::Ok(200, "committed and durable", "Cursor"),
            BAD,
            GONE,
            Answer::Error(ErrorCode::StaleFencingToken, "a lower token than the cursor's, or backwards with the same token; highest_token and next_seq are the cursor's"),
            Answer::Error(ErrorCode::OutOfRange, "seq is past the stream's next_seq"),
            UNAVAILABLE,
            FULL,
        ],
    },
    Route {
        method: "get",
        path: "/v1/streams/{stream}/cursors/{name}",
        operation_id: "get_cursor",
        summary: "A named consumer cursor",
        access: Access::Scope(Scope::Read),
        handler: || get(producers::get_cursor),
        query: &[],
        headers: &[],
        request_body: None,
        responses: &[
            Answer::Ok(200, "the cursor", "Cursor"),
            BAD,
            GONE,
            Answer::Error(ErrorCode::CursorNotFound, ""),
        ],
    },
    Route {
        method: "get",
        path: "/v1/streams/{stream}/cursors",
        operation_id: "list_cursors",
        summary: "Every cursor of the stream, in name order",
        access: Access::Scope(Scope::Read),
        handler: || get(producers::list_cursors),
        query: &[],
        headers: &[],
        request_body: None,
        responses: &[Answer::Ok(200, "the cursors", "CursorList"), BAD, GONE],
    },
    Route {
        method: "post",
        path: "/v1/batch",
        operation_id: "batch",
        summary: "Appends and fences on up to 64 streams, all or nothing, durable as one unit",
        access: Access::Scope(Scope::Append),
        handler: || post(producers::batch),
        query: &[],
        headers: &[],
        request_body: Some(RequestBody::Json("BatchRequest", true)),
        responses: &[
            Answer::Ok(200, "every op applied and durable; ops holds each op's ack (an append's AppendAck or a fence's StreamState)", "BatchResult"),
            BAD,
            Answer::Error(ErrorCode::StaleFencingToken, "an op was refused (the first refusal's code); nothing was applied; ops holds every op's outcome: an ack, or an error body"),
            Answer::Error(ErrorCode::SeqMismatch, "as for 409: nothing applied, every op's outcome in ops"),
            Answer::Error(ErrorCode::TooLarge, "over the batch limits"),
            UNAVAILABLE,
            FULL,
        ],
    },
    Route {
        method: "get",
        path: "/healthz",
        operation_id: "healthz",
        access: Access::Open,
        summary: "200 while the engine accepts writes, 503 once storage failed",
        handler: || get(ops::healthz),
        query: &[],
        headers: &[],
        request_body: None,
        responses: &[Answer::Ok(200, "healthy", ""), UNAVAILABLE],
    },
    Route {
        method: "get",
        path: "/metrics",
        operation_id: "metrics",
        access: Access::Scope(Scope::Admin),
        summary: "Prometheus text exposition",
        handler: || get(ops::metrics),
        query: &[],
        headers: &[],
        request_body: None,
        responses: &[Answer::Ok(200, "metrics in the OpenMetrics text format", "")],
    },
    Route {
        method: "get",
        path: "/console",
        operation_id: "console",
        // Static files of the page, no data: the page's own API calls
        // carry a token and are checked like any other client's.
        access: Access::Open,
        summary: "The web console (HTML): streams, records, token timelines, live tails and metrics, using this API from the browser",
        handler: || get(console::index),
        query: &[],
        headers: &[],
        request_body: None,
        responses: &[Answer::Ok(200, "the console's page", "")],
    },
    Route {
        method: "get",
        path: "/console/{asset}",
        operation_id: "console_asset",
        access: Access::Open,
        summary: "A script or the stylesheet of the web console, embedded in the binary",
        handler: || get(console::asset),
        query: &[],
        headers: &[],
        request_body: None,
        responses: &[
            Answer::Ok(200, "the file", ""),
            Answer::Error(ErrorCode::NotFound, "the console has no such file"),
        ],
    },
    Route {
        method: "get",
        path: "/v1/openapi.json",
        operation_id: "openapi",
        access: Access::Open,
        summary: "This document",
        handler: || get(serve_openapi),
        query: &[],
        headers: &[],
        request_body: None,
        responses: &[Answer::Ok(200, "the OpenAPI 3 description of the API", "")],
    },
];

/// The OpenAPI 3 document for [`ROUTES`].
pub fn openapi_document() -> Value {
    openapi::document(ROUTES)
}

/// `GET /v1/openapi.json`.
async fn serve_openapi() -> Json<Value> {
    Json(openapi_document())
}
