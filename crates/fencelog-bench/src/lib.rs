//! `fencelog bench`: a load generator that drives fencelog (or, with the
//! `peers` feature, PostgreSQL and Redis doing the same fenced write) and
//! then proves the target kept exactly what it acknowledged.
//!
//! Every client owns one connection and waits for each answer before
//! sending the next request, like a producer holding a lease would. With
//! `--rate`, clients follow a fixed schedule instead and latency is measured
//! from the intended send time, so a stalled server is charged for the
//! requests it delayed (no coordinated omission).
//!
//! Record bodies name their writer (client id, per-client counter, index in
//! the batch), so after the run every acknowledged `(stream, seq)` can be
//! checked byte for byte against what the server returns.

mod body;
mod drive;
mod fencelog;
mod http1;
mod ledger;
#[cfg(feature = "peers")]
mod peer_nats;
#[cfg(feature = "peers")]
mod peer_postgres;
#[cfg(feature = "peers")]
mod peer_redis;
mod session;
mod stats;

pub use stats::{LatencySummary, Report, Verification};

use clap::{Args, ValueEnum};
use std::fmt;
use std::future::Future;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Appends with the stream's current token; every one must be accepted.
    Append,
    /// Every stream is fenced high first, then every append presents a lower
    /// token; every one must be rejected and nothing may change.
    Reject,
    /// Half the clients append with the current token, the other half
    /// present stale tokens at the same time.
    Mixed,
    /// Streams are filled first, then clients read batches from them.
    Read,
    /// Live tails (SSE; `--tails-per-stream` each) while clients append;
    /// reports how long an acknowledged record takes to reach every tail of
    /// its stream (the last tail to get it).
    Tail,
    /// `GET /healthz`: the server's HTTP floor, to compare rejections with.
    Healthz,
    /// One connection, single-record appends pipelined (`--window` in
    /// flight), each answered in order once durable: fencelog's append
    /// session (the client crate's), or Redis's Lua append sent
    /// `--window` per pipeline. Ignores `--clients`, `--streams`, `--rate`.
    Session,
    /// Puts `--fill-records` records into each of `--streams` streams, then
    /// stops (ignores `--duration`); for memory and restart measurements.
    Fill,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Fencelog,
    /// Needs the `peers` feature: a conditional update of the stream's
    /// highest token plus the insert, in one transaction.
    Postgres,
    /// Needs the `peers` feature: a Lua script that checks the stored token
    /// and XADDs.
    Redis,
    /// Needs the `peers` feature: JetStream publishes fenced by
    /// `Nats-Expected-Last-Subject-Sequence`.
    Nats,
}

/// How appends are put on the wire for fencelog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Encoding {
    /// Raw body for single-record appends, JSON for batches.
    Auto,
    Json,
    /// One record per request as `application/octet-stream`.
    Raw,
    /// Length-prefixed records as `application/vnd.fencelog.batch`, any
    /// batch size.
    Binary,
    /// Through the client crate itself (`fencelog_client::Client`, its
    /// own HTTP/1.1 pool, one connection per bench client): the raw body
    /// for one record, the binary batch for more. Set-up and verification
    /// stay on the generator's raw connection.
    Client,
    /// [`Encoding::Client`] with the client's reqwest transport
    /// (`ClientBuilder::use_reqwest`), the one it had before its pool.
    ClientReqwest,
}

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// A running fencelog server, e.g. http://127.0.0.1:7070 (loopback
    /// only). Without it, a server is started in-process on a temporary
    /// data directory and removed afterwards.
    #[arg(long, env = "FENCELOG_BENCH_SERVER")]
    pub server: Option<String>,
    /// Concurrent clients, one connection each.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Streams written to; defaults to one per client.
    #[arg(long)]
    pub streams: Option<usize>,
    /// Records per append.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Bytes per record body (at least 24: the writer's id is encoded in it).
    #[arg(long, default_value_t = 100)]
    pub record_bytes: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Total requests per second across clients, sent on a fixed schedule
    /// (open loop). Without it each client sends as fast as answers come.
    #[arg(long)]
    pub rate: Option<f64>,
    #[arg(long, value_enum, default_value_t = Workload::Append)]
    pub workload: Workload,
    #[arg(long, value_enum, default_value_t = Target::Fencelog)]
    pub target: Target,
    /// How fencelog appends are encoded; `--body` is the same option
    /// (`--body json|binary|raw`).
    #[arg(long, alias = "body", value_enum, default_value_t = Encoding::Auto)]
    pub encoding: Encoding,
    /// Live tails on each stream for `--workload tail` (fan-out).
    #[arg(long, default_value_t = 1)]
    pub tails_per_stream: usize,
    /// Records per stream for `--workload fill` (and the backlog `read`
    /// reads from).
    #[arg(long, default_value_t = 100)]
    pub fill_records: usize,
    /// `--workload session`: appends in flight on the one connection (for
    /// Redis, commands per pipeline).
    #[arg(long, default_value_t = 4096)]
    pub window: usize,
    /// One JSON line per result on stdout instead of the text summary.
    #[arg(long)]
    pub json: bool,
    /// PostgreSQL connection string for `--target postgres`.
    #[arg(
        long,
        env = "FENCELOG_BENCH_PG_URL",
        default_value = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
    )]
    pub pg_url: String,
    /// Redis URL for `--target redis`.
    #[arg(
        long,
        env = "FENCELOG_BENCH_REDIS_URL",
        default_value = "redis://127.0.0.1:6379/"
    )]
    pub redis_url: String,
    /// NATS server URL for `--target nats` (JetStream enabled).
    #[arg(
        long,
        env = "FENCELOG_BENCH_NATS_URL",
        default_value = "nats://127.0.0.1:4222"
    )]
    pub nats_url: String,
}

