//! [`ClientError`]: everything that can go wrong, by what the caller
//! should do about it, and how a server's answer becomes one. An error the
//! server answered keeps the whole answer ([`ClientError::answer`]), so
//! nothing the server said is lost on the way to the caller.

use fencelog_api::{ErrorBody, ErrorCode, Field};
use std::fmt;

/// Why a request got no answer: the failure of whichever transport carried
/// it (the client's own HTTP/1 pool for `http://`, reqwest for `https://`
/// and live tails). Its `Display` and `source` chain say the cause.
#[derive(Debug)]
pub struct TransportError(pub(crate) Cause, pub(crate) Option<String>);

#[derive(Debug)]
pub(crate) enum Cause {
    Reqwest(reqwest::Error),
    Io(std::io::Error),
    /// The server's name did not resolve.
    Dns(std::io::Error),
    /// Nothing heard within the named limit.
    Timeout(&'static str),
    /// The answer broke a rule of this client (e.g. over its size cap).
    Answer(String),
}

impl TransportError {
    /// A timeout (connecting, waiting for a pooled connection, or the
    /// request's own) rather than a failure the peer caused.
    pub fn is_timeout(&self) -> bool {
        match &self.0 {
            Cause::Reqwest(e) => e.is_timeout(),
            Cause::Timeout(_) => true,
            Cause::Io(e) => e.kind() == std::io::ErrorKind::TimedOut,
            Cause::Dns(_) => false,
            Cause::Answer(_) => false,
        }
    }

