//! Deliberate bugs the crash, fault, corruption and simulation suites must
//! catch, each a one-line check at the spot it breaks. They exist only with
//! the `mutations` feature: without it, [`mutated!`] is a call of a const
//! function returning `false` (a call rather than the literal, so lints do
//! not read every guarded branch as dead code), and neither the switch nor
//! the names are compiled into the engine (the way raft-engine gates its
//! fail points).
//!
//! A thread-local switch rather than a config field because recovery and
//! segment creation run before and outside any engine. The writer thread
//! adopts the switch of the thread that opened its engine ([`inherit`]),
//! so a test that turns a mutation on affects only the engines it opens
//! itself and runs in parallel with every other test.

/// Whether the named deliberate bug is switched on. `false` at compile
/// time without the `mutations` feature.
#[cfg(feature = "mutations")]
macro_rules! mutated {
    ($m:ident) => {
        $crate::mutation::active($crate::mutation::Mutation::$m)
    };
}

#[cfg(not(feature = "mutations"))]
macro_rules! mutated {
    ($m:ident) => {
        $crate::mutation::off()
    };
}

/// Whether the named deliberate bug is the one `inherited` carries: for
/// checks that run on callers' threads (an async runtime's workers), which
/// read the switch of the thread that opened the engine.
#[cfg(feature = "mutations")]
macro_rules! mutated_as {
    ($inherited:expr, $m:ident) => {
        $inherited.is($crate::mutation::Mutation::$m)
    };
}

#[cfg(not(feature = "mutations"))]
macro_rules! mutated_as {
    ($inherited:expr, $m:ident) => {{
        let _ = &$inherited;
        $crate::mutation::off()
    }};
}

/// What every [`mutated!`] check is without the `mutations` feature.
#[cfg(not(feature = "mutations"))]
#[inline(always)]
pub(crate) const fn off() -> bool {
    false
}

#[cfg(feature = "mutations")]
pub use imp::*;

/// The deliberate bugs of the cluster crate's Raft WAL (issue 14), which
/// lives outside the engine but is switched with the engine's
/// `Mutation`s, so one feature turns every mutation on.
/// The WAL reads the switch once, when it opens, on the opening thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalMutation {
    /// The WAL as shipped.
    None,
    /// See `Mutation::WalVoteUnsynced`.
    VoteUnsynced,
    /// See `Mutation::WalAckBeforeSync`.
    AckBeforeSync,
    /// See `Mutation::WalCutsDamage`.
    CutsDamage,
}

/// Without the `mutations` feature no WAL mutation is ever on.
#[cfg(not(feature = "mutations"))]
pub fn wal_mutation() -> WalMutation {
    WalMutation::None
}

/// Without the `mutations` feature a snapshot capture copies the active
/// segment.
#[cfg(not(feature = "mutations"))]
pub fn snapshot_links_active_segment() -> bool {
    false
}

/// The deliberate bugs of a cluster node's write path (issue 14), read once
/// when the node starts, on the starting thread, like [`WalMutation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeMutation {
    /// The node as shipped.
    None,
    /// See `Mutation::ProducerRefusedEarly`.
    ProducerRefusedEarly,
    /// See `Mutation::SessionGateIgnored`.
    SessionGateIgnored,
    /// See `Mutation::LeaderResumesOwnVote`.
    LeaderResumesOwnVote,
    /// See `Mutation::SnapshotHoldIgnored`.
    SnapshotHoldIgnored,
    /// See `Mutation::ClusterBudgetIgnored`.
    ClusterBudgetIgnored,
    /// See `Mutation::AppendRpcUnbounded`.
    AppendRpcUnbounded,
}

/// Without the `mutations` feature no node mutation is ever on.
#[cfg(not(feature = "mutations"))]
pub fn node_mutation() -> NodeMutation {
    NodeMutation::None
}

/// The deliberate bugs of the server's pipelined append session (issue
/// 13), read once when the server's state is made, on that thread, like
/// [`WalMutation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionMutation {
    /// The session as shipped.
    None,
    /// See `Mutation::SessionAckUnordered`.
    AckUnordered,
    /// See `Mutation::SessionAckBeforeDurable`.
    AckBeforeDurable,
}

/// Without the `mutations` feature no session mutation is ever on.
#[cfg(not(feature = "mutations"))]
pub fn session_mutation() -> SessionMutation {
    SessionMutation::None
}

/// The calling thread's switch, to hand to a thread it spawns.
#[cfg(not(feature = "mutations"))]
#[derive(Clone, Copy)]
pub(crate) struct Inherited;

#[cfg(not(feature = "mutations"))]
pub(crate) fn inherit() -> Inherited {
    Inherited
}

#[cfg(not(feature = "mutations"))]
pub(crate) fn adopt(_: Inherited) {}

#[cfg(feature = "mutations")]
mod imp {
    use std::cell::Cell;

