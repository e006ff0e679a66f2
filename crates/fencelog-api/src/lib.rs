//! fencelog's wire contract, in one place for the server, the Rust client,
//! the CLI and the load generator: the binary batch body today, and the
//! request/response types, error codes and SSE events as they move here.

pub mod batch;
