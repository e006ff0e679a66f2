//! Multi-stream batches (issue 11 §5): checked here for what costs no
//! writer time, then planned by the writer all or nothing in one group.

use super::Engine;
use crate::error::WriteError;
use crate::name::validate_stream_name;
use crate::writer::{BatchAction, BatchOp, Op};
use fencelog_types::BatchAck;

/// Operations one multi-stream batch may carry.
pub const BATCH_OPS_MAX: usize = 64;

impl Engine {
    /// Applies `ops` — appends and fences on any streams, the same stream
    /// more than once too — atomically and durably as one unit: each is
    /// checked against the state the earlier ones leave, and if any is
    /// refused none is applied ([`WriteError::BatchRefused`] with every
    /// operation's outcome). All of them share `not_after_ms`. Malformed
    /// input is refused before the writer sees it.
    pub async fn batch(
        &self,
        ops: Vec<BatchOp>,
        not_after_ms: Option<u64>,
    ) -> Result<Vec<BatchAck>, WriteError> {
        self.check_batch_ops(&ops)?;
        self.precheck(&ops[0].stream, None)?;
        let stream = ops[0].stream.clone();
        self.request(&stream, |reply| Op::Batch {
            ops,
            not_after_ms,
            reply,
        })
        .await
    }

    /// The checks [`Engine::batch`] makes before the writer: 1..=64 ops,
    /// valid names, no token 0, each append within this engine's limits
    /// and all of them within its batch bytes (also a cluster node's, made
    /// before proposing, issue 14).
    pub fn check_batch_ops(&self, ops: &[BatchOp]) -> Result<(), WriteError> {
        if ops.is_empty() || ops.len() > BATCH_OPS_MAX {
            return Err(WriteError::BadInput(format!(
                "a batch has 1..={BATCH_OPS_MAX} operations, this one {}",
                ops.len()
            )));
        }
        let mut bytes = 0usize;
        for (i, op) in ops.iter().enumerate() {
            let at = |e: WriteError| WriteError::BadInput(format!("ops[{i}]: {e}"));
            validate_stream_name(&op.stream).map_err(|e| at(WriteError::InvalidStreamName(e)))?;
            if op.fencing_token == 0 {
                return Err(at(WriteError::ZeroToken));
            }
            if let BatchAction::Append { records, .. } = &op.action {
                self.check_batch(records, 0).map_err(|e| match e {
                    e @ WriteError::TooLarge { .. } => e,
                    e => at(e),
                })?;
                bytes += records.iter().map(|r| r.len()).sum::<usize>();
            }
        }
        let limit = self.shared().config.batch_bytes_max;
        if bytes > limit {
            return Err(WriteError::TooLarge {
                what: "bytes in the multi-stream batch",
                limit: limit as u64,
                actual: bytes as u64,
            });
        }
        Ok(())
    }
}
