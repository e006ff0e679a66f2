//! Counting, latency histograms, the live progress line and the report.

use super::{BenchArgs, Encoding, Target, Workload};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Latencies are kept in microseconds; anything over a minute is clamped.
const LATENCY_MAX_US: u64 = 60_000_000;

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("static histogram bounds are valid")
}

pub fn record_us(h: &mut Histogram<u64>, d: Duration) {
    let us = u64::try_from(d.as_micros())
        .unwrap_or(LATENCY_MAX_US)
        .clamp(1, LATENCY_MAX_US);
    h.record(us)
        .expect("value is clamped into the histogram's range");
}

/// Counters shared by all clients, read by the progress line.
#[derive(Default)]
pub struct Live {
    pub requests: AtomicU64,
    pub records: AtomicU64,
    pub rejections: AtomicU64,
    pub errors: AtomicU64,
}

impl Live {
    pub fn add(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Prints a progress line about once a second while stderr is a terminal;
/// stops at `until` at the latest.
pub fn spawn_progress(
    live: Arc<Live>,
    started: Instant,
    until: Instant,
) -> Option<tokio::task::JoinHandle<()>> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        let mut last = (0u64, 0u64, 0u64, started);
        while Instant::now() < until {
            tick.tick().await;
            let now = Instant::now();
            let req = live.requests.load(Ordering::Relaxed);
            let rec = live.records.load(Ordering::Relaxed);
            let rej = live.rejections.load(Ordering::Relaxed);
            let secs = now.duration_since(last.3).as_secs_f64().max(1e-9);
            eprint!(
                "\r{:>6.1}s  {:>10.0} req/s  {:>10.0} records/s  {:>10.0} rejections/s  errors {}   ",
                now.duration_since(started).as_secs_f64(),
                (req - last.0) as f64 / secs,
                (rec - last.1) as f64 / secs,
                (rej - last.2) as f64 / secs,
                live.errors.load(Ordering::Relaxed),
            );
            last = (req, rec, rej, now);
        }
        eprintln!();
    }))
}

#[derive(Debug, Clone, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
}

