//! Error answers: one typed code per outcome with its HTTP status, and the
//! body every error carries, `{"error": code, "message": text, ...fields}`.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};
use std::fmt;

/// Every `error` code a fencelog server sends. Each code has exactly one
/// HTTP status, fixed in [`ErrorCode::status`]; the matches are exhaustive
/// so a new code does not compile until it has a status and a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 400: malformed or invalid input; nothing changed.
    BadRequest,
    /// 401: no access token, or one the server does not know.
    Unauthenticated,
    /// 403: the access token's scopes or stream prefix do not cover the
    /// operation; the body names the missing `scope`.
    Forbidden,
    /// 404 from a handler: the stream does not exist.
    StreamNotFound,
    /// 404 from the router: no such route.
    NotFound,
    /// 405: the route exists, the method does not.
    MethodNotAllowed,
    /// 408: the request body did not arrive within the body read timeout.
    RequestTimeout,
    /// 409: the stream accepted a higher fencing token; the writer lost
    /// ownership.
    StaleFencingToken,
    /// 409: the stream is sealed; no append, fence or trim is accepted,
    /// whatever the token. Carries the stream's state fields.
    StreamSealed,
    /// 412: `match_seq_num` is not the stream's `next_seq`.
    SeqMismatch,
    /// 413: over a batch or body limit.
    TooLarge,
    /// 415: a `Content-Type`, `Content-Encoding` or `Transfer-Encoding`
    /// the route does not take.
    UnsupportedMediaType,
    /// 416: a read started past the stream's `next_seq`, or below its
    /// `first_seq` (trimmed).
    OutOfRange,
    /// 431: the request's headers are over the server's limit.
    HeadersTooLarge,
    /// 500: a frame failed its checksum when read back.
    Corrupt,
    /// 500: a read failed with an I/O error.
    IoError,
    /// 503: storage failed (writes refused until restart) or shutting down.
    Unavailable,
    /// 503: the server is at a limit (writer queue, memory budget); nothing
    /// was done. Sent with `Retry-After`.
    Overloaded,
    /// 507: storage failed because the disk is full.
    InsufficientStorage,
    /// 409: an idempotent producer the stream does not know, with a token
    /// below the stream's producer token floor (it may retry an evicted
    /// producer's write); a new lease's higher token fixes it.
    ProducerFenced,
    /// 409: `producer_seq` below the producer's last applied one.
    ProducerSeqStale,
    /// 409: `producer_seq` more than one past the producer's last one.
    ProducerSeqGap,
    /// 409: the writer's time is past the request's `not_after_ms`.
    DeadlineExceeded,
    /// 404: the stream does not remember this producer.
    ProducerNotFound,
    /// 404: the stream has no cursor of this name.
    CursorNotFound,
}

impl ErrorCode {
    /// Every code, for lookups by name and for tests.
    pub const ALL: [ErrorCode; 25] = [
        ErrorCode::BadRequest,
        ErrorCode::Unauthenticated,
        ErrorCode::Forbidden,
        ErrorCode::StreamNotFound,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::RequestTimeout,
        ErrorCode::StaleFencingToken,
        ErrorCode::StreamSealed,
        ErrorCode::SeqMismatch,
        ErrorCode::TooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::OutOfRange,
        ErrorCode::HeadersTooLarge,
        ErrorCode::Corrupt,
        ErrorCode::IoError,
        ErrorCode::Unavailable,
        ErrorCode::Overloaded,
        ErrorCode::InsufficientStorage,
        ErrorCode::ProducerFenced,
        ErrorCode::ProducerSeqStale,
        ErrorCode::ProducerSeqGap,
        ErrorCode::DeadlineExceeded,
        ErrorCode::ProducerNotFound,
        ErrorCode::CursorNotFound,
    ];

