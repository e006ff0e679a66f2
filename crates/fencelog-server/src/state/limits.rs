//! [`HttpLimits`], the request-level limits of the HTTP layer, their
//! defaults, and the check of a request's header bytes against them.

use crate::error::ApiError;
use fencelog_api::ErrorCode;
use fencelog_engine::Config;
use std::time::Duration;

/// Request-level limits of the HTTP layer. Connection-level ones (header
/// read timeout, drain time) are in [`crate::server::ServerConfig`].
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Largest request body accepted; checked against `Content-Length`
    /// before reading and enforced while streaming, so an oversized body is
    /// never buffered whole.
    pub body_bytes_max: usize,
    /// A request body must arrive completely within this time of the
    /// handler starting to read it, so a client trickling bytes cannot hold
    /// a connection and a buffer indefinitely.
    pub body_read_timeout: Duration,
    /// How long a live tail may stay silent before it sends `event: ping`.
    pub ping_interval: Duration,
    /// How long a response chunk may wait for the memory budget once the
    /// response has started (the connection is dropped past it); the
    /// server's write timeout.
    pub write_timeout: Duration,
    /// Most bytes of header names and values in one request (431 past it).
    pub header_bytes_max: usize,
    /// Appends one append session may have read but not yet answered; at
    /// the bound the session stops reading until answers go out.
    pub session_appends_max: usize,
    /// Bytes of append messages one session may have read but not yet
    /// answered (the same rule; one message may take it past the bound).
    pub session_bytes_max: usize,
}

/// Header bytes one request may carry by default (32 KiB).
pub const HEADER_BYTES_MAX_DEFAULT: usize = 32 << 10;

/// Unanswered appends per session by default: at 150k appends/s this is
/// 27 ms of appends, far more than one group commit takes, and a quarter
/// of the writer's default queue, so one session alone never fills it.
pub const SESSION_APPENDS_MAX_DEFAULT: usize = 4096;
/// Unanswered append bytes per session by default (2 MiB).
pub const SESSION_BYTES_MAX_DEFAULT: usize = 2 << 20;

/// Room for JSON framing around the batch: base64 inflates by 4/3 and each
/// record object adds a few dozen bytes, so twice the batch plus slack lets
/// every batch the engine would accept through, and nothing much larger.
const BODY_SLACK_BYTES: usize = 64 << 10;

impl HttpLimits {
    /// Limits that fit the engine's batch limits.
    pub fn for_config(config: &Config) -> Self {
        HttpLimits {
            body_bytes_max: config.batch_bytes_max.saturating_mul(2) + BODY_SLACK_BYTES,
            body_read_timeout: Duration::from_secs(30),
            ping_interval: Duration::from_secs(15),
            write_timeout: Duration::from_secs(30),
            header_bytes_max: HEADER_BYTES_MAX_DEFAULT,
            session_appends_max: SESSION_APPENDS_MAX_DEFAULT,
            session_bytes_max: SESSION_BYTES_MAX_DEFAULT,
        }
    }

    /// The 431 for a request whose header names and values take `bytes`,
    /// when that is over [`HttpLimits::header_bytes_max`] (hyper's own
    /// buffer limit is a backstop further out, see `conn_io`). The
    /// router's one middleware and the append route in front of it check
    /// it first, so the refusal is counted like any other answer.
    // Inline: every request the append route answers in front of the
    // router makes this call, and its usual answer should cost a compare.
    #[inline]
    pub(crate) fn headers_over_limit(&self, bytes: usize) -> Option<ApiError> {
        let limit = self.header_bytes_max;
        (bytes > limit).then(|| {
            ApiError::new(
                ErrorCode::HeadersTooLarge,
                format!(
                    "the request headers are {bytes} bytes, over the server's limit of {limit}"
                ),
            )
        })
    }
}
