//! The ids every part of a cluster names: a node's and a shard's.

/// A node's id, as given by `--node-id`.
pub type NodeId = u64;
/// A shard, `0..S`.
pub type ShardId = u32;
