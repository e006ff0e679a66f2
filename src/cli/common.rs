//! What the client subcommands share: the server option, exit codes, and
//! how records and errors are printed.

use fencelog_api::{BodyJson, ErrorBody, ErrorCode, Field, RecordJson};
use fencelog_client::{Client, ClientError, StreamInfo};
use fencelog_engine::Record;
use serde_json::{json, Value};
use std::process::ExitCode;

/// The command did what was asked.
pub const EXIT_OK: u8 = 0;
/// Transport failure, server unavailable, or the outcome of a write is
/// unknown: retrying may help, after checking the stream's state.
pub const EXIT_FAILURE: u8 = 1;
/// The stream accepted a higher fencing token: this writer lost ownership
/// and must stop. Distinct so scripts can react to being fenced.
pub const EXIT_STALE: u8 = 3;
/// Any other rejection (seq mismatch, not found, bad request, too large):
/// retrying the same request will fail the same way.
pub const EXIT_REJECTED: u8 = 4;

/// Shown by `fencelog --help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes of the client commands (append, read, tail, fence, status, trim,
seal, delete, config, producer, fences, cursor):
  0  success
  1  failure: server unreachable or unavailable, or a write's outcome is unknown
  2  usage error (bad arguments)
  3  stale fencing token (or producer fenced): a newer owner took over the
     stream; stop writing
  4  other rejection: stream sealed, seq mismatch, stream not found, bad
     request, too large, out of range, producer seq stale or gap, deadline
     exceeded, producer or cursor not found";

#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Base URL of the fencelog server (http:// or https://).
    #[arg(
        long = "server",
        env = "FENCELOG_URL",
        default_value = "http://127.0.0.1:7070"
    )]
    pub url: String,
    /// A PEM CA certificate to trust for an https:// server, besides the
    /// system's roots.
    #[arg(long, env = "FENCELOG_CA_CERT")]
    pub ca_cert: Option<std::path::PathBuf>,
    /// The access-token secret (`fencelog token create` makes one), not to
    /// be confused with a fencing token; sent
    /// as `Authorization: Bearer`. Prefer the environment variable: a flag
    /// shows up in `ps`.
    #[arg(long, env = "FENCELOG_AUTH_TOKEN", hide_env_values = true)]
    pub auth_token: Option<String>,
}

impl ServerArgs {
    pub fn client(&self) -> Result<Client, ClientError> {
        let mut builder = Client::builder(self.url.clone());
        if let Some(path) = &self.ca_cert {
            builder = builder
                .ca_cert_file(path)
                .map_err(|e| ClientError::BadRequest {
                    message: format!("cannot read --ca-cert {}: {e}", path.display()),
                })?;
        }
        if let Some(secret) = &self.auth_token {
            builder = builder.token(secret.clone());
        }
        builder.build()
    }
}

/// A runtime for one command; a client command is one request or one tail,
/// so a single thread is plenty.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start the async runtime")
        .block_on(f)
}

pub fn exit_code(err: &ClientError) -> u8 {
    match err {
        ClientError::StaleToken { .. } | ClientError::ProducerFenced { .. } => EXIT_STALE,
        ClientError::BatchRefused { first, .. } => exit_code(first),
        ClientError::ProducerSeqStale { .. }
        | ClientError::ProducerSeqGap { .. }
        | ClientError::DeadlineExceeded { .. }
        | ClientError::SeqMismatch { .. }
        | ClientError::StreamSealed { .. }
        | ClientError::NotFound
        | ClientError::OutOfRange { .. }
        | ClientError::TooLarge { .. }
        | ClientError::BadRequest { .. }
        | ClientError::Unauthenticated { .. }
        | ClientError::Forbidden { .. } => EXIT_REJECTED,
        ClientError::Unavailable { .. }
        | ClientError::InsufficientStorage { .. }
        | ClientError::OutcomeUnknown { .. }
        | ClientError::Transport { .. }
        | ClientError::Protocol { .. } => EXIT_FAILURE,
    }
}