    /// The reqwest error, when reqwest carried the request.
    pub fn reqwest(&self) -> Option<&reqwest::Error> {
        match &self.0 {
            Cause::Reqwest(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The pool's errors name the URL as reqwest's do.
        if let Some(url) = &self.1 {
            write!(f, "error sending request for url ({url}): ")?;
        }
        match &self.0 {
            Cause::Reqwest(e) => e.fmt(f),
            Cause::Io(e) => e.fmt(f),
            Cause::Dns(e) => write!(f, "dns error: {e}"),
            Cause::Timeout(what) => write!(f, "timed out {what}"),
            Cause::Answer(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // Each inner error's own causes, not the inner error again (its
        // text is this one's).
        match &self.0 {
            Cause::Reqwest(e) => e.source(),
            Cause::Io(e) | Cause::Dns(e) => e.source(),
            Cause::Timeout(_) | Cause::Answer(_) => None,
        }
    }
}

impl From<reqwest::Error> for TransportError {
    fn from(e: reqwest::Error) -> Self {
        TransportError(Cause::Reqwest(e), None)
    }
}

/// Everything that can go wrong, by what the caller should do about it.
#[derive(Debug)]
pub enum ClientError {
    /// The stream has accepted a higher token: this writer lost ownership.
    StaleToken {
        presented: u64,
        highest: u64,
        next_seq: u64,
        answer: Box<ErrorBody>,
    },
    /// `match_seq_num` did not equal the stream's `next_seq`.
    SeqMismatch {
        expected: u64,
        next_seq: u64,
        answer: Box<ErrorBody>,
    },
    /// The stream is sealed: no append, fence or trim is accepted, whatever
    /// the token. Not a lost ownership: nobody can write any more.
    StreamSealed {
        first_seq: u64,
        next_seq: u64,
        highest_token: u64,
        answer: Box<ErrorBody>,
    },
    /// The server has no stream of that name (`stream_not_found`; also a
    /// deleted stream).
    StreamNotFound {
        stream: String,
        answer: Box<ErrorBody>,
    },
    /// The server (or something in front of it) has no such route: a 404
    /// that is not about a stream, e.g. a `--server` URL with a wrong path.
    NoSuchRoute {
        status: u16,
        /// The URL that was asked for.
        url: String,
        /// The answer's body, as text.
        body: String,
    },
    /// A read started past the stream's tail, or below its `first_seq`
    /// (those records were trimmed; read with `clamp` to start there).
    OutOfRange {
        first_seq: u64,
        next_seq: u64,
        answer: Box<ErrorBody>,
    },
    /// Over a batch, body or header limit (413). `answer` is `None` when
    /// the 413 came from something other than a fencelog server.
    TooLarge {
        message: String,
        answer: Option<Box<ErrorBody>>,
    },
    /// The request was malformed or invalid (400); nothing changed.
    BadRequest {
        message: String,
        answer: Option<Box<ErrorBody>>,
    },
    /// 401: the server wants an access token and got none it knows.
    Unauthenticated {
        message: String,
        answer: Option<Box<ErrorBody>>,
    },
    /// 403: the token does not cover this operation; `scope` names the
    /// scope it lacks.
    Forbidden {
        message: String,
        scope: Option<String>,
        answer: Option<Box<ErrorBody>>,
    },
    /// The server's storage failed (or it is shutting down). When
    /// `outcome_unknown` is set, this very request may or may not be durable.
    Unavailable {
        message: String,
        outcome_unknown: bool,
        answer: Option<Box<ErrorBody>>,
    },
    /// The server's disk is full.
    InsufficientStorage {
        message: String,
        outcome_unknown: bool,
        answer: Option<Box<ErrorBody>>,
    },
    /// Any other error the server answered with a code this client knows
    /// (`method_not_allowed`, `request_timeout`, `corrupt`, `io_error`).
    Rejected { answer: Box<ErrorBody> },
    /// The request may have reached the server and taken effect; the
    /// answer was lost. Never retried for appends.
    OutcomeUnknown { source: TransportError },
    /// The request never left (connection refused, DNS failure, no pooled
    /// connection free in time): safe to retry.
    Transport { source: TransportError },
    /// The server URL is not one a client can use.
    InvalidUrl { url: String, reason: String },
    /// The server answered something this client does not understand.
    Protocol { status: u16, body: String },
    /// An idempotent producer the stream does not know, with a token below
    /// its producer token floor (it may retry an evicted producer's write).
    ProducerFenced { floor: u64, answer: Box<ErrorBody> },
    /// The producer's seq is below its last applied one.
    ProducerSeqStale { last: u64, answer: Box<ErrorBody> },
    /// The producer's seq skips ahead; the stream expects `expected`.
    ProducerSeqGap {
        expected: u64,
        answer: Box<ErrorBody>,
    },
    /// The server's time was past the request's `not_after_ms`; nothing
    /// changed.
    DeadlineExceeded {
        writer_ms: u64,
        answer: Box<ErrorBody>,
    },
    /// An append session ([`crate::AppendSession`]) ended before it
    /// answered append `first_unanswered`. With `answer`, the server ended
    /// it (a bad message, shutdown) and no append from there on was
    /// applied; without, the connection was lost and their outcome is
    /// unknown.
    SessionEnded {
        first_unanswered: u64,
        message: String,
        answer: Option<Box<ErrorBody>>,
    },
    /// A multi-stream batch was refused whole: `first` is the first
    /// refusal, `ops` every op's outcome (an ack or an error body).
    BatchRefused {
        first: Box<ClientError>,
        ops: Vec<serde_json::Value>,
    },
}

impl ClientError {
    /// The server's error answer, when the error is one.
    pub fn answer(&self) -> Option<&ErrorBody> {
        match self {
            ClientError::StaleToken { answer, .. }
            | ClientError::SeqMismatch { answer, .. }
            | ClientError::StreamSealed { answer, .. }
            | ClientError::StreamNotFound { answer, .. }
            | ClientError::OutOfRange { answer, .. }
            | ClientError::ProducerFenced { answer, .. }
            | ClientError::ProducerSeqStale { answer, .. }
            | ClientError::ProducerSeqGap { answer, .. }
            | ClientError::DeadlineExceeded { answer, .. }
            | ClientError::Rejected { answer } => Some(answer),
            ClientError::BatchRefused { first, .. } => first.answer(),
            ClientError::TooLarge { answer, .. }
            | ClientError::BadRequest { answer, .. }
            | ClientError::Unauthenticated { answer, .. }
            | ClientError::Forbidden { answer, .. }
            | ClientError::Unavailable { answer, .. }
            | ClientError::InsufficientStorage { answer, .. }
            | ClientError::SessionEnded { answer, .. } => answer.as_deref(),
            ClientError::NoSuchRoute { .. }
            | ClientError::OutcomeUnknown { .. }
            | ClientError::Transport { .. }
            | ClientError::InvalidUrl { .. }
            | ClientError::Protocol { .. } => None,
        }
    }
}

/// An error and every cause under it, `: `-separated: reqwest's own text
/// names only the URL, the reason (refused, DNS, TLS) is further down.
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let next = c.to_string();
        // Some layers repeat their source's text; say each thing once.
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        cause = c.source();
    }
    text
}

/// A hint for transport failures whose cause does not say what to do.
fn transport_hint(causes: &str) -> &'static str {
    if causes.contains("invalid HTTP version")
        || causes.contains("connection closed before message completed")
    {
        " (a server that speaks TLS answers a plain http:// request like this: \
         try https://)"
    } else if causes.contains("scheme is not http") || causes.contains("invalid URL, scheme") {
        " (this client speaks plain http://)"
    } else {
        ""
    }
}

impl fmt::Display for ClientError {
    #[allow(
        clippy::too_many_lines,
        reason = "a table: one arm per variant, each its one message"
    )]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::StaleToken {
                presented,
                highest,
                next_seq,
                ..
            } => write!(
                f,
                "stale fencing token {presented}: the stream accepted {highest} (next_seq {next_seq})"
            ),
            ClientError::SeqMismatch {
                expected, next_seq, ..
            } => write!(f, "match_seq_num {expected} but next_seq is {next_seq}"),
            ClientError::StreamSealed {
                next_seq,
                highest_token,
                ..
            } => write!(
                f,
                "the stream is sealed at next_seq {next_seq} (highest token {highest_token})"
            ),
            ClientError::StreamNotFound { stream, .. } => {
                write!(f, "stream {stream:?} does not exist")
            }
            ClientError::NoSuchRoute { status, url, .. } => write!(
                f,
                "no such route: {url} answered {status} (is the server URL's path right?)"
            ),
            ClientError::OutOfRange {
                first_seq,
                next_seq,
                ..
            } => write!(
                f,
                "start_seq is outside the stream's readable records {first_seq}..{next_seq}"
            ),
            ClientError::TooLarge { message, .. } => write!(f, "too large: {message}"),
            ClientError::BadRequest { message, .. } => write!(f, "bad request: {message}"),
            ClientError::Unauthenticated { message, .. } => write!(f, "unauthenticated: {message}"),
            ClientError::Forbidden { message, .. } => write!(f, "forbidden: {message}"),
            ClientError::Unavailable {
                message,
                outcome_unknown,
                ..
            } => write!(f, "unavailable (outcome unknown: {outcome_unknown}): {message}"),
            ClientError::InsufficientStorage {
                message,
                outcome_unknown,
                ..
            } => write!(f, "server disk full (outcome unknown: {outcome_unknown}): {message}"),
            ClientError::Rejected { answer } => write!(f, "{}: {}", answer.code, answer.message),
            ClientError::OutcomeUnknown { source } => {
                let causes = with_causes(source);
                let hint = transport_hint(&causes);
                write!(f, "outcome unknown, the connection failed after sending: {causes}{hint}")
            }
            ClientError::Transport { source } => {
                let causes = with_causes(source);
                let hint = transport_hint(&causes);
                write!(f, "could not reach the server: {causes}{hint}")
            }
            ClientError::InvalidUrl { url, reason } => {
                write!(f, "invalid server URL {url:?}: {reason}")
            }
            ClientError::Protocol { status, body } => {
                write!(f, "unexpected answer {status}: {body}")
            }
            ClientError::ProducerFenced { floor, .. } => write!(
                f,
                "producer fenced: unknown to the stream and below its producer token floor {floor}"
            ),
            ClientError::ProducerSeqStale { last, .. } => {
                write!(f, "producer_seq below the last applied one, {last}")
            }
            ClientError::ProducerSeqGap { expected, .. } => {
                write!(f, "producer_seq skips ahead: expected {expected}")
            }
            ClientError::DeadlineExceeded { writer_ms, .. } => {
                write!(f, "deadline exceeded: the server's time was {writer_ms} ms")
            }
            ClientError::BatchRefused { first, ops } => {
                write!(f, "batch of {} ops refused, none applied: {first}", ops.len())
            }
            ClientError::SessionEnded {
                first_unanswered,
                message,
                answer,
            } => {
                let what = match answer {
                    Some(_) => "were not applied",
                    None => "have an unknown outcome",
                };
                write!(
                    f,
                    "append session ended: appends from #{first_unanswered} on {what}: {message}"
                )
            }
        }
    }
}

