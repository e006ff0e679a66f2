//! `fencelog append STREAM --token T [--match-seq N] [DATA | -]`: one record
//! from the argument, or one record per stdin line, sent in batches.

use super::common::{self, ServerArgs, EXIT_OK};
use bytes::Bytes;
use fencelog_client::{AppendAck, Client, ClientError};
use serde_json::json;
use std::io::BufRead;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Stream to append to.
    pub stream: String,
    /// Fencing token of this writer (1..=2^64-1).
    #[arg(long)]
    pub token: u64,
    /// Only append if the stream's next_seq equals N. With several stdin
    /// batches, each later batch expects the seq right after the previous.
    #[arg(long = "match-seq")]
    pub match_seq: Option<u64>,
    /// The record; `-` or nothing reads one record per line from stdin.
    pub data: Option<String>,
    /// Most records per request; keep at or below the server's
    /// batch-records-max.
    #[arg(long, default_value_t = fencelog_engine::config::BATCH_RECORDS_DEFAULT)]
    pub batch_records: usize,
    /// Most body bytes per request; keep at or below the server's
    /// batch-bytes-max.
    #[arg(long, default_value_t = fencelog_engine::config::BATCH_BYTES_DEFAULT)]
    pub batch_bytes: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// What was appended so far; printed even when a later batch fails, so the
/// caller knows exactly which lines are durable.
#[derive(Default)]
struct Progress {
    first_seq: Option<u64>,
    last: Option<AppendAck>,
    records: u64,
    batches: u64,
}

pub fn run(args: Args) -> ExitCode {
    let client = match args.server.client() {
        Ok(c) => c,
        Err(e) => return common::fail(&e, args.json),
    };
    let batch_records = args.batch_records.max(1);
    let batch_bytes = args.batch_bytes.max(1);
    let mut progress = Progress::default();
    let result = match args.data.as_deref() {
        Some(d) if d != "-" => common::block_on(send(
            &client,
            &args,
            vec![Bytes::from(d.to_string())],
            &mut progress,
        )),
        _ => {
            // A reader thread lets batches go out as lines arrive, so a
            // slow pipe (`tail ... | fencelog append`) is not held back
            // waiting for a full batch.
            let (tx, mut rx) =
                tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(batch_records);
            std::thread::spawn(move || {
                let stdin = std::io::stdin();
                let mut lock = stdin.lock();
                loop {
                    let mut line = Vec::new();
                    match lock.read_until(b'\n', &mut line) {
                        Ok(0) => return,
                        Ok(_) => {
                            if line.last() == Some(&b'\n') {
                                line.pop();
                                if line.last() == Some(&b'\r') {
                                    line.pop();
                                }
                            }
                            if tx.blocking_send(Ok(line)).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let _ = tx.blocking_send(Err(e));
                            return;
                        }
                    }
                }
            });
            common::block_on(async {
                let mut pending: Option<Vec<u8>> = None;
                loop {
                    let first = match pending.take() {
                        Some(l) => l,
                        None => match rx.recv().await {
                            Some(Ok(l)) => l,
                            Some(Err(e)) => return Err(StdinError(e).into()),
                            None => return Ok(()),
                        },
                    };
                    let mut bytes = first.len();
                    let mut batch = vec![Bytes::from(first)];
                    while batch.len() < batch_records {
                        match rx.try_recv() {
                            Ok(Ok(l)) if bytes + l.len() <= batch_bytes => {
                                bytes += l.len();
                                batch.push(Bytes::from(l));
                            }
                            Ok(Ok(l)) => {
                                pending = Some(l);
                                break;
                            }
                            Ok(Err(e)) => return Err(StdinError(e).into()),
                            Err(_) => break,
                        }
                    }
                    send(&client, &args, batch, &mut progress).await?;
                }
            })
        }
    };
    // After a failure, only a partial success is worth reporting: it tells
    // the caller exactly which lines are already durable.
    if result.is_ok() || progress.records > 0 {
        report(&args, &progress);
    }
    match result {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(Failure::Client(e)) => common::fail(&e, args.json),
        Err(Failure::Stdin(StdinError(e))) => {
            eprintln!("fencelog: cannot read stdin: {e}");
            ExitCode::from(common::EXIT_FAILURE)
        }
    }
}

struct StdinError(std::io::Error);

enum Failure {
    Client(ClientError),
    Stdin(StdinError),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        Failure::Client(e)
    }
}

impl From<StdinError> for Failure {
    fn from(e: StdinError) -> Self {
        Failure::Stdin(e)
    }
}

async fn send(
    client: &Client,
    args: &Args,
    batch: Vec<Bytes>,
    progress: &mut Progress,
) -> Result<(), Failure> {
    // Later batches chain on the previous ack, so --match-seq guards the
    // whole input, not only its first batch.
    let expect = match &progress.last {
        Some(ack) if args.match_seq.is_some() => Some(ack.next_seq),
        _ => args.match_seq,
    };
    let n = batch.len() as u64;
    let ack = client
        .append_with(&args.stream, args.token, batch, expect)
        .await?;
    progress.first_seq.get_or_insert(ack.first_seq);
    progress.records += n;
    progress.batches += 1;
    progress.last = Some(ack);
    Ok(())
}

fn report(args: &Args, p: &Progress) {
    let Some(last) = &p.last else {
        if args.json {
            println!(
                "{}",
                json!({ "stream": args.stream, "records": 0, "batches": 0 })
            );
        } else {
            println!("appended 0 records to {}", args.stream);
        }
        return;
    };
    let first = p.first_seq.unwrap_or(last.first_seq);
    if args.json {
        println!(
            "{}",
            json!({
                "stream": last.stream,
                "first_seq": first,
                "last_seq": last.last_seq,
                "next_seq": last.next_seq,
                "fencing_token": last.fencing_token,
                "timestamp_ms": last.timestamp_ms,
                "records": p.records,
                "batches": p.batches,
            })
        );
    } else {
        println!(
            "appended {} record{} to {} at seq {}..={} with token {}",
            p.records,
            if p.records == 1 { "" } else { "s" },
            last.stream,
            first,
            last.last_seq,
            last.fencing_token
        );
    }
}
