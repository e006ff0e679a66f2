//! A worker that owns a fencelog stream through an etcd lock.
//!
//! It takes a lease-backed lock in etcd, uses the revision at which its lock
//! key was created as its fencing token (strictly increasing across
//! acquisitions; see `fencelog::etcd`), fences the stream with it, and
//! appends one record per line of stdin through an idempotent producer (its
//! name is the producer id: a lost answer is retried without writing
//! twice), each append bound by `not_after_ms` = the lease's expiry minus a
//! clock-skew margin. If it is paused long enough to lose its lease, its
//! next append is refused — `deadline_exceeded` before a successor exists,
//! `stale_fencing_token` once one has fenced — and it stops with exit code
//! 3; fenced out, it prints what the producer lookup says landed last.
//!
//! ```text
//! etcd &                                   # client URL http://127.0.0.1:2379
//! fencelog serve &                         # http://127.0.0.1:7070
//! cargo run --example etcd_fenced_worker -- orders http://127.0.0.1:2379 http://127.0.0.1:7070
//! ```
//!
//! `fencelog demo-worker` runs the same code as a subcommand of the binary.

use fencelog_client::etcd::{run_worker, WorkerConfig, WorkerOutcome};
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let stream = args.next().unwrap_or_else(|| "orders".to_string());
    let etcd_url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:2379".to_string());
    let fencelog_url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:7070".to_string());
    let config = WorkerConfig {
        etcd_url,
        fencelog_url,
        lock_key: format!("fencelog/locks/{stream}"),
        stream,
        name: format!("example-{}", std::process::id()),
        lease_ttl_s: 5,
        // Appends carry not_after_ms: the lease's expiry minus this margin.
        deadline_margin_ms: Some(500),
    };
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    match run_worker(&config, stdin, tokio::io::stdout()).await {
        Ok(WorkerOutcome::Finished { .. }) => ExitCode::SUCCESS,
        // Another owner took over while this one was paused: stop, never retry.
        Ok(WorkerOutcome::FencedOut { .. } | WorkerOutcome::LeaseExpired { .. }) => {
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("worker failed: {e}");
            ExitCode::FAILURE
        }
    }
}
