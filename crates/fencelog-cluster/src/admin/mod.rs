//! Membership, leadership transfer, the rebalancer, the admin API, and a
//! joining node's shard count.

pub(crate) mod api;
pub(crate) mod call;
pub(crate) mod campaign;
pub(crate) mod cmd;
pub(crate) mod handle;
pub(crate) mod join;
pub(crate) mod membership;
pub(crate) mod rebalance;
pub(crate) mod transfer;
pub(crate) mod voters;

pub use join::shard_count as joining_shard_count;
pub use rebalance::spawn as spawn_rebalancer;