impl BenchArgs {
    /// Arguments with every default, for tests and programmatic use.
    pub fn new(workload: Workload) -> Self {
        BenchArgs {
            server: None,
            clients: 16,
            streams: None,
            batch: 1,
            record_bytes: 100,
            duration: 10.0,
            rate: None,
            workload,
            target: Target::Fencelog,
            encoding: Encoding::Auto,
            fill_records: 100,
            window: 4096,
            tails_per_stream: 1,
            json: false,
            pg_url: "host=127.0.0.1 port=5432 user=postgres dbname=postgres".into(),
            redis_url: "redis://127.0.0.1:6379/".into(),
            nats_url: "nats://127.0.0.1:4222".into(),
        }
    }

    /// The encoding fencelog appends actually use: `auto` picks the raw
    /// body for single records and JSON for batches.
    pub fn effective_encoding(&self) -> Encoding {
        match (self.encoding, self.batch) {
            (Encoding::Auto, 1) => Encoding::Raw,
            (Encoding::Auto, _) => Encoding::Json,
            (e, _) => e,
        }
    }

    pub(crate) fn stream_count(&self) -> usize {
        self.streams.unwrap_or(self.clients).max(1)
    }

    fn validate(&self) -> Result<(), BenchError> {
        if self.clients == 0 || self.clients > 4096 {
            return Err(BenchError::args("--clients must be in 1..=4096"));
        }
        if self.batch == 0 || self.batch > 4096 {
            return Err(BenchError::args("--batch must be in 1..=4096"));
        }
        if self.record_bytes < body::RECORD_BYTES_MIN {
            return Err(BenchError::args(format!(
                "--record-bytes must be at least {}",
                body::RECORD_BYTES_MIN
            )));
        }
        if !(self.duration > 0.0 && self.duration <= 86_400.0) {
            return Err(BenchError::args("--duration must be in (0, 86400] seconds"));
        }
        if let Some(rate) = self.rate {
            if !(rate > 0.0 && rate.is_finite()) {
                return Err(BenchError::args("--rate must be positive"));
            }
        }
        if self.encoding == Encoding::Raw && self.batch != 1 {
            return Err(BenchError::args(
                "--encoding raw carries one record: use --batch 1",
            ));
        }
        if self.window == 0 || self.window > 1 << 16 {
            return Err(BenchError::args("--window must be in 1..=65536"));
        }
        if self.workload == Workload::Session && (self.batch != 1 || self.rate.is_some()) {
            return Err(BenchError::args(
                "--workload session sends single records as fast as the window allows: no --batch, no --rate",
            ));
        }
        if self.tails_per_stream == 0 || self.tails_per_stream > drive::TAILS_MAX {
            return Err(BenchError::args(format!(
                "--tails-per-stream must be in 1..={}",
                drive::TAILS_MAX
            )));
        }
        if self.workload == Workload::Fill && self.fill_records == 0 {
            return Err(BenchError::args("--fill-records must be at least 1"));
        }
        Ok(())
    }

    pub(crate) fn duration_limit(&self) -> Duration {
        Duration::from_secs_f64(self.duration)
    }
}

#[derive(Debug)]
pub enum BenchError {
    Args(String),
    /// The target could not be reached or answered something unusable.
    Target(String),
    /// The run finished but the target's data does not match what it
    /// acknowledged; the report says what differed.
    Verification(Box<Report>),
}

impl BenchError {
    pub(crate) fn args(msg: impl Into<String>) -> Self {
        BenchError::Args(msg.into())
    }
    pub(crate) fn target(msg: impl Into<String>) -> Self {
        BenchError::Target(msg.into())
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Args(m) => write!(f, "invalid arguments: {m}"),
            BenchError::Target(m) => write!(f, "target: {m}"),
            BenchError::Verification(r) => write!(
                f,
                "verification failed: {}",
                r.verification.failures.join("; ")
            ),
        }
    }
}

