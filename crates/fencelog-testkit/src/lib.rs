//! Test support shared by the workspace's integration tests (not
//! published): an in-process HTTP server with a small JSON client and an
//! SSE reader ([`http`]), the real `fencelog serve` binary and other child
//! processes ([`process`]), a TCP proxy a test can cut ([`proxy`]), the
//! rule for suites whose dependency is missing ([`deps`]), and the
//! history checker both the simulations and the cluster tests feed
//! ([`history`]).

#![allow(
    clippy::unwrap_used,
    reason = "test support, used only by tests: a helper that hits an error panics, failing the test that called it"
)]

pub mod deps;
pub mod history;
pub mod http;
pub mod process;
pub mod proxy;
