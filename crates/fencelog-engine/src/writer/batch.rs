//! Planning a multi-stream batch, pure: every operation is
//! planned with the single-operation functions against pending state, the
//! earlier operations of the batch included, in the group being planned.
//! If any is refused, the whole batch is rolled back — its frames cut
//! from the group's buffer, its streams' pending state restored — so
//! nothing of it reaches the disk. Otherwise all of its frames are in this
//! one group, whose last frame alone carries LAST_IN_GROUP: recovery
//! applies all of them or none (docs/design.md, "Groups").

use super::plan::{pending, plan_append, plan_state, AppendArgs, Lookup, Out, Pending, Saved};
use crate::error::WriteError;
use crate::fence;
use crate::op::{BatchAction, BatchOp};
use fencelog_types::{BatchAck, FenceBy};
use std::collections::HashMap;

/// Plans `ops` all or nothing; see the module comment.
pub(super) fn plan_batch<H>(
    out: &mut Out<'_>,
    streams: &mut HashMap<Box<str>, Pending<H>>,
    lookup: &mut impl Lookup<H>,
    ops: Vec<BatchOp>,
    not_after_ms: Option<u64>,
) -> Result<Vec<BatchAck>, WriteError> {
    let (buf_len, frames_len) = (out.buf.len(), out.frames.len());
    let (counts, budget) = (out.counts.clone(), out.ctx.budget);
    let mut saved: HashMap<Box<str>, Saved> = HashMap::new();
    let mut outcomes = Vec::with_capacity(ops.len());
    for op in &ops {
        let p = pending(streams, lookup, &op.stream);
        if !saved.contains_key(op.stream.as_str()) {
            saved.insert(op.stream.as_str().into(), p.save());
        }
        if matches!(op.action, BatchAction::Fence) {
            p.load_config(lookup, &op.stream);
        }
        outcomes.push(plan_op(out, p, op, not_after_ms));
    }
    if outcomes.iter().all(Result::is_ok) {
        out.counts.batches += 1;
        return Ok(outcomes.into_iter().map(Result::unwrap).collect());
    }
    if !mutated!(BatchPartial) {
        out.buf.truncate(buf_len);
        out.frames.truncate(frames_len);
        // The refusals stay counted; nothing else of the batch does.
        let refusals = out.counts.clone();
        *out.counts = counts;
        out.counts.stale = refusals.stale;
        out.counts.mismatched = refusals.mismatched;
        out.counts.sealed = refusals.sealed;
        out.counts.deadline_refusals = refusals.deadline_refusals;
        out.ctx.budget = budget;
        for (name, s) in saved {
            streams
                .get_mut(&name)
                .expect("saved from the map")
                .restore(s);
        }
    }
    out.counts.batches_refused += 1;
    Err(WriteError::BatchRefused(outcomes))
}

fn plan_op<H>(
    out: &mut Out<'_>,
    p: &mut Pending<H>,
    op: &BatchOp,
    not_after_ms: Option<u64>,
) -> Result<BatchAck, WriteError> {
    let token = op.fencing_token;
    match &op.action {
        BatchAction::Append {
            records,
            match_seq_num,
        } => {
            let args = AppendArgs {
                token,
                records,
                headers: &[],
                match_seq_num: *match_seq_num,
                producer: None,
                not_after_ms,
            };
            plan_append(out, p, &op.stream, args).map(BatchAck::Append)
        }
        BatchAction::Fence => {
            let r = fence::check_fence(p.fence, token);
            let by = (token, FenceBy::Fence, not_after_ms);
            plan_state(out, p, &op.stream, r, by).map(BatchAck::Fence)
        }
    }
}
