//! The cluster crate's integration tests.

mod support;

mod cluster;
mod peer_stream;
mod producers;
mod reclaim;
mod restart_vote;
mod session;
mod snapshot;
mod suite;
mod wal_crash;