    /// The code as the `error` field carries it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::StreamNotFound => "stream_not_found",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::StaleFencingToken => "stale_fencing_token",
            ErrorCode::StreamSealed => "stream_sealed",
            ErrorCode::SeqMismatch => "seq_mismatch",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::OutOfRange => "out_of_range",
            ErrorCode::HeadersTooLarge => "headers_too_large",
            ErrorCode::Corrupt => "corrupt",
            ErrorCode::IoError => "io_error",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::InsufficientStorage => "insufficient_storage",
            ErrorCode::ProducerFenced => "producer_fenced",
            ErrorCode::ProducerSeqStale => "producer_seq_stale",
            ErrorCode::ProducerSeqGap => "producer_seq_gap",
            ErrorCode::DeadlineExceeded => "deadline_exceeded",
            ErrorCode::ProducerNotFound => "producer_not_found",
            ErrorCode::CursorNotFound => "cursor_not_found",
        }
    }

    /// The HTTP status every answer with this code has.
    pub const fn status(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::StreamNotFound
            | ErrorCode::NotFound
            | ErrorCode::ProducerNotFound
            | ErrorCode::CursorNotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::StaleFencingToken
            | ErrorCode::StreamSealed
            | ErrorCode::ProducerFenced
            | ErrorCode::ProducerSeqStale
            | ErrorCode::ProducerSeqGap
            | ErrorCode::DeadlineExceeded => 409,
            ErrorCode::SeqMismatch => 412,
            ErrorCode::TooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::OutOfRange => 416,
            ErrorCode::HeadersTooLarge => 431,
            ErrorCode::Corrupt | ErrorCode::IoError => 500,
            ErrorCode::Unavailable | ErrorCode::Overloaded => 503,
            ErrorCode::InsufficientStorage => 507,
        }
    }

    /// The code named `code`, if this version knows it.
    pub fn parse(code: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == code)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The fields an error body carries besides `error` and `message`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// The stream the request named: every error of a request naming a
    /// valid stream carries it.
    Stream,
    /// The token a stale request carried (409).
    PresentedToken,
    /// The stream's highest accepted token (409).
    HighestToken,
    /// The stream's `next_seq` (409, 412, 416).
    NextSeq,
    /// The stream's `first_seq` (409 `stream_sealed`, 416).
    FirstSeq,
    /// Whether the stream is sealed (409 `stream_sealed`).
    Sealed,
    /// The `match_seq_num` the request expected (412).
    MatchSeqNum,
    /// Where a refused read started (416).
    StartSeq,
    /// The limit a request went over (413).
    Limit,
    /// How far over it went (413).
    Actual,
    /// Set when this very request may or may not be durable (503, 507).
    OutcomeUnknown,
    /// Whether a failed storage is out of space (`/healthz` 503).
    NoSpace,
    /// The producer id a request named (409 producer codes, 404).
    ProducerId,
    /// The producer's last applied seq (409 `producer_seq_stale`).
    LastProducerSeq,
    /// The seq the stream expects next from the producer (409
    /// `producer_seq_gap`).
    ExpectedProducerSeq,
    /// The stream's producer token floor (409 `producer_fenced`).
    ProducerTokenFloor,
    /// The writer's time when it refused (409 `deadline_exceeded`).
    WriterMs,
    /// The cursor a request named (404 `cursor_not_found`, cursor 416).
    Cursor,
    /// The seq a cursor commit carried (416).
    Seq,
    /// A refused multi-stream batch: every operation's outcome, in order.
    Ops,
    /// The scope a request lacked (403).
    Scope,
    /// The access token's name (403).
    Principal,
    /// Seconds to wait before retrying, as `Retry-After` says (503
    /// `overloaded`).
    RetryAfterS,
    /// The segment file holding a corrupt frame (500 `corrupt`).
    File,
    /// The byte offset of that frame in its file (500 `corrupt`).
    Offset,
}

