//! `fencelog serve`: check every setting, bind the listen address, open
//! (recover) the data directory, serve the HTTP API, and shut down cleanly
//! on SIGTERM or Ctrl-C. Nothing touches the disk until every setting has
//! been checked: a bad one is a usage error (exit 2) naming the setting as
//! the flag and the config file spell it, and no data directory is created.

use super::server_log::ServerLog;
use super::{rlimit, LogFormat};
use fencelog_cluster::peer::PeerRpc;
use fencelog_engine::config::{
    Config, BATCH_BYTES_DEFAULT, BATCH_BYTES_LIMIT, BATCH_RECORDS_DEFAULT, BATCH_RECORDS_LIMIT,
    SEGMENT_BYTES_DEFAULT, SEGMENT_BYTES_LIMIT,
};
use fencelog_engine::Engine;
use fencelog_server::auth::{Auth, AuthSettings};
use fencelog_server::server::{self as http, ServerConfig, Tls};
use fencelog_server::state::{AppState, HttpLimits, MemoryBudget};
use std::io::Write;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// TOML file with any of the settings below (same names, snake_case).
    /// Flags and environment variables override it.
    #[arg(long, env = "FENCELOG_CONFIG")]
    pub config: Option<PathBuf>,
    /// Print the effective settings as TOML and exit without serving.
    #[arg(long)]
    pub print_config: bool,
    /// Log line format on stderr [default: text].
    #[arg(long, env = "FENCELOG_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Which log lines to write: a level (error, warn, info, debug, trace)
    /// or directives such as `info,fencelog_server=debug`
    /// [default: $RUST_LOG if set, else info].
    #[arg(long, env = "FENCELOG_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Directory holding the log's segments, created if missing
    /// [default: ./fencelog-data].
    #[arg(long, env = "FENCELOG_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address to listen on; port 0 picks a free port (printed at startup)
    /// [default: 127.0.0.1:7070].
    #[arg(long, env = "FENCELOG_LISTEN")]
    pub listen: Option<String>,
    // The ranges below are the engine's caps (and this file's); a test
    // checks `--help` against the constants, so they cannot drift.
    /// Roll to a new segment file past this size, in 4096..=2147483648
    /// [default: 134217728].
    #[arg(long, env = "FENCELOG_SEGMENT_BYTES")]
    pub segment_bytes: Option<u64>,
    /// Most records in one append, in 1..=4096 [default: 1000].
    #[arg(long, env = "FENCELOG_BATCH_RECORDS_MAX")]
    pub batch_records_max: Option<usize>,
    /// Most record body bytes in one append, in 1..=33554432
    /// [default: 1048576].
    #[arg(long, env = "FENCELOG_BATCH_BYTES_MAX")]
    pub batch_bytes_max: Option<usize>,
    /// Largest HTTP request body, in 1..=134217728
    /// [default: 2 x batch-bytes-max + 64 KiB].
    #[arg(long, env = "FENCELOG_BODY_BYTES_MAX")]
    pub body_bytes_max: Option<usize>,
    /// Time a client has to send request headers, and to start the next
    /// request on an idle keep-alive connection, in 1..=3600000
    /// [default: 10000].
    #[arg(long, env = "FENCELOG_HEADER_READ_TIMEOUT_MS")]
    pub header_read_timeout_ms: Option<u64>,
    /// Time a client has to send a whole request body, in 1..=3600000
    /// [default: 30000].
    #[arg(long, env = "FENCELOG_BODY_READ_TIMEOUT_MS")]
    pub body_read_timeout_ms: Option<u64>,
    /// Trim records older than this from streams that set no retention of
    /// their own: 7d, 12h, 90m, 30s, seconds, or `unlimited`
    /// [default: unlimited].
    #[arg(long, env = "FENCELOG_RETENTION_AGE")]
    pub retention_age: Option<String>,
    /// Trim the oldest records of a stream that sets no retention of its
    /// own while it holds more than this: 10GiB, 500MB, bytes, or
    /// `unlimited` [default: unlimited].
    #[arg(long, env = "FENCELOG_RETENTION_BYTES")]
    pub retention_bytes: Option<String>,
    /// The disk budget: appends that would take the data directory past it
    /// get 507 before the disk is full, while reads, fences, trims, seals
    /// and deletes keep working; appends resume once space comes back.
    /// In a cluster it counts the node's shard engines (not the Raft WAL),
    /// and a shard's leader checks it before proposing.
    /// 10GiB, bytes, or `unlimited` [default: unlimited].
    #[arg(long, env = "FENCELOG_DATA_BYTES_MAX")]
    pub data_bytes_max: Option<String>,
    /// A connection whose socket takes no bytes for this long is closed (a
    /// client that stopped reading; a live tail whose socket stays full)
    /// [default: 30000].
    #[arg(long, env = "FENCELOG_WRITE_TIMEOUT_MS")]
    pub write_timeout_ms: Option<u64>,
    /// After SIGTERM, how long in-flight requests may take before they are
    /// dropped (never acknowledged) [default: 5000].
    #[arg(long, env = "FENCELOG_SHUTDOWN_TIMEOUT_MS")]
    pub shutdown_timeout_ms: Option<u64>,
    /// Connections served at once [default: half the file-descriptor limit].
    #[arg(long, env = "FENCELOG_CONNECTIONS_MAX")]
    pub connections_max: Option<usize>,
    /// Appends and fences waiting for the writer; past it they are refused
    /// with 503 overloaded [default: 16384].
    #[arg(long, env = "FENCELOG_QUEUE_DEPTH_MAX")]
    pub queue_depth_max: Option<usize>,
    /// Microseconds the writer keeps polling for the next append after a
    /// group commit before it sleeps (lower latency for callers that come
    /// straight back; at most that much CPU per group); 0 sleeps at once
    /// [default: 200, at most 10000].
    #[arg(long, env = "FENCELOG_WRITER_SPIN_US")]
    pub writer_spin_us: Option<u64>,
    /// Bytes of responses in flight across all connections [default: 67108864].
    #[arg(long, env = "FENCELOG_RESPONSE_BUDGET_BYTES")]
    pub response_budget_bytes: Option<usize>,
    /// Bytes of request bodies in flight across all connections
    /// [default: 67108864].
    #[arg(long, env = "FENCELOG_UPLOAD_BUDGET_BYTES")]
    pub upload_budget_bytes: Option<usize>,
    /// PEM certificate chain: serve HTTPS only (needs --tls-key). Reloaded
    /// on SIGHUP.
    #[arg(long, env = "FENCELOG_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "FENCELOG_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Serve GET /metrics without a token on this separate address.
    #[arg(long, env = "FENCELOG_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Run without access tokens on a non-loopback address (anyone who can
    /// reach the port may write, fence and read everything).
    #[arg(long, env = "FENCELOG_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,
    /// Cluster mode, replicated with Raft across every member: every
    /// member as `ID=HOST:PORT,...`; the node listens on its own address
    /// unless --listen says otherwise.
    #[arg(long, env = "FENCELOG_CLUSTER")]
    pub cluster: Option<String>,
    /// This node's id in --cluster.
    #[arg(long, env = "FENCELOG_NODE_ID")]
    pub node_id: Option<u64>,
    /// Shards of a new cluster, fixed at creation [default: 8].
    #[arg(long, env = "FENCELOG_SHARDS")]
    pub shards: Option<u32>,
    /// Raft heartbeat interval in ms [default: 100].
    #[arg(long, env = "FENCELOG_RAFT_HEARTBEAT_MS")]
    pub raft_heartbeat_ms: Option<u64>,
    /// Raft election timeout range in ms, `MIN-MAX` [default: 1000-2000].
    #[arg(long, env = "FENCELOG_RAFT_ELECTION_MS")]
    pub raft_election_ms: Option<String>,
    /// How long a replicated write may wait for its commit before it is
    /// answered 503 with `outcome_unknown` [default: 10000].
    #[arg(long, env = "FENCELOG_COMMIT_TIMEOUT_MS")]
    pub commit_timeout_ms: Option<u64>,
    /// A file holding the secret every node of the cluster shares (at
    /// least 16 bytes): Raft RPCs and forwarded writes carry it. Required
    /// in cluster mode when access tokens are configured.
    #[arg(long, env = "FENCELOG_CLUSTER_SECRET_FILE")]
    pub cluster_secret_file: Option<PathBuf>,
    /// With --tls-cert in cluster mode: the CA (PEM) that signed the other
    /// nodes' certificates, trusted besides the system's roots when this
    /// node calls them over https.
    #[arg(long, env = "FENCELOG_CLUSTER_CA_CERT")]
    pub cluster_ca_cert: Option<PathBuf>,
    /// Join a running cluster through any of its nodes (HOST:PORT) instead
    /// of creating one: the node starts empty, with the cluster's shard
    /// count, and waits for `fencelog cluster add ID ADDR`. Needs
    /// --node-id and --listen (the address the other nodes reach it at).
    #[arg(long, env = "FENCELOG_JOIN", conflicts_with = "cluster")]
    pub join: Option<String>,
    /// Answer a write for a shard this node does not lead with 307 and the
    /// leader's address instead of forwarding it.
    #[arg(long, env = "FENCELOG_CLUSTER_REDIRECT")]
    pub cluster_redirect: bool,
    /// How this node sends its Raft RPCs: `stream` (one connection per
    /// peer for every shard; snapshots over HTTP) or `http` (one request
    /// per RPC) [default: stream].
    #[arg(long, env = "FENCELOG_PEER_RPC")]
    pub peer_rpc: Option<PeerRpc>,
    /// How often the rebalancer moves shard leadership to the shard's
    /// preferred node, in ms; 0 turns it off [default: 3000].
    #[arg(long, env = "FENCELOG_REBALANCE_MS")]
    pub rebalance_ms: Option<u64>,
    /// Cluster mode: how often each shard's leader proposes the retention
    /// trims its streams are due (--retention-age, --retention-bytes and
    /// each stream's own settings, judged at the leader's clock), in ms; 0
    /// turns retention off in the cluster [default: 10000].
    #[arg(long, env = "FENCELOG_RETENTION_INTERVAL_MS")]
    pub retention_interval_ms: Option<u64>,
    /// A Raft snapshot of a shard every this many applied entries; a
    /// quarter of it (at most 1000) stays in the log behind each snapshot
    /// for lagging followers, older entries are purged [default: 20000].
    /// While a node sends a shard's snapshot, and until that follower has
    /// replayed the log after it, its next one waits, up to four times
    /// this many entries; a catch-up slower than that is sent again.
    #[arg(long, env = "FENCELOG_RAFT_SNAPSHOT_LOGS")]
    pub raft_snapshot_logs: Option<u64>,
}

