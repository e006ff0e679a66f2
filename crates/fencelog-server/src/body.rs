//! Reading a request body without trusting the client: the encoding must
//! be plain (or plain chunked), the declared length is checked before a
//! byte is read, the actual length while streaming, the bytes come out of
//! the global upload budget before they are buffered, and the whole body
//! has a deadline.

use crate::budget::{overloaded, Lease, MemoryBudget, Pool};
use crate::error::ApiError;
use crate::state::HttpLimits;
use axum::body::Body;
use axum::http::{header, HeaderMap};
use bytes::{Bytes, BytesMut};
use fencelog_api::{ErrorCode, Field};
use futures_util::StreamExt;
use tokio::time::Instant;

/// A body read whole, holding its share of the upload budget until the
/// request is done with it.
pub struct Upload {
    pub bytes: Bytes,
    _lease: Lease,
}

fn unsupported(message: String) -> ApiError {
    ApiError::new(ErrorCode::UnsupportedMediaType, message)
}

/// Only `Transfer-Encoding: chunked` (which hyper undoes) and no
/// `Content-Encoding` at all: a body is never taken as something else
/// than what it says it is (`gzip, chunked` would be gzip bytes read as
/// records).
pub fn check_encoding(headers: &HeaderMap) -> Result<(), ApiError> {
    let codings = headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(str::trim)
        .collect::<Vec<_>>();
    let plain =
        codings.is_empty() || (codings.len() == 1 && codings[0].eq_ignore_ascii_case("chunked"));
    if !plain {
        return Err(unsupported(format!(
            "Transfer-Encoding {:?} is not supported: send the body as is, or chunked",
            codings.join(", ")
        )));
    }
    for v in headers.get_all(header::CONTENT_ENCODING) {
        let v = v.to_str().unwrap_or("?").trim();
        if !v.eq_ignore_ascii_case("identity") {
            return Err(unsupported(format!(
                "Content-Encoding {v:?} is not supported: send the body uncompressed"
            )));
        }
    }
    Ok(())
}

fn declared_length(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    match headers.get(header::CONTENT_LENGTH) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Some)
            .ok_or_else(|| ApiError::bad_request("Content-Length is not a number")),
    }
}

pub async fn read_capped(
    headers: &HeaderMap,
    body: Body,
    limits: &HttpLimits,
    budget: &MemoryBudget,
) -> Result<Upload, ApiError> {
    check_encoding(headers)?;
    let limit = limits.body_bytes_max;
    let too_large = |len: u64| {
        ApiError::too_large(format!(
            "request body is {len} bytes or more, the limit is {limit}"
        ))
        .with(Field::Limit, limit as u64)
    };
    let declared = declared_length(headers)?;
    if let Some(len) = declared {
        if len > limit as u64 {
            return Err(too_large(len));
        }
    }
    let deadline = Instant::now() + limits.body_read_timeout;
    let timeout = || {
        ApiError::new(
            ErrorCode::RequestTimeout,
            format!(
                "the request body did not arrive within {} ms",
                limits.body_read_timeout.as_millis()
            ),
        )
    };
    // A declared length is taken from the budget up front; a chunked body,
    // which may be anything up to the limit, takes the limit.
    let reserve = declared.map_or(limit, |len| len as usize);
    let wait = budget.wait.min(limits.body_read_timeout);
    let lease = budget
        .take(Pool::Uploads, reserve, wait)
        .await
        .ok_or_else(|| overloaded("request bodies"))?;
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(0) as usize);
    let mut stream = body.into_data_stream();
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| timeout())?;
        match next {
            None => {
                return Ok(Upload {
                    bytes: buf.freeze(),
                    _lease: lease,
                })
            }
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
