//! The planning step, pure: a group of requests and the pending per-stream
//! state become encoded frames in one buffer, the index changes to publish
//! once they are durable, every request's answer, and counters. No locks,
//! no I/O, no clock: the writer looks durable state up through the
//! [`Lookup`] and passes the time in.
//!
//! The fencing rule ([`crate::fence`]) is applied in arrival order against
//! *pending* state: the durable state plus the frames planned so far in the
//! group. So a lower token after an accepted higher one in the same group
//! is refused, `match_seq_num` sees the seqs planned before it, and a copy
//! compaction asked for is dead on arrival if a trim or delete planned
//! before it in the group (or published before the group) killed it.

use super::protocol::{
    records_frame_len, refusal_error, Ack, Answer, Op, Relocated, Relocation, Request,
};
use crate::codec::checkpoint::{FenceBy, FenceEvent};
use crate::codec::{
    encode_frame, encode_frame_with, encode_relocated, set_last_in_group, FrameKind, FrameSpec,
    PayloadSpec, RecordSpec, StreamConfig, FLAG_RETENTION,
};
use crate::error::WriteError;
use crate::fence::{self, Change, Effect, FenceState, Refusal};
use crate::record::Header;
use crate::stream::StreamState;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};

/// A stream's durable state as the group starts, and what publishing needs
/// to reach it (`H`: the stream's shared state in the engine).
pub(super) struct Durable<H> {
    pub fence: FenceState,
    pub last_timestamp_ms: u64,
    pub handle: H,
}

/// What the planner may ask of durable state.
pub(super) trait Lookup<H> {
    /// The stream's durable state, if it exists.
    fn stream(&mut self, name: &str) -> Option<Durable<H>>;
    /// Whether the stream's durable index points its frame starting at
    /// `first_seq` at (segment, offset).
    fn points_at(&mut self, name: &str, first_seq: u64, at: (u64, u64)) -> bool;
}

/// A stream's state inside the group: durable state plus what is planned.
pub(super) struct Pending<H> {
    pub fence: FenceState,
    pub last_timestamp_ms: u64,
    /// `None` for a stream that does not exist yet; publishing creates it.
    pub handle: Option<H>,
    /// Fence history entries the group adds, oldest first.
    pub events: Vec<FenceEvent>,
    /// The retention settings the group sets, if it sets any.
    pub config: StreamConfig,
    pub config_changed: bool,
}

impl<H> Pending<H> {
    fn start(durable: Option<Durable<H>>) -> Self {
        let (fence, last_timestamp_ms, handle) = match durable {
            Some(d) => (d.fence, d.last_timestamp_ms, Some(d.handle)),
            None => (FenceState::default(), 0, None),
        };
        Pending {
            fence,
            last_timestamp_ms,
            handle,
            events: Vec::new(),
            config: StreamConfig::default(),
            config_changed: false,
        }
    }

    /// Applies an accepted change with `token` at `ts`, recording the
    /// token in the fence history if it takes effect.
    fn apply(&mut self, change: Change, token: u64, ts: u64, by: FenceBy) {
        if fence::takes_effect(self.fence, token) {
            self.events.push(FenceEvent {
                token,
                first_seq: self.fence.next_seq,
                timestamp_ms: ts,
                by,
            });
        }
        self.fence = fence::advance(self.fence, change, token);
    }

    /// The answer of a state-changing request: the pending state. `bytes`
    /// and the retention settings are filled in from the published stream
    /// when the answer is sent (they are the group's end).
    fn state(&self, stream: &str, defaults: &Defaults) -> StreamState {
        StreamState {
            stream: stream.to_string(),
            first_seq: self.fence.first_seq,
            next_seq: self.fence.next_seq,
            highest_token: self.fence.highest_token,
            last_timestamp_ms: self.last_timestamp_ms,
            sealed: self.fence.sealed,
            deleted: self.fence.deleted,
            retention_age_s: self.config.retention_age_s.effective(defaults.age_s),
            retention_bytes: self.config.retention_bytes.effective(defaults.bytes),
            retention_respect_cursors: self.config.respect_cursors,
            bytes: 0,
        }
    }
}

/// The server's retention defaults, for answers.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Defaults {
    pub age_s: Option<u64>,
    pub bytes: Option<u64>,
}

