//! The OpenAPI 3 document, rendered from a route table's entries
//! ([`crate::routes::table::ROUTES`], served at `GET /v1/openapi.json`):
//! each route's parameters, body, answers and the scope it checks, and
//! the schemas they refer to.

use crate::auth::Access;
use crate::routes::route::{Answer, Param, RequestBody, Route, Schema};
use fencelog_api::ErrorCode;
use serde_json::{json, Map, Value};

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn param(p: &Param, location: &str) -> Value {
    let schema = match p.schema {
        Schema::String => json!({ "type": "string" }),
        Schema::Boolean => json!({ "type": "boolean" }),
        Schema::Integer => json!({ "type": "integer" }),
        Schema::IntegerFrom(min) => json!({ "type": "integer", "minimum": min }),
    };
    json!({
        "name": p.name, "in": location, "required": false,
        "description": p.description, "schema": schema,
    })
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
    if route.path.contains("{asset}") {
        out.push(json!({
            "name": "asset", "in": "path", "required": true,
            "description": "A file name of the console, e.g. app.js",
            "schema": { "type": "string" },
        }));
    }
    for (name, description) in [
        (
            "producer_id",
            "An idempotent producer's id: 1-64 of [A-Za-z0-9._:-]",
        ),
        ("name", "A cursor's name: 1-64 of [A-Za-z0-9._:-]"),
    ] {
        if route.path.contains(&format!("{{{name}}}")) {
            out.push(json!({
                "name": name, "in": "path", "required": true,
                "description": description, "schema": { "type": "string" },
            }));
        }
    }
    out.extend(route.query.iter().map(|p| param(p, "query")));
    out.extend(route.headers.iter().map(|p| param(p, "header")));
    out
}

fn append_body() -> Value {
    json!({
        "required": true,
        "content": {
            fencelog_api::header::JSON: { "schema": schema_ref("AppendRequest") },
            fencelog_api::header::BATCH: {
                "schema": {
                    "type": "string", "format": "binary",
                    "description": "one or more records, each a u32 little-endian byte \
                                    length followed by that many bytes; nothing after \
                                    the last record",
                }
            },
            fencelog_api::batch::CONTENT_TYPE_V2: {
                "schema": {
                    "type": "string", "format": "binary",
                    "description": "records with headers, each: u16 header_count, then per \
                                    header u16 name_len, name, u32 value_len, value; then \
                                    u32 body_len, body (all little-endian); nothing after \
                                    the last record. At most 64 headers and 8 KiB of \
                                    names and values per record; names 1-255 bytes",
                }
            },
            fencelog_api::header::OCTET_STREAM: {
                "schema": { "type": "string", "format": "binary" }
            },
        },
    })
}

fn request_body(body: RequestBody) -> Value {
    match body {
        RequestBody::Append => append_body(),
        RequestBody::Json(schema, required) => json_body(schema, required),
    }
}

fn json_body(schema: &str, required: bool) -> Value {
    json!({
        "required": required,
        "content": { fencelog_api::header::JSON: { "schema": schema_ref(schema) } },
    })
}

fn answer(a: &Answer) -> (u16, Value) {
    let (status, description, schema) = match *a {
        Answer::Ok(status, description, schema) => (status, description.to_string(), schema),
        Answer::Error(code, "") => (code.status(), code.to_string(), "Error"),
        Answer::Error(code, means) => (code.status(), format!("{code}: {means}"), "Error"),
    };
    let mut r = json!({ "description": description });
    if !schema.is_empty() {
        r["content"] = json!({ fencelog_api::header::JSON: { "schema": schema_ref(schema) } });
    }
    if schema == "ReadResult" {
        binary_page(&mut r);
    }
    (status, r)
}

/// The read's second form: the binary read format and its headers
/// (`fencelog_api::read_batch`, where the layout is defined).
fn binary_page(r: &mut Value) {
    use fencelog_api::read_batch;
    r["content"][read_batch::CONTENT_TYPE] = json!({
        "schema": {
            "type": "string",
            "format": "binary",
            "description": "the records one after another, integers little-endian: seq u64, fencing_token u64, timestamp_ms u64, header_count u16, per header (name_len u16, name, value_len u32, value), body_len u32, body. An empty page is an empty body",
        }
    });
    let header =
        |description: &str| json!({ "description": description, "schema": { "type": "string" } });
    r["headers"] = json!({
        "Next-Start-Seq": header("binary pages: where the next page starts (the JSON page's next_start_seq)"),
        "Next-Seq": header("binary pages: the stream's tail when the read ran (next_seq)"),
        "Stream-Sealed": header("binary pages: true when the stream is sealed (absent otherwise)"),
    });
}