impl Field {
    pub const fn as_str(self) -> &'static str {
        match self {
            Field::Stream => "stream",
            Field::PresentedToken => "presented_token",
            Field::HighestToken => "highest_token",
            Field::NextSeq => "next_seq",
            Field::FirstSeq => "first_seq",
            Field::Sealed => "sealed",
            Field::MatchSeqNum => "match_seq_num",
            Field::StartSeq => "start_seq",
            Field::Limit => "limit",
            Field::Actual => "actual",
            Field::OutcomeUnknown => "outcome_unknown",
            Field::NoSpace => "no_space",
            Field::ProducerId => "producer_id",
            Field::LastProducerSeq => "last_producer_seq",
            Field::ExpectedProducerSeq => "expected_producer_seq",
            Field::ProducerTokenFloor => "producer_token_floor",
            Field::WriterMs => "writer_ms",
            Field::Cursor => "cursor",
            Field::Seq => "seq",
            Field::Ops => "ops",
            Field::Scope => "scope",
            Field::Principal => "principal",
            Field::RetryAfterS => "retry_after_s",
            Field::File => "file",
            Field::Offset => "offset",
        }
    }
}

/// The `error` field alone, borrowed from the answer when it has no escapes.
#[derive(serde::Deserialize)]
struct CodeOnly<'a> {
    #[serde(borrow)]
    error: std::borrow::Cow<'a, str>,
}

