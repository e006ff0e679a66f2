//! `fencelog tail STREAM [--from N] [--json]`: every record from N, then
//! new ones as they become durable, until Ctrl-C. Reconnects by itself and
//! resumes exactly where it stopped.

use super::common::{self, ServerArgs, EXIT_OK};
use futures_util::StreamExt;
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    pub stream: String,
    /// First seq to print.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
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
        let tail = client.tail(&args.stream, args.from);
        futures_util::pin_mut!(tail);
        let stop = stop_signal();
        futures_util::pin_mut!(stop);
        loop {
            let item = tokio::select! {
                _ = &mut stop => return ExitCode::from(EXIT_OK),
                item = tail.next() => item,
            };
            match item {
                Some(Ok(r)) => {
                    let line = if args.json {
                        common::record_json(&r).to_string()
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
                Some(Err(e)) => return common::fail(&e, args.json),
                None => return ExitCode::from(EXIT_OK),
            }
        }
    })
}

/// Ctrl-C, or SIGTERM from a supervisor: both mean "stop following".
/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is
/// called, not when the future is first polled, so a signal that arrives
/// between starting the tail and its first wait is not lost.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let int = signal(SignalKind::interrupt());
    let term = signal(SignalKind::terminate());
    async move {
        match (int, term) {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            // No signal handling available: never stop by signal.
            _ => std::future::pending::<()>().await,
        }
    }
}