/// What a planned frame does to its stream's index when published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IndexChange {
    /// A new records frame.
    Push {
        first_seq: u64,
        count: u32,
        len: u32,
    },
    /// A copy of the frame the index points at `from`.
    Repoint {
        first_seq: u64,
        from: (u64, u64),
    },
    /// Frames wholly below `first_seq` go.
    TrimTo(u64),
    /// Every frame goes (a tombstone).
    Clear,
    None,
}

/// A frame of the group, to index once durable.
pub(super) struct PlannedFrame {
    pub stream: Box<str>,
    pub offset_in_buf: usize,
    pub index: IndexChange,
}

/// What the group did, for the metrics.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub stale: u64,
    pub mismatched: u64,
    pub sealed: u64,
    pub over_budget: u64,
    pub appends: u64,
    pub fences: u64,
    pub trims: u64,
    pub seals: u64,
    pub deletes: u64,
    pub configs: u64,
    pub retention_trims: u64,
    pub relocated: u64,
    pub relocated_bytes: u64,
    pub dead_on_arrival: u64,
    pub records: u64,
}

/// A planned group. Its frames are in the buffer passed to [`plan`], the
/// last one flagged last-in-group; its answers in the answers passed.
pub(super) struct Plan<H> {
    /// Every stream the group looked at, in its state after the group.
    pub streams: HashMap<Box<str>, Pending<H>>,
    /// In log order.
    pub frames: Vec<PlannedFrame>,
    pub counts: Counts,
}

/// The group's fixed inputs.
#[derive(Debug, Clone, Copy)]
pub(super) struct Context {
    pub group_id: u64,
    pub now_ms: u64,
    pub defaults: Defaults,
    /// The disk budget, if there is one.
    pub budget: Option<Budget>,
}

/// The disk budget as the group starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Budget {
    pub limit: u64,
    pub used: u64,
    /// Frame bytes appends may still add. State frames and compaction's
    /// copies are not counted: they are tiny, or free space.
    pub room: u64,
}

/// Where frames go while planning.
struct Out<'a> {
    buf: &'a mut Vec<u8>,
    frames: &'a mut Vec<PlannedFrame>,
    counts: &'a mut Counts,
    ctx: Context,
}

impl Out<'_> {
    fn spec<'n>(
        &self,
        kind: FrameKind,
        flags: u8,
        name: &'n str,
        first_seq: u64,
        token: u64,
        ts: u64,
    ) -> FrameSpec<'n> {
        FrameSpec {
            kind,
            flags,
            group_id: self.ctx.group_id,
            first_seq,
            fencing_token: token,
            timestamp_ms: ts,
            name,
        }
    }

    fn push(&mut self, stream: &str, offset_in_buf: usize, index: IndexChange) {
        self.frames.push(PlannedFrame {
            stream: stream.into(),
            offset_in_buf,
            index,
        });
    }

    fn count_refusal(&mut self, r: &Refusal) {
        match r {
            Refusal::Stale { .. } => self.counts.stale += 1,
            Refusal::SeqMismatch { .. } => self.counts.mismatched += 1,
            Refusal::Sealed => self.counts.sealed += 1,
            _ => {}
        }
    }
}

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
            op => {
                let p = pending(&mut streams, lookup, &req.stream);
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
    }
}

fn pending<'s, H>(
    streams: &'s mut HashMap<Box<str>, Pending<H>>,
    lookup: &mut impl Lookup<H>,
    name: &str,
) -> &'s mut Pending<H> {
    if !streams.contains_key(name) {
        let p = Pending::start(lookup.stream(name));
        streams.insert(name.into(), p);
    }
    streams.get_mut(name).expect("inserted above")
}

