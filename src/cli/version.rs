//! What `fencelog --version` says: the release, the git commit it was
//! built from (`build.rs`), and the on-disk format version it writes, so
//! an operator can tell which data directories a binary can open before
//! an upgrade.

use std::sync::LazyLock;

static LONG: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{} (commit {}, on-disk format {})",
        env!("CARGO_PKG_VERSION"),
        env!("FENCELOG_GIT_COMMIT"),
        fencelog_engine::FORMAT_VERSION
    )
});

/// `0.1.0 (commit 1a2b3c4, on-disk format 1)`; clap prefixes the name.
pub fn long() -> &'static str {
    LONG.as_str()
}
