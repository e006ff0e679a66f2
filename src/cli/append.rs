//! `fencelog append STREAM --token T [--match-seq N] [--header K=V]... [DATA | -]`:
//! one record from the argument, or one record per stdin line, sent in
//! batches. Whatever happens — success, a failure, Ctrl-C — the summary of
//! what was acknowledged is printed, so the caller knows exactly which
//! lines are durable.

use super::common::{self, ServerArgs, EXIT_INTERRUPTED, EXIT_OK};
use super::signals::Interrupts;
use bytes::Bytes;
use fencelog_client::{AppendAck, Client, ClientError, Header, RecordIn};
use serde_json::json;
use std::io::BufRead;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Stream to append to (1-255 of A-Z a-z 0-9 . _ : -).
    #[arg(value_parser = common::parse_stream)]
    pub stream: String,
    /// Fencing token of this writer (1..=2^64-1).
    #[arg(long, value_parser = common::parse_token)]
    pub token: u64,
    /// Only append if the stream's next_seq equals N. With several stdin
    /// batches, each later batch expects the seq right after the previous.
    #[arg(long = "match-seq")]
    pub match_seq: Option<u64>,
    /// A header for every record appended, as NAME=VALUE (repeat for more;
    /// at most 64 per record, 8 KiB of names and values, names 1-255 bytes).
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = parse_header)]
    pub headers: Vec<(String, String)>,
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

fn parse_header(raw: &str) -> Result<(String, String), String> {
    let Some((name, value)) = raw.split_once('=') else {
        return Err(format!("{raw:?} is not a header: write NAME=VALUE"));
    };
    let header = [Header::new(name.to_string(), value.to_string())];
    fencelog_engine::validate_headers(&header).map_err(|e| e.to_string())?;
    Ok((name.to_string(), value.to_string()))
}

/// What was appended so far; printed even when a later batch fails or the
/// command is interrupted.
#[derive(Default)]
struct Progress {
    first_seq: Option<u64>,
    last: Option<AppendAck>,
    records: u64,
    batches: u64,
}

/// How the input ended.
enum Outcome {
    Done,
    /// Ctrl-C or SIGTERM; `in_flight` records were sent and their batch's
    /// outcome is unknown (0 when nothing was in flight).
    Interrupted {
        in_flight: u64,
    },
}

pub fn run(args: Args) -> ExitCode {
    let headers: Vec<Header> = args
        .headers
        .iter()
        .map(|(n, v)| Header::new(n.clone(), v.clone()))
        .collect();
    if let Err(e) = fencelog_engine::validate_headers(&headers) {
        eprintln!("fencelog: --header: {e}");
        return ExitCode::from(common::EXIT_USAGE);
    }
    let client = match args.server.client() {
        Ok(c) => c,
        Err(e) => return common::fail(&e, args.json),
    };
    let mut progress = Progress::default();
    let ctx = Ctx {
        client: &client,
        args: &args,
        headers: &headers,
    };
    let result = match args.data.as_deref() {
        Some(d) if d != "-" => common::block_on(async {
            let record = vec![Bytes::from(d.to_string())];
            ctx.send(record, &mut progress)
                .await
                .map(|()| Outcome::Done)
        }),
        _ => common::block_on(ctx.send_stdin(&mut progress)),
    };
    match result {
        Ok(Outcome::Done) => {
            report(&args, &progress);
            ExitCode::from(EXIT_OK)
        }
        Ok(Outcome::Interrupted { in_flight }) => {
            report(&args, &progress);
            if in_flight > 0 {
                eprintln!(
                    "fencelog: interrupted; the outcome of the last batch ({in_flight} record{}) is unknown",
                    plural(in_flight)
                );
            } else {
                eprintln!("fencelog: interrupted; nothing more was sent");
            }
            ExitCode::from(EXIT_INTERRUPTED)
        }
        Err(e) => {
            // After a failure, only a partial success is worth reporting:
            // it tells the caller exactly which lines are already durable.
            if progress.records > 0 {
                report(&args, &progress);
            }
            match e {
                Failure::Client(e) => common::fail(&e, args.json),
                Failure::Stdin(e) => {
                    eprintln!("fencelog: cannot read stdin: {e}");
                    ExitCode::from(common::EXIT_FAILURE)
                }
            }
        }
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

enum Failure {
    Client(ClientError),
    Stdin(std::io::Error),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        Failure::Client(e)
    }
}

struct Ctx<'a> {
    client: &'a Client,
    args: &'a Args,
    headers: &'a [Header],
}

/// Reads stdin on its own thread, so batches go out as lines arrive and a
/// slow pipe (`tail ... | fencelog append`) is not held back waiting for a
/// full batch.
fn stdin_lines(capacity: usize) -> tokio::sync::mpsc::Receiver<std::io::Result<Vec<u8>>> {
    let (tx, rx) = tokio::sync::mpsc::channel(capacity);
    std::thread::spawn(move || {
        let mut lock = std::io::stdin().lock();
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
    rx
}

impl Ctx<'_> {
    async fn send_stdin(&self, progress: &mut Progress) -> Result<Outcome, Failure> {
        let batch_records = self.args.batch_records.max(1);
        let batch_bytes = self.args.batch_bytes.max(1);
        let mut interrupts = Interrupts::catch();
        let mut rx = stdin_lines(batch_records);
        let mut pending: Option<Vec<u8>> = None;
        loop {
            let first = match pending.take() {
                Some(l) => l,
                None => tokio::select! {
                    line = rx.recv() => match line {
                        Some(Ok(l)) => l,
                        Some(Err(e)) => return Err(Failure::Stdin(e)),
                        None => return Ok(Outcome::Done),
                    },
                    _ = interrupts.next() => return Ok(Outcome::Interrupted { in_flight: 0 }),
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
                    Ok(Err(e)) => return Err(Failure::Stdin(e)),
                    Err(_) => break,
                }
            }
            let n = batch.len() as u64;
            let send = self.send(batch, progress);
            tokio::pin!(send);
            tokio::select! {
                sent = &mut send => sent?,
                _ = interrupts.next() => {
                    // Let the batch in flight answer, so the summary is
                    // exact; a second signal gives up on it.
                    eprintln!(
                        "fencelog: interrupted; waiting for the batch in flight (again to abandon it)"
                    );
                    return tokio::select! {
                        sent = &mut send => sent.map(|()| Outcome::Interrupted { in_flight: 0 }),
                        _ = interrupts.next() => Ok(Outcome::Interrupted { in_flight: n }),
                    };
                }
            }
        }
    }

    async fn send(&self, batch: Vec<Bytes>, progress: &mut Progress) -> Result<(), Failure> {
        // Later batches chain on the previous ack, so --match-seq guards the
        // whole input, not only its first batch.
        let expect = match &progress.last {
            Some(ack) if self.args.match_seq.is_some() => Some(ack.next_seq),
            _ => self.args.match_seq,
        };
        let n = batch.len() as u64;
        let (client, stream, token) = (self.client, &self.args.stream, self.args.token);
        let ack = if self.headers.is_empty() {
            client.append_with(stream, token, batch, expect).await?
        } else {
            let records = batch
                .into_iter()
                .map(|body| RecordIn {
                    body,
                    headers: self.headers.to_vec(),
                })
                .collect();
            client
                .append_records(stream, token, records, expect)
                .await?
        };
        progress.first_seq.get_or_insert(ack.first_seq);
        progress.records += n;
        progress.batches += 1;
        progress.last = Some(ack);
        Ok(())
    }
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
            plural(p.records),
            last.stream,
            first,
            last.last_seq,
            last.fencing_token
        );
    }
}
