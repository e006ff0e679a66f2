//! One shard's Raft group, below the WAL that stores its log and the node
//! that runs it (none of these files knows either): `types` holds the type
//! config, every openraft alias, what an entry carries and what apply
//! answers, with the ops written by `op_codec`; over them stand the state
//! machine on the shard engine (`state_machine`, whose snapshots are
//! `crate::snapshot`'s), the proposer that batches a leader's ops into
//! entries (`proposer`), when a shard snapshots (`snapshot_trigger`, whose
//! count of transfers under way the network shares), openraft's network
//! over a [`crate::rpc::Transport`] (`network`), and what a node keeps of
//! its votes (`vote_clock`, `restart_vote`).

pub(crate) mod network;
pub(crate) mod op_codec;
pub(crate) mod proposer;
pub(crate) mod restart_vote;
pub(crate) mod snapshot_trigger;
pub(crate) mod state_machine;
pub(crate) mod types;
pub(crate) mod vote_clock;

pub use op_codec::{CursorView, WireOp};
pub use proposer::{Proposed, SessionGate, SESSION_BROKEN};
pub use snapshot_trigger::Policy as SnapshotPolicy;
pub use state_machine::{shard_engine_config, ShardSm};
pub use types::{
    Batch, BatchResult, Entry, LogId, OpResult, Raft, Snapshot, SnapshotMeta, StateView,
    StorageError, StoredMembership, TypeConfig, Vote,
};
pub use vote_clock::VoteClock;
