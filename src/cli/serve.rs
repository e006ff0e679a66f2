//! `fencelog serve`: open the data directory, serve the HTTP API, and shut
//! down cleanly on SIGTERM or Ctrl-C.

use super::server_log::ServerLog;
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
        return print_settings(&settings);
    }
    let log = match super::server_log::init(log_format) {
        Ok(log) => log,
        Err(e) => {
            eprintln!("fencelog serve: cannot start the log writer thread: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = open_and_serve(&settings, &log);
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

/// Opens the data directory and serves it until a stop signal; returns
/// once the server, its runtime and the engine have shut down.
fn open_and_serve(settings: &Settings, log: &ServerLog) -> ExitCode {
    let config = Config {
        segment_bytes_max: settings.segment_bytes,
        batch_records_max: settings.batch_records_max,
        batch_bytes_max: settings.batch_bytes_max,
        ..Config::default()
    };
    let mut limits = HttpLimits::for_config(&config);
    limits.body_bytes_max = settings.body_bytes_max;
    limits.body_read_timeout = Duration::from_millis(settings.body_read_timeout_ms);
    let server_config = ServerConfig {
        header_read_timeout: Duration::from_millis(settings.header_read_timeout_ms),
        ..ServerConfig::default()
    };
    let Some(engine) = open_engine(&settings.data_dir, config) else {
        return ExitCode::FAILURE;
    };
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
    let state = AppState::new(engine).with_limits(limits);
    let code = runtime.block_on(serve_http(settings, state, server_config, log.clone()));
    drop(runtime);
    code
}

/// Opens (recovers) the log and says what recovery found.
fn open_engine(data_dir: &std::path::Path, config: Config) -> Option<Engine> {
    let engine = match Engine::open_with(data_dir, config) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(data_dir = %data_dir.display(), error = %e, "cannot open the log");
            return None;
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
    Some(engine)
}

/// Binds, announces the address once the startup lines are in the log,
/// and serves until SIGTERM or Ctrl-C.
async fn serve_http(
    settings: &Settings,
    state: AppState,
    server_config: ServerConfig,
    log: ServerLog,
) -> ExitCode {
    tokio::spawn(report_dropped_log_lines(log.clone()));
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
    let stop = match stop_signal(log.clone()) {
        Ok(stop) => stop,
        Err(e) => {
            tracing::error!(error = %e, "cannot watch SIGTERM and SIGINT");
            return ExitCode::FAILURE;
        }
    };
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
async fn report_dropped_log_lines(log: ServerLog) {
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
fn stop_signal(log: ServerLog) -> std::io::Result<impl std::future::Future<Output = ()>> {
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