    /// One deliberate bug each; see the suite named in each comment.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[repr(u8)]
    pub enum Mutation {
        /// No deliberate bug: the engine as shipped.
        None = 0,
        /// The writer answers a group before its `sync_data` (and syncs after).
        AckBeforeSync,
        /// A new segment's directory entry is never synced.
        SkipDirSync,
        /// A failed `sync_data` is treated as success.
        IgnoreSyncError,
        /// Recovery cuts the log at any frame that fails to decode, wherever it is.
        TruncateAnyBadFrame,
        /// Fence frames do not count when the log is replayed, so a data-less
        /// fence lives only in the memory of the engine that accepted it.
        FenceOnlyInMemory,
        /// The writer publishes a group to readers before its `sync_data`.
        ServeUnsynced,
        /// The writer panics while publishing a group, holding the index
        /// lock of a stream that already has indexed (acknowledged) frames.
        /// Not a durability bug but a crash of the writer thread: the
        /// engine must poison itself as on a storage failure, keep
        /// answering, and keep serving reads of that stream.
        PanicMidGroup,
        /// The writer copies what compaction asks for even when the frame
        /// was trimmed or deleted since (dead on arrival), and points the
        /// index at the copy without checking it still pointed at the old
        /// one.
        RelocateDeadOnArrival,
        /// Compaction copies frames without verifying their CRC, so a
        /// frame damaged at rest is copied forward with a fresh CRC.
        CompactWithoutCrc,
        /// Reclamation deletes segments before the checkpoint that covers
        /// them is durable (it writes the checkpoint after the deletion).
        DeleteBeforeCheckpoint,
        /// The checkpoint leaves tombstones out.
        ForgetTombstoneAtCheckpoint,
        /// The checkpoint leaves out every live stream, so a stream's
        /// highest token, trim point and seal live only in segments that
        /// reclamation then deletes ("a fence outlives its segments" broken).
        CheckpointOmitsStreams,
        /// Evicting a producer does not raise the stream's producer token
        /// floor, so a retry of an evicted producer's write is applied a
        /// second time (issue 11).
        EvictWithoutFloor,
        /// A duplicate producer append is written again instead of being
        /// answered with its original ack (issue 11).
        DuplicateWritten,
        /// The writer does not check `not_after_ms`: a write whose
        /// timestamp is above its deadline slips in.
        DeadlineIgnored,
        /// A multi-stream batch applies the operations before the first
        /// refusal instead of none.
        BatchPartial,
        /// A cursor commit with an equal token may move the cursor back.
        CursorBackwards,
        /// The writer encodes an append with headers as a plain batch: the
        /// flag HEADERS and every header are lost, the bodies kept.
        HeadersDropped,
        /// Readers return each record's headers in reverse order.
        HeadersReversed,
        /// Recovery skips the check that the last segment the MANIFEST
        /// lists exists, so one deleted while the server was stopped is
        /// taken for the end of the log (issue 12). First and middle ones
        /// keep their check.
        IgnoreMissingLastSegment,
        /// A replicated shard engine (issue 14) applies an entry at its
        /// own clock instead of the leader's timestamp carried in it.
        ApplyReadsClock,
        /// A replicated shard engine writes an entry's frames without its
        /// Applied marker, so the applied id is not durable with them.
        AppliedMarkerOmitted,
        /// A group holding several entries' Applied markers takes an
        /// unchanged (empty) membership in its last marker for the one
        /// before the group, in the writer and in recovery, forgetting what
        /// an earlier entry of the same group set.
        GroupMarkerForgetsMembership,
        /// A refused group (nothing written) holding a Raft entry leaves
        /// the shard engine open for the entries queued behind it, which
        /// are then applied past the refused one.
        RefusedApplyGoesOn,
        /// The cluster's Raft WAL (issue 14) completes a group of votes
        /// without its `sync_data`: a vote used before it is durable.
        WalVoteUnsynced,
        /// The cluster's Raft WAL completes every group (openraft's append
        /// callback included) before its `sync_data`, and syncs after.
        WalAckBeforeSync,
        /// The cluster's Raft WAL replay reads damage to a group that was
        /// durable (a later group was written after its sync) as a torn
        /// tail and cuts the file there, dropping acknowledged entries and
        /// votes, as version 1's replay did.
        WalCutsDamage,
        /// The rejection fast path (`Engine::check_write`, which a cluster
        /// node also runs on its applied state before it proposes) refuses
        /// an idempotent producer's append from the stream's higher token,
        /// like a plain append, so a retry of the producer's applied append
        /// after a fence is 409 instead of its original ack.
        ProducerRefusedEarly,
        /// A replicated shard engine (issue 14) applies a trim, seal or
        /// delete whose token is below the stream's highest as if it
        /// carried the highest: a stale lifecycle op accepted in apply.
        ApplyLifecycleUnfenced,
        /// The server's append session answers each append as soon as
        /// its outcome is known instead of in the order they were sent,
        /// so a refusal decided at once overtakes earlier appends still
        /// waiting for their sync (issue 13).
        SessionAckUnordered,
        /// The server's append session answers an append as accepted once
        /// the writer has it queued, before the engine's durable answer,
        /// with the seq it expects it to get (issue 13).
        SessionAckBeforeDurable,
        /// In `Durability::OnFlush` (issue 14's shard engines), a flush
        /// answers without syncing: a checkpoint, a segment deletion or a
        /// Raft log purge may then rely on groups a crash loses.
        FlushSkipsSync,
        /// In `Durability::OnFlush`, a roll leaves the old segment's
        /// groups unsynced: a crash can leave a hole in a segment that is
        /// not the last, which recovery cannot cut.
        RollLeavesUnsynced,
        /// Recovery of a `Durability::OnFlush` log treats a bad frame with
        /// complete later groups after it as damage, as in the default
        /// mode: a power loss that wrote back a later group before an
        /// earlier one leaves a shard that cannot open.
        OrderedTailOnFlush,
        /// A cluster shard's proposer (issue 14) keeps proposing an append
        /// session's ops after one of them was not applied, so a later
        /// append of the session can be applied without an earlier one.
        SessionGateIgnored,
        /// A cluster node that led a shard before it stopped resumes
        /// leading it at the same term when it restarts (openraft 0.9's
        /// own behaviour), so a log tail it lost unsynced while a follower
        /// kept it can be rewritten under the same log ids.
        LeaderResumesOwnVote,
        /// A cluster shard's snapshot capture hard-links the engine's
        /// active segment instead of copying it, so applies after the
        /// capture change the snapshot (issue 14).
        SnapshotLinksActiveSegment,
        /// A cluster shard's leader builds its next snapshot, and purges
        /// its log behind it, while it is still sending the last one, so
        /// a follower whose transfer is slower than the writes is sent one
        /// snapshot after another and never catches up (issue 14).
        SnapshotHoldIgnored,
        /// A cluster shard's leader proposes appends past the node's disk
        /// budget (`--data-bytes-max`), which no replica then refuses,
        /// since shard engines run without one (issue 14).
        ClusterBudgetIgnored,
        /// A cluster shard's leader sends a lagging follower as many
        /// entries per AppendEntries as openraft asks (300), whatever their
        /// bytes, instead of at most `Timing::append_rpc_bytes_max`.
        AppendRpcUnbounded,
    }

