//! The HTTP layer's integration tests against an in-process server: bad
//! input, the binary batch body, fencing over HTTP, reads, long-poll and
//! SSE, and the route table against the OpenAPI document.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on purpose: an unwrap that panics is the failure report"
)]
#![allow(
    clippy::too_many_lines,
    reason = "a test scenario reads top to bottom: its steps and their assertions in order"
)]
#![allow(
    clippy::cast_possible_truncation,
    reason = "the tests' counts, sizes, indices and clock readings fit their types by far; a truncated one would fail an assertion"
)]

mod bad_input;
mod binary_batch;
mod binary_reads;
mod client_producer;
mod console_assets;
mod fencing;
mod front;
mod fuzz_corpus;
mod headers;
mod http_metrics;
mod lifecycle;
mod openapi_routes;
mod producers;
mod read_positions;
mod reads;
mod session;
mod upgrade_v1;
