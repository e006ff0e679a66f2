//! Command-line parsing and dispatch. To add a subcommand: a file here with
//! an `Args` struct (clap derive) and a `run(args) -> ExitCode`, a variant
//! in [`Command`], and an arm in [`run`].

use clap::{Parser, Subcommand};
use std::process::ExitCode;

pub mod append;
pub mod bench;
pub mod bench_read;
pub mod cluster;
pub mod common;
pub mod completions;
pub mod demo_worker;
pub mod dev_cluster;
pub mod fence;
pub mod lifecycle;
pub mod man;
pub mod producers;
pub mod read;
pub mod rlimit;
pub mod serve;
pub mod serve_cluster;
mod server_log;
pub mod signals;
pub mod start;
pub mod status;
pub mod tail;
pub mod token;
pub mod units;
pub mod version;

#[derive(Debug, Parser)]
#[command(
    name = "fencelog",
    version = version::long(),
    about = "A fenced append-only log",
    after_help = common::EXIT_CODES_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at startup and matched at once: the size of `serve`'s arguments costs nothing"
)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server on a data directory.
    Serve(serve::Args),
    /// Append a record, or one record per stdin line, with a fencing token.
    #[command(after_help = common::EXIT_CODES_HELP)]
    Append(append::Args),
    /// Print a stream's records, one per line.
    #[command(after_help = common::EXIT_CODES_HELP)]
    Read(read::Args),
    /// Print a stream's records and follow new ones until Ctrl-C.
    #[command(after_help = common::EXIT_CODES_HELP)]
    Tail(tail::Args),
    /// Raise one or more streams' fencing token without writing a record
    /// (several streams: all or none, in one batch).
    #[command(after_help = common::EXIT_CODES_HELP)]
    Fence(fence::Args),
    /// Did my write land? An idempotent producer's last applied append.
    #[command(after_help = common::EXIT_CODES_HELP)]
    Producer(producers::ProducerArgs),
    /// The tokens that took effect on a stream, newest first.
    #[command(after_help = common::EXIT_CODES_HELP)]
    Fences(producers::FencesArgs),
    /// Show a fenced consumer cursor, or commit it with --set SEQ --token T.
    #[command(after_help = common::EXIT_CODES_HELP)]
    Cursor(producers::CursorArgs),
    /// Show one stream's state, or list every stream.
    #[command(after_help = common::EXIT_CODES_HELP)]
    Status(status::Args),
    /// Make a stream's records below a seq unreadable (fenced like an append).
    #[command(after_help = common::EXIT_CODES_HELP)]
    Trim(lifecycle::TrimArgs),
    /// Seal a stream: no more appends, fences or trims, whatever the token.
    #[command(after_help = common::EXIT_CODES_HELP)]
    Seal(lifecycle::TokenArgs),
    /// Delete a stream's records; its tombstone keeps the token forever.
    #[command(after_help = common::EXIT_CODES_HELP)]
    Delete(lifecycle::TokenArgs),
    /// Set a stream's retention (by age and by size).
    #[command(after_help = common::EXIT_CODES_HELP)]
    Config(lifecycle::ConfigArgs),
    /// Start a three-node cluster on loopback until Ctrl-C (for trying it out).
    DevCluster(dev_cluster::Args),
    /// A cluster's membership and leaders: status, add, remove, transfer.
    #[command(after_help = common::EXIT_CODES_HELP)]
    Cluster(cluster::Args),
    /// The etcd-locked worker of the end-to-end test and example.
    #[command(hide = true)]
    DemoWorker(demo_worker::Args),
    /// Drive a server (or PostgreSQL / Redis) with load and verify the result.
    Bench(fencelog_bench::BenchArgs),
    /// Read a stream back with the client, binary or JSON, and time it
    /// (`benches/peers/consume.sh`).
    #[command(hide = true)]
    BenchRead(bench_read::Args),
    /// Access tokens: `token create` prints a new secret and its config stanza.
    Token(token::Args),
    /// Print a shell completion script (bash, zsh or fish).
    Completions(completions::Args),
    /// Print the man page, or write every page into a directory.
    Man(man::Args),
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Append(args) => append::run(args),
        Command::Read(args) => read::run(args),
        Command::Tail(args) => tail::run(args),
        Command::Fence(args) => fence::run(args),
        Command::Producer(args) => producers::producer(args),
        Command::Fences(args) => producers::fences(args),
        Command::Cursor(args) => producers::cursor(args),
        Command::Status(args) => status::run(args),
        Command::Trim(args) => lifecycle::trim(args),
        Command::Seal(args) => lifecycle::seal(args),
        Command::Delete(args) => lifecycle::delete(args),
        Command::Config(args) => lifecycle::config(args),
        Command::DevCluster(args) => dev_cluster::run(args),
        Command::Cluster(args) => cluster::run(args),
        Command::DemoWorker(args) => demo_worker::run(args),
        Command::Bench(args) => bench::run(args),
        Command::BenchRead(args) => bench_read::run(args),
        Command::Token(args) => token::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
    }
}

/// Logs to stderr so stdout stays free for machine-readable lines.
pub fn init_logging() {
    init_logging_as(LogFormat::Text);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

impl std::fmt::Display for LogFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

pub fn init_logging_as(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    install_logging(format, filter, std::io::stderr);
}

fn install_logging<W>(format: LogFormat, filter: tracing_subscriber::EnvFilter, writer: W)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    // Colour codes only help a person at a terminal; in files and journals
    // they are noise that breaks grep.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
