//! Reading a request body without trusting the client: the declared length
//! is checked before a byte is read, the actual length while streaming, and
//! the whole body has a deadline.

use crate::error::ApiError;
use crate::state::HttpLimits;
use axum::body::Body;
use axum::http::{header, HeaderMap};
use bytes::{Bytes, BytesMut};
use fencelog_api::{ErrorCode, Field};
use futures_util::StreamExt;

pub async fn read_capped(
    headers: &HeaderMap,
    body: Body,
    limits: &HttpLimits,
) -> Result<Bytes, ApiError> {
    let limit = limits.body_bytes_max;
    let too_large = |len: u64| {
        ApiError::too_large(format!(
            "request body is {len} bytes or more, the limit is {limit}"
        ))
        .with(Field::Limit, limit as u64)
    };
    let declared = match headers.get(header::CONTENT_LENGTH) {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| ApiError::bad_request("Content-Length is not a number"))?,
        ),
    };
    if let Some(len) = declared {
        if len > limit as u64 {
            return Err(too_large(len));
        }
    }
    // Preallocate only what was declared and allowed; chunked bodies grow.
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(0) as usize);
    let mut stream = body.into_data_stream();
    let deadline = tokio::time::Instant::now() + limits.body_read_timeout;
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| {
                ApiError::new(
                    ErrorCode::RequestTimeout,
                    format!(
                        "the request body did not arrive within {} ms",
                        limits.body_read_timeout.as_millis()
                    ),
                )
            })?;
        match next {
            None => return Ok(buf.freeze()),
            Some(Ok(chunk)) => {
                if buf.len() + chunk.len() > limit {
                    return Err(too_large((buf.len() + chunk.len()) as u64));
                }
                buf.extend_from_slice(&chunk);
            }
            Some(Err(e)) => {
                return Err(ApiError::bad_request(format!(
                    "reading the request body failed: {e}"
                )))
            }
        }
    }
}
