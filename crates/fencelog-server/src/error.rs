//! The one place engine errors become answers. The matches are exhaustive
//! on purpose: a new engine error variant must fail to compile here until
//! someone decides its [`ErrorCode`], and the code fixes the HTTP status.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use fencelog_api::{fixed_json, ErrorBody, ErrorCode, Field};
use fencelog_engine::{ReadError, StorageFailure, WriteError};
use serde_json::Value;

/// Seconds a client is told to wait in `Retry-After` when overloaded
/// (the writer's queue is full, or the memory budget has no room).
pub const RETRY_AFTER_S: u64 = 1;

/// An error answer: its [`ErrorBody`], sent with the code's status (and
/// a cluster node's leader hint, when it has one for the request).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub body: ErrorBody,
    /// The `fencelog-leader` header (`id=addr`) sent with the answer.
    leader: Option<String>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            body: ErrorBody::new(code, message),
            leader: None,
        }
    }

    /// The same answer with the `fencelog-leader` hint `leader` (`id=addr`).
    pub fn with_leader(mut self, leader: Option<String>) -> Self {
        self.leader = leader;
        self
    }

    pub fn with(mut self, field: Field, value: impl Into<Value>) -> Self {
        self.body = self.body.with(field, value);
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::TooLarge, message)
    }

    /// The same answer naming `stream`, unless it names one already: every
    /// error of a request that names a valid stream carries it.
    pub fn on_stream(mut self, stream: &str) -> Self {
        if self.body.get(Field::Stream).is_none() && !stream.is_empty() {
            self.body = self.body.with(Field::Stream, stream);
        }
        self
    }

    /// The body as JSON, the bytes [`IntoResponse`] sends.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&self.body).expect("error bodies serialize")
    }

    pub fn code(&self) -> ErrorCode {
        self.body.code
    }

    pub fn status(&self) -> StatusCode {
        status(self.body.code)
    }

    /// The answer for an engine that no longer accepts writes: 507 when an
    /// operator can fix it by freeing space, 503 otherwise.
    pub fn storage(failure: &StorageFailure, message: String) -> Self {
        if failure.is_no_space() {
            Self::new(ErrorCode::InsufficientStorage, message)
        } else {
            Self::new(ErrorCode::Unavailable, message)
        }
    }
}

/// The status of `code`, as the api crate fixes it.
pub fn status(code: ErrorCode) -> StatusCode {
    StatusCode::from_u16(code.status()).expect("every error code's status is a valid HTTP status")
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = self.body.get(Field::RetryAfterS).and_then(Value::as_u64);
        let mut r = (self.status(), Json(&self.body)).into_response();
        if let Some(s) = retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        let leader = self.leader.and_then(|l| HeaderValue::from_str(&l).ok());
        if let Some(v) = leader {
            r.headers_mut().insert(fencelog_api::header::LEADER, v);
        }
        r
    }
}

/// The body of the answer to a stale token on `stream`, written without
/// building an [`ErrorBody`]: the bytes are exactly those of
/// `write_error`'s answer (fencelog-api's `stale` module holds the two to
/// the same text, and a test below the answers).
pub fn stale_body(stream: &str, presented: u64, highest: u64, next_seq: u64) -> Vec<u8> {
    // The engine's message is about 110 bytes; room for it at once.
    let mut body = Vec::with_capacity(fixed_json::stale_body_bytes(stream.len(), 128));
    fixed_json::write_stale_refusal(&mut body, stream, presented, highest, next_seq);
    body
}

