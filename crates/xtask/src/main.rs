//! `cargo xtask <task>`: project tasks that need nothing but the Rust
//! toolchain to start.
//!
//! - `test [ARGS...]`: provides what the test suites need when it is
//!   missing (see [`DEPENDENCIES`]), then runs every test of the workspace
//!   with the `mutations` feature (the tests of the tests), passing `ARGS`
//!   on to `cargo test`, and says how long it all took. This is the command
//!   README.md gives and `.ci/run` calls. It sets
//!   `FENCELOG_TEST_REQUIRE_DEPS=1`, so a suite that still cannot find its
//!   dependency fails instead of printing `SKIPPED` and passing.
//! - `deps`: only the providing step.
//!
//! Installing uses Debian's `apt-get`, as root; elsewhere it says what to
//! install and stops, rather than letting a suite skip.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

/// What a test suite needs beyond the Rust toolchain, how to tell it is
/// there, and how to provide it. A later suite adds one entry, e.g.
///
/// ```text
/// Dependency {
///     name: "pytest in a venv",
///     needed_by: "clients/python (its pytest suite)",
///     present: "target/test-deps/py/bin/python -m pytest --version",
///     apt: &["python3-venv"],
///     setup: &["python3 -m venv target/test-deps/py",
///              "target/test-deps/py/bin/pip install -q pytest"],
/// },
/// ```
///
/// (Node: `apt: &["nodejs", "npm"]`, `setup: &["npm ci --prefix clients/typescript"]`;
/// a browser: `setup: &["npx --prefix clients/typescript playwright install --with-deps chromium"]`;
/// partitions: `present: "command -v nft && command -v ip"`, `apt: &["nftables", "iproute2"]`.)
struct Dependency {
    /// Shown in messages.
    name: &'static str,
    /// The suite, so whoever reads a failure knows what it is for.
    needed_by: &'static str,
    /// A `sh -c` command, run in the workspace root, that succeeds when
    /// the dependency is there.
    present: &'static str,
    /// Debian packages that provide it (installed as root with apt-get).
    apt: &'static [&'static str],
    /// `sh -c` commands run in the workspace root after the packages
    /// (a virtualenv, `npm ci`, a browser download), in order.
    setup: &'static [&'static str],
}

const DEPENDENCIES: &[Dependency] = &[
    Dependency {
        name: "etcd",
        needed_by: "tests/it/etcd_story.rs (a real etcd lease in the fencing story)",
        present: "command -v etcd",
        apt: &["etcd-server"],
        setup: &[],
    },
    Dependency {
        name: "mounting a tmpfs (root with CAP_SYS_ADMIN)",
        needed_by: "tests/it/http_full_disk.rs (the real server on a full filesystem)",
        present: "d=$(mktemp -d) && { mount -t tmpfs -o size=1m tmpfs \"$d\" && umount \"$d\"; ok=$?; rmdir \"$d\"; exit $ok; }",
        apt: &[],
        setup: &[],
    },
];

/// Set for the test run: suites fail rather than skip on a missing
/// dependency (`fencelog_testkit::deps::REQUIRE_VAR`).
const REQUIRE_VAR: &str = "FENCELOG_TEST_REQUIRE_DEPS";

fn main() -> ExitCode {
    let started = Instant::now();
    let mut args = std::env::args().skip(1);
    let task = args.next();
    let rest: Vec<String> = args.collect();
    let result = match task.as_deref() {
        Some("test") => test(&rest, started),
        Some("deps") => provide_dependencies(),
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

fn test(extra: &[String], started: Instant) -> Result<(), String> {
    let provided = provide_dependencies();
    let providing = started.elapsed();
    let result = provided.and_then(|()| run_tests(extra));
    eprintln!(
        "xtask: {} after {} ({} providing dependencies, {} in cargo test)",
        if result.is_ok() { "passed" } else { "FAILED" },
        minutes(started.elapsed()),
        minutes(providing),
        minutes(started.elapsed() - providing)
    );
    result
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} min {:02} s", s / 60, s % 60)
    }
}

/// The workspace root: this crate lives at `crates/xtask`.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/xtask has a grandparent")
        .to_path_buf()
}

fn present(d: &Dependency) -> bool {
    Command::new("sh")
        .args(["-c", &format!("({}) >/dev/null 2>&1", d.present)])
        .current_dir(workspace_root())
        .status()
        .is_ok_and(|s| s.success())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn provide_dependencies() -> Result<(), String> {
    let missing: Vec<&Dependency> = DEPENDENCIES.iter().filter(|d| !present(d)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    for d in &missing {
        eprintln!("xtask: missing {}; needed by {}", d.name, d.needed_by);
    }
    install_packages(&missing)?;
    for d in &missing {
        for step in d.setup {
            run("sh", &["-c", step])?;
        }
    }
    let still: Vec<String> = missing
        .iter()
        .filter(|d| !present(d))
        .map(|d| format!("{} (checked with `{}`)", d.name, d.present))
        .collect();
    if still.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "still missing, and the suites that need it would fail: {}",
            still.join("; ")
        ))
    }
}

/// One `apt-get install` for every missing dependency's packages.
fn install_packages(missing: &[&Dependency]) -> Result<(), String> {
    let mut packages: Vec<&str> = missing.iter().flat_map(|d| d.apt.iter().copied()).collect();
    packages.sort_unstable();
    packages.dedup();
    if packages.is_empty() {
        return Ok(());
    }
    if !is_root()
        || !Command::new("apt-get")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    {
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
    run("apt-get", &install)
}

fn run_tests(extra: &[String]) -> Result<(), String> {
    let mut args = vec![
        "test",
        "--workspace",
        "--no-fail-fast",
        "--features",
        "fencelog-engine/mutations",
    ];
    args.extend(extra.iter().map(String::as_str));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(&cargo, &args)
}

/// Runs `program` in the workspace root, with the suites told to fail on a
/// missing dependency and apt told not to ask questions.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("xtask: running {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .env(REQUIRE_VAR, "1")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .map_err(|e| format!("could not start {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{program} {} failed ({status})", args.join(" ")))
    }
}
