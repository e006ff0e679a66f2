//! The shard engine of a cluster node: committed Raft entries
//! applied through the writer and the fencing rule, each with its Applied
//! marker in the same group, and the applied position they leave.
//!
//! An entry's marker is in the same group as its effects, so the applied
//! position a restart recovers is exactly the last entry whose effects it
//! recovers — never one applied twice, never one skipped. A cluster runs
//! its shard engines in `Durability::OnFlush`: an apply is answered once
//! written, and a crash may lose the groups after the last flush, which
//! only rewinds the applied position (recovery keeps a prefix of the
//! groups); openraft applies those entries again from its fsynced log,
//! which purges nothing a flush has not covered (see the cluster's
//! `state_machine.rs`).

use super::Engine;
use crate::codec::checkpoint::AppliedState;
use crate::error::WriteError;
use crate::locks;
use crate::op::{Applied, WriteOp};
use crate::writer::{ApplyEntry, Op, Request};
use std::collections::VecDeque;
use tokio::sync::oneshot;

/// Most entries one [`Engine::apply_entries`] has queued and not had
/// answered: below the writer's queue (`queue_depth_max`, whose overflow
/// would refuse an apply; at most half of it is taken), and enough to
/// fill a group with what one commit step hands over.
pub const APPLY_AHEAD_MAX: usize = 64;

/// The answer on `rx` (taken from a queue known to hold one); a writer
/// gone before answering is shutting down.
async fn answer_of<T>(
    rx: Option<oneshot::Receiver<Result<T, WriteError>>>,
) -> Result<T, WriteError> {
    let rx = rx.expect("an entry is waiting");
    rx.await.map_err(|_| WriteError::ShuttingDown)?
}

impl Engine {
    /// Applies one committed Raft entry: `ops` in order against pending
    /// state at timestamp `ts_ms` (the leader's, clamped per stream so it
    /// never decreases), then the marker `at` (`membership` empty when
    /// unchanged), all in one durable group. Answers one result per op —
    /// a refusal is a result, decided the same on every replica. `Err` is
    /// the engine's own failure (poisoned, stopped): nothing is known
    /// applied.
    pub async fn apply_batch(
        &self,
        at: AppliedState,
        ts_ms: u64,
        ops: Vec<WriteOp>,
    ) -> Result<Vec<Result<Applied, WriteError>>, WriteError> {
        let mut all = self.apply_entries(vec![(at, ts_ms, ops)]).await?;
        Ok(all.pop().expect("one entry, one answer"))
    }

    /// [`Engine::apply_batch`] for consecutive committed entries, in order:
    /// they are queued to the writer together (up to
    /// [`APPLY_AHEAD_MAX`] ahead of the first unanswered), so entries that
    /// commit together share a group instead of a thread hand-off each.
    /// Answers one result list per entry. On `Err` the entries before the
    /// failing one may be applied (each with its marker), none after it:
    /// any failure of an entry's group poisons the engine (a refused one
    /// too, see `publish::refuse_group`), so the entries queued behind it
    /// are refused.
    pub async fn apply_entries(
        &self,
        entries: Vec<(AppliedState, u64, Vec<WriteOp>)>,
    ) -> Result<Vec<Vec<Result<Applied, WriteError>>>, WriteError> {
        type Answer = Result<Vec<Result<Applied, WriteError>>, WriteError>;
        let mut waiting: VecDeque<oneshot::Receiver<Answer>> = VecDeque::new();
        let mut out = Vec::with_capacity(entries.len());
        // Half the writer's queue at most, so a small configured queue
        // still has room for the requests of others.
        let ahead = APPLY_AHEAD_MAX
            .min(self.shared().config.queue_depth_max / 2)
            .max(1);
        for (mark, ts_ms, ops) in entries {
            if waiting.len() >= ahead {
                out.push(answer_of(waiting.pop_front()).await?);
            }
            if let Some(f) = self.shared().poisoned.get() {
                return Err(WriteError::Poisoned(f.clone()));
            }
            let (reply, rx) = oneshot::channel();
            let entry = Box::new(ApplyEntry { ts_ms, ops, mark });
            self.enqueue(Request {
                stream: "".into(),
                op: Op::Apply { entry, reply },
            })?;
            waiting.push_back(rx);
        }
        while !waiting.is_empty() {
            out.push(answer_of(waiting.pop_front()).await?);
        }
        Ok(out)
    }

    /// Where retention wants each stream's front, judged at `now_ms` (the
    /// shard leader's clock) with the server's defaults `age_s` and
    /// `bytes` for streams that set none: `(stream, first_seq)` for every
    /// stream it would trim. Nothing is written: the leader proposes each
    /// as [`WriteOp::Retain`], and apply decides it through
    /// `fence::check_retention` on every replica alike.
    pub fn retention_due(
        &self,
        now_ms: u64,
        age_s: Option<u64>,
        bytes: Option<u64>,
    ) -> Vec<(String, u64)> {
        crate::reclaim::retention::due(self.shared(), now_ms, (age_s, bytes))
            .into_iter()
            .map(|(s, seq)| (s.into(), seq))
            .collect()
    }

    /// The applied Raft position (LogId and last membership) this log
    /// holds now: its last durable Applied marker, or its checkpoint's
    /// (a local engine has none).
    pub fn applied(&self) -> Option<AppliedState> {
        locks::lock(&self.shared().applied).clone()
    }
}