impl LatencySummary {
    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        LatencySummary {
            count: h.len(),
            p50_us: h.value_at_quantile(0.50),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            mean_us: h.mean(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Verification {
    pub passed: bool,
    pub streams_checked: u64,
    pub records_checked: u64,
    /// Requests whose outcome is unknown (transport errors): their records
    /// may or may not be present, and either is accepted.
    pub unknown_outcomes: u64,
    /// The first few differences found, in words.
    pub failures: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub target: Target,
    pub workload: Workload,
    pub clients: usize,
    pub streams: usize,
    pub batch: usize,
    /// How fencelog appends were encoded (meaningless for the peers).
    pub encoding: Encoding,
    pub record_bytes: usize,
    /// Requested requests/s for open-loop runs.
    pub rate: Option<f64>,
    /// `tail` only: live tails on each stream.
    pub tails_per_stream: usize,
    pub elapsed_s: f64,
    pub requests: u64,
    pub appends: u64,
    pub records: u64,
    pub rejections: u64,
    pub errors: u64,
    pub requests_per_s: f64,
    pub appends_per_s: f64,
    pub records_per_s: f64,
    pub mb_per_s: f64,
    pub rejections_per_s: f64,
    /// Request latency; for open-loop runs measured from the intended send
    /// time.
    pub latency: LatencySummary,
    /// `tail` only: acknowledgement to arrival at the last of the
    /// stream's live tails.
    pub visibility: Option<LatencySummary>,
    /// `session` only: appends in flight on the one connection (Redis:
    /// commands per pipeline, whose round trip `latency` is then).
    pub window: Option<usize>,
    /// CPU time (user + system) this load generator's process spent
    /// during the load, per request, in µs: the client side's cost, for
    /// comparing client libraries (fencelog's client crate, redis-rs)
    /// doing the same requests. Includes the generator's own bookkeeping,
    /// the same for every target; meaningless without `--server` for
    /// fencelog, whose in-process server it would include.
    pub client_cpu_us_per_request: Option<f64>,
    pub verification: Verification,
}

impl Report {
    pub fn header(args: &BenchArgs) -> impl FnOnce(Totals, Histogram<u64>) -> Report + '_ {
        move |t, h| {
            let secs = t.elapsed.as_secs_f64().max(1e-9);
            Report {
                target: args.target,
                workload: args.workload,
                clients: args.clients,
                streams: args.stream_count(),
                batch: args.batch,
                encoding: args.effective_encoding(),
                record_bytes: args.record_bytes,
                rate: args.rate,
                tails_per_stream: args.tails_per_stream,
                elapsed_s: secs,
                requests: t.requests,
                appends: t.appends,
                records: t.records,
                rejections: t.rejections,
                errors: t.errors,
                requests_per_s: t.requests as f64 / secs,
                appends_per_s: t.appends as f64 / secs,
                records_per_s: t.records as f64 / secs,
                mb_per_s: (t.records * args.record_bytes as u64) as f64 / secs / 1e6,
                rejections_per_s: t.rejections as f64 / secs,
                latency: LatencySummary::of(&h),
                visibility: None,
                window: None,
                client_cpu_us_per_request: t
                    .cpu_s
                    .filter(|_| t.requests > 0)
                    .map(|cpu| cpu / t.requests as f64 * 1e6),
                verification: Verification::default(),
            }
        }
    }

    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a report always serializes")
    }

    pub fn to_text(&self) -> String {
        let l = &self.latency;
        let mut out = format!(
            "{} {}: {} clients, {} streams, batch {}, {} B records, {:.1} s\n\
             \x20 {:.0} requests/s  {:.0} appends/s  {:.0} records/s  {:.2} MB/s  {:.0} rejections/s  ({} errors)\n\
             \x20 latency p50 {} µs  p99 {} µs  p99.9 {} µs  max {} µs  ({} samples)\n",
            format!("{:?}", self.target).to_lowercase(),
            format!("{:?}", self.workload).to_lowercase(),
            self.clients,
            self.streams,
            self.batch,
            self.record_bytes,
            self.elapsed_s,
            self.requests_per_s,
            self.appends_per_s,
            self.records_per_s,
            self.mb_per_s,
            self.rejections_per_s,
            self.errors,
            l.p50_us,
            l.p99_us,
            l.p999_us,
            l.max_us,
            l.count,
        );
        if let Some(cpu) = self.client_cpu_us_per_request {
            out.push_str(&format!("  client CPU {cpu:.1} µs per request\n"));
        }
        if let Some(v) = &self.visibility {
            out.push_str(&format!(
                "  ack -> all {} tails p50 {} µs  p99 {} µs  p99.9 {} µs  max {} µs  ({} records)\n",
                self.tails_per_stream, v.p50_us, v.p99_us, v.p999_us, v.max_us, v.count
            ));
        }
        let v = &self.verification;
        if v.passed {
            out.push_str(&format!(
                "  verified: {} streams, {} records{}\n",
                v.streams_checked,
                v.records_checked,
                if v.unknown_outcomes > 0 {
                    format!(" ({} requests with unknown outcome)", v.unknown_outcomes)
                } else {
                    String::new()
                }
            ));
        } else {
            out.push_str("  VERIFICATION FAILED:\n");
            for f in &v.failures {
                out.push_str(&format!("    {f}\n"));
            }
        }
        out
    }
}

/// Sums over all clients.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    pub elapsed: Duration,
    pub requests: u64,
    pub appends: u64,
    pub records: u64,
    pub rejections: u64,
    pub errors: u64,
    /// This process's CPU seconds during the load, where /proc has them.
    pub cpu_s: Option<f64>,
}

/// User + system CPU seconds this process has used so far
/// (`/proc/self/stat` fields 14 and 15, in 1/100 s ticks).
pub fn process_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}
