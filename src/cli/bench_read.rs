//! `fencelog bench-read`: how fast a consumer reads a stream back with the
//! project's own client, in the binary read format or as JSON. The stream
//! is filled first when it holds fewer record bytes than `--fill-bytes`
//! (binary batches), so repeated runs read the same bytes; every round
//! reads it whole from seq 0 and checks each record's seq and size, and
//! that its body names its seq. Driven by `benches/peers/consume.sh`,
//! which times `cat` of the same segment files in the same run.

use fencelog_client::{Client, ReadOptions};
use std::process::ExitCode;
use std::time::Instant;

/// Seq digits at the start of every body: the check that a record is the
/// one it says it is.
const SEQ_DIGITS: usize = 20;
const RECORD_BYTES_MAX: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Binary,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server, e.g. http://127.0.0.1:7070.
    #[arg(long)]
    server: String,
    #[arg(long, default_value = "consume")]
    stream: String,
    /// Record bytes the stream is filled to before reading.
    #[arg(long, default_value_t = 1 << 30)]
    fill_bytes: u64,
    /// Bytes per record body (ASCII, so JSON sends them unescaped).
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    #[arg(long, value_enum, default_value_t = Format::Binary)]
    format: Format,
    /// Whole-stream reads, each timed.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
}

pub fn run(args: Args) -> ExitCode {
    if !(SEQ_DIGITS..=RECORD_BYTES_MAX).contains(&args.record_bytes) {
        eprintln!(
            "fencelog bench-read: --record-bytes must be in {SEQ_DIGITS}..={RECORD_BYTES_MAX}"
        );
        return ExitCode::FAILURE;
    }
    // One connection read page after page: one thread is the client.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime starts");
    match runtime.block_on(bench(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fencelog bench-read: {e}");
            ExitCode::FAILURE
        }
    }
}

fn body(seq: u64, record_bytes: usize) -> Vec<u8> {
    let mut b = format!("{seq:0SEQ_DIGITS$}").into_bytes();
    b.resize(record_bytes, b'a');
    b
}

/// Appends until the stream holds `fill_bytes` of records, 4 MiB a batch.
async fn fill(c: &Client, args: &Args) -> Result<u64, String> {
    let records = args.fill_bytes.div_ceil(args.record_bytes as u64);
    let mut next = match c.state(&args.stream).await {
        Ok(s) => s.next_seq,
        Err(fencelog_client::ClientError::StreamNotFound { .. }) => 0,
        Err(e) => return Err(e.to_string()),
    };
    let per_batch = ((4 << 20) / args.record_bytes).clamp(1, 1000) as u64;
    while next < records {
        let n = per_batch.min(records - next);
        let batch: Vec<Vec<u8>> = (next..next + n)
            .map(|s| body(s, args.record_bytes))
            .collect();
        let ack = c
            .append_batch_binary(&args.stream, 1, batch, Some(next))
            .await
            .map_err(|e| e.to_string())?;
        next = ack.next_seq;
    }
    Ok(next)
}

/// Reads `[0, end)` once; the record bytes it got.
async fn read_all(c: &Client, args: &Args, end: u64) -> Result<u64, String> {
    let opts = ReadOptions {
        count: Some(10_000),
        bytes: Some(8 << 20),
        binary: args.format == Format::Binary,
        ..ReadOptions::default()
    };
    let (mut seq, mut bytes) = (0u64, 0u64);
    while seq < end {
        let page = c
            .read(&args.stream, seq, &opts)
            .await
            .map_err(|e| e.to_string())?;
        for r in &page.records {
            let named = std::str::from_utf8(&r.body[..SEQ_DIGITS.min(r.body.len())])
                .ok()
                .and_then(|d| d.parse::<u64>().ok());
            if r.seq != seq || r.body.len() != args.record_bytes || named != Some(seq) {
                return Err(format!("record {} is not the one written at {seq}", r.seq));
            }
            seq += 1;
            bytes += r.body.len() as u64;
        }
        if page.records.is_empty() {
            return Err(format!("an empty page at {seq}, before the end {end}"));
        }
    }
    Ok(bytes)
}

/// User + system CPU seconds of this process so far.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Clock ticks are 100 a second on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

async fn bench(args: &Args) -> Result<(), String> {
    let c = Client::new(args.server.clone()).map_err(|e| e.to_string())?;
    let end = fill(&c, args).await?;
    for round in 0..args.rounds {
        let (started, cpu) = (Instant::now(), cpu_s());
        let bytes = read_all(&c, args, end).await?;
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{{\"format\":\"{:?}\",\"round\":{round},\"records\":{end},\"record_bytes\":{bytes},\"seconds\":{secs:.3},\"mb_per_s\":{:.1},\"client_cpu_s\":{:.2}}}",
            args.format,
            bytes as f64 / secs / 1e6,
            cpu_s() - cpu
        );
    }
    Ok(())
}
