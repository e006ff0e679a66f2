//! The cluster crate's integration tests.

#![allow(clippy::unwrap_used, reason = "a test fails loudly on purpose")]
#![allow(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]

mod support;

mod append_rpc;
mod cluster;
mod disk_budget;
mod peer_stream;
mod producers;
mod reclaim;
mod restart_vote;
mod session;
mod snapshot;
mod snapshot_files;
mod suite;
mod upgrade_wal_v1;
mod wal_crash;
mod wal_damage;
