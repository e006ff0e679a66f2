//! The HTTP API: producers append with fencing tokens, consumers read,
//! long-poll and tail over Server-Sent Events, operators probe health and
//! scrape metrics. The wire contract — bodies, error codes and their
//! statuses, SSE events, header names — is the `fencelog-api` crate's; this
//! crate serves it with axum. The engine knows nothing about JSON.
//!
//! Routes:
//! - `POST /v1/streams/{stream}/records` append ([`records`])
//! - `GET  /v1/streams/{stream}/records` read, long-poll, or live tail ([`records`], [`sse`])
//! - `POST /v1/streams/{stream}/fence` raise the highest token without writing ([`streams`])
//! - `GET  /v1/streams/{stream}` stream state ([`streams`])
//! - `POST /v1/streams/{stream}/trim`, `/seal`, `DELETE /v1/streams/{stream}`,
//!   `PUT /v1/streams/{stream}/config`: the stream's lifecycle ([`lifecycle`])
//! - `GET  /v1/streams/{stream}/session` the pipelined append session, a
//!   WebSocket ([`session`])
//! - `GET  /v1/streams` list streams in name order ([`streams`])
//! - `GET  /healthz`, `GET /metrics` ([`ops`])
//! - `GET  /console`, `GET /console/{asset}` the web console ([`console`])
//! - `GET  /v1/openapi.json` this list as an OpenAPI 3 document ([`openapi`])
//!
//! The list lives once, in [`openapi::ROUTES`], each entry carrying its
//! handler: the router is built from it and the OpenAPI document describes
//! it, so neither can drift.
//!
//! Modules depend one way: handlers ([`records`], [`sse`], [`streams`],
//! [`ops`]) use the decoders (`json_append` → `fast_json` →
//! `append_body`), [`params`], [`body`], [`error`] and [`state`]; nothing
//! below a handler reaches back up. [`app`] builds the router so tests can
//! drive it without a socket; [`server`] binds it with the
//! connection-level protections.

mod append_body;
pub mod append_route;
pub mod audit;
pub mod auth;
pub mod backend;
pub mod body;
pub mod budget;
mod chunked;
mod conn_io;
pub mod console;
pub mod error;
mod fast_json;
mod front;
pub mod front_head;
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz;
pub mod header_view;
pub mod http_metrics;
mod json_append;
pub mod lifecycle;
pub mod openapi;
pub mod ops;
pub mod params;
pub mod producers;
pub mod records;
mod rewind;
mod router;
pub mod server;
pub mod session;
mod shutdown;
pub mod sse;
pub mod start;
pub mod state;
pub mod streams;
mod strict_json;
pub mod tls;
mod writes;

pub use append_body::AppendBody;
pub use error::ApiError;
pub use router::app;
pub use server::Shutdown;
pub use server::{serve, serve_metrics, serve_router, Routes, ServerConfig};
pub use state::{AppState, HttpLimits};
pub use tls::Tls;
