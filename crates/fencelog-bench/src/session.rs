//! `--workload session`: durable single-record appends pipelined on ONE
//! connection, `--window` in flight. For fencelog through the client
//! crate's [`fencelog_client::AppendSession`] (answers in order, each once
//! durable); for Redis, the same Lua append sent `--window` commands per
//! pipeline (what `redis-benchmark -P` does), each pipeline answered after
//! Redis's `appendfsync always` write. Either way every acknowledged
//! record is read back and checked byte for byte afterwards.

use super::body::{self, BodyId};
use super::drive::OWNER_TOKEN;
use super::stats::{self, Report, Totals, Verification};
use super::{BenchArgs, BenchError, Conn, StreamDump};
#[cfg(feature = "peers")]
use bytes::Bytes;
use fencelog_client::{Client, SessionReceiver, SessionSender};
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One append in this many has its latency taken (send to answer): the
/// rest cost the two loops nothing extra.
const SAMPLE_EVERY: u64 = 64;
/// Failures listed in a report.
const FAILURES_LISTED_MAX: usize = 20;

type Samples = Arc<Mutex<VecDeque<(u64, Instant)>>>;

#[allow(
    clippy::cast_possible_truncation,
    reason = "a name wants the clock's fast-moving low bits only"
)]
fn stream_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!("bench-session-{nanos:x}")
}

fn record(n: u64, len: usize, out: &mut Vec<u8>) {
    let id = BodyId {
        client: 0,
        counter: n,
        index: 0,
    };
    body::encode_into(id, len, out);
}

fn client_err(what: &str) -> impl FnOnce(fencelog_client::ClientError) -> BenchError + '_ {
    move |e| BenchError::target(format!("{what}: {e}"))
}

/// The fencelog run: fence, open the session, send until the deadline
/// while the answers are taken, then verify.
pub async fn fencelog(url: &str, args: &BenchArgs) -> Result<Report, BenchError> {
    let client = Client::new(url).map_err(client_err("client"))?;
    let stream = stream_name();
    client
        .fence(&stream, OWNER_TOKEN)
        .await
        .map_err(client_err("fence"))?;
    let session = client
        .append_session_with(&stream, args.window)
        .await
        .map_err(client_err("opening the session"))?;
    let samples: Samples = Arc::default();
    let started = Instant::now();
    let deadline = started + args.duration_limit();
    let sending = tokio::spawn(send(
        session.sender,
        deadline,
        args.record_bytes,
        samples.clone(),
    ));
    let (seqs, hist) = receive(session.receiver, samples).await?;
    let elapsed = started.elapsed();
    let sent = sending
        .await
        .map_err(|e| BenchError::target(format!("sender: {e}")))??;
    let backend = super::fencelog::Backend::new(url, args).await?;
    let mut conn = super::Backend::connect(&backend).await?;
    let dump = conn.dump(&stream, true).await?;
    finish(args, elapsed, sent, &seqs, hist, dump)
}

async fn send(
    mut tx: SessionSender,
    deadline: Instant,
    record_bytes: usize,
    samples: Samples,
) -> Result<u64, BenchError> {
    let mut buf = Vec::with_capacity(record_bytes);
    let mut n = 0u64;
    while Instant::now() < deadline {
        // A round of sends between clock reads: the clock is not free.
        for _ in 0..64 {
            record(n, record_bytes, &mut buf);
            if n.is_multiple_of(SAMPLE_EVERY) {
                samples
                    .lock()
                    .expect("send times poisoned: the receiving loop panicked")
                    .push_back((n, Instant::now()));
            }
            tx.send(OWNER_TOKEN, None, &buf)
                .await
                .map_err(client_err("send"))?;
            n += 1;
        }
    }
    tx.close().await.map_err(client_err("close"))?;
    Ok(n)
}

