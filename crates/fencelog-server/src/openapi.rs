//! The route table and the OpenAPI 3 description built from it, served at
//! `GET /v1/openapi.json`. [`crate::app`] routes exactly [`ROUTES`], so the
//! document lists exactly what the server answers.

use axum::Json;
use serde_json::{json, Map, Value};

/// One route of the API.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    /// Also the key [`crate::app`] picks the handler by.
    pub operation_id: &'static str,
    pub summary: &'static str,
    /// `(status, description, schema name or "")` of each documented answer.
    pub responses: &'static [(u16, &'static str, &'static str)],
}

const STALE: (u16, &str, &str) = (
    409,
    "stale_fencing_token: the stream accepted a higher token",
    "Error",
);
const BAD: (u16, &str, &str) = (400, "bad_request", "Error");
const UNAVAILABLE: (u16, &str, &str) =
    (503, "unavailable: storage failed or shutting down", "Error");
const FULL: (u16, &str, &str) = (507, "insufficient_storage: disk full", "Error");
const MISSING: (u16, &str, &str) = (404, "stream_not_found", "Error");

pub const ROUTES: &[Route] = &[
    Route {
        method: "post",
        path: "/v1/streams/{stream}/records",
        operation_id: "append",
        summary: "Append records with a fencing token (JSON body; a binary batch of u32 little-endian length-prefixed records as application/vnd.fencelog.batch; or one raw record), the last two with a Fencing-Token header",
        responses: &[
            (200, "appended and durable", "AppendAck"),
            BAD,
            STALE,
            (412, "seq_mismatch: match_seq_num is not the stream's next_seq", "Error"),
            (413, "too_large: over the batch or body limits", "Error"),
            UNAVAILABLE,
            FULL,
        ],
    },
    Route {
        method: "get",
        path: "/v1/streams/{stream}/records",
        operation_id: "read",
        summary: "Read durable records; long-poll with wait_ms; live tail over SSE with Accept: text/event-stream or follow=true",
        responses: &[
            (200, "records from start_seq (or an SSE stream of records, caught_up and ping events)", "ReadResult"),
            BAD,
            MISSING,
            (416, "out_of_range: start_seq is past next_seq", "Error"),
        ],
    },
    Route {
        method: "post",
        path: "/v1/streams/{stream}/fence",
        operation_id: "fence",
        summary: "Raise the stream's highest accepted token without writing a record",
        responses: &[
            (200, "fenced and durable", "StreamState"),
            BAD,
            STALE,
            UNAVAILABLE,
            FULL,
        ],
    },
    Route {
        method: "get",
        path: "/v1/streams/{stream}",
        operation_id: "state",
        summary: "A stream's durable state",
        responses: &[(200, "the state", "StreamState"), BAD, MISSING],
    },
    Route {
        method: "get",
        path: "/v1/streams",
        operation_id: "list",
        summary: "Streams in name order, paginated (prefix, start_after, limit)",
        responses: &[(200, "one page", "StreamList"), BAD],
    },
    Route {
        method: "get",
        path: "/healthz",
        operation_id: "healthz",
        summary: "200 while the engine accepts writes, 503 once storage failed",
        responses: &[(200, "healthy", ""), UNAVAILABLE],
    },
    Route {
        method: "get",
        path: "/metrics",
        operation_id: "metrics",
        summary: "Prometheus text exposition",
        responses: &[(200, "metrics in the OpenMetrics text format", "")],
    },
    Route {
        method: "get",
        path: "/v1/openapi.json",
        operation_id: "openapi",
        summary: "This document",
        responses: &[(200, "the OpenAPI 3 description of the API", "")],
    },
];

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn parameters(route: &Route) -> Vec<Value> {
    let mut out = Vec::new();
    if route.path.contains("{stream}") {
        out.push(json!({
            "name": "stream", "in": "path", "required": true,
            "description": "Stream name: 1-255 of [A-Za-z0-9._:-]",
            "schema": { "type": "string" },
        }));
    }
    let query: &[(&str, &str)] = match route.operation_id {
        "read" => &[
            ("start_seq", "first seq to read (default 0)"),
            ("count", "most records (capped)"),
            ("bytes", "most body bytes (capped)"),
            (
                "wait_ms",
                "long-poll: wait this long for a record at start_seq (capped)",
            ),
            ("follow", "true: live tail over Server-Sent Events"),
        ],
        "list" => &[
            ("prefix", "only names starting with this"),
            ("start_after", "the previous page's next_start_after"),
            ("limit", "most streams per page (capped)"),
        ],
        _ => &[],
    };
    for (name, description) in query {
        let ty = if matches!(*name, "prefix" | "start_after") {
            "string"
        } else if *name == "follow" {
            "boolean"
        } else {
            "integer"
        };
        out.push(json!({
            "name": name, "in": "query", "required": false,
            "description": description, "schema": { "type": ty },
        }));
    }
    if route.operation_id == "append" {
        out.push(json!({
            "name": "Fencing-Token", "in": "header", "required": false,
            "description": "raw and binary-batch appends only: the fencing token",
            "schema": { "type": "integer", "minimum": 1 },
        }));
        out.push(json!({
            "name": "Match-Seq-Num", "in": "header", "required": false,
            "description": "raw and binary-batch appends only: append only if next_seq equals it",
            "schema": { "type": "integer", "minimum": 0 },
        }));
    }
    if route.operation_id == "read" {
        out.push(json!({
            "name": "Last-Event-ID", "in": "header", "required": false,
            "description": "SSE resume: the next seq to read",
            "schema": { "type": "integer" },
        }));
    }
    out
}

