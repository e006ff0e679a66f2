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
    // A body that comes as one chunk (the front's always does, and
    // hyper's small ones do) is kept as it came, not copied.
    let mut first: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    let mut stream = body.into_data_stream();
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| timeout())?;
        match next {
            None => {
                return Ok(Upload {
                    bytes: first.unwrap_or_else(|| buf.freeze()),
                    _lease: lease,
                })
            }
            Some(Ok(chunk)) => {
                let have = buf.len() + first.as_ref().map_or(0, Bytes::len);
                if have + chunk.len() > limit {
                    return Err(too_large((have + chunk.len()) as u64));
                }
                match first.take() {
                    None if buf.is_empty() => first = Some(chunk),
                    earlier => {
                        if let Some(earlier) = earlier {
                            buf.reserve(declared.map_or(0, |n| n as usize).max(have + chunk.len()));
                            buf.extend_from_slice(&earlier);
                        }
                        buf.extend_from_slice(&chunk);
                    }
                }
            }
            Some(Err(e)) => {
                return Err(ApiError::bad_request(format!(
                    "reading the request body failed: {e}"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn read(body: Body) -> Bytes {
        let limits = HttpLimits::for_config(&fencelog_engine::Config::default());
        let budget = MemoryBudget::new(1 << 20, 1 << 20, Duration::from_secs(1));
        let upload = read_capped(&HeaderMap::new(), body, &limits, &budget).await;
        upload.unwrap_or_else(|e| panic!("{e:?}")).bytes
    }

    #[tokio::test]
    async fn one_chunk_is_kept_as_it_came_and_several_are_joined_in_order() {
        let whole = Bytes::from_static(b"one chunk");
        let read_whole = read(Body::from(whole.clone())).await;
        assert_eq!(
            (read_whole.as_ptr(), read_whole.len()),
            (whole.as_ptr(), whole.len())
        );
        for pieces in [
            vec!["", "ab", "", "cd", "e"],
            vec!["", "", "x"],
            vec!["ab", "cd"],
            vec![],
        ] {
            let chunks = pieces
                .clone()
                .into_iter()
                .map(|p| Ok::<_, std::io::Error>(Bytes::from(p)));
            let body = Body::from_stream(futures_util::stream::iter(chunks));
            assert_eq!(read(body).await, pieces.concat().as_bytes(), "{pieces:?}");
        }
    }
}