/// The config file: every setting optional, unknown keys refused so a typo
/// is an error instead of a silently ignored setting.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSettings {
    log_format: Option<LogFormat>,
    log_level: Option<String>,
    data_dir: Option<PathBuf>,
    pub(super) listen: Option<String>,
    segment_bytes: Option<u64>,
    batch_records_max: Option<usize>,
    batch_bytes_max: Option<usize>,
    body_bytes_max: Option<usize>,
    header_read_timeout_ms: Option<u64>,
    body_read_timeout_ms: Option<u64>,
    retention_age: Option<String>,
    retention_bytes: Option<String>,
    data_bytes_max: Option<String>,
    write_timeout_ms: Option<u64>,
    shutdown_timeout_ms: Option<u64>,
    connections_max: Option<usize>,
    queue_depth_max: Option<usize>,
    writer_spin_us: Option<u64>,
    response_budget_bytes: Option<usize>,
    upload_budget_bytes: Option<usize>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    metrics_listen: Option<String>,
    insecure_no_auth: Option<bool>,
    #[serde(default)]
    auth: AuthSettings,
    pub(super) cluster: Option<String>,
    pub(super) node_id: Option<u64>,
    pub(super) shards: Option<u32>,
    pub(super) raft_heartbeat_ms: Option<u64>,
    pub(super) raft_election_ms: Option<String>,
    pub(super) commit_timeout_ms: Option<u64>,
    pub(super) cluster_secret_file: Option<PathBuf>,
    pub(super) cluster_ca_cert: Option<PathBuf>,
    pub(super) join: Option<String>,
    pub(super) cluster_redirect: Option<bool>,
    pub(super) peer_rpc: Option<String>,
    pub(super) rebalance_ms: Option<u64>,
    pub(super) retention_interval_ms: Option<u64>,
    pub(super) raft_snapshot_logs: Option<u64>,
}

