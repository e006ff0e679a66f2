//! A stream's lifecycle from the command line: `fencelog trim STREAM
//! --token T --to N`, `fencelog seal STREAM --token T`, `fencelog delete
//! STREAM --token T`, and `fencelog config STREAM --retention-age 7d
//! --retention-bytes 10GiB`. Each prints the stream's state afterwards (a
//! line, or JSON with `--json`) and exits like every client command.

use super::common::{self, ServerArgs, EXIT_OK};
use super::units::{parse_bytes, parse_duration_s};
use fencelog_client::{ClientError, Retention, StreamConfig, StreamInfo};
use std::process::ExitCode;

/// What every lifecycle command shares.
#[derive(Debug, clap::Args)]
pub struct Common {
    /// Print the stream state as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, clap::Args)]
pub struct TrimArgs {
    pub stream: String,
    /// The owner's fencing token.
    #[arg(long)]
    pub token: u64,
    /// Records below this seq become unreadable (clamped to next_seq; the
    /// trim point never moves back).
    #[arg(long = "to")]
    pub to: u64,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    pub stream: String,
    /// The owner's fencing token.
    #[arg(long)]
    pub token: u64,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    pub stream: String,
    /// Trim records older than this: 7d, 12h, 90m, 30s, seconds, or
    /// `unlimited`; left out, the server's default applies.
    #[arg(long)]
    pub retention_age: Option<String>,
    /// Trim the oldest records while the stream holds more than this:
    /// 10GiB, 500MB, bytes, or `unlimited`; left out, the server's default.
    #[arg(long)]
    pub retention_bytes: Option<String>,
    /// Fence the change with this token (without one it is an operator's
    /// change, accepted on a sealed stream too).
    #[arg(long)]
    pub token: Option<u64>,
    #[command(flatten)]
    pub common: Common,
}

fn retention(
    text: Option<&str>,
    parse: fn(&str) -> Result<u64, String>,
) -> Result<Retention, String> {
    match text {
        None => Ok(Retention::Default),
        Some("unlimited") => Ok(Retention::Unlimited),
        Some(t) => parse(t).map(Retention::Limit),
    }
}

/// Runs one request and reports it the way every client command does.
fn report<F>(common: &Common, verb: &str, request: F) -> ExitCode
where
    F: std::future::Future<Output = Result<StreamInfo, ClientError>>,
{
    match common::block_on(request) {
        Ok(info) => {
            if common.json {
                println!("{}", common::info_json(&info));
            } else {
                println!("{verb} {}", common::info_line(&info));
            }
            ExitCode::from(EXIT_OK)
        }
        Err(e) => common::fail(&e, common.json),
    }
}

pub fn trim(args: TrimArgs) -> ExitCode {
    let client = match args.common.server.client() {
        Ok(c) => c,
        Err(e) => return common::fail(&e, args.common.json),
    };
    report(
        &args.common,
        "trimmed",
        client.trim(&args.stream, args.token, args.to),
    )
}

pub fn seal(args: TokenArgs) -> ExitCode {
    let client = match args.common.server.client() {
        Ok(c) => c,
        Err(e) => return common::fail(&e, args.common.json),
    };
    report(
        &args.common,
        "sealed",
        client.seal(&args.stream, args.token),
    )
}

pub fn delete(args: TokenArgs) -> ExitCode {
    let client = match args.common.server.client() {
        Ok(c) => c,
        Err(e) => return common::fail(&e, args.common.json),
    };
    report(
        &args.common,
        "deleted",
        client.delete(&args.stream, args.token),
    )
}

pub fn config(args: ConfigArgs) -> ExitCode {
    let parsed = retention(args.retention_age.as_deref(), parse_duration_s).and_then(|age| {
        Ok(StreamConfig {
            retention_age_s: age,
            retention_bytes: retention(args.retention_bytes.as_deref(), parse_bytes)?,
            respect_cursors: false,
        })
    });
    let config = match parsed {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fencelog config: {e}");
            return ExitCode::from(2);
        }
    };
    let client = match args.common.server.client() {
        Ok(c) => c,
        Err(e) => return common::fail(&e, args.common.json),
    };
    report(
        &args.common,
        "configured",
        client.set_config(&args.stream, args.token, config),
    )
}
