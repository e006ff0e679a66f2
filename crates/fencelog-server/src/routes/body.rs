//! Reading a request body without trusting the client: the encoding must
//! be plain (or plain chunked), the declared length is checked before a
//! byte is read, the actual length while streaming, the bytes come out of
//! the global upload budget before they are buffered, and the whole body
//! has a deadline. Also the JSON-object bodies of the lifecycle and
//! cursor routes, read that way.

use crate::decode::header_view::{visible_ascii, HeaderView};
use crate::error::ApiError;
use crate::state::budget::{overloaded, Lease, MemoryBudget, Pool};
use crate::state::{AppState, HttpLimits};
use axum::body::Body;
use axum::http::{header, HeaderMap};
use bytes::{Bytes, BytesMut};
use fencelog_api::{ErrorCode, Field};
use futures_util::StreamExt;
use serde_json::{Map, Value};
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
pub fn check_encoding<H: HeaderView + ?Sized>(headers: &H) -> Result<(), ApiError> {
    let codings = headers
        .values_of(&header::TRANSFER_ENCODING)
        .flat_map(|v| visible_ascii(v).unwrap_or("?").split(','))
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
    for v in headers.values_of(&header::CONTENT_ENCODING) {
        let v = visible_ascii(v).unwrap_or("?").trim();
        if !v.eq_ignore_ascii_case("identity") {
            return Err(unsupported(format!(
                "Content-Encoding {v:?} is not supported: send the body uncompressed"
            )));
        }
    }
    Ok(())
}

fn declared_length<H: HeaderView + ?Sized>(headers: &H) -> Result<Option<u64>, ApiError> {
    match headers.first(&header::CONTENT_LENGTH) {
        None => Ok(None),
        Some(v) => visible_ascii(v)
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Some)
            .ok_or_else(|| ApiError::bad_request("Content-Length is not a number")),
    }
}

/// A request body as it comes to [`read_capped`].
pub enum Incoming {
    /// Still to be read (from hyper).
    Stream(Body),
    /// Already whole in memory: the front's, a slice of its read buffer.
    Whole(Bytes),
}

impl From<Body> for Incoming {
    fn from(body: Body) -> Self {
        Incoming::Stream(body)
    }
}

pub async fn read_capped<H: HeaderView + ?Sized>(
    headers: &H,
    body: impl Into<Incoming>,
    limits: &HttpLimits,
    budget: &MemoryBudget,
) -> Result<Upload, ApiError> {
    check_encoding(headers)?;
    let limit = limits.body_bytes_max;
    match body.into() {
        // A whole body takes what it is from the budget. Its length was
        // read by its reader already (the front takes one `Content-Length`
        // of digits only, and that many bytes).
        Incoming::Whole(bytes) => {
            debug_assert!(
                declared_length(headers).is_ok_and(|d| d.is_none_or(|n| n == bytes.len() as u64)),
                "a whole body is as long as its head says"
            );
            if bytes.len() > limit {
                return Err(too_large(bytes.len() as u64, limit));
            }
            let lease = lease(budget, limits, bytes.len()).await?;
            Ok(Upload {
                bytes,
                _lease: lease,
            })
        }
        // A declared length is taken from the budget up front; a chunked
        // body, which may be anything up to the limit, takes the limit.
        Incoming::Stream(body) => {
            let declared = declared_length(headers)?
                .map(|len| {
                    usize::try_from(len)
                        .ok()
                        .filter(|&n| n <= limit)
                        .ok_or_else(|| too_large(len, limit))
                })
                .transpose()?;
            let deadline = Instant::now() + limits.body_read_timeout;
            let lease = lease(budget, limits, declared.unwrap_or(limit)).await?;
            let bytes = read_stream(body, declared, limits, deadline).await?;
            Ok(Upload {
                bytes,
                _lease: lease,
            })
        }
    }
}

/// The body as a JSON object whose keys are all in `known` (a typo is a
/// 400, not a silently ignored setting).
pub async fn json_object(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    known: &[&str],
) -> Result<Map<String, Value>, ApiError> {
    let upload = read_capped(headers, body, &state.limits, &state.budget).await?;
    let bytes = &upload.bytes;
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "unknown field {k:?}; known fields are {}",
            known.join(", ")
        )));
    }
    Ok(obj)
}

fn too_large(len: u64, limit: usize) -> ApiError {
    ApiError::too_large(format!(
        "request body is {len} bytes or more, the limit is {limit}"
    ))
    .with(Field::Limit, limit as u64)
}

/// The body's chunks, joined, by `deadline`; `declared` is its length
/// when the head gave one (already within the limit).
async fn read_stream(
    body: Body,
    declared: Option<usize>,
    limits: &HttpLimits,
    deadline: Instant,
) -> Result<Bytes, ApiError> {
    let limit = limits.body_bytes_max;
    let timeout = || {
        ApiError::new(
            ErrorCode::RequestTimeout,
            format!(
                "the request body did not arrive within {} ms",
                limits.body_read_timeout.as_millis()
            ),
        )
    };
    // A body that comes as one chunk (hyper's small ones do) is kept as
    // it came, not copied.
    let mut first: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    let mut stream = body.into_data_stream();
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| timeout())?;
        match next {
            None => return Ok(first.unwrap_or_else(|| buf.freeze())),
            Some(Ok(chunk)) => {
                let have = buf.len() + first.as_ref().map_or(0, Bytes::len);
                if have + chunk.len() > limit {
                    return Err(too_large((have + chunk.len()) as u64, limit));
                }
                match first.take() {
                    None if buf.is_empty() => first = Some(chunk),
                    earlier => {
                        if let Some(earlier) = earlier {
                            buf.reserve(declared.unwrap_or(0).max(have + chunk.len()));
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

/// `bytes` of the upload budget, waited for no longer than a body may
/// take to arrive.
async fn lease(
    budget: &MemoryBudget,
    limits: &HttpLimits,
    bytes: usize,
) -> Result<Lease, ApiError> {
    let wait = budget.wait.min(limits.body_read_timeout);
    budget
        .take(Pool::Uploads, bytes, wait)
        .await
        .ok_or_else(|| overloaded("request bodies"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderMap;
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

    #[tokio::test]
    async fn a_whole_body_is_kept_as_it_came_and_held_to_the_limit() {
        let mut limits = HttpLimits::for_config(&fencelog_engine::Config::default());
        limits.body_bytes_max = 4;
        let budget = MemoryBudget::new(1 << 20, 1 << 20, Duration::from_secs(1));
        let headers = HeaderMap::new();
        let whole = Bytes::from_static(b"four");
        let upload = read_capped(&headers, Incoming::Whole(whole.clone()), &limits, &budget)
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(upload.bytes.as_ptr(), whole.as_ptr());
        let over = Incoming::Whole(Bytes::from_static(b"fives"));
        let refused = read_capped(&headers, over, &limits, &budget).await;
        let message = refused.err().map(|e| e.body.message);
        assert_eq!(
            message.as_deref(),
            Some("request body is 5 bytes or more, the limit is 4")
        );
    }
}
