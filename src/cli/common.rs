//! What the client subcommands share: the server option, exit codes, and
//! how records and errors are printed.

use base64::Engine as _;
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
Exit codes of the client commands (append, read, tail, fence, status):
  0  success
  1  failure: server unreachable or unavailable, or a write's outcome is unknown
  2  usage error (bad arguments)
  3  stale fencing token: a newer owner took over the stream; stop writing
  4  other rejection: seq mismatch, stream not found, bad request, too large";

#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Base URL of the fencelog server.
    #[arg(
        long = "server",
        env = "FENCELOG_URL",
        default_value = "http://127.0.0.1:7070"
    )]
    pub url: String,
}

impl ServerArgs {
    pub fn client(&self) -> Result<Client, ClientError> {
        Client::new(self.url.clone())
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
        ClientError::StaleToken { .. } => EXIT_STALE,
        ClientError::SeqMismatch { .. }
        | ClientError::NotFound
        | ClientError::OutOfRange { .. }
        | ClientError::TooLarge { .. }
        | ClientError::BadRequest { .. } => EXIT_REJECTED,
        ClientError::Unavailable { .. }
        | ClientError::InsufficientStorage { .. }
        | ClientError::OutcomeUnknown { .. }
        | ClientError::Transport { .. }
        | ClientError::Protocol { .. } => EXIT_FAILURE,
    }
}

/// The error as a JSON object on one line, with the fields a script needs
/// to act on it (e.g. the highest token after a stale rejection).
pub fn error_json(err: &ClientError) -> Value {
    let message = err.to_string();
    match err {
        ClientError::StaleToken {
            presented,
            highest,
            next_seq,
        } => json!({
            "error": "stale_fencing_token", "message": message,
            "presented_token": presented, "highest_token": highest, "next_seq": next_seq,
        }),
        ClientError::SeqMismatch { expected, next_seq } => json!({
            "error": "seq_mismatch", "message": message,
            "match_seq_num": expected, "next_seq": next_seq,
        }),
        ClientError::NotFound => json!({ "error": "stream_not_found", "message": message }),
        ClientError::OutOfRange { next_seq } => {
            json!({ "error": "out_of_range", "message": message, "next_seq": next_seq })
        }
        ClientError::TooLarge { .. } => json!({ "error": "too_large", "message": message }),
        ClientError::BadRequest { .. } => json!({ "error": "bad_request", "message": message }),
        ClientError::Unavailable {
            outcome_unknown, ..
        } => json!({
            "error": "unavailable", "message": message, "outcome_unknown": outcome_unknown,
        }),
        ClientError::InsufficientStorage {
            outcome_unknown, ..
        } => json!({
            "error": "insufficient_storage", "message": message,
            "outcome_unknown": outcome_unknown,
        }),
        ClientError::OutcomeUnknown { .. } => {
            json!({ "error": "outcome_unknown", "message": message, "outcome_unknown": true })
        }
        ClientError::Transport { .. } => json!({ "error": "transport", "message": message }),
        ClientError::Protocol { .. } => json!({ "error": "protocol", "message": message }),
    }
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

/// A record as one JSON line, in the API's own shape.
pub fn record_json(r: &Record) -> Value {
    let mut v = json!({
        "seq": r.seq,
        "fencing_token": r.fencing_token,
        "timestamp_ms": r.timestamp_ms,
    });
    match std::str::from_utf8(&r.body) {
        Ok(s) => v["body"] = json!(s),
        Err(_) => {
            v["body_base64"] = json!(base64::engine::general_purpose::STANDARD.encode(&r.body))
        }
    }
    v
}

/// A record as one human line: `seq token body`. Control characters are
/// escaped so a body can never break the one-record-per-line shape; a body
/// that is not UTF-8 is shown as `base64:...`.
pub fn record_line(r: &Record) -> String {
    let body = match std::str::from_utf8(&r.body) {
        Ok(s) => s
            .chars()
            .flat_map(|c| {
                if c.is_control() {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect::<String>(),
        Err(_) => format!(
            "base64:{}",
            base64::engine::general_purpose::STANDARD.encode(&r.body)
        ),
    };
    format!("{}\t{}\t{}", r.seq, r.fencing_token, body)
}

pub fn info_json(s: &StreamInfo) -> Value {
    json!({
        "stream": s.stream,
        "first_seq": s.first_seq,
        "next_seq": s.next_seq,
        "highest_token": s.highest_token,
        "last_timestamp_ms": s.last_timestamp_ms,
    })
}

pub fn info_line(s: &StreamInfo) -> String {
    format!(
        "{}\tnext_seq={}\thighest_token={}\tfirst_seq={}\tlast_timestamp_ms={}",
        s.stream, s.next_seq, s.highest_token, s.first_seq, s.last_timestamp_ms
    )
}