fn request_body(route: &Route) -> Option<Value> {
    match route.operation_id {
        "append" => Some(json!({
            "required": true,
            "content": {
                "application/json": { "schema": schema_ref("AppendRequest") },
                fencelog_api::batch::CONTENT_TYPE: {
                    "schema": {
                        "type": "string", "format": "binary",
                        "description": "one or more records, each a u32 little-endian byte \
                                        length followed by that many bytes; nothing after \
                                        the last record",
                    }
                },
                "application/octet-stream": {
                    "schema": { "type": "string", "format": "binary" }
                },
            },
        })),
        "fence" => Some(json!({
            "required": true,
            "content": { "application/json": { "schema": schema_ref("FenceRequest") } },
        })),
        _ => None,
    }
}

fn components() -> Value {
    let token = json!({ "type": "integer", "format": "uint64", "minimum": 1 });
    let seq = json!({ "type": "integer", "format": "uint64", "minimum": 0 });
    json!({
        "schemas": {
            "Error": {
                "type": "object",
                "required": ["error", "message"],
                "properties": {
                    "error": { "type": "string" },
                    "message": { "type": "string" },
                    "stream": { "type": "string" },
                    "presented_token": token,
                    "highest_token": token,
                    "next_seq": seq,
                    "match_seq_num": seq,
                    "outcome_unknown": { "type": "boolean" },
                },
            },
            "AppendRequest": {
                "type": "object",
                "required": ["fencing_token", "records"],
                "properties": {
                    "fencing_token": token,
                    "match_seq_num": seq,
                    "records": {
                        "type": "array", "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "body": { "type": "string" },
                                "body_base64": { "type": "string", "format": "byte" },
                            },
                        },
                    },
                },
            },
            "FenceRequest": {
                "type": "object",
                "required": ["fencing_token"],
                "properties": { "fencing_token": token },
            },
            "AppendAck": {
                "type": "object",
                "required": ["stream", "first_seq", "last_seq", "next_seq", "fencing_token", "timestamp_ms"],
                "properties": {
                    "stream": { "type": "string" },
                    "first_seq": seq, "last_seq": seq, "next_seq": seq,
                    "fencing_token": token,
                    "timestamp_ms": { "type": "integer" },
                },
            },
            "StreamState": {
                "type": "object",
                "required": ["stream", "first_seq", "next_seq", "highest_token", "last_timestamp_ms"],
                "properties": {
                    "stream": { "type": "string" },
                    "first_seq": seq, "next_seq": seq,
                    "highest_token": seq,
                    "last_timestamp_ms": { "type": "integer" },
                },
            },
            "StreamList": {
                "type": "object",
                "required": ["streams"],
                "properties": {
                    "streams": { "type": "array", "items": schema_ref("StreamState") },
                    "next_start_after": { "type": "string", "nullable": true },
                },
            },
            "Record": {
                "type": "object",
                "required": ["seq", "fencing_token", "timestamp_ms"],
                "properties": {
                    "seq": seq, "fencing_token": token,
                    "timestamp_ms": { "type": "integer" },
                    "body": { "type": "string", "description": "when the bytes are UTF-8" },
                    "body_base64": { "type": "string", "format": "byte", "description": "otherwise" },
                },
            },
            "ReadResult": {
                "type": "object",
                "required": ["records", "next_seq"],
                "properties": {
                    "records": { "type": "array", "items": schema_ref("Record") },
                    "next_seq": seq,
                },
            },
        },
    })
}

/// The OpenAPI 3 document for [`ROUTES`].
pub fn document() -> Value {
    let mut paths = Map::new();
    for route in ROUTES {
        let mut responses = Map::new();
        for (status, description, schema) in route.responses {
            let mut r = json!({ "description": description });
            if !schema.is_empty() {
                r["content"] = json!({ "application/json": { "schema": schema_ref(schema) } });
            }
            responses.insert(status.to_string(), r);
        }
        let mut op = json!({
            "operationId": route.operation_id,
            "summary": route.summary,
            "parameters": parameters(route),
            "responses": responses,
        });
        if let Some(body) = request_body(route) {
            op["requestBody"] = body;
        }
        let entry = paths
            .entry(route.path.to_string())
            .or_insert_with(|| json!({}));
        entry[route.method] = op;
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "fencelog",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A fenced append-only log: every write carries a fencing token; \
                            a token below the stream's highest accepted one is rejected with 409.",
        },
        "paths": paths,
        "components": components(),
    })
}

pub async fn serve() -> Json<Value> {
    Json(document())
}
