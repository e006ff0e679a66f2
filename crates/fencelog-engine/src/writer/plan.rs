//! The planning step, pure: each request of a group, against the pending
//! per-stream state, becomes encoded frames in one buffer, the index
//! changes to publish once they are durable, its answer, and counters
//! ([`super::group`] runs it over a whole group). No locks, no I/O, no
//! clock: the writer looks durable state up through the [`Lookup`] and
//! passes the time in.
//!
//! The fencing rule ([`crate::fence`]) is applied in arrival order against
//! *pending* state: the durable state plus the frames planned so far in the
//! group. So a lower token after an accepted higher one in the same group
//! is refused, `match_seq_num` sees the seqs planned before it, and a copy
//! compaction asked for is dead on arrival if a trim or delete planned
//! before it in the group (or published before the group) killed it.

use super::protocol::{
    records_frame_len, refusal_error, trailer_len, Answer, Op, Relocated, Relocation,
};
use crate::carried::{Carried, ProducerWrite};
use crate::codec::checkpoint::AppliedState;
use crate::codec::{
    encode_frame, encode_frame_with, encode_relocated, len_u32, FrameKind, FrameSpec, PayloadSpec,
    ProducerTrailer, RecordSpec, FLAG_RETENTION,
};
use crate::error::WriteError;
use crate::fence::{self, Change, Effect, FenceState, Refusal};
use crate::op::ProducerSeq;
use bytes::Bytes;
use fencelog_types::{Ack, CursorEntry, FenceBy, FenceEvent, Header, StreamConfig, StreamState};
use std::collections::HashMap;

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
    /// A copy of the stream's durable producers and cursors (empty for a
    /// stream that does not exist). Asked only for producer appends and
    /// cursor commits, so plain appends never copy them.
    fn carried(&mut self, name: &str) -> Carried;
    /// The stream's durable retention settings. Asked only before a
    /// request whose answer shows them (a stream state), so appends never
    /// take the stream's lock for them.
    fn config(&mut self, name: &str) -> StreamConfig;
}

/// A stream's state inside the group: durable state plus what is planned.
pub(super) struct Pending<H> {
    pub fence: FenceState,
    pub last_timestamp_ms: u64,
    /// `None` for a stream that does not exist yet; publishing creates it.
    pub handle: Option<H>,
    /// Fence history entries the group adds, oldest first.
    pub events: Vec<FenceEvent>,
    /// The retention settings: the group's if it set any, else the
    /// durable ones once loaded (`config_loaded`), else the default.
    pub config: StreamConfig,
    pub config_changed: bool,
    pub config_loaded: bool,
    /// The producers and cursors, once a request of the group needed them
    /// (loaded from durable state); published when changed.
    /// Boxed: most groups never load it, and an inline one would make
    /// every pending stream a `memcpy` to move.
    pub carried: Option<Box<Carried>>,
    pub carried_changed: bool,
}

/// A pending stream's state but its handle, to roll a refused batch back.
pub(super) struct Saved {
    fence: FenceState,
    last_timestamp_ms: u64,
    events: usize,
    config: StreamConfig,
    config_changed: bool,
    config_loaded: bool,
}

impl<H> Pending<H> {
    pub(super) fn save(&self) -> Saved {
        Saved {
            fence: self.fence,
            last_timestamp_ms: self.last_timestamp_ms,
            events: self.events.len(),
            config: self.config,
            config_changed: self.config_changed,
            config_loaded: self.config_loaded,
        }
    }

    /// Back to `saved`. Batches change neither producers nor cursors, so
    /// those need no saving.
    pub(super) fn restore(&mut self, saved: Saved) {
        self.fence = saved.fence;
        self.last_timestamp_ms = saved.last_timestamp_ms;
        self.events.truncate(saved.events);
        self.config = saved.config;
        self.config_changed = saved.config_changed;
        self.config_loaded = saved.config_loaded;
    }

    /// Loads the durable retention settings unless the group has set its
    /// own: before a request whose answer is the stream's state.
    pub(super) fn load_config(&mut self, lookup: &mut impl Lookup<H>, name: &str) {
        if !self.config_changed && !self.config_loaded {
            if self.handle.is_some() {
                self.config = lookup.config(name);
            }
            self.config_loaded = true;
        }
    }

    pub(super) fn load_carried(&mut self, lookup: &mut impl Lookup<H>, name: &str) {
        if self.carried.is_none() {
            self.carried = Some(Box::new(if self.handle.is_some() {
                lookup.carried(name)
            } else {
                Carried::default()
            }));
        }
    }

    /// The producers and cursors; loaded before any request that needs
    /// them is planned.
    fn carried(&self) -> &Carried {
        self.carried.as_ref().expect("loaded by plan()")
    }

