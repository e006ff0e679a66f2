//! The HTTP API: producers append with fencing tokens, consumers read,
//! long-poll and tail over Server-Sent Events, operators probe health and
//! scrape metrics. The wire contract — bodies, error codes and their
//! statuses, SSE events, header names — is the `fencelog-api` crate's; this
//! crate serves it with axum. The engine knows nothing about JSON.
//!
//! Routes:
//! - `POST /v1/streams/{stream}/records` append
//! - `GET  /v1/streams/{stream}/records` read, long-poll, or live tail
//! - `POST /v1/streams/{stream}/fence` raise the highest token without writing
//! - `GET  /v1/streams/{stream}` stream state
//! - `POST /v1/streams/{stream}/trim`, `/seal`, `DELETE /v1/streams/{stream}`,
//!   `PUT /v1/streams/{stream}/config`: the stream's lifecycle
//! - `GET  /v1/streams/{stream}/session` the pipelined append session, a
//!   WebSocket
//! - `GET  /v1/streams` list streams in name order
//! - `GET  /v1/streams/{stream}/producers/{id}`, `/fences`, `/cursors`,
//!   `POST /v1/batch`: producers, fence history, cursors, batches
//! - `GET  /healthz`, `GET /metrics`
//! - `GET  /console`, `GET /console/{asset}` the web console
//! - `GET  /v1/openapi.json` this list as an OpenAPI 3 document
//!
//! The list lives once, in [`routes::ROUTES`], each entry carrying its
//! handler: the router ([`app`]) is built from it and the OpenAPI document
//! describes it, so neither can drift.
//!
//! The modules, from the bottom up, each depending only on those below
//! it: the errors and their answers (`error.rs`, [`ApiError`]) and the
//! request decoders (`decode/`); who may do what ([`auth`]) and where
//! writes go ([`backend`]); what every handler shares ([`state`]); the
//! routes and their handlers ([`routes`], with [`app`], which builds the
//! router so tests can drive it without a socket); and the connection side
//! ([`server`]), which binds the router with the connection-level
//! protections and answers the append route in front of it.

#[macro_use]
mod mutation;

pub mod auth;
pub mod backend;
mod decode;
mod error;
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz;
pub mod routes;
pub mod server;
pub mod state;

pub use error::ApiError;
pub use routes::router::app;
