//! The connection side: from an accepted socket to a route's answer.
//! `serve.rs` accepts under the connection cap and drains on shutdown
//! ([`serve()`], [`serve_with`], and [`serve_metrics`] for a private
//! metrics address); `conn.rs` serves one connection: TLS (`tls.rs`), then
//! the HTTP/1.1 front (`front.rs`), which answers plainly framed requests
//! itself from one buffer by the pure rule of `front_head.rs`, and hands
//! the connection to hyper for good, unanswered bytes first
//! (`rewind.rs`), at the first request that is anything else; the socket
//! both see has a write deadline and JSON bodies on hyper's own refusals
//! (`conn_io.rs`). [`ServerConfig`] holds the connection-level settings
//! (`config.rs`). What a request means is the routes'; this side only
//! frames and times it.

mod config;
mod conn;
mod conn_io;
mod front;
pub(crate) mod front_head;
mod rewind;
mod serve;
mod tls;

pub use crate::state::shutdown::{ConnHold, Shutdown};
pub use config::ServerConfig;
pub use serve::{serve, serve_metrics, serve_with};
pub use tls::Tls;

#[cfg(test)]
mod append_route_tests;
