//! `fencelog bench`: the load generator in [`fencelog::loadgen`], with a
//! non-zero exit when the run could not be made or did not verify.

use fencelog_bench::{self as loadgen, BenchArgs, BenchError};
use std::process::ExitCode;

pub fn run(args: BenchArgs) -> ExitCode {
    // Only the in-process server logs, and only warnings: the report is
    // the output.
    if std::env::var_os("RUST_LOG").is_none() {
        std::env::set_var("RUST_LOG", "warn");
    }
    super::init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fencelog bench: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(loadgen::run_and_print(args)) {
        Ok(_) => ExitCode::SUCCESS,
        // The report, failures included, is already printed.
        Err(BenchError::Verification(_)) => {
            eprintln!("fencelog bench: verification failed");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("fencelog bench: {e}");
            ExitCode::FAILURE
        }
    }
}
