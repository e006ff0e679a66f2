//! What the client subcommands share: the server option, the arguments
//! checked before any request (stream names, tokens, durations), exit
//! codes, and how records and errors are printed.

use fencelog_api::{BodyJson, HeadersJson, RecordJson};
use fencelog_client::{Client, ClientError, StreamInfo};
use fencelog_engine::Record;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::Duration;

/// The command did what was asked.
pub const EXIT_OK: u8 = 0;
/// Transport failure, server unavailable, or the outcome of a write is
/// unknown: retrying may help, after checking the stream's state.
pub const EXIT_FAILURE: u8 = 1;
/// Bad arguments: fix the command (clap uses the same code).
pub const EXIT_USAGE: u8 = 2;
/// The stream accepted a higher fencing token: this writer lost ownership
/// and must stop. Distinct so scripts can react to being fenced.
pub const EXIT_STALE: u8 = 3;
/// Any other rejection (seq mismatch, not found, bad request, too large):
/// retrying the same request will fail the same way.
pub const EXIT_REJECTED: u8 = 4;
/// Stopped by Ctrl-C (SIGINT) or SIGTERM before the work was done, as
/// shells report a command killed by SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Shown by `fencelog --help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes of the client commands (append, read, tail, fence, status, trim,
seal, delete, config, producer, fences, cursor):
  0    success
  1    failure: server unreachable or unavailable, or a write's outcome is unknown
  2    usage error (bad arguments, checked before anything is sent)
  3    stale fencing token (or producer fenced): a newer owner took over the
       stream; stop writing
  4    other rejection: stream sealed, seq mismatch, stream not found, no such
       route, bad request, too large, out of range, producer seq stale or gap,
       deadline exceeded, producer or cursor not found
  130  interrupted (Ctrl-C) before the work was done";

#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The fencelog server: http://HOST:PORT or https://HOST:PORT, or
    /// HOST:PORT for plain HTTP.
    #[arg(
        long = "server",
        env = "FENCELOG_URL",
        default_value = "http://127.0.0.1:7070",
        value_parser = parse_server_url,
        value_name = "URL"
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
    /// A file holding the access-token secret (surrounding whitespace
    /// ignored), instead of --auth-token: nothing shows up in `ps` or the
    /// environment.
    #[arg(
        long,
        env = "FENCELOG_AUTH_TOKEN_FILE",
        conflicts_with = "auth_token",
        value_name = "PATH"
    )]
    pub auth_token_file: Option<std::path::PathBuf>,
}

/// Longest access-token file read (a secret is a line; a bigger file is
/// the wrong file).
const AUTH_TOKEN_FILE_BYTES_MAX: u64 = 4096;

impl ServerArgs {
    pub fn client(&self) -> Result<Client, ClientError> {
        let mut builder = Client::builder(self.url.clone());
        if let Some(path) = &self.ca_cert {
            builder = builder
                .ca_cert_file(path)
                .map_err(|e| ClientError::BadRequest {
                    message: format!("cannot read --ca-cert {}: {e}", path.display()),
                    answer: None,
                })?;
        }
        if let Some(secret) = self.secret()? {
            builder = builder.token(secret);
        }
        builder.build()
    }