impl std::error::Error for ClientError {}

/// The error an answer with a non-success `status` and body `bytes`
/// stands for, to a request for `url`.
pub(crate) fn from_answer(status: u16, bytes: &[u8], url: &str) -> ClientError {
    // The hot refusal, in the exact shape the server writes it: no JSON
    // parser, and the same `ErrorBody` the parser would make.
    if status == ErrorCode::StaleFencingToken.status() {
        if let Some(stale) = fencelog_api::fixed_json::read_stale_body(bytes) {
            return ClientError::StaleToken {
                presented: stale.presented,
                highest: stale.highest,
                next_seq: stale.next_seq,
                answer: Box::new(stale.to_error_body()),
            };
        }
    }
    // The code counts only with the status it is sent with.
    let mut body = ErrorBody::decode(bytes).filter(|b| b.code.status() == status);
    // A refused multi-stream batch: the first refusal's code and fields,
    // and every op's outcome under "ops".
    let has_ops = |b: &ErrorBody| matches!(b.get(Field::Ops), Some(serde_json::Value::Array(_)));
    if let Some(mut whole) = body.take_if(|b| has_ops(b)) {
        let Some(serde_json::Value::Array(ops)) = whole.fields.remove(Field::Ops.as_str()) else {
            unreachable!("checked above");
        };
        let first = Box::new(from_body(status, Box::new(whole), url, bytes));
        return ClientError::BatchRefused { first, ops };
    }
    let protocol = || ClientError::Protocol {
        status,
        body: String::from_utf8_lossy(bytes).into_owned(),
    };
    let Some(body) = body else {
        return by_status(status, None, url, bytes).unwrap_or_else(|_| protocol());
    };
    from_body(status, Box::new(body), url, bytes)
}