/// What the server runs with, after file, environment and flags.
#[derive(Debug, serde::Serialize)]
pub struct Settings {
    pub log_format: String,
    pub log_level: String,
    pub data_dir: PathBuf,
    pub listen: String,
    pub segment_bytes: u64,
    pub batch_records_max: usize,
    pub batch_bytes_max: usize,
    pub body_bytes_max: usize,
    pub header_read_timeout_ms: u64,
    pub body_read_timeout_ms: u64,
    /// Seconds; "unlimited" when absent.
    #[serde(serialize_with = "limit_or_unlimited")]
    pub retention_age_s: Option<u64>,
    #[serde(serialize_with = "limit_or_unlimited")]
    pub retention_bytes: Option<u64>,
    #[serde(serialize_with = "limit_or_unlimited")]
    pub data_bytes_max: Option<u64>,
    pub write_timeout_ms: u64,
    pub shutdown_timeout_ms: u64,
    /// 0: derived from the file-descriptor limit at start.
    pub connections_max: usize,
    pub queue_depth_max: usize,
    pub writer_spin_us: u64,
    pub response_budget_bytes: usize,
    pub upload_budget_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<String>,
    pub insecure_no_auth: bool,
    pub auth: AuthSettings,
    /// Cluster mode, when --cluster is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<super::serve_cluster::ClusterSettings>,
}