impl std::error::Error for BenchError {}

/// Runs one benchmark and verifies the target's data afterwards. A failed
/// verification is reported in [`Report::verification`], not as an error,
/// so callers can inspect it; [`run_and_print`] turns it into one.
pub async fn run(args: BenchArgs) -> Result<Report, BenchError> {
    args.validate()?;
    if args.workload == Workload::Session {
        return run_session(&args).await;
    }
    match args.target {
        Target::Fencelog => match &args.server {
            Some(url) => {
                let backend = fencelog::Backend::new(url, &args).await?;
                drive::drive(backend, &args).await
            }
            None => {
                let server = fencelog::InProcess::start().await?;
                let backend = fencelog::Backend::new(&server.url(), &args).await?;
                let report = drive::drive(backend, &args).await;
                server.stop().await;
                report
            }
        },
        #[cfg(feature = "peers")]
        Target::Postgres => {
            let backend = peer_postgres::Backend::new(&args.pg_url).await?;
            drive::drive(backend, &args).await
        }
        #[cfg(feature = "peers")]
        Target::Redis => {
            let backend = peer_redis::Backend::new(&args.redis_url)?;
            drive::drive(backend, &args).await
        }
        #[cfg(feature = "peers")]
        Target::Nats => {
            let backend = peer_nats::Backend::new(&args.nats_url).await?;
            drive::drive(backend, &args).await
        }
        #[cfg(not(feature = "peers"))]
        Target::Postgres | Target::Redis | Target::Nats => Err(BenchError::args(
            "peer targets need a build with `--features peers`",
        )),
    }
}

/// `--workload session` on its target.
async fn run_session(args: &BenchArgs) -> Result<Report, BenchError> {
    match args.target {
        Target::Fencelog => match &args.server {
            Some(url) => session::fencelog(url, args).await,
            None => {
                let server = fencelog::InProcess::start().await?;
                let report = session::fencelog(&server.url(), args).await;
                server.stop().await;
                report
            }
        },
        #[cfg(feature = "peers")]
        Target::Redis => session::redis(&args.redis_url, args).await,
        _ => Err(BenchError::args(
            "--workload session runs against fencelog, or Redis with `--features peers`",
        )),
    }
}

/// What `fencelog bench` does: run, print the result (text or one JSON
/// line), and fail when verification failed.
pub async fn run_and_print(args: BenchArgs) -> Result<Report, BenchError> {
    let json = args.json;
    let report = run(args).await?;
    if json {
        println!("{}", report.to_json_line());
    } else {
        print!("{}", report.to_text());
    }
    if report.verification.passed {
        Ok(report)
    } else {
        Err(BenchError::Verification(Box::new(report)))
    }
}

/// What one request did to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Appended { first_seq: u64 },
    Stale,
}

/// A stream's whole content as the target returns it.
#[derive(Debug, Default)]
pub(crate) struct StreamDump {
    pub next_seq: u64,
    pub highest_token: Option<u64>,
    /// `(seq, token, body)` in the target's order.
    pub records: Vec<(u64, u64, bytes::Bytes)>,
}

/// One system under test. Connections are per client; the backend itself
/// only hands them out.
pub(crate) trait Backend: Send + Sync + 'static {
    type Conn: Conn;
    fn name(&self) -> &'static str;
    fn connect(&self) -> impl Future<Output = Result<Self::Conn, BenchError>> + Send;
    fn supports(&self, workload: Workload) -> bool;
    /// Where live tails connect; only fencelog has them.
    fn tail_endpoint(&self) -> Result<http1::Endpoint, BenchError> {
        Err(BenchError::args(format!(
            "{} has no live tail",
            self.name()
        )))
    }
}

pub(crate) trait Conn: Send + 'static {
    /// Creates the stream if needed and raises its highest token to `token`.
    fn fence(
        &mut self,
        stream: &str,
        token: u64,
    ) -> impl Future<Output = Result<(), BenchError>> + Send;

    fn append(
        &mut self,
        stream: &str,
        token: u64,
        records: &[bytes::Bytes],
    ) -> impl Future<Output = Result<Outcome, BenchError>> + Send;

    /// Reads up to `count` records from `start_seq`; returns how many came.
    fn read(
        &mut self,
        stream: &str,
        start_seq: u64,
        count: usize,
    ) -> impl Future<Output = Result<Vec<(u64, bytes::Bytes)>, BenchError>> + Send;

    fn healthz(&mut self) -> impl Future<Output = Result<(), BenchError>> + Send;

    /// Everything in the stream, for verification. `with_token` asks for the
    /// stream's highest token too, where that costs an extra request.
    fn dump(
        &mut self,
        stream: &str,
        with_token: bool,
    ) -> impl Future<Output = Result<StreamDump, BenchError>> + Send;
}