    fn carried_mut(&mut self) -> &mut Carried {
        self.carried_changed = true;
        self.carried.as_mut().expect("loaded by plan()")
    }

    /// The timestamp a frame planned now gets: the clock, but never below
    /// the stream's last one.
    fn timestamp(&self, now_ms: u64) -> u64 {
        now_ms.max(self.last_timestamp_ms)
    }

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
            config_loaded: false,
            carried: None,
            carried_changed: false,
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

    /// The answer of a state-changing request: the pending state, with
    /// the retention settings loaded before it was planned
    /// ([`Pending::load_config`]). `bytes` is filled in from the published
    /// stream when the answer is sent (the group's end).
    pub(super) fn state(&self, stream: &str, defaults: &Defaults) -> StreamState {
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
#[derive(Debug, Default, Clone, PartialEq, Eq)]
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
    pub duplicates: u64,
    pub evictions: u64,
    pub producer_refusals: u64,
    pub deadline_refusals: u64,
    pub cursors: u64,
    pub batches: u64,
    pub batches_refused: u64,
}

/// A planned group. Its frames are in the buffer passed to [`plan`], the
/// last one flagged last-in-group; its answers in the answers passed.
pub(super) struct Plan<H> {
    /// Every stream the group looked at, in its state after the group.
    pub streams: HashMap<Box<str>, Pending<H>>,
    /// In log order.
    pub frames: Vec<PlannedFrame>,
    pub counts: Counts,
    /// The last Applied marker the group writes (a shard engine's), as
    /// planned: `membership` empty when unchanged.
    pub applied: Option<AppliedState>,
}

/// The group's fixed inputs.
#[derive(Debug, Clone, Copy)]
pub(super) struct Context {
    pub group_id: u64,
    pub now_ms: u64,
    pub defaults: Defaults,
    /// The disk budget, if there is one.
    pub budget: Option<Budget>,
    /// `Config::producers_per_stream_max`.
    pub producers_max: usize,
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
pub(super) struct Out<'a> {
    pub buf: &'a mut Vec<u8>,
    pub frames: &'a mut Vec<PlannedFrame>,
    pub counts: &'a mut Counts,
    pub ctx: Context,
}

impl Out<'_> {
    pub(super) fn spec<'n>(
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

    pub(super) fn push(&mut self, stream: &str, offset_in_buf: usize, index: IndexChange) {
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
            Refusal::ProducerFenced { .. }
            | Refusal::ProducerSeqStale { .. }
            | Refusal::ProducerSeqGap { .. } => self.counts.producer_refusals += 1,
            Refusal::DeadlineExceeded { .. } => self.counts.deadline_refusals += 1,
            _ => {}
        }
    }
}

pub(super) fn pending<'s, H>(
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

/// Whether `op`'s answer (or refusal) shows the stream's state, retention
/// settings included: everything but appends and cursor commits.
pub(super) fn answers_state(op: &Op) -> bool {
    !matches!(op, Op::Append { .. } | Op::Cursor { .. })
}

/// A cursor commit or an append with a producer needs the stream's
/// producers and cursors loaded.
pub(super) fn needs_carried(op: &Op) -> bool {
    match op {
        Op::Cursor { .. } => true,
        Op::Append { extra, .. } => extra.as_ref().is_some_and(|x| x.producer.is_some()),
        _ => false,
    }
}

/// The arguments of one append.
pub(super) struct AppendArgs<'a> {
    pub token: u64,
    pub records: &'a [Bytes],
    /// Empty (a plain batch) or one list per record.
    pub headers: &'a [Vec<Header>],
    pub match_seq_num: Option<u64>,
    pub producer: Option<&'a ProducerSeq>,
    pub not_after_ms: Option<u64>,
}

