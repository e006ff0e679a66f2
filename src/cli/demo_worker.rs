//! `fencelog demo-worker` (hidden): the etcd-locked worker of
//! `fencelog::etcd`, as a process the end-to-end test can pause with
//! SIGSTOP. `examples/etcd_fenced_worker.rs` is the documented twin.

use super::common::{EXIT_FAILURE, EXIT_OK, EXIT_STALE};
use fencelog_client::etcd::{run_worker, WorkerConfig, WorkerOutcome};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// etcd client URL (JSON gateway).
    #[arg(long, default_value = "http://127.0.0.1:2379")]
    pub etcd: String,
    #[arg(long, env = "FENCELOG_URL", default_value = "http://127.0.0.1:7070")]
    pub server: String,
    #[arg(long)]
    pub stream: String,
    /// Lock key in etcd [default: fencelog/locks/STREAM].
    #[arg(long)]
    pub lock_key: Option<String>,
    #[arg(long, default_value = "worker")]
    pub name: String,
    #[arg(long, default_value_t = 2)]
    pub lease_ttl_s: u64,
    /// Appends carry not_after_ms = the lease's expiry minus this margin
    /// (ms); without it, no deadline.
    #[arg(long)]
    pub deadline_margin_ms: Option<u64>,
}

pub fn run(args: Args) -> ExitCode {
    super::init_logging();
    let config = WorkerConfig {
        etcd_url: args.etcd,
        fencelog_url: args.server,
        lock_key: args
            .lock_key
            .unwrap_or_else(|| format!("fencelog/locks/{}", args.stream)),
        stream: args.stream,
        name: args.name,
        lease_ttl_s: args.lease_ttl_s,
        deadline_margin_ms: args.deadline_margin_ms,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("cannot start the async runtime");
    let outcome = rt.block_on(run_worker(
        &config,
        tokio::io::BufReader::new(tokio::io::stdin()),
        tokio::io::stdout(),
    ));
    match outcome {
        Ok(WorkerOutcome::Finished { .. }) => ExitCode::from(EXIT_OK),
        Ok(WorkerOutcome::FencedOut { .. } | WorkerOutcome::LeaseExpired { .. }) => {
            ExitCode::from(EXIT_STALE)
        }
        Err(e) => {
            eprintln!("demo-worker: {e}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}
