//! `fencelog completions bash|zsh|fish`: a completion script for the shell,
//! generated from the clap definitions, so it knows every subcommand and
//! option this binary has.

use clap::CommandFactory;
use clap_complete::Shell;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
#[command(after_help = "Install, for example:\n  \
    bash: fencelog completions bash > /etc/bash_completion.d/fencelog\n  \
    zsh:  fencelog completions zsh > \"${fpath[1]}/_fencelog\"\n  \
    fish: fencelog completions fish > ~/.config/fish/completions/fencelog.fish")]
pub struct Args {
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

/// The shells we generate for (and test).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

pub fn run(args: Args) -> ExitCode {
    let shell = match args.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut cmd = super::Cli::command();
    clap_complete::generate(shell, &mut cmd, "fencelog", &mut std::io::stdout());
    ExitCode::SUCCESS
}
