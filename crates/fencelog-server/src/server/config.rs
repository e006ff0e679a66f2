//! [`ServerConfig`], the connection-level settings, and their defaults.

use crate::server::tls::Tls;
use axum::http::HeaderValue;
use std::sync::Arc;
use std::time::Duration;

/// Connections served at once by default; the CLI derives its default
/// from the file-descriptor limit instead.
pub const CONNECTIONS_MAX_DEFAULT: usize = 10_000;
/// The most bytes hyper buffers per connection, in either direction; also
/// the largest request head (431 past it).
pub const HEADER_BYTES_MAX_DEFAULT: usize = 64 << 10;
/// The kernel send buffer of each connection (Linux doubles it for its
/// own bookkeeping). Fixed instead of autotuned: autotuning grows it to
/// megabytes for a client that does not read, and the server would encode
/// that much for every such client (1,000 idle tails: gigabytes of kernel
/// memory and the CPU to fill it). 128 KiB (256 KiB in the kernel) keeps a
/// 1 ms path at well over 200 MB/s.
pub const SEND_BUFFER_BYTES_DEFAULT: usize = 128 << 10;

/// The connection-level settings of a server (the request-level ones
/// are [`crate::state::HttpLimits`]).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// A client must send a request's complete headers within this time of
    /// the connection becoming ready for one, which includes idle time
    /// between keep-alive requests.
    pub header_read_timeout: Duration,
    /// Longest the server waits for in-flight requests after a shutdown
    /// signal; unfinished ones are then dropped (never acknowledged).
    pub drain_timeout: Duration,
    /// A connection whose socket takes no bytes for this long is closed:
    /// a client that stopped reading a response, or a live tail whose
    /// socket stays full.
    pub write_timeout: Duration,
    /// Connections served at once; more wait in the kernel's backlog, so
    /// accepting never competes with the writer for file descriptors.
    pub connections_max: usize,
    /// Request head limit and hyper's buffer per connection (at least 8192).
    pub header_bytes_max: usize,
    /// Serve HTTPS only (plain HTTP requests get a JSON 400 and a close).
    pub tls: Option<Arc<Tls>>,
    /// `SO_SNDBUF` of each connection.
    pub send_buffer_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            header_read_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(30),
            connections_max: CONNECTIONS_MAX_DEFAULT,
            header_bytes_max: HEADER_BYTES_MAX_DEFAULT,
            tls: None,
            send_buffer_bytes: SEND_BUFFER_BYTES_DEFAULT,
        }
    }
}

impl ServerConfig {
    /// What `Keep-Alive: timeout=N` advertises: a second under the real
    /// idle limit, so a client that honours it closes first and never sends
    /// a request into a connection the server is closing.
    pub(super) fn keep_alive_header(&self) -> HeaderValue {
        let secs = self.header_read_timeout.as_secs().saturating_sub(1).max(1);
        HeaderValue::from_str(&format!("timeout={secs}")).expect("ASCII")
    }
}
