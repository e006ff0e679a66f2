//! fencelog replicated (issue 14): streams map to S shards (FNV-1a of the
//! name mod S); each shard is one openraft group over all nodes, whose
//! state machine is a fencelog engine that runs the fencing rule in apply.
//! One Raft WAL per node, shared by all its groups, group-commits their
//! appends and votes. See ARCHITECTURE.md, "Cluster".

#![warn(missing_docs)]

pub mod admin;
pub mod backend;
pub mod disk_budget;
mod holds;
pub mod http_auth;
mod ids;
pub mod node;
pub mod node_metrics;
pub mod peer;
pub mod raft;
pub mod retention;
pub mod routes;
pub mod rpc;
pub mod shard;
pub mod snapshot;
pub mod wal;

pub use ids::{NodeId, ShardId};
