//! `fencelog fence STREAM --token T`: raise the stream's highest token
//! without writing, so every older owner is rejected from now on.

use super::common::{self, ServerArgs, EXIT_OK};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    pub stream: String,
    /// The new owner's fencing token.
    #[arg(long)]
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