    thread_local! {
        static ACTIVE: Cell<Mutation> = const { Cell::new(Mutation::None) };
    }

    /// Switches one deliberate bug on for the calling thread and the
    /// writers of engines it opens from now on (or all off with
    /// [`Mutation::None`]).
    pub fn set_mutation(m: Mutation) {
        ACTIVE.with(|a| a.set(m));
    }

    #[inline]
    pub(crate) fn active(m: Mutation) -> bool {
        ACTIVE.with(|a| a.get()) == m
    }

    /// The calling thread's switch, to hand to a thread it spawns.
    #[derive(Clone, Copy)]
    pub(crate) struct Inherited(Mutation);

    impl Inherited {
        /// Whether `m` is the switch handed over.
        pub(crate) fn is(self, m: Mutation) -> bool {
            self.0 == m
        }
    }

    /// The Raft WAL's deliberate bug switched on for the calling thread.
    pub fn wal_mutation() -> super::WalMutation {
        match ACTIVE.with(|a| a.get()) {
            Mutation::WalVoteUnsynced => super::WalMutation::VoteUnsynced,
            Mutation::WalAckBeforeSync => super::WalMutation::AckBeforeSync,
            Mutation::WalCutsDamage => super::WalMutation::CutsDamage,
            _ => super::WalMutation::None,
        }
    }

    /// Whether the snapshot capture's deliberate bug is switched on for the
    /// calling thread.
    pub fn snapshot_links_active_segment() -> bool {
        active(Mutation::SnapshotLinksActiveSegment)
    }

    /// The cluster node's deliberate bug switched on for the calling thread.
    pub fn node_mutation() -> super::NodeMutation {
        match ACTIVE.with(|a| a.get()) {
            Mutation::ProducerRefusedEarly => super::NodeMutation::ProducerRefusedEarly,
            Mutation::SessionGateIgnored => super::NodeMutation::SessionGateIgnored,
            Mutation::LeaderResumesOwnVote => super::NodeMutation::LeaderResumesOwnVote,
            Mutation::SnapshotHoldIgnored => super::NodeMutation::SnapshotHoldIgnored,
            Mutation::ClusterBudgetIgnored => super::NodeMutation::ClusterBudgetIgnored,
            Mutation::AppendRpcUnbounded => super::NodeMutation::AppendRpcUnbounded,
            _ => super::NodeMutation::None,
        }
    }

    /// The append session's deliberate bug switched on for the calling
    /// thread.
    pub fn session_mutation() -> super::SessionMutation {
        match ACTIVE.with(|a| a.get()) {
            Mutation::SessionAckUnordered => super::SessionMutation::AckUnordered,
            Mutation::SessionAckBeforeDurable => super::SessionMutation::AckBeforeDurable,
            _ => super::SessionMutation::None,
        }
    }

    pub(crate) fn inherit() -> Inherited {
        Inherited(ACTIVE.with(|a| a.get()))
    }

    /// Called first thing on a spawned thread.
    pub(crate) fn adopt(i: Inherited) {
        set_mutation(i.0);
    }
}
