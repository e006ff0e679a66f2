//! The HTTP layer's integration tests against an in-process server: bad
//! input, the binary batch body, fencing over HTTP, reads, long-poll and
//! SSE, and the route table against the OpenAPI document.

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
