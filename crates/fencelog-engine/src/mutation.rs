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
        /// second time.
        EvictWithoutFloor,
        /// A duplicate producer append is written again instead of being
        /// answered with its original ack.
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
        /// taken for the end of the log. First and middle ones
        /// keep their check.
        IgnoreMissingLastSegment,
        /// A cluster's shard engine applies an entry at its
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
        /// The rejection fast path (`Engine::check_write`, which a cluster
        /// node also runs on its applied state before it proposes) refuses
        /// an idempotent producer's append from the stream's higher token,
        /// like a plain append, so a retry of the producer's applied append
        /// after a fence is 409 instead of its original ack.
        ProducerRefusedEarly,
        /// A cluster's shard engine applies a trim, seal or
        /// delete whose token is below the stream's highest as if it
        /// carried the highest: a stale lifecycle op accepted in apply.
        ApplyLifecycleUnfenced,
        /// In `Durability::OnFlush` (a cluster's shard engines), a flush
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

    pub(crate) fn inherit() -> Inherited {
        Inherited(ACTIVE.with(|a| a.get()))
    }

    /// Called first thing on a spawned thread.
    pub(crate) fn adopt(i: Inherited) {
        set_mutation(i.0);
    }
}
