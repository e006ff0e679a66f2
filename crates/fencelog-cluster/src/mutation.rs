//! The cluster's deliberate bugs, for the suites to prove they notice:
//! each a check at the spot it breaks, compiled in only with the
//! `mutations` feature (without it, [`mutated!`] is `false` at compile time
//! and no switch exists). The switch is per thread, read once where a part
//! starts on the starting thread — a node and its proposers, its Raft WAL,
//! a shard's state machine — so a test turns a bug on for the nodes it
//! starts and runs beside every other test. The engine's own bugs (apply,
//! flush, the fast path) are the engine's (`fencelog_engine::Mutation`).

/// Whether `$switch` (a [`Switch`]) is the named deliberate bug.
#[cfg(feature = "mutations")]
macro_rules! mutated {
    ($switch:expr, $m:ident) => {
        $switch == $crate::mutation::Mutation::$m
    };
}

#[cfg(not(feature = "mutations"))]
macro_rules! mutated {
    ($switch:expr, $m:ident) => {{
        let _ = $switch;
        false
    }};
}

#[cfg(feature = "mutations")]
pub use imp::{set_mutation, Mutation};

/// The deliberate bug a part of the cluster was started with.
#[cfg(feature = "mutations")]
pub(crate) type Switch = Mutation;

/// Without the `mutations` feature: none.
#[cfg(not(feature = "mutations"))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Switch;

/// The calling thread's switch.
#[cfg(not(feature = "mutations"))]
pub(crate) fn current() -> Switch {
    Switch
}

#[cfg(feature = "mutations")]
pub(crate) use imp::current;

#[cfg(feature = "mutations")]
mod imp {
    use std::cell::Cell;

    /// One deliberate bug each; see the suite named in each comment
    /// (under `crates/fencelog-cluster/tests/it/`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Mutation {
        /// No deliberate bug: the cluster as shipped.
        None,
        /// The Raft WAL completes a group of votes without its
        /// `sync_data`: a vote used before it is durable (`wal_crash.rs`).
        WalVoteUnsynced,
        /// The Raft WAL completes every group (openraft's append callback
        /// included) before its `sync_data`, and syncs after
        /// (`wal_crash.rs`).
        WalAckBeforeSync,
        /// The Raft WAL's replay reads damage to a group that was durable
        /// (a later group was written after its sync) as a torn tail and
        /// cuts the file there, dropping acknowledged entries and votes
        /// (`wal_crash.rs`, `wal_damage.rs`).
        WalCutsDamage,
        /// A shard's proposer keeps proposing an append session's ops
        /// after one of them was not applied, so a later append of the
        /// session can be applied without an earlier one (`session.rs`).
        SessionGateIgnored,
        /// A node that led a shard before it stopped resumes leading it at
        /// the same term when it restarts (openraft 0.9's own behaviour),
        /// so a log tail it lost unsynced while a follower kept it can be
        /// rewritten under the same log ids (`restart_vote.rs`).
        LeaderResumesOwnVote,
        /// A shard's snapshot capture hard-links the engine's active
        /// segment instead of copying it, so applies after the capture
        /// change the snapshot (`snapshot_files.rs`).
        SnapshotLinksActiveSegment,
        /// A shard's leader builds its next snapshot, and purges its log
        /// behind it, while it is still sending the last one, so a
        /// follower whose transfer is slower than the writes is sent one
        /// snapshot after another and never catches up (`snapshot.rs`).
        SnapshotHoldIgnored,
        /// A shard's leader proposes appends past the node's disk budget
        /// (`--data-bytes-max`), which no replica then refuses, since
        /// shard engines run without one (`disk_budget.rs`).
        ClusterBudgetIgnored,
        /// A shard's leader sends a lagging follower as many entries per
        /// AppendEntries as openraft asks (300), whatever their bytes,
        /// instead of at most `Timing::append_rpc_bytes_max`
        /// (`append_rpc.rs`).
        AppendRpcUnbounded,
    }

    thread_local! {
        static ACTIVE: Cell<Mutation> = const { Cell::new(Mutation::None) };
    }

    /// Switches one deliberate bug on for the calling thread, for the
    /// nodes, WALs and state machines it starts from now on (or all off
    /// with [`Mutation::None`]).
    pub fn set_mutation(m: Mutation) {
        ACTIVE.with(|a| a.set(m));
    }

    /// The calling thread's switch.
    pub(crate) fn current() -> Mutation {
        ACTIVE.with(|a| a.get())
    }
}