/// A response of JSON `body` already written (what `Json` sends, without
/// serde).
pub fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = Response::new(axum::body::Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// An answer that is either JSON already written or any response: what
/// the append route gives back, so that the HTTP/1.1 front can write its
/// usual outcomes (an ack, a stale refusal) straight from the bytes,
/// instead of building a `Response` — a `HeaderMap` for its one header,
/// a boxed body — only to take it apart again (`crate::server::front`).
pub enum Answer {
    /// `status` with `body` as `application/json`, exactly what
    /// [`json_response`] makes of them.
    Json {
        status: StatusCode,
        body: Vec<u8>,
    },
    Response(Response),
}

impl Answer {
    pub fn status(&self) -> StatusCode {
        match self {
            Answer::Json { status, .. } => *status,
            Answer::Response(r) => r.status(),
        }
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        match self {
            Answer::Json { status, body } => json_response(status, body),
            Answer::Response(r) => r,
        }
    }
}

impl From<Response> for Answer {
    fn from(r: Response) -> Self {
        Answer::Response(r)
    }
}

/// So a handler that answers some refusals as prepared responses (see
/// [`stale_body`]) can still refuse the rest with `?`.
impl From<ApiError> for Response {
    fn from(e: ApiError) -> Response {
        e.into_response()
    }
}

/// Maps a refused append or fence on `stream`. Logging is the caller's
/// (`AppState::write_refused_answer`, which aggregates stale rejections).
pub fn write_error(stream: &str, err: WriteError) -> ApiError {
    write_answer(stream, err).on_stream(stream)
}

#[allow(
    clippy::too_many_lines,
    reason = "a table: one arm per refusal, each with the fields its answer carries"
)]
fn write_answer(stream: &str, err: WriteError) -> ApiError {
    let message = err.to_string();
    match err {
        WriteError::InvalidStreamName(_)
        | WriteError::ZeroToken
        | WriteError::EmptyBatch
        | WriteError::BadConfig(_) => ApiError::bad_request(message),
        WriteError::TooLarge { limit, actual, .. } => ApiError::too_large(message)
            .with(Field::Limit, limit)
            .with(Field::Actual, actual),
        WriteError::StaleToken {
            presented,
            highest,
            next_seq,
        } => ApiError::new(ErrorCode::StaleFencingToken, message)
            .with(Field::Stream, stream)
            .with(Field::PresentedToken, presented)
            .with(Field::HighestToken, highest)
            .with(Field::NextSeq, next_seq),
        WriteError::SeqMismatch { expected, next_seq } => {
            ApiError::new(ErrorCode::SeqMismatch, message)
                .with(Field::Stream, stream)
                .with(Field::MatchSeqNum, expected)
                .with(Field::NextSeq, next_seq)
        }
        WriteError::StreamSealed(state) => ApiError::new(ErrorCode::StreamSealed, message)
            .with(Field::Stream, stream)
            .with(Field::FirstSeq, state.first_seq)
            .with(Field::NextSeq, state.next_seq)
            .with(Field::HighestToken, state.highest_token)
            .with(Field::Sealed, true),
        WriteError::NotFound => {
            ApiError::new(ErrorCode::StreamNotFound, message).with(Field::Stream, stream)
        }
        WriteError::InsufficientStorage { limit, used } => {
            // The budget, not the disk: definitely not applied, and the
            // engine stays healthy.
            ApiError::new(ErrorCode::InsufficientStorage, message)
                .with(Field::Stream, stream)
                .with(Field::Limit, limit)
                .with(Field::Actual, used)
                .with(Field::OutcomeUnknown, false)
        }
        WriteError::StorageFailed(failure) => {
            // The client cannot know whether the torn write survives a
            // restart; saying so keeps it from assuming either way.
            ApiError::storage(&failure, message).with(Field::OutcomeUnknown, true)
        }
        WriteError::Poisoned(failure) => ApiError::storage(&failure, message),
        // Nothing was written and the engine goes on: no outcome_unknown,
        // and a retry later is safe.
        WriteError::NotWritten(failure) => ApiError::storage(&failure, message),
        WriteError::Overloaded { .. } => {
            ApiError::new(ErrorCode::Overloaded, message).with(Field::RetryAfterS, RETRY_AFTER_S)
        }
        WriteError::ShuttingDown => ApiError::new(ErrorCode::Unavailable, message),
        WriteError::BadInput(_) => ApiError::bad_request(message),
        WriteError::ProducerFenced { floor } => ApiError::new(ErrorCode::ProducerFenced, message)
            .with(Field::Stream, stream)
            .with(Field::ProducerTokenFloor, floor),
        WriteError::ProducerSeqStale { last } => {
            ApiError::new(ErrorCode::ProducerSeqStale, message)
                .with(Field::Stream, stream)
                .with(Field::LastProducerSeq, last)
        }
        WriteError::ProducerSeqGap { expected } => {
            ApiError::new(ErrorCode::ProducerSeqGap, message)
                .with(Field::Stream, stream)
                .with(Field::ExpectedProducerSeq, expected)
        }
        WriteError::DeadlineExceeded { writer_ms } => {
            ApiError::new(ErrorCode::DeadlineExceeded, message)
                .with(Field::Stream, stream)
                .with(Field::WriterMs, writer_ms)
        }
        WriteError::CursorOutOfRange { seq, next_seq } => {
            ApiError::new(ErrorCode::OutOfRange, message)
                .with(Field::Stream, stream)
                .with(Field::Seq, seq)
                .with(Field::NextSeq, next_seq)
        }
        // A batch's answer is built by its handler, which knows each op's
        // stream (`POST /v1/batch`, in routes/producers.rs); this is the
        // fallback without them.
        WriteError::BatchRefused(_) => ApiError::new(ErrorCode::BadRequest, message),
        WriteError::BadHeaders { error, .. } if error.is_limit() => ApiError::too_large(message),
        WriteError::BadHeaders { .. } => ApiError::bad_request(message),
    }
}