/// One request for one stream.
fn plan_one<H>(out: &mut Out<'_>, p: &mut Pending<H>, stream: &str, op: Op) -> Answer {
    let state_answer = |out: &mut Out<'_>, p: &Pending<H>, r: Result<(), Refusal>| {
        r.map(|()| p.state(stream, &out.ctx.defaults)).map_err(|r| {
            out.count_refusal(&r);
            refusal_error(r, &p.state(stream, &out.ctx.defaults))
        })
    };
    match op {
        Op::Append {
            token,
            records,
            headers,
            match_seq_num,
            reply,
        } => {
            let batch = Batch {
                bodies: &records,
                headers: &headers,
            };
            Answer::Append(
                reply,
                plan_append(out, p, stream, token, match_seq_num, batch),
            )
        }
        Op::Fence { token, reply } => {
            let r = fence::check_fence(p.fence, token)
                .map(|e| state_frame(out, p, stream, e, token, FenceBy::Fence));
            Answer::State(reply, state_answer(out, p, r))
        }
        Op::Trim {
            token,
            trim_seq,
            reply,
        } => {
            let r = fence::check_trim(p.fence, token, trim_seq)
                .map(|e| state_frame(out, p, stream, e, token, FenceBy::Trim));
            Answer::State(reply, state_answer(out, p, r))
        }
        Op::Seal { token, reply } => {
            let r = fence::check_seal(p.fence, token)
                .map(|e| state_frame(out, p, stream, e, token, FenceBy::Seal));
            Answer::State(reply, state_answer(out, p, r))
        }
        Op::Delete { token, reply } => {
            let r = fence::check_delete(p.fence, token)
                .map(|e| state_frame(out, p, stream, e, token, FenceBy::Delete));
            Answer::State(reply, state_answer(out, p, r))
        }
        Op::Config {
            token,
            config,
            reply,
        } => {
            let r =
                fence::check_config(p.fence, token).map(|t| plan_config(out, p, stream, t, config));
            Answer::State(reply, state_answer(out, p, r))
        }
        Op::Retain { first_seq, reply } => {
            let e = fence::check_retention(p.fence, first_seq);
            let token = p.fence.highest_token;
            state_frame(out, p, stream, e, token, FenceBy::Trim);
            Answer::Unit(reply, Ok(()))
        }
        Op::Relocate { .. } => unreachable!("planned by plan_relocate"),
    }
}

/// An append's records: bodies, and either no headers at all or one list
/// per record.
#[derive(Clone, Copy)]
struct Batch<'a> {
    bodies: &'a [Bytes],
    headers: &'a [Vec<Header>],
}

impl Batch<'_> {
    /// Encodes the batch's records frame into `buf` and returns its offset:
    /// a plain frame (exactly version 1's bytes) without headers, else one
    /// with flag HEADERS.
    fn encode(&self, buf: &mut Vec<u8>, spec: &FrameSpec<'_>) -> usize {
        if self.headers.is_empty() || mutated!(HeadersDropped) {
            return encode_frame(buf, spec, self.bodies);
        }
        debug_assert_eq!(self.headers.len(), self.bodies.len());
        let pairs: Vec<Vec<(&[u8], &[u8])>> = self
            .headers
            .iter()
            .map(|h| h.iter().map(|h| (&h.name[..], &h.value[..])).collect())
            .collect();
        let records: Vec<RecordSpec<'_>> = self
            .bodies
            .iter()
            .zip(&pairs)
            .map(|(body, headers)| RecordSpec { headers, body })
            .collect();
        let payload = PayloadSpec::Records {
            producer: None,
            records: &records,
        };
        encode_frame_with(buf, spec, &payload)
    }
}

fn plan_append<H>(
    out: &mut Out<'_>,
    p: &mut Pending<H>,
    stream: &str,
    token: u64,
    match_seq_num: Option<u64>,
    batch: Batch<'_>,
) -> Result<Ack, WriteError> {
    if let Err(r) = fence::check_append(p.fence, token, match_seq_num, None, None) {
        out.count_refusal(&r);
        return Err(refusal_error(r, &p.state(stream, &out.ctx.defaults)));
    }
    let len = records_frame_len(stream, batch.bodies, batch.headers) as u64;
    if let Some(b) = out.ctx.budget.as_mut() {
        if len > b.room {
            out.counts.over_budget += 1;
            return Err(WriteError::InsufficientStorage {
                limit: b.limit,
                used: b.used,
            });
        }
        b.room -= len;
    }
    let timestamp_ms = out.ctx.now_ms.max(p.last_timestamp_ms);
    let first_seq = p.fence.next_seq;
    let count = batch.bodies.len() as u32;
    let spec = out.spec(
        FrameKind::Records,
        0,
        stream,
        first_seq,
        token,
        timestamp_ms,
    );
    let offset_in_buf = batch.encode(out.buf, &spec);
    // What the index and the live-byte counters account is the frame as
    // written (a deliberate bug may have written less than planned).
    let len = (out.buf.len() - offset_in_buf) as u64;
    p.apply(
        Change::Append { count },
        token,
        timestamp_ms,
        FenceBy::Append,
    );
    p.last_timestamp_ms = timestamp_ms;
    out.push(
        stream,
        offset_in_buf,
        IndexChange::Push {
            first_seq,
            count,
            len: len as u32,
        },
    );
    out.counts.appends += 1;
    out.counts.records += count as u64;
    Ok(Ack {
        first_seq,
        last_seq: first_seq + count as u64 - 1,
        next_seq: first_seq + count as u64,
        fencing_token: token,
        timestamp_ms,
    })
}

