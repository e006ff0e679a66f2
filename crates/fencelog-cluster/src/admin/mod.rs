//! Membership changes, leadership transfer and the rebalancer, on top of
//! the node, which knows nothing of them (it keeps the rebalancing holds,
//! and `crate::peer::answer` hands the `member` RPC here). From the
//! bottom: `cmd` is the member RPC's messages and sending one to a peer;
//! `voters` a shard's voters and preferred leader; `campaign` how a node
//! takes a shard's leadership; `handle` what a node does with a command;
//! `call` running one on a node or on a shard's leader; then the
//! operations, `transfer`, `membership` (add and remove, over transfer)
//! and `rebalance`; `api` serves them under `/_cluster/admin/`; and `join`
//! is a joining node's shard count, asked with the member RPC.

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
