//! The `fencelog` command. Each subcommand lives in its own file under
//! `src/cli/`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::run()
}