/// One request for one stream.
#[allow(
    clippy::too_many_lines,
    reason = "one arm per op kind, a table; the writer's hot path takes no extra call per request"
)]
pub(super) fn plan_one<H>(out: &mut Out<'_>, p: &mut Pending<H>, stream: &str, op: Op) -> Answer {
    match op {
        Op::Append {
            token,
            records,
            match_seq_num,
            extra,
            reply,
        } => {
            let x = extra.as_deref();
            let args = AppendArgs {
                token,
                records: &records,
                headers: x.map_or(&[], |x| &x.headers),
                match_seq_num,
                producer: x.and_then(|x| x.producer.as_ref()),
                not_after_ms: x.and_then(|x| x.not_after_ms),
            };
            Answer::Append(reply, plan_append(out, p, stream, args))
        }
        Op::Fence {
            token,
            not_after_ms,
            reply,
        } => {
            let r = fence::check_fence(p.fence, token);
            let by = (token, FenceBy::Fence, not_after_ms);
            Answer::State(reply, plan_state(out, p, stream, r, by))
        }
        Op::Trim {
            token,
            trim_seq,
            not_after_ms,
            reply,
        } => {
            let r = fence::check_trim(p.fence, token, trim_seq);
            let by = (token, FenceBy::Trim, not_after_ms);
            Answer::State(reply, plan_state(out, p, stream, r, by))
        }
        Op::Seal {
            token,
            not_after_ms,
            reply,
        } => {
            let r = fence::check_seal(p.fence, token);
            let by = (token, FenceBy::Seal, not_after_ms);
            Answer::State(reply, plan_state(out, p, stream, r, by))
        }
        Op::Delete { token, reply } => {
            let r = fence::check_delete(p.fence, token);
            let by = (token, FenceBy::Delete, None);
            Answer::State(reply, plan_state(out, p, stream, r, by))
        }
        Op::Config {
            token,
            config,
            reply,
        } => {
            let r =
                fence::check_config(p.fence, token).map(|t| plan_config(out, p, stream, t, config));
            let r = r.map(|()| p.state(stream, &out.ctx.defaults));
            Answer::State(reply, r.map_err(|r| refused(out, p, stream, r)))
        }
        Op::Cursor {
            name,
            token,
            seq,
            reply,
        } => Answer::Cursor(reply, plan_cursor(out, p, stream, &name, token, seq)),
        Op::Retain { first_seq, reply } => {
            let e = fence::check_retention(p.fence, first_seq);
            let token = p.fence.highest_token;
            state_frame(out, p, stream, e, token, FenceBy::Trim);
            Answer::State(reply, Ok(p.state(stream, &out.ctx.defaults)))
        }
        Op::Relocate { .. } | Op::Batch { .. } | Op::Apply { .. } => {
            unreachable!("planned by plan()")
        }
    }
}

/// Counts refusal `r` and makes it the error answered.
fn refused<H>(out: &mut Out<'_>, p: &Pending<H>, stream: &str, r: Refusal) -> WriteError {
    out.count_refusal(&r);
    refusal_error(r, &p.state(stream, &out.ctx.defaults))
}

/// Rule 7 for a write whose frame would be planned now.
fn check_deadline<H>(
    out: &Out<'_>,
    p: &Pending<H>,
    not_after_ms: Option<u64>,
) -> Result<(), Refusal> {
    if mutated!(DeadlineIgnored) {
        return Ok(());
    }
    fence::check_deadline(not_after_ms, p.timestamp(out.ctx.now_ms))
}

/// A fence, trim, seal or delete the rule answered `checked`: the deadline
/// (rule 7, also for a write that changes nothing: its answer is given at
/// the writer's time), then its frame. `(token, by, not_after_ms)`.
pub(super) fn plan_state<H>(
    out: &mut Out<'_>,
    p: &mut Pending<H>,
    stream: &str,
    checked: Result<Effect, Refusal>,
    (token, by, not_after_ms): (u64, FenceBy, Option<u64>),
) -> Result<StreamState, WriteError> {
    let r = checked.and_then(|e| check_deadline(out, p, not_after_ms).map(|()| e));
    match r {
        Ok(e) => {
            state_frame(out, p, stream, e, token, by);
            Ok(p.state(stream, &out.ctx.defaults))
        }
        Err(r) => Err(refused(out, p, stream, r)),
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "check, budget, encode and account in one pass: the writer's hot path, no extra call per append"
)]
pub(super) fn plan_append<H>(
    out: &mut Out<'_>,
    p: &mut Pending<H>,
    stream: &str,
    a: AppendArgs<'_>,
) -> Result<Ack, WriteError> {
    let timestamp_ms = p.timestamp(out.ctx.now_ms);
    let check = a
        .producer
        .map(|pr| p.carried().producer_check(&pr.id, pr.seq));
    let deadline = a
        .not_after_ms
        .filter(|_| !mutated!(DeadlineIgnored))
        .map(|d| (d, timestamp_ms));
    match fence::check_append(p.fence, a.token, a.match_seq_num, check, deadline) {
        Err(r) => return Err(refused(out, p, stream, r)),
        Ok(fence::Verdict::Duplicate) if !mutated!(DuplicateWritten) => {
            out.counts.duplicates += 1;
            let pr = a.producer.expect("only producers have duplicates");
            return Ok(duplicate_ack(p.carried(), &pr.id));
        }
        Ok(_) => {}
    }
    let len = (records_frame_len(stream, a.records, a.headers) + a.producer.map_or(0, trailer_len))
        as u64;
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
    let first_seq = p.fence.next_seq;
    let count = len_u32(a.records.len());
    let offset_in_buf = encode_records(out, stream, &a, first_seq, timestamp_ms);
    // What the index and the live-byte counters account is the frame as
    // written (a deliberate bug may have written less than planned).
    let len = len_u32(out.buf.len() - offset_in_buf);
    if let Some(pr) = a.producer {
        let w = ProducerWrite {
            id: &pr.id,
            seq: pr.seq,
            first_seq,
            count,
            token: a.token,
            timestamp_ms,
            group: out.ctx.group_id,
        };
        let max = out.ctx.producers_max;
        match p.carried_mut().apply_producer(w, max) {
            Ok(evicted) => out.counts.evictions += evicted,
            // Only under the DuplicateWritten mutation.
            Err(r) => debug_assert!(mutated!(DuplicateWritten), "checked above: {r:?}"),
        }
    }
    p.apply(
        Change::Append { count },
        a.token,
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
            len,
        },
    );
    out.counts.appends += 1;
    out.counts.records += count as u64;
    Ok(Ack {
        first_seq,
        last_seq: first_seq + count as u64 - 1,
        next_seq: first_seq + count as u64,
        fencing_token: a.token,
        timestamp_ms,
        duplicate: false,
    })
}

