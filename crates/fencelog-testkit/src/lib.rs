//! Test support shared by the workspace's integration tests (not
//! published): an in-process HTTP server with a small JSON client and an
//! SSE reader ([`http`]), the real `fencelog serve` binary and other child
//! processes ([`process`]), a TCP proxy a test can cut ([`proxy`]), and
//! the rule for suites whose dependency is missing ([`deps`]).

pub mod deps;
pub mod http;
pub mod process;
pub mod proxy;
