//! Retention in cluster mode: the per-stream `retention_age_s` /
//! `retention_bytes` and the server's defaults, enforced by a cluster.
//!
//! A single node's reclaimer trims by its own clock. A cluster cannot let
//! each replica do that: two clocks, two moments, two different logs. So
//! shard engines run no retention of their own
//! (`Config::retention_in_reclaim` off), and every interval each node,
//! for each shard it leads, asks its shard engine where retention wants
//! each stream's front *at the leader's clock*
//! ([`fencelog_engine::Engine::retention_due`], from its applied state)
//! and proposes one [`WriteOp::Retain`] per such stream. The entry
//! carries the chosen front; apply decides it on every replica, in log
//! order, through the engine's planner and `fence::check_retention`:
//! forward only, never past `next_seq`, never on a tombstone, under the
//! stream's own token. Nothing is fenced by it and nothing is refused.
//!
//! A front computed from a slightly old applied state is still a front
//! retention wanted (records only get older, streams only grow until
//! trimmed), and one that a trim already passed is a no-op in apply. An
//! unknown outcome (leader change) is left alone: the next interval's
//! leader asks again.

use crate::ids::ShardId;
use crate::node::{Node, WriteOutcome};
use crate::raft::proposer::leadership;
use fencelog_engine::WriteOp;
use std::sync::Arc;

/// Retention trims one shard proposes per interval at most; a shard with
/// more due streams trims the rest at the next one.
pub const RETAIN_OPS_PER_PASS_MAX: usize = 1024;

/// Starts the node's retention proposer, when its options ask for one. It
/// stops with the node.
pub fn spawn(node: &Arc<Node>) {
    let Some(every) = node.options().retention else {
        return;
    };
    crate::node::every_shard_periodically(node, every, |node, k| async move {
        pass(&node, k).await;
    });
}

/// One shard's pass on this node: nothing unless it leads the shard.
/// Returns the retention trims decided (applied, moved or not).
pub async fn pass(node: &Node, k: ShardId) -> usize {
    if leadership(node.raft(k), node.id()).is_err() || node.wal().poisoned().is_some() {
        return 0;
    }
    let now_ms = crate::millis::unix_now();
    let c = &node.options().engine;
    let (age_s, bytes) = (c.retention_age_s, c.retention_bytes);
    let engine = node.engine(k);
    // It reads frame timestamps from the segment files: blocking I/O, so
    // off the runtime's workers, which serve requests.
    let found = tokio::task::spawn_blocking(move || engine.retention_due(now_ms, age_s, bytes));
    let Ok(mut due) = found.await else {
        tracing::warn!(shard = k, "the retention scan panicked; nothing proposed");
        return 0;
    };
    due.truncate(RETAIN_OPS_PER_PASS_MAX);
    // Proposed together, so the proposer puts them into few entries.
    let writes = due.into_iter().map(|(stream, first_seq)| {
        debug_assert_eq!(node.shard_of(&stream), k);
        node.write(WriteOp::Retain { stream, first_seq })
    });
    let mut decided = 0;
    for outcome in futures_util::future::join_all(writes).await {
        match outcome {
            WriteOutcome::Decided(_) => decided += 1,
            other => tracing::debug!(shard = k, ?other, "a retention trim was not decided"),
        }
    }
    decided
}