/// The error a decoded answer `answer` (its code sent with its status)
/// stands for.
fn from_body(status: u16, answer: Box<ErrorBody>, url: &str, bytes: &[u8]) -> ClientError {
    let protocol = || ClientError::Protocol {
        status,
        body: String::from_utf8_lossy(bytes).into_owned(),
    };
    match answer.code {
        // Never a made-up 0: an answer without its fields is not one this
        // client understands.
        ErrorCode::StaleFencingToken
        | ErrorCode::SeqMismatch
        | ErrorCode::StreamSealed
        | ErrorCode::OutOfRange => position_error(answer).unwrap_or_else(protocol),
        ErrorCode::ProducerFenced
        | ErrorCode::ProducerSeqStale
        | ErrorCode::ProducerSeqGap
        | ErrorCode::DeadlineExceeded => producer_error(answer).unwrap_or_else(protocol),
        // Not a route that is missing: the stream does not know the name.
        ErrorCode::ProducerNotFound | ErrorCode::CursorNotFound => ClientError::Rejected { answer },
        ErrorCode::StreamNotFound => match answer.stream() {
            Some(stream) => ClientError::StreamNotFound {
                stream: stream.to_string(),
                answer,
            },
            None => protocol(),
        },
        _ => match by_status(status, Some(answer), url, bytes) {
            Ok(e) => e,
            Err(answer) => ClientError::Rejected {
                answer: answer.expect("handed in"),
            },
        },
    }
}

