//! `fencelog fence STREAM --token T`: raise the stream's highest token
//! without writing, so every older owner is rejected from now on.

use super::common::{self, ServerArgs, EXIT_OK};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Stream to fence (1-255 of A-Z a-z 0-9 . _ : -); created if missing.
    #[arg(value_parser = common::parse_stream)]
    pub stream: String,
    /// The new owner's fencing token (1..=2^64-1).
    #[arg(long, value_parser = common::parse_token)]
    pub token: u64,
    /// Print the stream state as JSON.
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
    match common::block_on(client.fence(&args.stream, args.token)) {
        Ok(info) => {
            if args.json {
                println!("{}", common::info_json(&info));
            } else {
                println!(
                    "fenced {} at token {} (next_seq {})",
                    info.stream, info.highest_token, info.next_seq
                );
            }
            ExitCode::from(EXIT_OK)
        }
        Err(e) => common::fail(&e, args.json),
    }
}