/// Maps a failed read of `stream`.
pub fn read_error(stream: &str, err: ReadError) -> ApiError {
    read_answer(stream, err).on_stream(stream)
}

fn read_answer(stream: &str, err: ReadError) -> ApiError {
    let message = err.to_string();
    match err {
        ReadError::InvalidStreamName(_) => ApiError::bad_request(message),
        ReadError::NotFound => {
            ApiError::new(ErrorCode::StreamNotFound, message).with(Field::Stream, stream)
        }
        ReadError::OutOfRange {
            start_seq,
            first_seq,
            next_seq,
        } => ApiError::new(ErrorCode::OutOfRange, message)
            .with(Field::Stream, stream)
            .with(Field::StartSeq, start_seq)
            .with(Field::FirstSeq, first_seq)
            .with(Field::NextSeq, next_seq),
        ReadError::Corrupt(c) => {
            tracing::error!(stream, file = %c.file, offset = c.offset, reason = %c.reason, "corrupt frame refused on read");
            ApiError::new(ErrorCode::Corrupt, message)
                .with(Field::File, c.file)
                .with(Field::Offset, c.offset)
        }
        ReadError::Io(_) => {
            tracing::error!(stream, error = %message, "read failed");
            ApiError::new(ErrorCode::IoError, message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole answer to a stale token, as the write routes send it
    /// ([`Answer::Json`] of [`stale_body`]).
    fn stale_response(stream: &str, presented: u64, highest: u64, next_seq: u64) -> Response {
        let body = stale_body(stream, presented, highest, next_seq);
        json_response(status(ErrorCode::StaleFencingToken), body)
    }

    /// The prepared stale answer says exactly what the general mapping
    /// says: same status, same type, same bytes (message included).
    #[tokio::test]
    async fn the_prepared_stale_answer_is_the_general_one() {
        for (stream, presented, highest, next_seq) in
            [("orders", 4, 5, 9), ("a.b:c-d_e", 0, u64::MAX, u64::MAX)]
        {
            let err = WriteError::StaleToken {
                presented,
                highest,
                next_seq,
            };
            let general = write_error(stream, err);
            let want = serde_json::to_vec(&general.body).unwrap();
            let r = stale_response(stream, presented, highest, next_seq);
            assert_eq!(r.status(), general.status());
            assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
            let got = axum::body::to_bytes(r.into_body(), usize::MAX)
                .await
                .unwrap();
            assert_eq!(
                String::from_utf8(got.to_vec()).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
    }

    #[test]
    fn every_code_has_a_valid_status() {
        for code in ErrorCode::ALL {
            assert_eq!(status(code).as_u16(), code.status());
        }
    }
}
