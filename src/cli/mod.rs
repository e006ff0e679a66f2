//! Command-line parsing and dispatch. To add a subcommand: a file here with
//! an `Args` struct (clap derive) and a `run(args) -> ExitCode`, a variant
//! in [`Command`], and an arm in [`run`].

use clap::{Parser, Subcommand};
use std::process::ExitCode;

pub mod bench;
pub mod serve;

#[derive(Debug, Parser)]
#[command(name = "fencelog", version, about = "A fenced append-only log")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server on a data directory.
    Serve(serve::Args),
    /// Drive a server (or PostgreSQL / Redis) with load and verify the result.
    Bench(fencelog::loadgen::BenchArgs),
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Bench(args) => bench::run(args),
    }
}

/// Logs to stderr so stdout stays free for machine-readable lines.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
