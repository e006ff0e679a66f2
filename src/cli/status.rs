//! `fencelog status [STREAM]`: one stream's state, or every stream.

use super::common::{self, ServerArgs, EXIT_OK};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A stream; without it, every stream is listed.
    #[arg(value_parser = common::parse_stream)]
    pub stream: Option<String>,
    /// Only list streams whose names start with this.
    #[arg(long, default_value = "")]
    pub prefix: String,
    /// Print JSON: the state object, or `{"streams": [...]}`.
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
        if let Some(stream) = &args.stream {
            return match client.state(stream).await {
                Ok(info) => {
                    if args.json {
                        println!("{}", common::info_json(&info));
                    } else {
                        println!("{}", common::info_line(&info));
                    }
                    ExitCode::from(EXIT_OK)
                }
                Err(e) => common::fail(&e, args.json),
            };
        }
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        loop {
            match client.list(&args.prefix, after.as_deref(), None).await {
                Ok(page) => {
                    all.extend(page.streams);
                    match page.next_start_after {
                        Some(a) => after = Some(a),
                        None => break,
                    }
                }
                Err(e) => return common::fail(&e, args.json),
            }
        }
        if args.json {
            let list: Vec<String> = all.iter().map(common::info_json).collect();
            println!("{{\"streams\":[{}]}}", list.join(","));
        } else if all.is_empty() {
            println!("no streams");
        } else {
            for info in &all {
                println!("{}", common::info_line(info));
            }
        }
        ExitCode::from(EXIT_OK)
    })
}