/// The original ack of producer `id`'s last applied append.
fn duplicate_ack(carried: &Carried, id: &str) -> Ack {
    let e = carried
        .producer(id)
        .expect("a duplicate's producer is known");
    Ack {
        first_seq: e.first_seq,
        last_seq: e.last_seq,
        next_seq: e.last_seq + 1,
        fencing_token: e.token,
        timestamp_ms: e.timestamp_ms,
        duplicate: true,
    }
}

/// Encodes an accepted append's records frame: a plain one (exactly
/// version 1's bytes) without a producer or headers, else with the
/// producer trailer and/or flag HEADERS.
fn encode_records(
    out: &mut Out<'_>,
    stream: &str,
    a: &AppendArgs<'_>,
    first_seq: u64,
    timestamp_ms: u64,
) -> usize {
    let spec = out.spec(
        FrameKind::Records,
        0,
        stream,
        first_seq,
        a.token,
        timestamp_ms,
    );
    let headers = if mutated!(HeadersDropped) {
        &[]
    } else {
        a.headers
    };
    if a.producer.is_none() && headers.is_empty() {
        return encode_frame(out.buf, &spec, a.records);
    }
    debug_assert!(headers.is_empty() || headers.len() == a.records.len());
    let pairs: Vec<Vec<(&[u8], &[u8])>> = headers
        .iter()
        .map(|h| h.iter().map(|h| (&h.name[..], &h.value[..])).collect())
        .collect();
    let records: Vec<RecordSpec<'_>> = a
        .records
        .iter()
        .enumerate()
        .map(|(i, body)| RecordSpec {
            headers: pairs.get(i).map_or(&[][..], |h| &h[..]),
            body,
        })
        .collect();
    let payload = PayloadSpec::Records {
        producer: a.producer.map(|pr| ProducerTrailer {
            id: &pr.id,
            seq: pr.seq,
        }),
        records: &records,
    };
    encode_frame_with(out.buf, &spec, &payload)
}

/// A cursor commit: the cursor rule against the pending cursor, then a
/// Cursor frame (first_seq = the cursor's seq).
fn plan_cursor<H>(
    out: &mut Out<'_>,
    p: &mut Pending<H>,
    stream: &str,
    name: &str,
    token: u64,
    seq: u64,
) -> Result<CursorEntry, WriteError> {
    let ts = p.timestamp(out.ctx.now_ms);
    let fence = p.fence;
    let entry = match p.carried_mut().apply_cursor(fence, name, token, seq, ts) {
        Ok(e) => e,
        Err(r) => return Err(refused(out, p, stream, r)),
    };
    let spec = out.spec(FrameKind::Cursor, 0, stream, seq, token, ts);
    let at = encode_frame_with(out.buf, &spec, &PayloadSpec::Cursor(name));
    out.push(stream, at, IndexChange::None);
    out.counts.cursors += 1;
    Ok(entry)
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
    let ts = p.timestamp(out.ctx.now_ms);
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
        // A tombstone keeps only the token: no retention override, no
        // producers, no cursors (publish clears the published ones).
        p.config = StreamConfig::default();
        p.config_changed = true;
        p.carried = Some(Box::default());
        p.carried_changed = true;
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
    let ts = p.timestamp(out.ctx.now_ms);
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
pub(super) fn plan_relocate<H>(
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