fn limit_or_unlimited<S: serde::Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(n) => s.serialize_u64(*n),
        None => s.serialize_str("unlimited"),
    }
}

/// A limit setting: `unlimited`, or what `parse` reads.
fn limit(
    name: &str,
    text: Option<&str>,
    parse: fn(&str) -> Result<u64, String>,
) -> Result<Option<u64>, String> {
    match text {
        None | Some("unlimited") => Ok(None),
        Some(t) => parse(t).map(Some).map_err(|e| format!("{name}: {e}")),
    }
}

impl Settings {
    /// Flags and environment (both arrive through clap) win over the file,
    /// which wins over the built-in defaults.
    #[allow(
        clippy::too_many_lines,
        reason = "a table: one field per setting, each its flag over the file over the default"
    )]
    fn resolve(args: &Args) -> Result<(Settings, LogFormat), String> {
        let file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                toml::from_str::<FileSettings>(&text)
                    .map_err(|e| format!("bad config file {}: {e}", path.display()))?
            }
            None => FileSettings::default(),
        };
        let cluster = super::serve_cluster::ClusterSettings::resolve(args, &file)?;
        let log_format = args
            .log_format
            .or(file.log_format)
            .unwrap_or(LogFormat::Text);
        let batch_bytes_max = args
            .batch_bytes_max
            .or(file.batch_bytes_max)
            .unwrap_or(BATCH_BYTES_DEFAULT);
        let config = Config {
            batch_bytes_max,
            ..Config::default()
        };
        let log_level = args
            .log_level
            .clone()
            .or(file.log_level)
            .or_else(|| std::env::var("RUST_LOG").ok())
            .unwrap_or_else(|| "info".to_string());
        let settings = Settings {
            log_format: log_format.to_string(),
            log_level,
            data_dir: args
                .data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(|| PathBuf::from("./fencelog-data")),
            listen: args
                .listen
                .clone()
                .or(file.listen)
                .unwrap_or_else(|| "127.0.0.1:7070".to_string()),
            segment_bytes: args
                .segment_bytes
                .or(file.segment_bytes)
                .unwrap_or(SEGMENT_BYTES_DEFAULT),
            batch_records_max: args
                .batch_records_max
                .or(file.batch_records_max)
                .unwrap_or(BATCH_RECORDS_DEFAULT),
            batch_bytes_max,
            body_bytes_max: args
                .body_bytes_max
                .or(file.body_bytes_max)
                .unwrap_or_else(|| HttpLimits::for_config(&config).body_bytes_max),
            header_read_timeout_ms: args
                .header_read_timeout_ms
                .or(file.header_read_timeout_ms)
                .unwrap_or(10_000),
            body_read_timeout_ms: args
                .body_read_timeout_ms
                .or(file.body_read_timeout_ms)
                .unwrap_or(30_000),
            retention_age_s: limit(
                "retention_age",
                args.retention_age
                    .as_deref()
                    .or(file.retention_age.as_deref()),
                super::units::parse_duration_s,
            )?,
            retention_bytes: limit(
                "retention_bytes",
                args.retention_bytes
                    .as_deref()
                    .or(file.retention_bytes.as_deref()),
                super::units::parse_bytes,
            )?,
            data_bytes_max: limit(
                "data_bytes_max",
                args.data_bytes_max
                    .as_deref()
                    .or(file.data_bytes_max.as_deref()),
                super::units::parse_bytes,
            )?,
            write_timeout_ms: args
                .write_timeout_ms
                .or(file.write_timeout_ms)
                .unwrap_or(30_000),
            shutdown_timeout_ms: args
                .shutdown_timeout_ms
                .or(file.shutdown_timeout_ms)
                .unwrap_or(5_000),
            connections_max: args.connections_max.or(file.connections_max).unwrap_or(0),
            queue_depth_max: args
                .queue_depth_max
                .or(file.queue_depth_max)
                .unwrap_or(fencelog_engine::config::QUEUE_DEPTH_DEFAULT),
            writer_spin_us: args
                .writer_spin_us
                .or(file.writer_spin_us)
                .unwrap_or(fencelog_engine::config::WRITER_SPIN_US_DEFAULT),
            response_budget_bytes: args
                .response_budget_bytes
                .or(file.response_budget_bytes)
                .unwrap_or(MemoryBudget::RESPONSE_BYTES_DEFAULT),
            upload_budget_bytes: args
                .upload_budget_bytes
                .or(file.upload_budget_bytes)
                .unwrap_or(MemoryBudget::UPLOAD_BYTES_DEFAULT),
            tls_cert: args.tls_cert.clone().or(file.tls_cert),
            tls_key: args.tls_key.clone().or(file.tls_key),
            metrics_listen: args.metrics_listen.clone().or(file.metrics_listen),
            insecure_no_auth: args.insecure_no_auth || file.insecure_no_auth.unwrap_or(false),
            auth: file.auth,
            cluster,
        };
        if settings.tls_cert.is_some() != settings.tls_key.is_some() {
            return Err("--tls-cert and --tls-key go together".into());
        }
        Ok((settings, log_format))
    }
}

