//! `fencelog serve`: open the data directory, serve the HTTP API, and shut
//! down cleanly on SIGTERM or Ctrl-C.

use super::LogFormat;
use fencelog_engine::config::{
    Config, BATCH_BYTES_DEFAULT, BATCH_RECORDS_DEFAULT, SEGMENT_BYTES_DEFAULT,
};
use fencelog_engine::Engine;
use fencelog_server::{self as http, AppState, HttpLimits, ServerConfig};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
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
    /// Directory holding the log's segments, created if missing
    /// [default: ./fencelog-data].
    #[arg(long, env = "FENCELOG_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address to listen on; port 0 picks a free port (printed at startup)
    /// [default: 127.0.0.1:7070].
    #[arg(long, env = "FENCELOG_LISTEN")]
    pub listen: Option<String>,
    /// Roll to a new segment file past this size [default: 134217728].
    #[arg(long, env = "FENCELOG_SEGMENT_BYTES")]
    pub segment_bytes: Option<u64>,
    /// Most records in one append [default: 1000].
    #[arg(long, env = "FENCELOG_BATCH_RECORDS_MAX")]
    pub batch_records_max: Option<usize>,
    /// Most record body bytes in one append [default: 1048576].
    #[arg(long, env = "FENCELOG_BATCH_BYTES_MAX")]
    pub batch_bytes_max: Option<usize>,
    /// Largest HTTP request body [default: 2 x batch-bytes-max + 64 KiB].
    #[arg(long, env = "FENCELOG_BODY_BYTES_MAX")]
    pub body_bytes_max: Option<usize>,
    /// Time a client has to send request headers, and to start the next
    /// request on an idle keep-alive connection [default: 10000].
    #[arg(long, env = "FENCELOG_HEADER_READ_TIMEOUT_MS")]
    pub header_read_timeout_ms: Option<u64>,
    /// Time a client has to send a whole request body [default: 30000].
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
    /// 10GiB, bytes, or `unlimited` [default: unlimited].
    #[arg(long, env = "FENCELOG_DATA_BYTES_MAX")]
    pub data_bytes_max: Option<String>,
}

/// The config file: every setting optional, unknown keys refused so a typo
/// is an error instead of a silently ignored setting.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    log_format: Option<LogFormat>,
    data_dir: Option<PathBuf>,
    listen: Option<String>,
    segment_bytes: Option<u64>,
    batch_records_max: Option<usize>,
    batch_bytes_max: Option<usize>,
    body_bytes_max: Option<usize>,
    header_read_timeout_ms: Option<u64>,
    body_read_timeout_ms: Option<u64>,
    retention_age: Option<String>,
    retention_bytes: Option<String>,
    data_bytes_max: Option<String>,
}

/// What the server runs with, after file, environment and flags.
#[derive(Debug, serde::Serialize)]
pub struct Settings {
    pub log_format: String,
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
        let settings = Settings {
            log_format: log_format.to_string(),
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
        };
        Ok((settings, log_format))
    }
}

pub fn run(args: Args) -> ExitCode {
    let (settings, log_format) = match Settings::resolve(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fencelog serve: {e}");
            return ExitCode::from(2);
        }
    };
    if args.print_config {
        match toml::to_string(&settings) {
            Ok(text) => {
                print!("{text}");
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("fencelog serve: cannot render the settings: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let log_guard = super::init_server_logging(log_format);
    let config = Config {
        segment_bytes_max: settings.segment_bytes,
        batch_records_max: settings.batch_records_max,
        batch_bytes_max: settings.batch_bytes_max,
        retention_age_s: settings.retention_age_s,
        retention_bytes: settings.retention_bytes,
        data_bytes_max: settings.data_bytes_max,
        ..Config::default()
    };
    let mut limits = HttpLimits::for_config(&config);
    limits.body_bytes_max = settings.body_bytes_max;
    limits.body_read_timeout = Duration::from_millis(settings.body_read_timeout_ms);
    let server_config = ServerConfig {
        header_read_timeout: Duration::from_millis(settings.header_read_timeout_ms),
        ..ServerConfig::default()
    };

    let engine = match Engine::open_with(&settings.data_dir, config) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(data_dir = %settings.data_dir.display(), error = %e, "cannot open the log");
            return ExitCode::FAILURE;
        }
    };
    let report = engine.recovery_report();
    tracing::info!(
        data_dir = %settings.data_dir.display(),
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
    let dropped = log_guard.dropped_counter();
    let code = runtime.block_on(async move {
        tokio::spawn(report_dropped_log_lines(dropped));
        let listener = match tokio::net::TcpListener::bind(&settings.listen).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(listen = %settings.listen, error = %e, "cannot listen");
                return ExitCode::FAILURE;
            }
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the bound address");
                return ExitCode::FAILURE;
            }
        };
        // Scripts and tests that pass port 0 read the real port from here.
        println!("listening on {addr}");
        let _ = std::io::stdout().flush();
        tracing::info!(%addr, data_dir = %settings.data_dir.display(), "serving");
        let state = AppState::new(engine).with_limits(limits);
        match http::serve(listener, state, server_config, stop_signal()).await {
            Ok(()) => {
                tracing::info!("stopped");
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!(error = %e, "server failed");
                ExitCode::FAILURE
            }
        }
    });
    drop(runtime);
    let dropped = log_guard.dropped_lines();
    if dropped > 0 {
        tracing::warn!(
            dropped_lines = dropped,
            "log lines were dropped in total because stderr could not keep up"
        );
    }
    // Dropping the guard writes out every line still queued.
    drop(log_guard);
    code
}

/// Says so when log lines were dropped (the queue to stderr was full), at
/// most every 10 s: the line itself has room by the time it is written,
/// since a drop means the writer was behind, not gone.
async fn report_dropped_log_lines(counter: tracing_appender::non_blocking::ErrorCounter) {
    let mut reported = 0;
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tick.tick().await;
        let now = counter.dropped_lines();
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

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGTERM; only Ctrl-C stops the server");
            let _ = ctrl_c.await;
            return;
        }
    };
    tokio::select! {
        _ = ctrl_c => tracing::info!("received Ctrl-C"),
        _ = term.recv() => tracing::info!("received SIGTERM"),
    }
}