/// Every answer, in order: the seq each append got, and sampled latencies.
async fn receive(
    mut rx: SessionReceiver,
    samples: Samples,
) -> Result<(Vec<u64>, Histogram<u64>), BenchError> {
    let mut hist = stats::histogram();
    let mut seqs = Vec::new();
    while let Some((n, answer)) = rx.recv().await.map_err(client_err("session"))? {
        let ack = answer.map_err(client_err("append"))?;
        if n.is_multiple_of(SAMPLE_EVERY) {
            let sent = samples
                .lock()
                .expect("send times poisoned: the sending loop panicked")
                .pop_front();
            match sent {
                Some((m, at)) if m == n => stats::record_us(&mut hist, at.elapsed()),
                _ => return Err(BenchError::target(format!("no send time for #{n}"))),
            }
        }
        seqs.push(ack.first_seq);
    }
    Ok((seqs, hist))
}

/// The report, with the stream checked against what was acknowledged:
/// append #n at seq n with its own bytes and the owner's token, and
/// nothing else.
fn finish(
    args: &BenchArgs,
    elapsed: Duration,
    sent: u64,
    seqs: &[u64],
    hist: Histogram<u64>,
    dump: StreamDump,
) -> Result<Report, BenchError> {
    let mut failures = Vec::new();
    if seqs.len() as u64 != sent {
        failures.push(format!("{sent} appends sent, {} answered", seqs.len()));
    }
    if dump.records.len() != seqs.len() {
        failures.push(format!(
            "{} records in the stream, {} acknowledged",
            dump.records.len(),
            seqs.len()
        ));
    }
    let mut buf = Vec::new();
    for (n, (&seq, (got_seq, token, got))) in seqs.iter().zip(&dump.records).enumerate() {
        record(n as u64, args.record_bytes, &mut buf);
        if seq != n as u64 || *got_seq != seq || *token != OWNER_TOKEN || got[..] != buf[..] {
            failures.push(format!(
                "append #{n}: acknowledged at seq {seq}, stream has seq {got_seq} token {token} body {:?}",
                String::from_utf8_lossy(&got[..got.len().min(40)])
            ));
        }
    }
    let mut one = args.clone();
    one.clients = 1;
    one.streams = Some(1);
    let totals = Totals {
        elapsed,
        requests: seqs.len() as u64,
        appends: seqs.len() as u64,
        records: seqs.len() as u64,
        ..Totals::default()
    };
    let mut report = Report::header(&one)(totals, hist);
    report.window = Some(args.window);
    let passed = failures.is_empty();
    failures.truncate(FAILURES_LISTED_MAX);
    report.verification = Verification {
        passed,
        streams_checked: 1,
        records_checked: dump.records.len() as u64,
        unknown_outcomes: 0,
        failures,
    };
    Ok(report)
}

/// The Redis run: the Lua append pipelined `--window` at a time on one
/// connection, each pipeline's answers checked before the next is sent.
#[cfg(feature = "peers")]
pub async fn redis(url: &str, args: &BenchArgs) -> Result<Report, BenchError> {
    let backend = super::peer_redis::Backend::new(url)?;
    let mut conn = super::Backend::connect(&backend).await?;
    let stream = stream_name();
    conn.fence(&stream, OWNER_TOKEN).await?;
    let mut hist = stats::histogram();
    let mut seqs = Vec::new();
    let started = Instant::now();
    let deadline = started + args.duration_limit();
    let mut buf = Vec::new();
    while Instant::now() < deadline {
        let from = seqs.len() as u64;
        let bodies: Vec<Bytes> = (from..from + args.window as u64)
            .map(|n| {
                record(n, args.record_bytes, &mut buf);
                Bytes::copy_from_slice(&buf)
            })
            .collect();
        let sent = Instant::now();
        let firsts = conn.append_pipelined(&stream, OWNER_TOKEN, &bodies).await?;
        stats::record_us(&mut hist, sent.elapsed());
        for first in firsts {
            if first < 0 {
                return Err(BenchError::target("redis: an owner's append was stale"));
            }
            seqs.push(first as u64);
        }
    }
    let elapsed = started.elapsed();
    let dump = conn.dump(&stream, true).await?;
    let sent = seqs.len() as u64;
    finish(args, elapsed, sent, &seqs, hist, dump)
}
