//! `fencelog read STREAM [--from N | --last N | --since D] [--count M] [--json]`:
//! the durable records from the start, one per line, up to the tail as it
//! was when the read began, paging with each page's `next_start_seq`.

use super::common::{self, ServerArgs, EXIT_OK};
use super::start::StartArgs;
use fencelog_api::ReadStart;
use fencelog_client::ReadOptions;
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Stream to read (1-255 of A-Z a-z 0-9 . _ : -).
    #[arg(value_parser = common::parse_stream)]
    pub stream: String,
    #[command(flatten)]
    pub start: StartArgs,
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
        let mut start = args.start.start();
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
            let page = match client.read_from(&args.stream, start, &opts).await {
                Ok(p) => p,
                Err(e) => return common::fail(&e, args.json),
            };
            let end = *end.get_or_insert(page.next_seq);
            let mut out = stdout.lock();
            for r in page
                .records
                .iter()
                .take_while(|r| r.seq < end)
                .take(usize::try_from(left).unwrap_or(usize::MAX))
            {
                let line = if args.json {
                    common::record_json(r)
                } else {
                    common::record_line(r)
                };
                if writeln!(out, "{line}").is_err() {
                    // Reader went away (e.g. `| head`): that is not our failure.
                    return ExitCode::from(EXIT_OK);
                }
                left -= 1;
            }
            // The continuation, never the tail: `next_seq` is usually far
            // past this page's last record.
            if page.records.is_empty() || page.next_start_seq >= end {
                break;
            }
            start = ReadStart::Seq(page.next_start_seq);
        }
        ExitCode::from(EXIT_OK)
    })
}