/// Largest `body_bytes_max`: a request body is held in memory whole.
pub const BODY_BYTES_LIMIT: usize = 128 << 20;
/// Longest read timeout: an hour (a longer one holds a slot for nothing).
pub const READ_TIMEOUT_MS_LIMIT: u64 = 3_600_000;

/// Settings that passed [`check`], in the forms the server takes.
struct Checked {
    config: Config,
    filter: tracing_subscriber::EnvFilter,
}

/// Checks every setting without touching the disk or the network, naming a
/// bad one as the config file and the flag spell it.
fn check(settings: &Settings) -> Result<Checked, String> {
    let config = engine_config(settings);
    config.validate().map_err(|e| setting_name(&e))?;
    let caps = [
        (
            "body_bytes_max",
            settings.body_bytes_max as u64,
            BODY_BYTES_LIMIT as u64,
        ),
        (
            "header_read_timeout_ms",
            settings.header_read_timeout_ms,
            READ_TIMEOUT_MS_LIMIT,
        ),
        (
            "body_read_timeout_ms",
            settings.body_read_timeout_ms,
            READ_TIMEOUT_MS_LIMIT,
        ),
    ];
    for (name, value, limit) in caps {
        if value == 0 || value > limit {
            return Err(setting_name(&format!(
                "{name} must be in 1..={limit}, got {value}"
            )));
        }
    }
    // Syntax only (and name resolution): whether the port is free is known
    // when it is bound, which is still before recovery.
    if let Err(e) = settings.listen.to_socket_addrs() {
        return Err(format!(
            "listen (--listen) {:?} is not an address ({e}); write it as HOST:PORT, \
             e.g. 127.0.0.1:7070",
            settings.listen
        ));
    }
    let filter = log_filter(&settings.log_level).map_err(|e| {
        format!(
            "log_level (--log-level) {:?} is not a level or filter ({e}); \
             use off, error, warn, info, debug or trace, or TARGET=LEVEL",
            settings.log_level
        )
    })?;
    Ok(Checked { config, filter })
}

/// A filter from `--log-level`. A bare word must be a level: the filter
/// syntax would take any other word as a module name to log everything
/// of, which makes a typo (`--log-level inf`) silence the log.
fn log_filter(spec: &str) -> Result<tracing_subscriber::EnvFilter, String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    for directive in spec.split(',').map(str::trim) {
        let bare = !directive.contains(['=', '[']);
        if bare && !LEVELS.contains(&directive.to_ascii_lowercase().as_str()) {
            return Err(format!("{directive:?} is not a level"));
        }
    }
    tracing_subscriber::EnvFilter::try_new(spec).map_err(|e| e.to_string())
}