/// Writes the frame of an accepted fence, trim, seal or delete (none when
/// the rule says it changes nothing) and applies it.
fn state_frame<H>(
    out: &mut Out<'_>,
    p: &mut Pending<H>,
    stream: &str,
    effect: Effect,
    token: u64,
    by: FenceBy,
) {
    let Effect::Frame(change) = effect else {
        return;
    };
    let ts = out.ctx.now_ms.max(p.last_timestamp_ms);
    let (kind, first_seq, flags, index) = match change {
        Change::Fence => (FrameKind::Fence, p.fence.next_seq, 0, IndexChange::None),
        Change::Trim {
            first_seq,
            retention,
        } => {
            let flags = if retention { FLAG_RETENTION } else { 0 };
            (
                FrameKind::Trim,
                first_seq,
                flags,
                IndexChange::TrimTo(first_seq),
            )
        }
        Change::Seal => (FrameKind::Seal, p.fence.next_seq, 0, IndexChange::None),
        Change::Delete => (FrameKind::Delete, p.fence.next_seq, 0, IndexChange::Clear),
        Change::Append { .. } | Change::Config => unreachable!("planned elsewhere"),
    };
    let spec = out.spec(kind, flags, stream, first_seq, token, ts);
    let at = encode_frame::<&[u8]>(out.buf, &spec, &[]);
    p.apply(change, token, ts, by);
    if change == Change::Delete {
        // A tombstone keeps only the token: no retention override either.
        p.config = StreamConfig::default();
        p.config_changed = true;
    }
    out.push(stream, at, index);
    let c = &mut out.counts;
    match change {
        Change::Fence => c.fences += 1,
        Change::Trim {
            retention: true, ..
        } => c.retention_trims += 1,
        Change::Trim { .. } => c.trims += 1,
        Change::Seal => c.seals += 1,
        Change::Delete => c.deletes += 1,
        _ => {}
    }
}

fn plan_config<H>(
    out: &mut Out<'_>,
    p: &mut Pending<H>,
    stream: &str,
    token: u64,
    config: StreamConfig,
) {
    let ts = out.ctx.now_ms.max(p.last_timestamp_ms);
    let spec = out.spec(FrameKind::Config, 0, stream, p.fence.next_seq, token, ts);
    let at = encode_frame_with(out.buf, &spec, &PayloadSpec::Config(config));
    p.apply(Change::Config, token, ts, FenceBy::Config);
    p.config = config;
    p.config_changed = true;
    out.push(stream, at, IndexChange::None);
    out.counts.configs += 1;
}

/// Compaction's copies: each frame still live — its stream not deleted,
/// not trimmed past it, and the durable index pointing at the copy the
/// reclaimer read — is copied with flag RELOCATED and a new group id.
fn plan_relocate<H>(
    out: &mut Out<'_>,
    streams: &mut HashMap<Box<str>, Pending<H>>,
    lookup: &mut impl Lookup<H>,
    frames: Vec<Relocation>,
) -> Relocated {
    let mut done = Relocated::default();
    for f in frames {
        let p = pending(streams, lookup, &f.stream);
        let end = f.first_seq + f.count as u64;
        let live = p.fence.exists
            && !p.fence.deleted
            && end > p.fence.first_seq
            && lookup.points_at(&f.stream, f.first_seq, f.from);
        if !live && !mutated!(RelocateDeadOnArrival) {
            done.dead += 1;
            out.counts.dead_on_arrival += 1;
            continue;
        }
        let at = encode_relocated(out.buf, &f.bytes, out.ctx.group_id);
        out.push(
            &f.stream,
            at,
            IndexChange::Repoint {
                first_seq: f.first_seq,
                from: f.from,
            },
        );
        done.copied += 1;
        done.bytes += f.bytes.len() as u64;
    }
    out.counts.relocated += done.copied;
    out.counts.relocated_bytes += done.bytes;
    done
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
