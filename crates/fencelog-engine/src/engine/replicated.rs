//! The shard engine of a cluster node (issue 14): committed Raft entries
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
use crate::writer::{Applied, ApplyEntry, Op, ReplicatedOp, Request};
use tokio::sync::oneshot;

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
        ops: Vec<ReplicatedOp>,
    ) -> Result<Vec<Result<Applied, WriteError>>, WriteError> {
        if let Some(f) = self.shared().poisoned.get() {
            return Err(WriteError::Poisoned(f.clone()));
        }
        let (reply, rx) = oneshot::channel();
        let entry = Box::new(ApplyEntry {
            ts_ms,
            ops,
            mark: at,
        });
        self.submit(Request {
            stream: "".into(),
            op: Op::Apply { entry, reply },
        })
        .await?;
        rx.await.map_err(|_| WriteError::ShuttingDown)?
    }

    /// Where retention wants each stream's front, judged at `now_ms` (the
    /// shard leader's clock) with the server's defaults `age_s` and
    /// `bytes` for streams that set none: `(stream, first_seq)` for every
    /// stream it would trim. Nothing is written: the leader proposes each
    /// as [`ReplicatedOp::Retain`], and apply decides it through
    /// `fence::check_retention` on every replica alike (issue 14).
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
    /// (issue 14; a local engine has none).
    pub fn applied(&self) -> Option<AppliedState> {
        locks::lock(&self.shared().applied).clone()
    }
}