/// The engine's name for a setting (as in `Config::validate`'s message)
/// turned into the setting's own, with its flag.
fn setting_name(message: &str) -> String {
    let (name, rest) = message.split_once(' ').unwrap_or((message, ""));
    let name = match name {
        "segment_bytes_max" => "segment_bytes",
        other => other,
    };
    format!("{name} (--{}) {rest}", name.replace('_', "-"))
}

fn engine_config(settings: &Settings) -> Config {
    Config {
        segment_bytes_max: settings.segment_bytes,
        batch_records_max: settings.batch_records_max,
        batch_bytes_max: settings.batch_bytes_max,
        queue_depth_max: settings.queue_depth_max,
        writer_spin_us: settings.writer_spin_us,
        retention_age_s: settings.retention_age_s,
        retention_bytes: settings.retention_bytes,
        data_bytes_max: settings.data_bytes_max,
        ..Config::default()
    }
}

// The caps `--help` states are these.
const _: () = assert!(SEGMENT_BYTES_LIMIT == 2147483648);
const _: () = assert!(BATCH_RECORDS_LIMIT == 4096);
const _: () = assert!(BATCH_BYTES_LIMIT == 33554432);
const _: () = assert!(BODY_BYTES_LIMIT == 134217728);
const _: () = assert!(fencelog_engine::config::WRITER_SPIN_US_LIMIT == 10000);

pub fn run(args: Args) -> ExitCode {
    let checked = Settings::resolve(&args)
        .and_then(|(settings, format)| Ok((check(&settings)?, settings, format)));
    let (checked, settings, log_format) = match checked {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fencelog serve: {e}");
            return ExitCode::from(2);
        }
    };
    if args.print_config {
        return print_settings(&settings);
    }
    let log = match super::server_log::init(log_format, checked.filter) {
        Ok(log) => log,
        Err(e) => {
            eprintln!("fencelog serve: cannot start the log writer thread: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match Prepared::new(&settings, checked.config, rlimit::raise_nofile()) {
        Ok(prepared) => match &settings.cluster {
            Some(c) => super::serve_cluster::open_and_serve(&settings, c, prepared, &log),
            None => open_and_serve(&settings, prepared, &log),
        },
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::from(2)
        }
    };
    let dropped = log.dropped_lines();
    if dropped > 0 {
        tracing::warn!(
            dropped_lines = dropped,
            "log lines were dropped in total because stderr could not keep up"
        );
    }
    // Every line, the shutdown ones included, is on stderr before the exit.
    drop(log);
    code
}

