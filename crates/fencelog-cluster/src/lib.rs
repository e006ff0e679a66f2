//! fencelog replicated (issue 14): streams map to S shards (FNV-1a of the
//! name mod S); each shard is one openraft group over all nodes, whose
//! state machine is a fencelog engine that runs the fencing rule in apply.
//! One Raft WAL per node, shared by all its groups, group-commits their
//! appends and votes. See ARCHITECTURE.md, "Cluster".

#![warn(missing_docs)]

pub mod admin;
pub mod backend;
pub mod disk_budget;
pub mod http_auth;
pub mod http_transport;
pub mod join;
pub mod log_store;
pub mod membership;
pub mod network;
pub mod node;
pub mod node_metrics;
pub mod op_codec;
pub mod peer_frame;
mod peer_serve;
pub mod peer_stream;
pub mod proposer;
pub mod rebalance;
mod restart_vote;
pub mod retention;
pub mod router;
pub mod routes;
pub mod shard;
pub mod shard_dir;
pub mod snapshot_dir;
pub mod snapshot_trigger;
pub mod state_machine;
pub mod transfer;
pub mod types;
pub mod vote_clock;
pub mod wal;
pub mod wal_codec;
