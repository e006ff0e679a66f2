//! The API's routes: what each request means and how it is answered.
//! The route table (`table.rs`, each entry a `route.rs` [`Route`]) is the
//! one list of them: the router (`router.rs`) is built from it, each route
//! behind its access check, and the OpenAPI document (`openapi.rs`) is
//! rendered from it. The handlers: `records.rs` appends and reads (with
//! `sse.rs` for live tails, `start.rs` for where a read starts and
//! `chunked.rs` for record responses in budgeted pieces), `session.rs`
//! the pipelined append session, `streams.rs` state, listing and fences,
//! `lifecycle.rs` trim, seal, delete and config, `producers.rs` producer
//! lookups, fence history, cursors and batches, `ops.rs` health, metrics
//! and the fallbacks, `console.rs` the web console. Every write goes
//! through `writes.rs`, every body is read by `body.rs`, and the append
//! route is also answered in front of the router by `append_route.rs`,
//! with the same steps as plain calls.

pub(crate) mod append_route;
pub(crate) mod body;
mod chunked;
mod console;
mod lifecycle;
mod openapi;
pub(crate) mod ops;
mod producers;
mod records;
mod route;
pub(crate) mod router;
mod session;
mod sse;
mod start;
mod streams;
mod table;
mod writes;

pub use console::{Asset, ASSETS, CONTENT_SECURITY_POLICY};
pub use route::{Answer, Param, RequestBody, Route, Schema};
pub use table::{openapi_document, REDIRECTED, ROUTES};
