//! `fencelog fence STREAM... --token T`: raise the streams' highest token
//! without writing, so every older owner is rejected from now on. Several
//! streams are fenced in one multi-stream batch: all of them or none, so no
//! stale owner slips a write into one of them in between (a shard
//! handoff).

use super::common::{self, ServerArgs, EXIT_OK};
use fencelog_client::{BatchOp, StreamInfo};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Streams to fence, one or more (up to 64; each 1-255 of A-Z a-z 0-9 .
    /// _ : -); created if missing. Several are fenced all or none.
    #[arg(required = true, value_parser = common::parse_stream)]
    pub streams: Vec<String>,
    /// The new owner's fencing token (1..=2^64-1).
    #[arg(long, value_parser = common::parse_token)]
    pub token: u64,
    /// Print the stream states as JSON, one per line.
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
    let infos: Result<Vec<StreamInfo>, _> = if let [stream] = args.streams.as_slice() {
        common::block_on(client.fence(stream, args.token)).map(|i| vec![i])
    } else {
        let ops: Vec<BatchOp> = args
            .streams
            .iter()
            .map(|s| BatchOp::Fence {
                stream: s.clone(),
                fencing_token: args.token,
            })
            .collect();
        common::block_on(client.batch(&ops, None)).map(|acks| {
            acks.into_iter()
                .filter_map(|a| serde_json::from_value(a).ok())
                .collect()
        })
    };
    match infos {
        Ok(infos) => {
            for info in infos {
                if args.json {
                    println!("{}", common::info_json(&info));
                } else {
                    println!(
                        "fenced {} at token {} (next_seq {})",
                        info.stream, info.highest_token, info.next_seq
                    );
                }
            }
            ExitCode::from(EXIT_OK)
        }
        Err(e) => common::fail(&e, args.json),
    }
}
