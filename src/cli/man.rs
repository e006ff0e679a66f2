//! `fencelog man [--out-dir DIR]`: man pages generated from the clap
//! definitions. Without `--out-dir`, `fencelog(1)` goes to stdout; with it,
//! `fencelog.1` and one `fencelog-SUBCOMMAND.1` per visible subcommand are
//! written there. `docs/man/` holds the pages of this checkout (a test
//! keeps them equal to what the binary generates).

use clap::CommandFactory;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write every page into this directory instead of printing fencelog.1.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// The command as the pages describe it: the plain release as its version,
/// not the commit, so the pages change only when the interface does.
fn command() -> clap::Command {
    super::Cli::command().version(env!("CARGO_PKG_VERSION"))
}

fn render(cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    Ok(out)
}

/// `(file name, page)` for fencelog.1 and each visible subcommand.
pub fn pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut cmd = command();
    // Subcommands get their display names ("fencelog-serve"), which the
    // pages use as titles, only once the parent is built.
    cmd.build();
    let mut out = vec![("fencelog.1".to_string(), render(cmd.clone())?)];
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let name = format!("fencelog-{}", sub.get_name());
        let page = sub.clone().version(env!("CARGO_PKG_VERSION"));
        out.push((format!("{name}.1"), render(page)?));
    }
    Ok(out)
}

fn write_all(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, page) in pages()? {
        std::fs::write(dir.join(name), page)?;
    }
    Ok(())
}

pub fn run(args: Args) -> ExitCode {
    let result = match &args.out_dir {
        Some(dir) => write_all(dir),
        None => render(command()).and_then(|page| {
            use std::io::Write;
            std::io::stdout().write_all(&page)
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fencelog man: {e}");
            ExitCode::from(super::common::EXIT_FAILURE)
        }
    }
}