fn print_settings(settings: &Settings) -> ExitCode {
    match toml::to_string(settings) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fencelog serve: cannot render the settings: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Everything decided before the log is opened: limits, auth, TLS.
pub(super) struct Prepared {
    pub(super) config: Config,
    pub(super) state_limits: HttpLimits,
    pub(super) budget: MemoryBudget,
    pub(super) server_config: ServerConfig,
    pub(super) auth: Auth,
}

impl Prepared {
    /// `nofile`: the file-descriptor limit before and after raising it.
    /// `config`: the engine's, already checked ([`check`]).
    fn new(
        settings: &Settings,
        config: Config,
        (nofile_was, nofile): (u64, u64),
    ) -> Result<Prepared, String> {
        let mut limits = HttpLimits::for_config(&config);
        limits.body_bytes_max = settings.body_bytes_max;
        limits.body_read_timeout = Duration::from_millis(settings.body_read_timeout_ms);
        limits.write_timeout = Duration::from_millis(settings.write_timeout_ms);
        let auth = Auth::from_settings(&settings.auth)?;
        check_exposure(settings, &auth)?;
        let tls = match (&settings.tls_cert, &settings.tls_key) {
            (Some(cert), Some(key)) => Some(Tls::from_files(cert, key)?),
            _ => None,
        };
        let connections_max = match settings.connections_max {
            0 => rlimit::connections_for(nofile),
            n => n,
        };
        tracing::info!(
            nofile_was,
            nofile,
            connections_max,
            tls = tls.is_some(),
            tokens = match &auth {
                Auth::Open => 0,
                Auth::Tokens(t) => t.len(),
            },
            "limits in force"
        );
        let server_config = ServerConfig {
            header_read_timeout: Duration::from_millis(settings.header_read_timeout_ms),
            drain_timeout: Duration::from_millis(settings.shutdown_timeout_ms),
            write_timeout: Duration::from_millis(settings.write_timeout_ms),
            connections_max,
            tls,
            ..ServerConfig::default()
        };
        let budget = MemoryBudget::new(
            settings.response_budget_bytes,
            settings.upload_budget_bytes,
            MemoryBudget::WAIT_DEFAULT,
        );
        Ok(Prepared {
            config,
            state_limits: limits,
            budget,
            server_config,
            auth,
        })
    }
}

/// The safe default: without tokens the server runs open only where only
/// this machine can reach it, unless the operator says otherwise — and
/// then it says so at every start.
fn check_exposure(settings: &Settings, auth: &Auth) -> Result<(), String> {
    if !auth.is_open() {
        return Ok(());
    }
    let loopback = listen_is_loopback(&settings.listen)
        && settings
            .metrics_listen
            .as_deref()
            .is_none_or(listen_is_loopback);
    if loopback {
        return Ok(());
    }
    if settings.insecure_no_auth {
        tracing::warn!(
            listen = %settings.listen,
            "serving WITHOUT access tokens on a non-loopback address (--insecure-no-auth): anyone who can reach the port can append, fence and read every stream"
        );
        return Ok(());
    }
    Err(format!(
        "refusing to listen on {} without access tokens: anyone who could reach it could fence every stream. \
         Create a token with `fencelog token create --name NAME --scopes append,read`, put the [[auth.tokens]] stanza it prints in the --config file, \
         or listen on a loopback address, or pass --insecure-no-auth",
        settings.listen
    ))
}

/// Whether every address `listen` names is a loopback one. Names other
/// than `localhost` are not resolved: unknown means exposed.
fn listen_is_loopback(listen: &str) -> bool {
    use std::net::SocketAddr;
    if let Ok(addr) = listen.parse::<SocketAddr>() {
        return addr.ip().is_loopback();
    }
    listen
        .rsplit_once(':')
        .is_some_and(|(host, _)| host.eq_ignore_ascii_case("localhost"))
}

/// Reads the certificate and key again on every SIGHUP; a bad file keeps
/// the old certificate and says why.
async fn reload_on_sighup(tls: Arc<Tls>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGHUP; certificates will not reload");
            return;
        }
    };
    while hup.recv().await.is_some() {
        match tls.reload() {
            Ok(()) => tracing::info!("TLS certificate reloaded"),
            Err(e) => {
                tracing::error!(error = %e, "TLS reload failed; keeping the previous certificate")
            }
        }
    }
}

/// Binds the listen address, opens the data directory and serves it until
/// a stop signal; returns once the server, its runtime and the engine have
/// shut down. The address is bound first: a port in use is reported at
/// once, not after a recovery that may read the whole log. (Connections
/// made meanwhile wait in the backlog until recovery is done.)
fn open_and_serve(settings: &Settings, p: Prepared, log: &ServerLog) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    // tokio's bind sets SO_REUSEADDR, so a restart on the same port does
    // not wait out the old connections' TIME_WAIT.
    let listener = match runtime.block_on(tokio::net::TcpListener::bind(&settings.listen)) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(listen = %settings.listen, error = %e, "cannot listen");
            return ExitCode::FAILURE;
        }
    };
    let engine = match open_engine(&settings.data_dir, p.config) {
        Ok(e) => e,
        Err(code) => return ExitCode::from(code),
    };
    let state = AppState::new(engine)
        .with_limits(p.state_limits)
        .with_auth(p.auth)
        .with_budget(p.budget);
    let code = runtime.block_on(serve_http(
        settings,
        listener,
        state,
        p.server_config,
        log.clone(),
    ));
    drop(runtime);
    code
}

/// `fencelog serve` refused a data directory that is damaged or
/// incomplete (a checksum, a missing segment, a foreign file): distinct
/// from 1 so a service manager can stop restarting it
/// (`RestartPreventExitStatus=5`) — a restart cannot fix it, an operator
/// must look.
pub const EXIT_DATA_REFUSED: u8 = 5;

