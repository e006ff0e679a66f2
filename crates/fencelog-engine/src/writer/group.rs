//! Planning one group, pure: every request taken off the queue in arrival
//! order and planned against one set of pending per-stream states — a
//! single stream's request by [`plan_one`], compaction's copies by
//! [`plan_relocate`], a multi-stream batch by [`super::batch`], a committed
//! Raft entry by [`super::apply`] — then the group's last frame marked.

use super::apply::plan_apply;
use super::batch::plan_batch;
use super::plan::{
    answers_state, needs_carried, pending, plan_one, plan_relocate, Context, Counts, Lookup, Out,
    Pending, Plan,
};
use super::protocol::{Answer, Op, Request};
use crate::codec::checkpoint::AppliedState;
use crate::codec::set_last_in_group;
use std::collections::{HashMap, VecDeque};

/// Plans group `ctx.group_id`: takes every request off the front of
/// `requests` (so a request is either still there or has its answer in
/// `answers`), encodes the accepted ones into `buf` (cleared first), and
/// answers each in arrival order. Timestamps are `ctx.now_ms`, but never
/// below a stream's last one.
pub(super) fn plan<H>(
    requests: &mut VecDeque<Request>,
    answers: &mut Vec<Answer>,
    buf: &mut Vec<u8>,
    ctx: Context,
    lookup: &mut impl Lookup<H>,
) -> Plan<H> {
    buf.clear();
    let mut streams: HashMap<Box<str>, Pending<H>> = HashMap::new();
    let mut frames = Vec::new();
    let mut counts = Counts::default();
    let mut applied = None;
    let mut out = Out {
        buf,
        frames: &mut frames,
        counts: &mut counts,
        ctx,
    };
    while let Some(req) = requests.pop_front() {
        let answer = match req.op {
            Op::Relocate { frames, reply } => Answer::Relocated(
                reply,
                Ok(plan_relocate(&mut out, &mut streams, lookup, frames)),
            ),
            Op::Apply { entry, reply } => {
                let results = plan_apply(&mut out, &mut streams, lookup, &entry);
                applied = Some(carry_membership(applied.take(), entry.mark));
                Answer::Applied(reply, Ok(results))
            }
            Op::Batch {
                ops,
                not_after_ms,
                reply,
            } => Answer::Batch(
                reply,
                plan_batch(&mut out, &mut streams, lookup, ops, not_after_ms),
            ),
            op => {
                let p = pending(&mut streams, lookup, &req.stream);
                if needs_carried(&op) {
                    p.load_carried(lookup, &req.stream);
                }
                if answers_state(&op) {
                    p.load_config(lookup, &req.stream);
                }
                plan_one(&mut out, p, &req.stream, op)
            }
        };
        answers.push(answer);
    }
    if let Some(last) = frames.last() {
        set_last_in_group(&mut buf[last.offset_in_buf..], true);
    }
    Plan {
        streams,
        frames,
        counts,
        applied,
    }
}

/// The group's marker after `mark`: `mark`, holding the membership of the
/// group's earlier marker `before` when it leaves membership unchanged
/// (empty), so a group of several entries publishes the last membership
/// any of them set, as recovery reads it back.
fn carry_membership(before: Option<AppliedState>, mut mark: AppliedState) -> AppliedState {
    if mark.membership.is_empty() && !mutated!(GroupMarkerForgetsMembership) {
        if let Some(b) = before {
            mark.membership = b.membership;
        }
    }
    mark
}
