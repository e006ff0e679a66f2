//! `fencelog serve`: open the data directory, serve the HTTP API, and shut
//! down cleanly on SIGTERM or Ctrl-C.

use fencelog::config::{Config, BATCH_BYTES_DEFAULT, BATCH_RECORDS_DEFAULT, SEGMENT_BYTES_DEFAULT};
use fencelog::http::{self, AppState, HttpLimits, ServerConfig};
use fencelog::Engine;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory holding the log's segments (created if missing).
    #[arg(long, env = "FENCELOG_DATA_DIR", default_value = "./fencelog-data")]
    pub data_dir: PathBuf,
    /// Address to listen on; port 0 picks a free port (printed at startup).
    #[arg(long, env = "FENCELOG_LISTEN", default_value = "127.0.0.1:7070")]
    pub listen: String,
    /// Roll to a new segment file past this size.
    #[arg(long, env = "FENCELOG_SEGMENT_BYTES", default_value_t = SEGMENT_BYTES_DEFAULT)]
    pub segment_bytes: u64,
    /// Most records in one append.
    #[arg(long, env = "FENCELOG_BATCH_RECORDS_MAX", default_value_t = BATCH_RECORDS_DEFAULT)]
    pub batch_records_max: usize,
    /// Most record body bytes in one append.
    #[arg(long, env = "FENCELOG_BATCH_BYTES_MAX", default_value_t = BATCH_BYTES_DEFAULT)]
    pub batch_bytes_max: usize,
    /// Largest HTTP request body [default: 2 x batch-bytes-max + 64 KiB].
    #[arg(long, env = "FENCELOG_BODY_BYTES_MAX")]
    pub body_bytes_max: Option<usize>,
    /// Time a client has to send request headers, and to start the next
    /// request on an idle keep-alive connection.
    #[arg(
        long,
        env = "FENCELOG_HEADER_READ_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub header_read_timeout_ms: u64,
    /// Time a client has to send a whole request body.
    #[arg(long, env = "FENCELOG_BODY_READ_TIMEOUT_MS", default_value_t = 30_000)]
    pub body_read_timeout_ms: u64,
}

pub fn run(args: Args) -> ExitCode {
    super::init_logging();
    let config = Config {
        segment_bytes_max: args.segment_bytes,
        batch_records_max: args.batch_records_max,
        batch_bytes_max: args.batch_bytes_max,
        ..Config::default()
    };
    let mut limits = HttpLimits::for_config(&config);
    if let Some(n) = args.body_bytes_max {
        limits.body_bytes_max = n;
    }
    limits.body_read_timeout = Duration::from_millis(args.body_read_timeout_ms);
    let server_config = ServerConfig {
        header_read_timeout: Duration::from_millis(args.header_read_timeout_ms),
        ..ServerConfig::default()
    };

    let engine = match Engine::open_with(&args.data_dir, config) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(data_dir = %args.data_dir.display(), error = %e, "cannot open the log");
            return ExitCode::FAILURE;
        }
    };
    let report = engine.recovery_report();
    tracing::info!(
        data_dir = %args.data_dir.display(),
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
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(&args.listen).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(listen = %args.listen, error = %e, "cannot listen");
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
        tracing::info!(%addr, data_dir = %args.data_dir.display(), "serving");
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
    })
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
