//! Every error the API returns, and the one place engine errors become HTTP
//! statuses. The matches are exhaustive on purpose: a new engine error
//! variant must fail to compile here until someone decides its status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fencelog_engine::{ReadError, StorageFailure, WriteError};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Map, Value};

/// An error response: `{"error": code, "message": text, ...fields}`.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub fields: Map<String, Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            fields: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(key.to_string(), value.into());
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// The JSON body, as sent.
    pub fn body(&self) -> Value {
        let mut body = Map::new();
        body.insert("error".into(), json!(self.code));
        body.insert("message".into(), json!(self.message));
        for (k, v) in &self.fields {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }

    /// The answer for an engine that no longer accepts writes: 507 when an
    /// operator can fix it by freeing space, 503 otherwise.
    pub fn storage(failure: &StorageFailure, message: String) -> Self {
        if failure.is_no_space() {
            Self::new(
                StatusCode::INSUFFICIENT_STORAGE,
                "insufficient_storage",
                message,
            )
        } else {
            Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
        }
    }
}

/// The same JSON as [`ApiError::body`], keys in the same (sorted) order,
/// written straight from the error: a stale rejection is a hot path, and
/// building a second map just to serialize it cost a copy of every field.
impl Serialize for ApiError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let fixed = [("error", self.code), ("message", self.message.as_str())];
        let mut pending = fixed.iter().peekable();
        let mut map = s.serialize_map(Some(self.fields.len() + 2))?;
        for (key, value) in &self.fields {
            while let Some((name, text)) = pending.next_if(|(name, _)| *name <= key.as_str()) {
                // `body` lets a field of the same name replace the fixed one.
                if name != key {
                    map.serialize_entry(name, text)?;
                }
            }
            map.serialize_entry(key, value)?;
        }
        for (name, text) in pending {
            map.serialize_entry(name, text)?;
        }
        map.end()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(&self)).into_response()
    }
}

/// Maps a refused append or fence on `stream`. Every write path goes
/// through here, which is what makes every stale rejection logged exactly
/// once (tokens only, never payloads).
pub fn write_error(stream: &str, err: WriteError) -> ApiError {
    let message = err.to_string();
    match err {
        WriteError::InvalidStreamName(_) | WriteError::ZeroToken | WriteError::EmptyBatch => {
            ApiError::bad_request(message)
        }
        WriteError::TooLarge { limit, actual, .. } => ApiError::too_large(message)
            .with("limit", limit)
            .with("actual", actual),
        WriteError::StaleToken {
            presented,
            highest,
            next_seq,
        } => {
            tracing::info!(
                stream,
                presented_token = presented,
                highest_token = highest,
                "stale fencing token rejected"
            );
            ApiError::new(StatusCode::CONFLICT, "stale_fencing_token", message)
                .with("stream", stream)
                .with("presented_token", presented)
                .with("highest_token", highest)
                .with("next_seq", next_seq)
        }
        WriteError::SeqMismatch { expected, next_seq } => {
            ApiError::new(StatusCode::PRECONDITION_FAILED, "seq_mismatch", message)
                .with("stream", stream)
                .with("match_seq_num", expected)
                .with("next_seq", next_seq)
        }
        WriteError::StorageFailed(failure) => {
            // The client cannot know whether the torn write survives a
            // restart; saying so keeps it from assuming either way.
            ApiError::storage(&failure, message).with("outcome_unknown", true)
        }
        WriteError::Poisoned(failure) => ApiError::storage(&failure, message),
        WriteError::ShuttingDown => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
        }
    }
}

/// Maps a failed read of `stream`.
pub fn read_error(stream: &str, err: ReadError) -> ApiError {
    let message = err.to_string();
    match err {
        ReadError::InvalidStreamName(_) => ApiError::bad_request(message),
        ReadError::NotFound => {
            ApiError::new(StatusCode::NOT_FOUND, "stream_not_found", message).with("stream", stream)
        }
        ReadError::OutOfRange {
            start_seq,
            next_seq,
        } => ApiError::new(StatusCode::RANGE_NOT_SATISFIABLE, "out_of_range", message)
            .with("stream", stream)
            .with("start_seq", start_seq)
            .with("next_seq", next_seq),
        ReadError::Corrupt(c) => {
            tracing::error!(stream, file = %c.file, offset = c.offset, reason = %c.reason, "corrupt frame refused on read");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "corrupt", message)
        }
        ReadError::Io(_) => {
            tracing::error!(stream, error = %message, "read failed");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "io_error", message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_exactly_like_body() {
        let stale = write_error(
            "s",
            WriteError::StaleToken {
                presented: 4,
                highest: 5,
                next_seq: 9,
            },
        );
        let cases = [
            stale,
            ApiError::bad_request("plain"),
            ApiError::too_large("x").with("limit", 3).with("actual", 4),
            // Keys around and equal to the fixed ones.
            ApiError::bad_request("m")
                .with("a", 1)
                .with("error", "overridden")
                .with("f", 2)
                .with("message", "also")
                .with("z", 3),
        ];
        for e in cases {
            assert_eq!(
                serde_json::to_string(&e).unwrap(),
                serde_json::to_string(&e.body()).unwrap()
            );
        }
    }
}
