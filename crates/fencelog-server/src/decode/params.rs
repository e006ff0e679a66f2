//! Parsing what clients send outside the body's records: the stream name in
//! the path, fencing tokens and sequence numbers in headers, and
//! query parameters, and the read parameters plain reads and live tails
//! share. Each malformed value is a 400 with a message naming it, rather
//! than the framework's generic rejection.

use crate::decode::header_view::{visible_ascii, HeaderView};
use crate::error::ApiError;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::HeaderName;
use fencelog_api::read::{
    param, ReadStart, READ_BYTES_CAP, READ_BYTES_DEFAULT, READ_COUNT_CAP, READ_COUNT_DEFAULT,
    WAIT_MS_CAP,
};
use fencelog_api::stream::RETENTION_UNLIMITED;
use fencelog_engine::{validate_stream_name, Retention};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// The `{stream}` path segment, validated.
pub fn stream_name(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(name) = path.map_err(|e| ApiError::bad_request(format!("bad path: {e}")))?;
    valid_stream_name(&name)?;
    Ok(name)
}

/// A decoded `{stream}` segment against the engine's naming rule.
pub fn valid_stream_name(name: &str) -> Result<(), ApiError> {
    validate_stream_name(name)
        .map_err(|e| ApiError::bad_request(format!("invalid stream name: {e}")))
}

const TOKEN_RANGE: &str = "an integer in 1..=18446744073709551615";

/// A fencing token from a JSON field. Parsed here rather than by a derive so
/// that 0, negatives, fractions, strings and overflow are all a 400 with the
/// same explanation.
pub fn token_from_json(value: Option<&Value>) -> Result<u64, ApiError> {
    match value {
        None | Some(Value::Null) => Err(ApiError::bad_request("fencing_token is required")),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(t) if t >= 1 => Ok(t),
            _ => Err(ApiError::bad_request(format!(
                "fencing_token must be {TOKEN_RANGE}, got {n}"
            ))),
        },
        Some(other) => Err(ApiError::bad_request(format!(
            "fencing_token must be {TOKEN_RANGE}, got {other}"
        ))),
    }
}

/// An optional sequence number from a JSON field.
pub fn seq_from_json(field: &str, value: Option<&Value>) -> Result<Option<u64>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
        Some(other) => Err(ApiError::bad_request(format!(
            "{field} must be a non-negative integer, got {other}"
        ))),
    }
}

/// A required sequence number from a JSON field.
pub fn required_seq(field: &str, value: Option<&Value>) -> Result<u64, ApiError> {
    seq_from_json(field, value)?
        .ok_or_else(|| ApiError::bad_request(format!("{field} is required")))
}

/// A retention setting of a config request: a positive number, the string
/// `"unlimited"`, or `null` / left out for the server's default.
pub fn retention_from_json(field: &str, value: Option<&Value>) -> Result<Retention, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(Retention::Default),
        Some(Value::String(s)) if s == RETENTION_UNLIMITED => Ok(Retention::Unlimited),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) if (1..u64::MAX).contains(&v) => Ok(Retention::Limit(v)),
            _ => Err(ApiError::bad_request(format!(
                "{field} must be a positive integer, \"{RETENTION_UNLIMITED}\" or null, got {n}"
            ))),
        },
        Some(other) => Err(ApiError::bad_request(format!(
            "{field} must be a positive integer, \"{RETENTION_UNLIMITED}\" or null, got {other}"
        ))),
    }
}

/// Digits only: `u64::from_str` would also take a leading `+`, which no
/// JSON client could send, and the two paths should agree.
fn parse_u64_strict(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The API's header names, parsed once: a lookup by `&str` parses and
/// hashes the name again on every request (the raw append path looks up
/// five of them).
pub mod names {
    use axum::http::HeaderName;
    use fencelog_api::header;

    pub static FENCING_TOKEN: HeaderName = HeaderName::from_static(header::FENCING_TOKEN);
    pub static MATCH_SEQ_NUM: HeaderName = HeaderName::from_static(header::MATCH_SEQ_NUM);
    pub static PRODUCER_ID: HeaderName = HeaderName::from_static(header::PRODUCER_ID);
    pub static PRODUCER_SEQ: HeaderName = HeaderName::from_static(header::PRODUCER_SEQ);
    pub static NOT_AFTER_MS: HeaderName = HeaderName::from_static(header::NOT_AFTER_MS);
    pub static LAST_EVENT_ID: HeaderName = HeaderName::from_static(header::LAST_EVENT_ID);
}

/// A header's one value, trimmed: `None` when absent, 400 when it appears
/// more than once or is not ASCII. Why at most once: two `Fencing-Token`
/// headers would mean one thing to a reader that takes the first and
/// another to one that takes the last.
pub fn header_str<'a, H: HeaderView + ?Sized>(
    headers: &'a H,
    name: &'a HeaderName,
) -> Result<Option<&'a str>, ApiError> {
    let mut all = headers.values_of(name);
    let Some(v) = all.next() else {
        return Ok(None);
    };
    if all.next().is_some() {
        return Err(ApiError::bad_request(format!(
            "header {name} appears more than once"
        )));
    }
    visible_ascii(v)
        .map(|s| Some(s.trim()))
        .ok_or_else(|| ApiError::bad_request(format!("header {name} is not ASCII")))
}