/// Opens (recovers) the log and says what recovery found; `Err` is the
/// exit code when it cannot.
fn open_engine(data_dir: &std::path::Path, config: Config) -> Result<Engine, u8> {
    let engine = match Engine::open_with(data_dir, config) {
        Ok(e) => e,
        Err(fencelog_engine::OpenError::Corrupt(c)) => {
            tracing::error!(
                data_dir = %data_dir.display(),
                file = %c.file,
                offset = c.offset,
                reason = %c.reason,
                "refusing to open the log: {c} (see docs/operations.md, \"A data directory refused at start\")"
            );
            return Err(EXIT_DATA_REFUSED);
        }
        Err(e) => {
            tracing::error!(data_dir = %data_dir.display(), error = %e, "cannot open the log");
            return Err(super::common::EXIT_FAILURE);
        }
    };
    let report = engine.recovery_report();
    tracing::info!(
        data_dir = %data_dir.display(),
        segments = report.segments,
        streams = report.streams,
        records = report.records,
        "recovered"
    );
    if let Some(t) = &report.truncated {
        tracing::warn!(
            file = %t.file,
            offset = t.offset,
            bytes_cut = t.bytes_cut,
            reason = %t.reason,
            "truncated an unacknowledged tail"
        );
    }
    if let Some(name) = &report.removed_segment {
        tracing::warn!(file = %name, "removed a segment whose creation never became durable");
    }
    if let Some(name) = &report.adopted_roll {
        tracing::info!(file = %name, "listed a new empty segment in the MANIFEST (a roll cut short by a stop)");
    }
    Ok(engine)
}

/// Announces the bound address once the startup lines are in the log, and
/// serves until SIGTERM or Ctrl-C.
async fn serve_http(
    settings: &Settings,
    listener: tokio::net::TcpListener,
    state: AppState,
    server_config: ServerConfig,
    log: ServerLog,
) -> ExitCode {
    tokio::spawn(report_dropped_log_lines(log.clone()));
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "cannot read the bound address");
            return ExitCode::FAILURE;
        }
    };
    let stop = match stop_signal(log.clone()) {
        Ok(stop) => stop,
        Err(e) => {
            tracing::error!(error = %e, "cannot watch SIGTERM and SIGINT");
            return ExitCode::FAILURE;
        }
    };
    if let Some(listen) = &settings.metrics_listen {
        let metrics = match tokio::net::TcpListener::bind(listen).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(listen = %listen, error = %e, "cannot listen for metrics");
                return ExitCode::FAILURE;
            }
        };
        if let Ok(a) = metrics.local_addr() {
            tracing::info!(addr = %a, "serving /metrics without a token");
            println!("metrics on {a}");
        }
        tokio::spawn(http::serve_metrics(metrics, state.clone()));
    }
    if let Some(tls) = server_config.tls.clone() {
        tokio::spawn(reload_on_sighup(tls));
    }
    tracing::info!(%addr, data_dir = %settings.data_dir.display(), "serving");
    // Whoever acts on the line below (a supervisor, a test that kills the
    // server right then) finds the startup lines in the log.
    log.sync();
    log.set_lossy(true);
    // Scripts and tests that pass port 0 read the real port from here.
    println!("listening on {addr}");
    let _ = std::io::stdout().flush();
    match http::serve(listener, state, server_config, stop).await {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = %e, "server failed");
            ExitCode::FAILURE
        }
    }
}

/// Says so when log lines were dropped (the queue to stderr was full), at
/// most every 10 s: the line itself has room by the time it is written,
/// since a drop means the writer was behind, not gone.
pub(super) async fn report_dropped_log_lines(log: ServerLog) {
    let mut reported = 0;
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tick.tick().await;
        let now = log.dropped_lines();
        if now > reported {
            tracing::warn!(
                dropped_lines = now - reported,
                total = now,
                "log lines dropped because stderr could not keep up"
            );
            reported = now;
        }
    }
}

/// Watches SIGTERM and SIGINT (Ctrl-C) from the call on, and resolves on
/// the first; from then on the log is no longer lossy, since the shutdown
/// lines must reach it. Called before `listening on` is printed: a handler
/// installed later (on the first poll of the future) left a window in which
/// a supervisor stopping a just-ready server killed it outright instead.
pub(super) fn stop_signal(
    log: ServerLog,
) -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        let which = tokio::select! {
            _ = interrupt.recv() => "Ctrl-C",
            _ = term.recv() => "SIGTERM",
        };
        log.set_lossy(false);
        tracing::info!("received {which}");
    })
}