    /// The access-token secret: `--auth-token`, or `--auth-token-file`'s
    /// contents.
    fn secret(&self) -> Result<Option<String>, ClientError> {
        let Some(path) = &self.auth_token_file else {
            return Ok(self.auth_token.clone());
        };
        let bad = |why: String| ClientError::BadRequest {
            message: format!("cannot read --auth-token-file {}: {why}", path.display()),
            answer: None,
        };
        let len = std::fs::metadata(path)
            .map_err(|e| bad(e.to_string()))?
            .len();
        if len > AUTH_TOKEN_FILE_BYTES_MAX {
            return Err(bad(format!(
                "{len} bytes, an access token file holds at most {AUTH_TOKEN_FILE_BYTES_MAX}"
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        match text.trim() {
            "" => Err(bad("the file is empty".into())),
            secret => Ok(Some(secret.to_string())),
        }
    }
}

/// `--server`, checked and normalised before anything is sent.
fn parse_server_url(raw: &str) -> Result<String, String> {
    fencelog_client::normalize_url(raw).map_err(|e| match e {
        ClientError::InvalidUrl { reason, .. } => reason,
        other => other.to_string(),
    })
}

/// A stream name argument, checked by the server's own rule so a bad name
/// is a usage error here, not a round trip.
pub fn parse_stream(raw: &str) -> Result<String, String> {
    fencelog_engine::validate_stream_name(raw)
        .map(|()| raw.to_string())
        .map_err(|e| e.to_string())
}

/// A fencing token argument: 1..=2^64-1.
pub fn parse_token(raw: &str) -> Result<u64, String> {
    match raw.parse::<u64>() {
        Ok(0) => Err("0 is never a fencing token; tokens are 1..=18446744073709551615".into()),
        Ok(t) => Ok(t),
        Err(_) => Err(format!(
            "a fencing token is an integer in 1..=18446744073709551615, got {raw:?}"
        )),
    }
}

/// A duration argument such as `90s`, `10m`, `2h`, `7d` or `500ms`.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (digits, unit) = raw.split_at(split);
    let usage = || {
        format!(
            "{raw:?} is not a duration: write a number and a unit, e.g. 90s, 10m, 2h, 7d or 500ms"
        )
    };
    let n: u64 = digits.parse().map_err(|_| usage())?;
    let ms_per = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(usage()),
    };
    n.checked_mul(ms_per)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{raw:?} is too long a duration"))
}

/// The Unix ms `since` before now, for `--since`.
pub fn since_ms(since: Duration) -> u64 {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(ms)
        .unwrap_or(0);
    now.saturating_sub(ms(since))
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
        | ClientError::StreamNotFound { .. }
        | ClientError::NoSuchRoute { .. }
        | ClientError::OutOfRange { .. }
        | ClientError::TooLarge { .. }
        | ClientError::BadRequest { .. }
        | ClientError::Unauthenticated { .. }
        | ClientError::Forbidden { .. } => EXIT_REJECTED,
        ClientError::Rejected { answer } if answer.status() < 500 => EXIT_REJECTED,
        ClientError::InvalidUrl { .. } => EXIT_USAGE,
        ClientError::Rejected { .. }
        | ClientError::Unavailable { .. }
        | ClientError::InsufficientStorage { .. }
        | ClientError::OutcomeUnknown { .. }
        | ClientError::Transport { .. }
        | ClientError::Protocol { .. }
        | ClientError::SessionEnded { .. } => EXIT_FAILURE,
    }
}

/// The error as a JSON object on one line: the server's error body exactly
/// as it answered (every field, `stream` included), or one of the same
/// shape for failures no server answer names (`outcome_unknown`,
/// `transport`, `no_such_route`, `invalid_url`, `protocol`).
pub fn error_json(err: &ClientError) -> Value {
    if let ClientError::BatchRefused { first, ops } = err {
        // The first refusal's body, with every op's outcome.
        let mut v = error_json(first);
        v[fencelog_api::Field::Ops.as_str()] = json!(ops);
        return v;
    }
    if let Some(answer) = err.answer() {
        return answer.to_value();
    }
    let message = err.to_string();
    match err {
        ClientError::OutcomeUnknown { .. } => {
            json!({ "error": "outcome_unknown", "message": message, "outcome_unknown": true })
        }
        ClientError::NoSuchRoute { status, url, .. } => {
            json!({ "error": "no_such_route", "message": message, "status": status, "url": url })
        }
        ClientError::Protocol { status, .. } => {
            json!({ "error": "protocol", "message": message, "status": status })
        }
        ClientError::InvalidUrl { url, .. } => {
            json!({ "error": "invalid_url", "message": message, "url": url })
        }
        // Status-only classes (a proxy's 413, 503, ...) keep their class.
        ClientError::TooLarge { .. } => json!({ "error": "too_large", "message": message }),
        ClientError::BadRequest { .. } => json!({ "error": "bad_request", "message": message }),
        ClientError::Unauthenticated { .. } => {
            json!({ "error": "unauthenticated", "message": message })
        }
        ClientError::Forbidden { scope, .. } => {
            json!({ "error": "forbidden", "message": message, "scope": scope })
        }
        ClientError::Unavailable {
            outcome_unknown, ..
        }
        | ClientError::InsufficientStorage {
            outcome_unknown, ..
        } => {
            let code = match err {
                ClientError::Unavailable { .. } => "unavailable",
                _ => "insufficient_storage",
            };
            json!({ "error": code, "message": message, "outcome_unknown": outcome_unknown })
        }
        _ => json!({ "error": "transport", "message": message }),
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

/// A record as one JSON line, in the API's own shape and field order
/// (`seq`, `fencing_token`, `timestamp_ms`, headers when it has any, body).
pub fn record_json(r: &Record) -> String {
    serde_json::to_string(&RecordJson::new(r)).expect("records serialize")
}

/// Text with control characters escaped, so it can never break a line.
fn escaped(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// A record as one human line: `seq<TAB>token<TAB>body`, and a fourth
/// column `name=value, ...` when it has headers. Control characters are
/// escaped so a record is always one line; bytes that are not UTF-8 are
/// shown as `base64:...`.
pub fn record_line(r: &Record) -> String {
    let body = match BodyJson::encode(&r.body) {
        BodyJson::Text(s) => escaped(&s),
        BodyJson::Base64(b64) => format!("base64:{b64}"),
    };
    let mut line = format!("{}\t{}\t{}", r.seq, r.fencing_token, body);
    if let Some(headers) = HeadersJson::encode(&r.headers) {
        let pairs: Vec<String> = match headers {
            HeadersJson::Text(pairs) => pairs
                .iter()
                .map(|(n, v)| format!("{}={}", escaped(n), escaped(v)))
                .collect(),
            HeadersJson::Base64(pairs) => pairs
                .iter()
                .map(|(n, v)| format!("base64:{n}=base64:{v}"))
                .collect(),
        };
        line.push('\t');
        line.push_str(&pairs.join(", "));
    }
    line
}

/// A stream's state as one JSON line, in the API's own shape and field
/// order (a `Value` would sort the keys).
pub fn info_json(s: &StreamInfo) -> String {
    serde_json::to_string(s).expect("stream states serialize")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_number_and_a_unit() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        for bad in ["", "10", "m", "1.5h", "-3s", "10 m"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("is not a duration"), "{bad}: {e}");
        }
    }

    #[test]
    fn tokens_and_names_are_checked_with_reasons() {
        assert_eq!(parse_token("42"), Ok(42));
        assert!(parse_token("0")
            .unwrap_err()
            .starts_with("0 is never a fencing token"));
        assert!(parse_token("-1").unwrap_err().contains("got \"-1\""));
        assert_eq!(parse_stream("orders"), Ok("orders".into()));
        assert!(parse_stream("team/orders")
            .unwrap_err()
            .starts_with("'/' is not allowed in a stream name"));
    }
}
