//! `cargo xtask <task>`: project tasks that need nothing but the Rust
//! toolchain to start.
//!
//! - `test [ARGS...]`: installs what the test suites need when it is missing
//!   (see [`DEPENDENCIES`]), then runs every test of the workspace with the
//!   `mutations` feature (the tests of the tests), passing `ARGS` on to
//!   `cargo test`. This is the command README.md gives and `.ci/run` calls.
//! - `deps`: only the installation step.
//!
//! Installing uses Debian's `apt-get`, as root; elsewhere it says what to
//! install and stops, rather than letting a suite skip silently.

use std::process::{Command, ExitCode};
use std::time::Instant;

/// A program a test suite runs, and the Debian package that provides it.
struct Dependency {
    program: &'static str,
    package: &'static str,
    needed_by: &'static str,
}

const DEPENDENCIES: &[Dependency] = &[Dependency {
    program: "etcd",
    package: "etcd-server",
    needed_by: "tests/it/etcd_story.rs (a real etcd lease in the fencing story)",
}];

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let task = args.next();
    let rest: Vec<String> = args.collect();
    let result = match task.as_deref() {
        Some("test") => install_dependencies().and_then(|()| run_tests(&rest)),
        Some("deps") => install_dependencies(),
        _ => Err("usage: cargo xtask test [CARGO TEST ARGS...] | cargo xtask deps".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn on_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn install_dependencies() -> Result<(), String> {
    let missing: Vec<&Dependency> = DEPENDENCIES
        .iter()
        .filter(|d| !on_path(d.program))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let packages: Vec<&str> = missing.iter().map(|d| d.package).collect();
    for d in &missing {
        eprintln!(
            "xtask: `{}` is missing; needed by {}",
            d.program, d.needed_by
        );
    }
    if !is_root() {
        return Err(format!(
            "install the Debian packages {} (as root: apt-get install -y {}) and run again",
            packages.join(", "),
            packages.join(" ")
        ));
    }
    // `update` first: a fresh machine's package lists may be empty.
    run("apt-get", &["update", "-q"])?;
    let mut install = vec!["install", "-y", "-q", "--no-install-recommends"];
    install.extend(&packages);
    run("apt-get", &install)?;
    for d in &missing {
        if !on_path(d.program) {
            return Err(format!(
                "{} still missing after installing {}",
                d.program, d.package
            ));
        }
    }
    Ok(())
}

fn run_tests(extra: &[String]) -> Result<(), String> {
    let started = Instant::now();
    let mut args = vec![
        "test",
        "--workspace",
        "--no-fail-fast",
        "--features",
        "fencelog-engine/mutations",
    ];
    args.extend(extra.iter().map(String::as_str));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let result = run(&cargo, &args);
    eprintln!(
        "xtask: tests finished in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    result
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("xtask: running {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .status()
        .map_err(|e| format!("could not start {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{program} {} failed ({status})", args.join(" ")))
    }
}
