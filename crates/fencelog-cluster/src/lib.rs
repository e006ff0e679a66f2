//! fencelog replicated: streams map to S shards (FNV-1a of the name mod
//! S); each shard is one openraft group over all nodes, whose state
//! machine is a fencelog engine that runs the fencing rule in apply. One
//! Raft WAL per node, shared by all its groups, group-commits their
//! appends and votes. See ARCHITECTURE.md, "Cluster", and docs/cluster.md.
//!
//! The crate is in layers, each using only those below it. At the bottom
//! the ids ([`NodeId`], [`ShardId`]), time in milliseconds (`millis`), a
//! peer RPC's bytes and the transport seam ([`rpc`]), the shard map
//! ([`shard`]) and who may call a node ([`http_auth`]); then snapshots on
//! disk ([`snapshot`]); one shard's Raft group ([`raft`]); the disk budget
//! ([`disk_budget`]); the node's WAL and each group's log over it
//! ([`wal`]); the node itself ([`node`]), which starts them all, takes
//! every write and keeps the rebalancing holds; over the node its metrics
//! ([`node_metrics`]) and retention ([`retention`]), the admin side
//! ([`admin`]), how nodes reach each other ([`peer`]), and at the top the
//! server's write seam ([`backend`]) and the `/_cluster/` routes
//! ([`routes`]).

#![warn(missing_docs)]

#[macro_use]
mod mutation;

pub mod admin;
pub mod backend;
pub mod disk_budget;
mod holds;
pub mod http_auth;
mod ids;
mod millis;
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
#[cfg(feature = "mutations")]
pub use mutation::{set_mutation, Mutation};
