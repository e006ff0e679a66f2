//! `fencelog token create`: a new random access-token secret, printed once,
//! and the `[[auth.tokens]]` stanza (with only its SHA-256) to paste into
//! the server's config file. The server never stores the secret.

use fencelog_server::auth::{generate_secret, hash_secret, to_hex, Scope, TokenSettings};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: TokenCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Print a new secret and the config stanza for it.
    Create(CreateArgs),
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The token's name in logs, metrics and 403 answers.
    #[arg(long)]
    pub name: String,
    /// Comma-separated: read, append, fence, trim, seal, delete, config, admin.
    #[arg(long, value_delimiter = ',', required = true)]
    pub scopes: Vec<String>,
    /// Only streams whose names start with this ("" = every stream).
    #[arg(long, default_value = "")]
    pub stream_prefix: String,
}

pub fn run(args: Args) -> ExitCode {
    let TokenCommand::Create(args) = args.command;
    for s in &args.scopes {
        if Scope::parse(s).is_none() {
            eprintln!(
                "fencelog token create: unknown scope {s:?} (read, append, fence, trim, seal, delete, config, admin)"
            );
            return ExitCode::from(2);
        }
    }
    let secret = match generate_secret() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fencelog token create: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stanza = TokenSettings {
        name: args.name,
        sha256: to_hex(&hash_secret(&secret)),
        scopes: args.scopes,
        stream_prefix: args.stream_prefix,
    };
    let table = toml::to_string(&stanza).expect("a token stanza renders as TOML");
    println!("# The secret, shown only now; clients send it as Authorization: Bearer <secret>:");
    println!("# {secret}");
    println!("# Paste into the server's --config file:");
    println!("[[auth.tokens]]");
    print!("{table}");
    ExitCode::SUCCESS
}