#[allow(
    clippy::too_many_lines,
    reason = "one literal: the document's shared schemas, read as the document reads"
)]
fn components() -> Value {
    let token = json!({ "type": "integer", "format": "uint64", "minimum": 1 });
    let seq = json!({ "type": "integer", "format": "uint64", "minimum": 0 });
    let retention = json!({
        "description": "a positive number, \"unlimited\", or null (or left out) for the server's default",
        "oneOf": [
            { "type": "integer", "minimum": 1 },
            { "type": "string", "enum": ["unlimited"] },
        ],
        "nullable": true,
    });
    json!({
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "an access token's secret; each operation's x-fencelog-scope names the scope it needs",
            },
        },
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
                    "first_seq": seq,
                    "start_seq": seq,
                    "sealed": { "type": "boolean" },
                    "match_seq_num": seq,
                    "limit": { "type": "integer" },
                    "actual": { "type": "integer" },
                    "outcome_unknown": { "type": "boolean" },
                    "producer_id": { "type": "string" },
                    "last_producer_seq": seq,
                    "expected_producer_seq": seq,
                    "producer_token_floor": seq,
                    "writer_ms": { "type": "integer" },
                    "cursor": { "type": "string" },
                    "seq": seq,
                    "ops": { "type": "array", "items": { "type": "object" }, "description": "a refused batch: every op's outcome" },
                    "file": { "type": "string", "description": "corrupt: the segment file" },
                    "offset": { "type": "integer", "description": "corrupt: the frame's offset in it" },
                },
            },
            "ProducerInfo": {
                "type": "object",
                "required": ["producer_id", "producer_seq", "first_seq", "last_seq", "fencing_token", "timestamp_ms"],
                "properties": {
                    "producer_id": { "type": "string" }, "producer_seq": seq,
                    "first_seq": seq, "last_seq": seq, "fencing_token": token,
                    "timestamp_ms": { "type": "integer" },
                },
            },
            "FenceList": {
                "type": "object",
                "required": ["stream", "fences"],
                "properties": {
                    "stream": { "type": "string" },
                    "fences": { "type": "array", "items": {
                        "type": "object",
                        "required": ["fencing_token", "first_seq", "timestamp_ms", "by"],
                        "properties": {
                            "fencing_token": token, "first_seq": seq,
                            "timestamp_ms": { "type": "integer" },
                            "by": { "type": "string", "enum": ["append", "fence", "trim", "seal", "delete", "config"] },
                        },
                    } },
                },
            },
            "CursorRequest": {
                "type": "object",
                "required": ["fencing_token", "seq"],
                "properties": { "fencing_token": token, "seq": seq },
            },
            "Cursor": {
                "type": "object",
                "required": ["stream", "name", "fencing_token", "seq", "timestamp_ms"],
                "properties": {
                    "stream": { "type": "string" }, "name": { "type": "string" },
                    "fencing_token": token, "seq": seq, "timestamp_ms": { "type": "integer" },
                },
            },
            "CursorList": {
                "type": "object",
                "required": ["stream", "cursors"],
                "properties": {
                    "stream": { "type": "string" },
                    "cursors": { "type": "array", "items": schema_ref("Cursor") },
                },
            },
            "BatchRequest": {
                "type": "object",
                "required": ["ops"],
                "properties": {
                    "not_after_ms": seq,
                    "ops": { "type": "array", "minItems": 1, "maxItems": 64, "items": {
                        "type": "object",
                        "required": ["stream", "fencing_token"],
                        "properties": {
                            "stream": { "type": "string" }, "fencing_token": token,
                            "records": { "type": "array", "items": { "type": "object" } },
                            "match_seq_num": seq,
                            "fence": { "type": "boolean" },
                        },
                    } },
                },
            },
            "BatchResult": {
                "type": "object",
                "required": ["ops"],
                "properties": { "ops": { "type": "array", "items": { "type": "object" } } },
            },
            "Headers": {
                "type": "array",
                "description": "a record's headers in order, as [name, value] pairs; names \
                                may repeat. `headers` when every name and value is UTF-8, \
                                `headers_base64` (both parts base64) otherwise; absent when \
                                the record has none. Stored with the record and returned by \
                                reads and live tails exactly as appended. At most 64 per \
                                record and 8 KiB of names and values (413 too_large over \
                                either), names 1-255 bytes (400 bad_request); header bytes \
                                count against the batch byte limit and a read's bytes",
                "items": {
                    "type": "array", "minItems": 2, "maxItems": 2,
                    "items": { "type": "string" },
                },
                "maxItems": fencelog_engine::HEADERS_PER_RECORD_MAX,
            },
            "AppendRequest": {
                "type": "object",
                "required": ["fencing_token", "records"],
                "properties": {
                    "fencing_token": token,
                    "match_seq_num": seq,
                    "not_after_ms": seq,
                    "producer_id": { "type": "string" },
                    "producer_seq": seq,
                    "records": {
                        "type": "array", "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "body": { "type": "string" },
                                "body_base64": { "type": "string", "format": "byte" },
                                "headers": schema_ref("Headers"),
                                "headers_base64": schema_ref("Headers"),
                            },
                        },
                    },
                },
            },
            "FenceRequest": {
                "type": "object",
                "required": ["fencing_token"],
                "properties": { "fencing_token": token, "not_after_ms": seq },
            },
            "AppendAck": {
                "type": "object",
                "required": ["stream", "first_seq", "last_seq", "next_seq", "fencing_token", "timestamp_ms"],
                "properties": {
                    "stream": { "type": "string" },
                    "first_seq": seq, "last_seq": seq,
                    "next_seq": {
                        "type": "integer", "format": "uint64", "minimum": 0,
                        "description": "the stream's tail after this append",
                    },
                    "fencing_token": token,
                    "timestamp_ms": { "type": "integer" },
                    "duplicate": { "type": "boolean", "description": "a producer's retry: the original ack, nothing written" },
                },
            },
            "StreamState": {
                "type": "object",
                "required": ["stream", "first_seq", "next_seq", "highest_token", "last_timestamp_ms",
                             "sealed", "retention_age_s", "retention_bytes", "retention_respect_cursors", "bytes"],
                "properties": {
                    "stream": { "type": "string" },
                    "first_seq": seq,
                    "next_seq": {
                        "type": "integer", "format": "uint64", "minimum": 0,
                        "description": "the stream's tail: the seq the next record gets",
                    },
                    "highest_token": seq,
                    "last_timestamp_ms": { "type": "integer" },
                    "sealed": { "type": "boolean" },
                    "deleted": { "type": "boolean", "description": "only in the answer to a delete" },
                    "retention_age_s": { "type": "integer", "nullable": true, "description": "in force; null is unlimited" },
                    "retention_bytes": { "type": "integer", "nullable": true, "description": "in force; null is unlimited" },
                    "retention_respect_cursors": { "type": "boolean" },
                    "bytes": { "type": "integer", "description": "bytes on disk of the readable records" },
                },
            },
            "TrimRequest": {
                "type": "object",
                "required": ["fencing_token", "trim_seq"],
                "properties": { "fencing_token": token, "trim_seq": seq, "not_after_ms": seq },
            },
            "ConfigRequest": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "fencing_token": token,
                    "retention_age_s": retention.clone(),
                    "retention_bytes": retention,
                    "retention_respect_cursors": { "type": "boolean" },
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
                    "headers": schema_ref("Headers"),
                    "headers_base64": schema_ref("Headers"),
                    "body": { "type": "string", "description": "when the bytes are UTF-8" },
                    "body_base64": { "type": "string", "format": "byte", "description": "otherwise" },
                },
            },
            "ReadResult": {
                "type": "object",
                "required": ["records", "next_start_seq", "next_seq"],
                "properties": {
                    "records": { "type": "array", "items": schema_ref("Record") },
                    "next_start_seq": {
                        "type": "integer", "format": "uint64", "minimum": 0,
                        "description": "the continuation: start the next page here (the seq \
                                        after the last record returned, or the start when \
                                        none was)",
                    },
                    "next_seq": {
                        "type": "integer", "format": "uint64", "minimum": 0,
                        "description": "the stream's tail when the read ran (the seq the next \
                                        appended record gets); not where the next page starts",
                    },
                    "sealed": { "type": "boolean", "description": "present when the stream is sealed" },
                },
            },
        },
    })
}

/// The OpenAPI 3 document for `routes`.
pub fn document(routes: &[Route]) -> Value {
    let mut paths = Map::new();
    for route in routes {
        let responses: Map<String, Value> = route
            .responses
            .iter()
            .map(|a| {
                let (status, r) = answer(a);
                (status.to_string(), r)
            })
            .collect();
        let mut op = json!({
            "operationId": route.operation_id,
            "summary": route.summary,
            "parameters": parameters(route),
            "responses": responses,
        });
        if let Some(body) = route.request_body {
            op["requestBody"] = request_body(body);
        }
        match route.access {
            Access::Open => op["security"] = json!([]),
            Access::Scope(scope) => {
                op["security"] = json!([{ "bearer": [] }]);
                op["x-fencelog-scope"] = json!(scope.as_str());
                for code in [ErrorCode::Unauthenticated, ErrorCode::Forbidden] {
                    let (status, r) = answer(&Answer::Error(code, ""));
                    op["responses"][status.to_string()] = r;
                }
            }
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
