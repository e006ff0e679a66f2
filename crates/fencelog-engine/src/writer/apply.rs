//! Planning a committed Raft entry of a shard engine, pure like
//! the rest of [`super::plan`]: each op goes through the same fencing rule
//! and frame encoding as a local request, in order against pending state,
//! at the leader's timestamp (never the clock), with no disk-budget
//! refusal (the leader enforces local limits before proposing); then the
//! entry's Applied marker follows in the same group, so a restart sees the
//! entry's effects exactly when it sees its LogId.

use super::batch::plan_batch;
use super::plan::{
    answers_state, needs_carried, pending, plan_one, IndexChange, Lookup, Out, Pending,
};
use super::protocol::{Answer, ApplyEntry, Op};
use crate::checks::{validate_short_name, validate_stream_config, BATCH_OPS_MAX};
use crate::codec::{encode_frame_with, AppliedMark, FrameKind, PayloadSpec, FRAME_RECORDS_MAX};
use crate::error::WriteError;
use crate::name::validate_stream_name;
use crate::op::{Applied, BatchAction, WriteOp};
use crate::record::validate_headers;
use fencelog_types::Header;
use std::collections::HashMap;

/// Plans `entry`'s ops and its marker; answers one result per op.
pub(super) fn plan_apply<H>(
    out: &mut Out<'_>,
    streams: &mut HashMap<Box<str>, Pending<H>>,
    lookup: &mut impl Lookup<H>,
    entry: &ApplyEntry,
) -> Vec<Result<Applied, WriteError>> {
    let (now_ms, budget) = (out.ctx.now_ms, out.ctx.budget.take());
    if !mutated!(ApplyReadsClock) {
        out.ctx.now_ms = entry.ts_ms;
    }
    let results = entry
        .ops
        .iter()
        .map(|op| {
            check_format(op)?;
            if let WriteOp::Batch { ops, not_after_ms } = op {
                let acks = plan_batch(out, streams, lookup, ops.clone(), *not_after_ms);
                return acks.map(Applied::Batch);
            }
            let p = pending(streams, lookup, op.stream());
            let local = to_op(p, op);
            if needs_carried(&local) {
                p.load_carried(lookup, op.stream());
            }
            if answers_state(&local) {
                p.load_config(lookup, op.stream());
            }
            outcome(plan_one(out, p, op.stream(), local))
        })
        .collect();
    (out.ctx.now_ms, out.ctx.budget) = (now_ms, budget);
    if mutated!(AppliedMarkerOmitted) {
        return results;
    }
    let m = &entry.mark;
    let spec = out.spec(FrameKind::Applied, 0, "", 0, 0, 0);
    let mark = AppliedMark {
        term: m.term,
        node_id: m.node_id,
        index: m.index,
        membership: &m.membership,
    };
    let at = encode_frame_with(out.buf, &spec, &PayloadSpec::Applied(mark));
    out.push("", at, IndexChange::None);
    results
}

/// The checks whose failure would otherwise be an encoder assertion: the
/// format's caps, identical on every node, so refusing is deterministic.
fn check_format(op: &WriteOp) -> Result<(), WriteError> {
    match op {
        WriteOp::Batch { ops, .. } => return check_batch_format(ops),
        WriteOp::Config { config, .. } => validate_stream_config(config)?,
        WriteOp::Cursor { name, token, .. } => {
            validate_short_name("cursor name", name)?;
            if *token == 0 {
                return Err(WriteError::ZeroToken);
            }
        }
        _ => {}
    }
    validate_stream_name(op.stream()).map_err(WriteError::InvalidStreamName)?;
    if let WriteOp::Append {
        records,
        headers,
        options,
        ..
    } = op
    {
        if let Some(p) = &options.producer {
            validate_short_name("producer_id", &p.id)?;
        }
        check_records(records.len())?;
        check_headers(records.len(), headers)?;
    }
    Ok(())
}

fn check_records(count: usize) -> Result<(), WriteError> {
    if count == 0 {
        return Err(WriteError::EmptyBatch);
    }
    if count > FRAME_RECORDS_MAX {
        return Err(WriteError::TooLarge {
            what: "records in the batch",
            limit: FRAME_RECORDS_MAX as u64,
            actual: count as u64,
        });
    }
    Ok(())
}

/// A batch's shape, as [`crate::Engine::check_batch_ops`] checks it but
/// with the format's caps instead of this engine's limits.
fn check_batch_format(ops: &[crate::op::BatchOp]) -> Result<(), WriteError> {
    if ops.is_empty() || ops.len() > BATCH_OPS_MAX {
        return Err(WriteError::BadInput(format!(
            "a batch has 1..={BATCH_OPS_MAX} operations, this one {}",
            ops.len()
        )));
    }
    for (i, op) in ops.iter().enumerate() {
        let at = |e: WriteError| WriteError::BadInput(format!("ops[{i}]: {e}"));
        validate_stream_name(&op.stream).map_err(|e| at(WriteError::InvalidStreamName(e)))?;
        if op.fencing_token == 0 {
            return Err(at(WriteError::ZeroToken));
        }
        if let BatchAction::Append { records, .. } = &op.action {
            check_records(records.len()).map_err(at)?;
        }
    }
    Ok(())
}

/// Headers are none at all or one list per record, each within the
/// format's limits (the leader checked them; a list the decoder would not
/// believe must never reach the encoder).
fn check_headers(records: usize, headers: &[Vec<Header>]) -> Result<(), WriteError> {
    if headers.is_empty() {
        return Ok(());
    }
    if headers.len() != records {
        return Err(WriteError::TooLarge {
            what: "header lists in the batch",
            limit: records as u64,
            actual: headers.len() as u64,
        });
    }
    for (record, h) in headers.iter().enumerate() {
        validate_headers(h).map_err(|error| WriteError::BadHeaders { record, error })?;
    }
    Ok(())
}

/// The local request an op plans as: the same conversion a single node's
/// write makes ([`WriteOp::into_request`]); its answer is taken out of
/// the planned [`Answer`], never from its reply channel.
fn to_op<H>(p: &Pending<H>, op: &WriteOp) -> Op {
    let (request, _) = op.clone().into_request();
    let mut local = request.op;
    if let Op::Trim { token, .. } | Op::Seal { token, .. } | Op::Delete { token, .. } = &mut local {
        *token = lifecycle_token(p, *token);
    }
    local
}

/// A trim's, seal's or delete's token as apply checks it: the op's own,
/// or under the mutation the stream's highest when the op's is below it
/// (a stale lifecycle op let through apply unfenced).
fn lifecycle_token<H>(p: &Pending<H>, token: u64) -> u64 {
    if mutated!(ApplyLifecycleUnfenced) {
        return token.max(p.fence.highest_token);
    }
    token
}

fn outcome(a: Answer) -> Result<Applied, WriteError> {
    match a {
        Answer::Append(_, r) => r.map(Applied::Appended),
        Answer::State(_, r) => r.map(Applied::State),
        Answer::Cursor(_, r) => r.map(Applied::Cursor),
        Answer::Relocated(..) | Answer::Applied(..) | Answer::Batch(..) => {
            unreachable!("an applied op answers an ack, a state or a cursor")
        }
    }
}
