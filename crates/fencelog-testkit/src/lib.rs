//! Test support shared by the workspace's integration tests (not
//! published): an in-process HTTP server with a small JSON client and an
//! SSE reader.

pub mod http;
