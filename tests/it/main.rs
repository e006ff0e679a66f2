//! End-to-end tests of the `fencelog` binary and the crates together: the
//! CLI, the Rust client against a real server, SIGKILL loops, graceful
//! stop, a full disk, the load generator, and the etcd story.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on purpose: an unwrap that panics is the failure report"
)]
#![allow(
    clippy::too_many_lines,
    reason = "a test scenario reads top to bottom: its steps and their assertions in order"
)]
#![allow(
    clippy::cast_possible_truncation,
    reason = "the tests' counts, sizes, indices and clock readings fit their types by far; a truncated one would fail an assertion"
)]

mod support;

mod architecture_doc;
mod audit_log;
mod auth_batch;
mod auth_scopes;
mod cli_commands;
mod cli_explains;
mod cli_lifecycle;
mod cli_operator_kit;
mod cli_producers;
mod cli_serve_config;
mod client_errors;
mod client_lifecycle;
mod client_pool;
mod client_tail_restart;
mod cluster_auth;
mod cluster_auth_admin;
mod cluster_cli;
mod cluster_fast_append;
mod cluster_history;
mod cluster_kill;
mod cluster_lifecycle;
mod cluster_load;
mod cluster_membership;
mod cluster_metrics;
mod cluster_ops;
mod cluster_partition;
mod cluster_procs;
mod cluster_producers;
mod cluster_retention;
mod cluster_support;
mod doc_snippets;
mod etcd_story;
mod http_full_disk;
mod http_restart;
mod kill9_loop;
mod loadgen_smoke;
mod misbehaving_clients;
mod one_reading;
mod ops_dashboard;
mod release_build;
mod tls;
mod user_text;