/// A JSON append carries its token and `match_seq_num` in the body; the
/// headers too would be a second reading of the same request.
pub fn refuse_raw_headers<H: HeaderView + ?Sized>(headers: &H) -> Result<(), ApiError> {
    for name in [
        &names::FENCING_TOKEN,
        &names::MATCH_SEQ_NUM,
        &names::PRODUCER_ID,
        &names::PRODUCER_SEQ,
        &names::NOT_AFTER_MS,
    ] {
        if headers.contains(name) {
            return Err(ApiError::bad_request(format!(
                "header {name} is for raw and binary-batch appends; a JSON append carries its fields in the body"
            )));
        }
    }
    Ok(())
}

/// The `Fencing-Token` header of a raw append.
pub fn token_from_header<H: HeaderView + ?Sized>(headers: &H) -> Result<u64, ApiError> {
    let raw = header_str(headers, &names::FENCING_TOKEN)?
        .ok_or_else(|| ApiError::bad_request("header Fencing-Token is required"))?;
    match parse_u64_strict(raw) {
        Some(t) if t >= 1 => Ok(t),
        _ => Err(ApiError::bad_request(format!(
            "header Fencing-Token must be {TOKEN_RANGE}, got {raw:?}"
        ))),
    }
}

/// An optional sequence-number header (`Match-Seq-Num`, `Last-Event-ID`).
pub fn seq_from_header<H: HeaderView + ?Sized>(
    headers: &H,
    name: &HeaderName,
) -> Result<Option<u64>, ApiError> {
    match header_str(headers, name)? {
        None => Ok(None),
        Some(raw) => parse_u64_strict(raw).map(Some).ok_or_else(|| {
            ApiError::bad_request(format!(
                "header {name} must be a non-negative integer, got {raw:?}"
            ))
        }),
    }
}

/// Query parameters, checked one by one. Unknown parameters are ignored so
/// clients can add cache-busters.
pub struct QueryParams(HashMap<String, String>);

impl QueryParams {
    pub fn from_extractor(
        q: Result<Query<HashMap<String, String>>, QueryRejection>,
    ) -> Result<Self, ApiError> {
        q.map(|Query(m)| QueryParams(m))
            .map_err(|e| ApiError::bad_request(format!("bad query string: {e}")))
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn u64(&self, key: &str) -> Result<Option<u64>, ApiError> {
        match self.str(key) {
            None => Ok(None),
            Some(raw) => parse_u64_strict(raw).map(Some).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "query parameter {key} must be a non-negative integer, got {raw:?}"
                ))
            }),
        }
    }

    /// A positive count with a default, clamped to `cap`: asking for more
    /// than the server gives is not an error, asking for nothing is. A
    /// count past what a usize holds (on a 32-bit target) is as many as
    /// there are.
    pub fn positive_capped(&self, key: &str, default: u64, cap: u64) -> Result<usize, ApiError> {
        let n = match self.u64(key)? {
            None => default,
            Some(0) => {
                return Err(ApiError::bad_request(format!(
                    "query parameter {key} must be at least 1"
                )))
            }
            Some(n) => n.min(cap),
        };
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    pub fn bool(&self, key: &str) -> Result<bool, ApiError> {
        match self.str(key) {
            None | Some("false") => Ok(false),
            Some("true") | Some("") => Ok(true),
            Some(raw) => Err(ApiError::bad_request(format!(
                "query parameter {key} must be true or false, got {raw:?}"
            ))),
        }
    }
}

/// Read parameters shared by plain reads and live tails.
pub struct ReadParams {
    /// `start_seq`, `tail_offset` or `start_timestamp_ms`; at most one.
    pub start: ReadStart,
    /// Start at the stream's `first_seq` when the start is below it
    /// (trimmed), instead of 416.
    pub clamp: bool,
    pub count: usize,
    pub bytes: usize,
    pub wait: Duration,
    pub follow: bool,
    pub until_timestamp_ms: Option<u64>,
    pub wait_for_stream: bool,
}

impl ReadParams {
    pub fn parse(q: &QueryParams) -> Result<Self, ApiError> {
        let starts = [
            q.u64(param::START_SEQ)?.map(ReadStart::Seq),
            q.u64(param::TAIL_OFFSET)?.map(ReadStart::TailOffset),
            q.u64(param::START_TIMESTAMP_MS)?.map(ReadStart::Timestamp),
        ];
        let mut given = starts.into_iter().flatten();
        let start = given.next().unwrap_or_default();
        if given.next().is_some() {
            return Err(ApiError::bad_request(format!(
                "give at most one of {}, {} and {}",
                param::START_SEQ,
                param::TAIL_OFFSET,
                param::START_TIMESTAMP_MS
            )));
        }
        Ok(ReadParams {
            start,
            clamp: q.bool(param::CLAMP)?,
            count: q.positive_capped(param::COUNT, READ_COUNT_DEFAULT, READ_COUNT_CAP)?,
            bytes: q.positive_capped(param::BYTES, READ_BYTES_DEFAULT, READ_BYTES_CAP)?,
            wait: Duration::from_millis(q.u64(param::WAIT_MS)?.unwrap_or(0).min(WAIT_MS_CAP)),
            follow: q.bool(param::FOLLOW)?,
            until_timestamp_ms: q.u64(param::UNTIL_TIMESTAMP_MS)?,
            wait_for_stream: q.bool(param::WAIT_FOR_STREAM)?,
        })
    }
}
