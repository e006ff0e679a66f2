//! One shard's Raft group: the type config and what an entry carries,
//! the state machine over the shard engine, the network, the proposer,
//! when a shard snapshots, and the votes a node keeps.

pub(crate) mod network;
pub(crate) mod op_codec;
pub(crate) mod proposer;
pub(crate) mod restart_vote;
pub(crate) mod snapshot_trigger;
pub(crate) mod state_machine;
pub(crate) mod types;
pub(crate) mod vote_clock;

pub use op_codec::WireOp;
pub use proposer::{Proposed, SessionGate, SESSION_BROKEN};
pub use state_machine::{shard_engine_config, ShardSm};
pub use types::{Batch, Entry, OpResult, Snapshot, StorageError, TypeConfig};