/// A refusal about the stream's position (a stale token, a sequence
/// mismatch, a sealed stream, a read out of range), with the fields its
/// code carries (`None` when one is missing: never a made-up 0).
fn position_error(answer: Box<ErrorBody>) -> Option<ClientError> {
    Some(match answer.code {
        ErrorCode::StaleFencingToken => ClientError::StaleToken {
            presented: answer.presented_token()?,
            highest: answer.highest_token()?,
            next_seq: answer.next_seq()?,
            answer,
        },
        ErrorCode::SeqMismatch => ClientError::SeqMismatch {
            expected: answer.match_seq_num()?,
            next_seq: answer.next_seq()?,
            answer,
        },
        ErrorCode::StreamSealed => ClientError::StreamSealed {
            first_seq: answer.first_seq()?,
            next_seq: answer.next_seq()?,
            highest_token: answer.highest_token()?,
            answer,
        },
        ErrorCode::OutOfRange => ClientError::OutOfRange {
            first_seq: answer.first_seq()?,
            next_seq: answer.next_seq()?,
            answer,
        },
        _ => return None,
    })
}

/// An idempotent producer's or a deadline's refusal, with the field its
/// code carries (`None` when the field is missing: never a made-up 0).
fn producer_error(answer: Box<ErrorBody>) -> Option<ClientError> {
    let get = |f: Field| answer.get(f).and_then(serde_json::Value::as_u64);
    Some(match answer.code {
        ErrorCode::ProducerFenced => ClientError::ProducerFenced {
            floor: get(Field::ProducerTokenFloor)?,
            answer,
        },
        ErrorCode::ProducerSeqStale => ClientError::ProducerSeqStale {
            last: get(Field::LastProducerSeq)?,
            answer,
        },
        ErrorCode::ProducerSeqGap => ClientError::ProducerSeqGap {
            expected: get(Field::ExpectedProducerSeq)?,
            answer,
        },
        ErrorCode::DeadlineExceeded => ClientError::DeadlineExceeded {
            writer_ms: get(Field::WriterMs)?,
            answer,
        },
        _ => return None,
    })
}

