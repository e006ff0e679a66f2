//! `fencelog tail STREAM [--from N|end | --last N | --since D] [--json]`:
//! every record from the start, then new ones as they become durable, until
//! Ctrl-C. A stream that does not exist yet is waited for (`--no-wait` to
//! fail instead). Reconnects by itself, resumes exactly where it stopped,
//! and says on stderr when it lost and regained the server and when it
//! stops.

use super::common::{self, ServerArgs, EXIT_OK};
use super::signals::Interrupts;
use super::start::StartArgs;
use fencelog_client::{ClientError, TailEvent, TailOptions};
use futures_util::StreamExt;
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Stream to follow (1-255 of A-Z a-z 0-9 . _ : -).
    #[arg(value_parser = common::parse_stream)]
    pub stream: String,
    #[command(flatten)]
    pub start: StartArgs,
    /// Fail (exit 4) when the stream does not exist, instead of waiting
    /// for it to be created.
    #[arg(long)]
    pub no_wait: bool,
    /// One JSON object per line instead of `seq<TAB>token<TAB>body`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

pub fn run(args: Args) -> ExitCode {
    let client = match args.server.client() {
        Ok(c) => c,
        Err(e) => return common::fail(&e, args.json),
    };
    common::block_on(async {
        let mut interrupts = Interrupts::catch();
        if !args.no_wait {
            // Anything else the tail itself reports.
            if let Err(ClientError::StreamNotFound { .. }) = client.state(&args.stream).await {
                eprintln!(
                    "fencelog: stream {:?} does not exist yet; waiting for it to be created (Ctrl-C to stop)",
                    args.stream
                );
            }
        }
        let options = TailOptions {
            start: args.start.start(),
            wait_for_stream: !args.no_wait,
        };
        let tail = client.tail_with(&args.stream, options);
        futures_util::pin_mut!(tail);
        let mut next: Option<u64> = None;
        loop {
            let item = tokio::select! {
                _ = interrupts.next() => {
                    stopped(&args.stream, next);
                    return ExitCode::from(EXIT_OK);
                }
                item = tail.next() => item,
            };
            match item {
                Some(Ok(TailEvent::Record(r))) => {
                    next = Some(r.seq + 1);
                    let line = if args.json {
                        common::record_json(&r)
                    } else {
                        common::record_line(&r)
                    };
                    let mut out = std::io::stdout().lock();
                    // A consumer reading line by line must see each record
                    // as soon as it is durable, not when a buffer fills.
                    if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
                        return ExitCode::from(EXIT_OK);
                    }
                }
                Some(Ok(TailEvent::CaughtUp { next_seq })) => next = Some(next_seq),
                Some(Ok(TailEvent::Sealed { next_seq })) => {
                    // Everything was printed and nothing more can come.
                    eprintln!("fencelog: {} is sealed at next_seq {next_seq}", args.stream);
                    return ExitCode::from(EXIT_OK);
                }
                Some(Ok(TailEvent::Disconnected { error })) => {
                    eprintln!("fencelog: disconnected ({error}); retrying…");
                }
                Some(Ok(TailEvent::Reconnected { resume_seq })) => match resume_seq {
                    Some(seq) => eprintln!("fencelog: resumed at seq {seq}"),
                    None => eprintln!("fencelog: reconnected"),
                },
                Some(Err(e)) => {
                    let code = common::fail(&e, args.json);
                    stopped(&args.stream, next);
                    return code;
                }
                None => {
                    stopped(&args.stream, next);
                    return ExitCode::from(EXIT_OK);
                }
            }
        }
    })
}

fn stopped(stream: &str, next: Option<u64>) {
    match next {
        Some(seq) => eprintln!("fencelog: stopped following {stream} before seq {seq}"),
        None => eprintln!("fencelog: stopped following {stream}"),
    }
}
