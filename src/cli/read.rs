//! `fencelog read STREAM [--from N] [--count M] [--json]`: the durable
//! records from N, one per line, up to the tail as it was when the read began.

use super::common::{self, ServerArgs, EXIT_OK};
use fencelog_client::ReadOptions;
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    pub stream: String,
    /// First seq to read.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// Most records to print [default: all up to the tail].
    #[arg(long)]
    pub count: Option<u64>,
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
        let mut next = args.from;
        let mut left = args.count.unwrap_or(u64::MAX);
        // The server caps a page; keep paging until the tail seen by the
        // first page, so a busy stream cannot keep this running forever.
        let mut end: Option<u64> = None;
        let stdout = std::io::stdout();
        while left > 0 {
            let opts = ReadOptions {
                count: Some(left),
                ..ReadOptions::default()
            };
            let page = match client.read(&args.stream, next, &opts).await {
                Ok(p) => p,
                Err(e) => return common::fail(&e, args.json),
            };
            let end = *end.get_or_insert(page.next_seq);
            let mut out = stdout.lock();
            for r in &page.records {
                if r.seq >= end || left == 0 {
                    break;
                }
                let line = if args.json {
                    common::record_json(r).to_string()
                } else {
                    common::record_line(r)
                };
                if writeln!(out, "{line}").is_err() {
                    // Reader went away (e.g. `| head`): that is not our failure.
                    return ExitCode::from(EXIT_OK);
                }
                next = r.seq + 1;
                left -= 1;
            }
            if page.records.is_empty() || next >= end {
                break;
            }
        }
        ExitCode::from(EXIT_OK)
    })
}