/// The classes a status alone decides, so an answer from a proxy (or a
/// newer server's code) still lands where its status says; any other
/// status hands `answer` back.
fn by_status(
    status: u16,
    answer: Option<Box<ErrorBody>>,
    url: &str,
    bytes: &[u8],
) -> Result<ClientError, Option<Box<ErrorBody>>> {
    const NOT_FOUND: u16 = ErrorCode::NotFound.status();
    const TOO_LARGE: u16 = ErrorCode::TooLarge.status();
    const BAD_REQUEST: u16 = ErrorCode::BadRequest.status();
    const UNAUTHENTICATED: u16 = ErrorCode::Unauthenticated.status();
    const FORBIDDEN: u16 = ErrorCode::Forbidden.status();
    const UNAVAILABLE: u16 = ErrorCode::Unavailable.status();
    const INSUFFICIENT_STORAGE: u16 = ErrorCode::InsufficientStorage.status();
    let message = answer
        .as_ref()
        .map(|a| a.message.clone())
        .unwrap_or_default();
    let outcome_unknown = answer.as_ref().is_some_and(|a| a.outcome_unknown());
    Ok(match status {
        NOT_FOUND => ClientError::NoSuchRoute {
            status,
            url: url.to_string(),
            body: String::from_utf8_lossy(bytes).into_owned(),
        },
        TOO_LARGE => ClientError::TooLarge { message, answer },
        BAD_REQUEST => ClientError::BadRequest { message, answer },
        UNAUTHENTICATED => ClientError::Unauthenticated { message, answer },
        FORBIDDEN => ClientError::Forbidden {
            message,
            scope: answer
                .as_ref()
                .and_then(|b| b.get(fencelog_api::Field::Scope))
                .and_then(|v| v.as_str())
                .map(str::to_string),
            answer,
        },
        UNAVAILABLE => ClientError::Unavailable {
            message,
            outcome_unknown,
            answer,
        },
        INSUFFICIENT_STORAGE => ClientError::InsufficientStorage {
            message,
            outcome_unknown,
            answer,
        },
        _ => return Err(answer),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://h/v1/streams/s";

    #[test]
    fn a_404_is_a_missing_stream_only_when_the_server_says_so() {
        let e = from_answer(
            404,
            br#"{"error":"stream_not_found","message":"stream not found","stream":"s"}"#,
            URL,
        );
        assert!(matches!(&e, ClientError::StreamNotFound { stream, .. } if stream == "s"));
        assert_eq!(e.answer().unwrap().stream(), Some("s"));
        for body in [
            &br#"{"error":"not_found","message":"no route"}"#[..],
            b"<html>404</html>",
            b"",
        ] {
            let e = from_answer(404, body, URL);
            assert!(
                matches!(&e, ClientError::NoSuchRoute { status: 404, url, .. } if url == URL),
                "{e:?}"
            );
            assert!(e
                .to_string()
                .starts_with("no such route: http://h/v1/streams/s answered 404"));
        }
    }

    #[test]
    fn missing_fields_are_a_protocol_error_not_zero() {
        let e = from_answer(
            409,
            br#"{"error":"stale_fencing_token","message":"m","highest_token":5}"#,
            URL,
        );
        assert!(
            matches!(e, ClientError::Protocol { status: 409, .. }),
            "{e:?}"
        );
        let e = from_answer(
            412,
            br#"{"error":"seq_mismatch","message":"m","next_seq":1}"#,
            URL,
        );
        assert!(
            matches!(e, ClientError::Protocol { status: 412, .. }),
            "{e:?}"
        );
        let e = from_answer(
            409,
            br#"{"error":"stale_fencing_token","message":"m","stream":"s","presented_token":4,"highest_token":5,"next_seq":9}"#,
            URL,
        );
        match e {
            ClientError::StaleToken {
                presented,
                highest,
                next_seq,
                answer,
            } => {
                assert_eq!((presented, highest, next_seq), (4, 5, 9));
                assert_eq!(answer.stream(), Some("s"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn other_codes_keep_their_answer_and_statuses_decide_the_rest() {
        let e = from_answer(
            500,
            br#"{"error":"corrupt","message":"bad crc","file":"f","offset":3}"#,
            URL,
        );
        match &e {
            ClientError::Rejected { answer } => {
                assert_eq!(answer.code, ErrorCode::Corrupt);
                assert_eq!(answer.fields["file"], "f");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.to_string(), "corrupt: bad crc");
        let e = from_answer(413, b"<html>too big</html>", URL);
        assert!(matches!(e, ClientError::TooLarge { answer: None, .. }));
        let e = from_answer(
            503,
            br#"{"error":"unavailable","message":"m","outcome_unknown":true}"#,
            URL,
        );
        assert!(matches!(
            e,
            ClientError::Unavailable {
                outcome_unknown: true,
                answer: Some(_),
                ..
            }
        ));
        // A known code with the wrong status is not believed.
        let e = from_answer(
            500,
            br#"{"error":"stale_fencing_token","message":"m"}"#,
            URL,
        );
        assert!(matches!(e, ClientError::Protocol { status: 500, .. }));
    }
}
