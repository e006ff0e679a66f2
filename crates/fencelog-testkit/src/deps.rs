//! Suites that need something beyond the Rust toolchain (etcd, a tmpfs
//! mount, later Python, Node, a browser, nftables).
//!
//! Run by hand (`cargo test`), such a suite that cannot find its dependency
//! says `SKIPPED: <why>` loudly and passes, so a developer without etcd can
//! still run everything else. Run by `cargo xtask test`, which installs the
//! dependencies and sets [`REQUIRE_VAR`], a missing dependency fails the
//! test: the one test command never passes with a suite silently skipped.

use std::io::Write;
use std::path::PathBuf;

/// Set to `1` by `cargo xtask test`: missing dependencies are failures.
pub const REQUIRE_VAR: &str = "FENCELOG_TEST_REQUIRE_DEPS";

/// Whether this run must have every dependency.
pub fn required() -> bool {
    std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1")
}

/// Reports that `test` cannot run because `why`: panics under
/// `cargo xtask test`, otherwise prints `SKIPPED` and returns, and the test
/// returns right after.
#[track_caller]
pub fn missing(test: &str, why: &str) {
    if required() {
        panic!("{test} cannot run: {why} ({REQUIRE_VAR}=1, so this is a failure)");
    }
    // Straight to the process's stderr: libtest captures `eprintln!` of a
    // passing test, and a skip must be seen.
    let _ = writeln!(
        std::io::stderr().lock(),
        "\n*** SKIPPED: {test}: {why} (`cargo xtask test` provides it and treats its absence as a failure) ***\n"
    );
}

/// The first `name` on `PATH` that is a file, as `command -v` finds it.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
