//! The commands of idempotent producers, fence history and cursors:
//! `fencelog producer STREAM ID` ("did my write land?"), `fencelog fences
//! STREAM` (the fence history, newest first) and
//! `fencelog cursor STREAM NAME [--set SEQ --token T]`.

use super::common::{self, ServerArgs, EXIT_OK, EXIT_REJECTED};
use fencelog_client::ClientError;
use serde::Serialize;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ProducerArgs {
    pub stream: String,
    /// The idempotent producer's id.
    pub id: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, clap::Args)]
pub struct FencesArgs {
    pub stream: String,
    /// Most entries (the server keeps the last 64).
    #[arg(long)]
    pub limit: Option<u64>,
    /// Print one JSON object per entry.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, clap::Args)]
pub struct CursorArgs {
    pub stream: String,
    /// The cursor's name.
    pub name: String,
    /// Commit the cursor at this seq (needs --token).
    #[arg(long, requires = "token")]
    pub set: Option<u64>,
    /// The cursor's fencing token for --set.
    #[arg(long)]
    pub token: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

fn print<T: Serialize>(value: &T, json: bool, line: impl FnOnce(&T) -> String) {
    if json {
        println!(
            "{}",
            serde_json::to_value(value).expect("wire types serialise")
        );
    } else {
        println!("{}", line(value));
    }
}

pub fn producer(args: ProducerArgs) -> ExitCode {
    let client = match args.server.client() {
        Ok(c) => c,
        Err(e) => return common::fail(&e, args.json),
    };
    match common::block_on(client.producer(&args.stream, &args.id)) {
        Ok(Some(p)) => {
            print(&p, args.json, |p| {
                format!(
                    "{}\tproducer_seq={}\tfirst_seq={}\tlast_seq={}\tfencing_token={}\ttimestamp_ms={}",
                    p.producer_id, p.producer_seq, p.first_seq, p.last_seq, p.fencing_token, p.timestamp_ms
                )
            });
            ExitCode::from(EXIT_OK)
        }
        Ok(None) => {
            eprintln!(
                "fencelog: stream {} does not remember producer {:?}",
                args.stream, args.id
            );
            ExitCode::from(EXIT_REJECTED)
        }
        Err(e) => common::fail(&e, args.json),
    }
}

pub fn fences(args: FencesArgs) -> ExitCode {
    let client = match args.server.client() {
        Ok(c) => c,
        Err(e) => return common::fail(&e, args.json),
    };
    match common::block_on(client.fences(&args.stream, args.limit)) {
        Ok(list) => {
            for f in &list.fences {
                print(f, args.json, |f| {
                    format!(
                        "{}\tfirst_seq={}\ttimestamp_ms={}\tby={}",
                        f.fencing_token, f.first_seq, f.timestamp_ms, f.by
                    )
                });
            }
            ExitCode::from(EXIT_OK)
        }
        Err(e) => common::fail(&e, args.json),
    }
}

pub fn cursor(args: CursorArgs) -> ExitCode {
    let client = match args.server.client() {
        Ok(c) => c,
        Err(e) => return common::fail(&e, args.json),
    };
    let r: Result<_, ClientError> = match (args.set, args.token) {
        (Some(seq), Some(token)) => {
            common::block_on(client.commit_cursor(&args.stream, &args.name, token, seq))
        }
        _ => common::block_on(client.cursor(&args.stream, &args.name)),
    };
    match r {
        Ok(c) => {
            print(&c, args.json, |c| {
                format!(
                    "{}\tseq={}\tfencing_token={}\ttimestamp_ms={}",
                    c.name, c.seq, c.fencing_token, c.timestamp_ms
                )
            });
            ExitCode::from(EXIT_OK)
        }
        Err(e) => common::fail(&e, args.json),
    }
}