/// The error as a JSON object on one line, with the fields a script needs
/// to act on it (e.g. the highest token after a stale rejection): the
/// server's error body, or one of the same shape for failures no server
/// answer names (`outcome_unknown`, `transport`, `protocol`).
pub fn error_json(err: &ClientError) -> Value {
    let message = err.to_string();
    let answer = |code| ErrorBody::new(code, message.clone());
    let local = |code: &str| json!({ "error": code, "message": message });
    let body = match *err {
        ClientError::StaleToken {
            presented,
            highest,
            next_seq,
        } => answer(ErrorCode::StaleFencingToken)
            .with(Field::PresentedToken, presented)
            .with(Field::HighestToken, highest)
            .with(Field::NextSeq, next_seq),
        ClientError::SeqMismatch { expected, next_seq } => answer(ErrorCode::SeqMismatch)
            .with(Field::MatchSeqNum, expected)
            .with(Field::NextSeq, next_seq),
        ClientError::StreamSealed {
            first_seq,
            next_seq,
            highest_token,
        } => answer(ErrorCode::StreamSealed)
            .with(Field::FirstSeq, first_seq)
            .with(Field::NextSeq, next_seq)
            .with(Field::HighestToken, highest_token)
            .with(Field::Sealed, true),
        ClientError::NotFound => answer(ErrorCode::StreamNotFound),
        ClientError::OutOfRange {
            first_seq,
            next_seq,
        } => answer(ErrorCode::OutOfRange)
            .with(Field::FirstSeq, first_seq)
            .with(Field::NextSeq, next_seq),
        ClientError::TooLarge { .. } => answer(ErrorCode::TooLarge),
        ClientError::BadRequest { .. } => answer(ErrorCode::BadRequest),
        ClientError::Unauthenticated { .. } => answer(ErrorCode::Unauthenticated),
        ClientError::Forbidden { ref scope, .. } => match scope {
            Some(s) => answer(ErrorCode::Forbidden).with(Field::Scope, s.as_str()),
            None => answer(ErrorCode::Forbidden),
        },
        ClientError::Unavailable {
            outcome_unknown, ..
        } => answer(ErrorCode::Unavailable).with(Field::OutcomeUnknown, outcome_unknown),
        ClientError::InsufficientStorage {
            outcome_unknown, ..
        } => answer(ErrorCode::InsufficientStorage).with(Field::OutcomeUnknown, outcome_unknown),
        ClientError::OutcomeUnknown { .. } => {
            let mut v = local("outcome_unknown");
            v[Field::OutcomeUnknown.as_str()] = json!(true);
            return v;
        }
        ClientError::Transport { .. } => return local("transport"),
        ClientError::Protocol { .. } => return local("protocol"),
        ClientError::ProducerFenced { floor } => {
            answer(ErrorCode::ProducerFenced).with(Field::ProducerTokenFloor, floor)
        }
        ClientError::ProducerSeqStale { last } => {
            answer(ErrorCode::ProducerSeqStale).with(Field::LastProducerSeq, last)
        }
        ClientError::ProducerSeqGap { expected } => {
            answer(ErrorCode::ProducerSeqGap).with(Field::ExpectedProducerSeq, expected)
        }
        ClientError::DeadlineExceeded { writer_ms } => {
            answer(ErrorCode::DeadlineExceeded).with(Field::WriterMs, writer_ms)
        }
        ClientError::BatchRefused { ref first, ref ops } => {
            let mut v = error_json(first);
            v["message"] = json!(message);
            v[Field::Ops.as_str()] = json!(ops);
            return v;
        }
    };
    body.to_value()
}

/// Reports `err` on stderr (JSON with `--json`, a sentence otherwise) and
/// turns it into the exit code.
pub fn fail(err: &ClientError, json_output: bool) -> ExitCode {
    if json_output {
        eprintln!("{}", error_json(err));
    } else if let ClientError::StaleToken { .. } = err {
        eprintln!("fencelog: fenced out: {err}");
    } else {
        eprintln!("fencelog: {err}");
    }
    ExitCode::from(exit_code(err))
}

/// A record as one JSON line, in the API's own shape (keys sorted).
pub fn record_json(r: &Record) -> Value {
    serde_json::to_value(RecordJson::new(r)).expect("records serialize")
}

/// A record as one human line: `seq token body`. Control characters are
/// escaped so a body can never break the one-record-per-line shape; a body
/// that is not UTF-8 is shown as `base64:...`.
pub fn record_line(r: &Record) -> String {
    let body = match BodyJson::encode(&r.body) {
        BodyJson::Text(s) => s
            .chars()
            .flat_map(|c| {
                if c.is_control() {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect::<String>(),
        BodyJson::Base64(b64) => format!("base64:{b64}"),
    };
    format!("{}\t{}\t{}", r.seq, r.fencing_token, body)
}

/// A stream's state as one JSON line, in the API's own shape (keys sorted).
pub fn info_json(s: &StreamInfo) -> Value {
    serde_json::to_value(s).expect("stream states serialize")
}

pub fn info_line(s: &StreamInfo) -> String {
    let limit = |v: Option<u64>| v.map_or("unlimited".to_string(), |v| v.to_string());
    let mut line = format!(
        "{}\tnext_seq={}\thighest_token={}\tfirst_seq={}\tlast_timestamp_ms={}\tbytes={}\tretention_age_s={}\tretention_bytes={}",
        s.stream,
        s.next_seq,
        s.highest_token,
        s.first_seq,
        s.last_timestamp_ms,
        s.bytes,
        limit(s.retention_age_s),
        limit(s.retention_bytes),
    );
    if s.sealed {
        line.push_str("\tsealed");
    }
    if s.deleted {
        line.push_str("\tdeleted");
    }
    line
}