/// An error answer: `{"error": code, "message": text, ...fields}`, keys in
/// sorted order.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    /// Everything but `error` and `message`.
    pub fields: Map<String, Value>,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code,
            message: message.into(),
            fields: Map::new(),
        }
    }

    pub fn with(mut self, field: Field, value: impl Into<Value>) -> Self {
        self.fields.insert(field.as_str().to_string(), value.into());
        self
    }

    /// The HTTP status the answer is sent with.
    pub fn status(&self) -> u16 {
        self.code.status()
    }

    pub fn get(&self, field: Field) -> Option<&Value> {
        self.fields.get(field.as_str())
    }

    fn u64(&self, field: Field) -> Option<u64> {
        self.get(field).and_then(Value::as_u64)
    }

    pub fn stream(&self) -> Option<&str> {
        self.get(Field::Stream).and_then(Value::as_str)
    }

    pub fn presented_token(&self) -> Option<u64> {
        self.u64(Field::PresentedToken)
    }

    pub fn highest_token(&self) -> Option<u64> {
        self.u64(Field::HighestToken)
    }

    pub fn next_seq(&self) -> Option<u64> {
        self.u64(Field::NextSeq)
    }

    pub fn first_seq(&self) -> Option<u64> {
        self.u64(Field::FirstSeq)
    }

    pub fn match_seq_num(&self) -> Option<u64> {
        self.u64(Field::MatchSeqNum)
    }

    pub fn start_seq(&self) -> Option<u64> {
        self.u64(Field::StartSeq)
    }

    pub fn limit(&self) -> Option<u64> {
        self.u64(Field::Limit)
    }

    pub fn actual(&self) -> Option<u64> {
        self.u64(Field::Actual)
    }

    /// Whether the request that failed may or may not be durable; false
    /// when the body does not say.
    pub fn outcome_unknown(&self) -> bool {
        self.get(Field::OutcomeUnknown)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    pub fn no_space(&self) -> Option<bool> {
        self.get(Field::NoSpace).and_then(Value::as_bool)
    }

    /// The body as a JSON value; serialises to the same text as `self`.
    pub fn to_value(&self) -> Value {
        let mut body = Map::new();
        body.insert("error".into(), Value::from(self.code.as_str()));
        body.insert("message".into(), Value::from(self.message.as_str()));
        for (k, v) in &self.fields {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }

    /// Reads an error answer. `None` when `bytes` is not a JSON object
    /// whose `error` is a code this version knows; a missing `message` is
    /// empty.
    pub fn decode(bytes: &[u8]) -> Option<ErrorBody> {
        let Ok(Value::Object(mut fields)) = serde_json::from_slice(bytes) else {
            return None;
        };
        let code = ErrorCode::parse(fields.remove("error")?.as_str()?)?;
        let message = match fields.remove("message") {
            Some(Value::String(m)) => m,
            _ => String::new(),
        };
        Some(ErrorBody {
            code,
            message,
            fields,
        })
    }

    /// Only the code of an error answer, without decoding the rest: what a
    /// load generator needs to count a rejection without paying for the
    /// whole body. `None` as for [`ErrorBody::decode`].
    pub fn decode_code(bytes: &[u8]) -> Option<ErrorCode> {
        let only: CodeOnly = serde_json::from_slice(bytes).ok()?;
        ErrorCode::parse(&only.error)
    }
}

/// The same JSON as [`ErrorBody::to_value`], keys in the same (sorted)
/// order, written straight from the body: a stale rejection is a hot path,
/// and building a second map just to serialise it costs a copy of every
/// field.
impl Serialize for ErrorBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let fixed = [
            ("error", self.code.as_str()),
            ("message", self.message.as_str()),
        ];
        let mut pending = fixed.iter().peekable();
        let mut map = s.serialize_map(Some(self.fields.len() + 2))?;
        for (key, value) in &self.fields {
            while let Some((name, text)) = pending.next_if(|(name, _)| *name <= key.as_str()) {
                // `to_value` lets a field of the same name replace the fixed one.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_by_name_and_have_one_status() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            assert!((400..600).contains(&code.status()), "{code}");
        }
        assert_eq!(ErrorCode::parse("stale"), None);
        assert_eq!(ErrorCode::StaleFencingToken.status(), 409);
        assert_eq!(ErrorCode::InsufficientStorage.status(), 507);
    }

    #[test]
    fn serializes_exactly_like_to_value() {
        let mut overridden = ErrorBody::new(ErrorCode::BadRequest, "m")
            .with(Field::Actual, 1)
            .with(Field::Stream, 3);
        // Keys around and equal to the fixed ones.
        for (k, v) in [("error", "overridden"), ("f", "2"), ("message", "also")] {
            overridden.fields.insert(k.into(), v.into());
        }
        let cases = [
            ErrorBody::new(ErrorCode::StaleFencingToken, "s")
                .with(Field::Stream, "s")
                .with(Field::PresentedToken, 4)
                .with(Field::HighestToken, 5)
                .with(Field::NextSeq, 9),
            ErrorBody::new(ErrorCode::BadRequest, "plain"),
            ErrorBody::new(ErrorCode::TooLarge, "x")
                .with(Field::Limit, 3)
                .with(Field::Actual, 4),
            overridden,
        ];
        for e in cases {
            assert_eq!(
                serde_json::to_string(&e).unwrap(),
                serde_json::to_string(&e.to_value()).unwrap()
            );
        }
    }

    #[test]
    fn decodes_what_it_sends_and_reads_fields_by_type() {
        let sent = ErrorBody::new(ErrorCode::StaleFencingToken, "stale")
            .with(Field::Stream, "orders")
            .with(Field::PresentedToken, 4)
            .with(Field::HighestToken, 5)
            .with(Field::NextSeq, 9);
        let text = serde_json::to_vec(&sent).unwrap();
        let got = ErrorBody::decode(&text).unwrap();
        assert_eq!(got, sent);
        assert_eq!(got.status(), 409);
        assert_eq!(got.stream(), Some("orders"));
        assert_eq!(
            (got.presented_token(), got.highest_token(), got.next_seq()),
            (Some(4), Some(5), Some(9))
        );
        assert_eq!(got.match_seq_num(), None);
        assert!(!got.outcome_unknown());
        let unknown =
            ErrorBody::decode(br#"{"error":"unavailable","outcome_unknown":true}"#).unwrap();
        assert_eq!(
            (unknown.message.as_str(), unknown.outcome_unknown()),
            ("", true)
        );
        assert_eq!(
            ErrorBody::decode_code(&text),
            Some(ErrorCode::StaleFencingToken)
        );
        for not_one in [
            &b"<html>"[..],
            b"[]",
            br#"{"error":"new_code"}"#,
            br#"{"message":"m"}"#,
        ] {
            assert_eq!(ErrorBody::decode(not_one), None);
            assert_eq!(ErrorBody::decode_code(not_one), None);
        }
    }
}
