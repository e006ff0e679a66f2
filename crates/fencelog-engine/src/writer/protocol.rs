//! What the engine handle (and the reclaimer) send the writer, and how the
//! writer answers.

use crate::codec::checkpoint::AppliedState;
use crate::codec::{frame_len, APPLIED_FIXED_BYTES, FRAME_HEADER_BYTES};
use crate::error::WriteError;
use crate::fence::Refusal;
use crate::op::{Applied, BatchAction, BatchOp, ProducerSeq, WriteOp};
use bytes::Bytes;
use fencelog_types::{Ack, BatchAck, CursorEntry, Header, StreamConfig, StreamState};
use tokio::sync::oneshot;

/// A message on the writer's queue.
pub(crate) enum Msg {
    Write(Request),
    /// Commit everything queued so far, then stop.
    Shutdown(oneshot::Sender<()>),
    /// Make every group written so far durable, then answer
    /// ([`crate::config::Durability::OnFlush`]; in the other mode every
    /// group already is).
    Flush(Reply<()>),
}

pub(crate) type Reply<T> = oneshot::Sender<Result<T, WriteError>>;

/// One write, checked by the handle (name, limits, the fast path) or made
/// by the reclaimer, waiting for the writer.
pub(crate) struct Request {
    /// The stream it changes (unused by [`Op::Relocate`], which names a
    /// stream per frame).
    pub stream: Box<str>,
    pub op: Op,
}

pub(crate) enum Op {
    Append {
        token: u64,
        records: Vec<Bytes>,
        match_seq_num: Option<u64>,
        /// `None` for a plain append: headers, a producer and a deadline
        /// are rare, and boxing them keeps every request small (see
        /// [`REQUEST_BYTES_MAX`]).
        extra: Option<Box<AppendExtra>>,
        reply: Reply<Ack>,
    },
    Fence {
        token: u64,
        not_after_ms: Option<u64>,
        reply: Reply<StreamState>,
    },
    Trim {
        token: u64,
        trim_seq: u64,
        not_after_ms: Option<u64>,
        reply: Reply<StreamState>,
    },
    Seal {
        token: u64,
        not_after_ms: Option<u64>,
        reply: Reply<StreamState>,
    },
    Delete {
        token: u64,
        reply: Reply<StreamState>,
    },
    /// `token: None` is an operator's change (no fencing).
    Config {
        token: Option<u64>,
        config: StreamConfig,
        reply: Reply<StreamState>,
    },
    /// A fenced cursor commit.
    Cursor {
        name: Box<str>,
        token: u64,
        seq: u64,
        reply: Reply<CursorEntry>,
    },
    /// A multi-stream batch: all of it in this group, or none of it.
    Batch {
        ops: Vec<BatchOp>,
        not_after_ms: Option<u64>,
        reply: Reply<Vec<BatchAck>>,
    },
    /// Retention's trim to `first_seq`, made by the reclaimer.
    Retain {
        first_seq: u64,
        reply: Reply<StreamState>,
    },
    /// Compaction's copies of live frames, made by the reclaimer.
    Relocate {
        frames: Vec<Relocation>,
        reply: Reply<Relocated>,
    },
    /// One committed Raft entry of a shard engine (cluster mode): its ops, in
    /// order, at the leader's timestamp, then its Applied marker, all in
    /// the same group.
    Apply {
        /// Boxed: a request stays within [`REQUEST_BYTES_MAX`].
        entry: Box<ApplyEntry>,
        reply: Reply<Vec<Result<Applied, WriteError>>>,
    },
}

/// A committed Raft entry as the writer applies it.
pub(crate) struct ApplyEntry {
    /// The leader's clock when it proposed; apply never reads a clock.
    pub ts_ms: u64,
    pub ops: Vec<WriteOp>,
    /// The entry's LogId; `membership` empty when unchanged.
    pub mark: AppliedState,
}

/// What an append carries besides its token, records and
/// `match_seq_num`; at least one field is set (else it is `None` in
/// [`Op::Append`]).
pub(crate) struct AppendExtra {
    /// Empty, or one list per record, checked against the limits, at least
    /// one not empty.
    pub headers: Vec<Vec<Header>>,
    pub producer: Option<ProducerSeq>,
    pub not_after_ms: Option<u64>,
}

impl AppendExtra {
    /// `None` when the append carries none of it: a plain append allocates
    /// nothing for headers, a producer or a deadline.
    pub(crate) fn boxed(
        headers: Vec<Vec<Header>>,
        producer: Option<ProducerSeq>,
        not_after_ms: Option<u64>,
    ) -> Option<Box<AppendExtra>> {
        if headers.is_empty() && producer.is_none() && not_after_ms.is_none() {
            return None;
        }
        Some(Box::new(AppendExtra {
            headers,
            producer,
            not_after_ms,
        }))
    }
}

/// Upper bound on a request's size. Every request is moved by value
/// through the queue, the collector and the planner; past 128 bytes those
/// moves compile to `memcpy` calls, which cost a plain append ~8% more
/// instructions when the producer and deadline fields sat inline
/// (callgrind, 9.0k → 9.9k instructions per append). Rare fields go
/// behind a box instead.
pub(crate) const REQUEST_BYTES_MAX: usize = 96;
const _: () = assert!(std::mem::size_of::<Request>() <= REQUEST_BYTES_MAX);

/// One records frame compaction wants copied forward.
pub(crate) struct Relocation {
    pub stream: Box<str>,
    /// The whole frame, its CRC verified by the reclaimer.
    pub bytes: Bytes,
    pub first_seq: u64,
    pub count: u32,
    /// Where the copy the index points at now lives: (segment, offset).
    pub from: (u64, u64),
}

/// What one relocation request did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Relocated {
    /// Frames copied and repointed.
    pub copied: u64,
    /// Frame bytes copied.
    pub bytes: u64,
    /// Frames that were no longer live when the writer got to them (trimmed
    /// or deleted since the reclaimer chose them): not copied.
    pub dead: u64,
}

impl Request {
    /// Bytes its frames will take in the group.
    pub(super) fn encoded_len(&self) -> usize {
        match &self.op {
            Op::Append { records, extra, .. } => match extra.as_deref() {
                None => frame_len(&self.stream, records),
                Some(x) => {
                    records_frame_len(&self.stream, records, &x.headers)
                        + x.producer.as_ref().map_or(0, trailer_len)
                }
            },
            Op::Batch { ops, .. } => ops.iter().map(BatchOp::encoded_len).sum(),
            Op::Cursor { name, .. } => FRAME_HEADER_BYTES + self.stream.len() + 1 + name.len(),
            Op::Relocate { frames, .. } => frames.iter().map(|f| f.bytes.len()).sum(),
            Op::Config { .. } => FRAME_HEADER_BYTES + self.stream.len() + 24,
            Op::Apply { entry, .. } => {
                let marker = FRAME_HEADER_BYTES + APPLIED_FIXED_BYTES + entry.mark.membership.len();
                entry.ops.iter().map(op_len).sum::<usize>() + marker
            }
            _ => FRAME_HEADER_BYTES + self.stream.len(),
        }
    }

    /// Answers with `err` without deciding anything.
    pub(super) fn refuse(self, err: WriteError) {
        // A caller that gave up (dropped its future) is not an error.
        match self.op {
            Op::Append { reply, .. } => drop(reply.send(Err(err))),
            Op::Fence { reply, .. }
            | Op::Trim { reply, .. }
            | Op::Seal { reply, .. }
            | Op::Delete { reply, .. }
            | Op::Config { reply, .. } => drop(reply.send(Err(err))),
            Op::Retain { reply, .. } => drop(reply.send(Err(err))),
            Op::Cursor { reply, .. } => drop(reply.send(Err(err))),
            Op::Batch { reply, .. } => drop(reply.send(Err(err))),
            Op::Relocate { reply, .. } => drop(reply.send(Err(err))),
            Op::Apply { reply, .. } => drop(reply.send(Err(err))),
        }
    }
}

/// Bytes an op's frames will take in a group.
pub(super) fn op_len(op: &WriteOp) -> usize {
    match op {
        WriteOp::Append {
            stream,
            records,
            headers,
            options,
            ..
        } => {
            records_frame_len(stream, records, headers)
                + options.producer.as_ref().map_or(0, trailer_len)
        }
        WriteOp::Fence { stream, .. }
        | WriteOp::Trim { stream, .. }
        | WriteOp::Seal { stream, .. }
        | WriteOp::Delete { stream, .. }
        | WriteOp::Retain { stream, .. } => FRAME_HEADER_BYTES + stream.len(),
        WriteOp::Config { stream, .. } => FRAME_HEADER_BYTES + stream.len() + 24,
        WriteOp::Cursor { stream, name, .. } => FRAME_HEADER_BYTES + stream.len() + 1 + name.len(),
        WriteOp::Batch { ops, .. } => ops.iter().map(BatchOp::encoded_len).sum(),
    }
}

/// Bytes a producer trailer adds to a records frame.
pub(super) fn trailer_len(p: &ProducerSeq) -> usize {
    1 + p.id.len() + 8
}

impl BatchOp {
    pub(super) fn encoded_len(&self) -> usize {
        match &self.action {
            BatchAction::Append { records, .. } => frame_len(&self.stream, records),
            BatchAction::Fence => FRAME_HEADER_BYTES + self.stream.len(),
        }
    }
}

/// Bytes of the records frame of an append: [`frame_len`] without
/// headers; with them, each record's header count and (length, bytes) per
/// name and value on top (`docs/design.md`, "Payloads").
pub(super) fn records_frame_len(stream: &str, records: &[Bytes], headers: &[Vec<Header>]) -> usize {
    let extra: usize = headers
        .iter()
        .map(|h| {
            2 + h
                .iter()
                .map(|h| 6 + h.name.len() + h.value.len())
                .sum::<usize>()
        })
        .sum();
    frame_len(stream, records) + extra
}

/// A request's answer, held until the group is durable.
pub(super) enum Answer {
    Append(Reply<Ack>, Result<Ack, WriteError>),
    /// A stream state; `bytes` is filled in from the published stream when
    /// it is sent.
    State(Reply<StreamState>, Result<StreamState, WriteError>),
    Relocated(Reply<Relocated>, Result<Relocated, WriteError>),
    Applied(
        Reply<Vec<Result<Applied, WriteError>>>,
        Result<Vec<Result<Applied, WriteError>>, WriteError>,
    ),
    Cursor(Reply<CursorEntry>, Result<CursorEntry, WriteError>),
    Batch(Reply<Vec<BatchAck>>, Result<Vec<BatchAck>, WriteError>),
}

impl Answer {
    pub(super) fn send(self) {
        // A caller that gave up (dropped its future) is not an error: the
        // write happened or not regardless of who listens.
        match self {
            Answer::Append(tx, r) => drop(tx.send(r)),
            Answer::State(tx, r) => drop(tx.send(r)),
            Answer::Relocated(tx, r) => drop(tx.send(r)),
            Answer::Applied(tx, r) => drop(tx.send(r)),
            Answer::Cursor(tx, r) => drop(tx.send(r)),
            Answer::Batch(tx, r) => drop(tx.send(r)),
        }
    }

    /// Sends `err` instead of the planned answer.
    pub(super) fn fail(self, err: WriteError) {
        match self {
            Answer::Append(tx, _) => drop(tx.send(Err(err))),
            Answer::State(tx, _) => drop(tx.send(Err(err))),
            Answer::Relocated(tx, _) => drop(tx.send(Err(err))),
            Answer::Applied(tx, _) => drop(tx.send(Err(err))),
            Answer::Cursor(tx, _) => drop(tx.send(Err(err))),
            Answer::Batch(tx, _) => drop(tx.send(Err(err))),
        }
    }
}

/// The error a refusal of the fencing rule is answered with; `state` is
/// the stream's pending state (for `stream_sealed`).
pub(super) fn refusal_error(r: Refusal, state: &StreamState) -> WriteError {
    match r {
        Refusal::ZeroToken => WriteError::ZeroToken,
        Refusal::Stale {
            presented,
            highest,
            next_seq,
        } => WriteError::StaleToken {
            presented,
            highest,
            next_seq,
        },
        Refusal::SeqMismatch { expected, next_seq } => {
            WriteError::SeqMismatch { expected, next_seq }
        }
        Refusal::Sealed => WriteError::StreamSealed(Box::new(state.clone())),
        Refusal::NotFound => WriteError::NotFound,
        Refusal::ProducerFenced { floor } => WriteError::ProducerFenced { floor },
        Refusal::ProducerSeqStale { last } => WriteError::ProducerSeqStale { last },
        Refusal::ProducerSeqGap { expected } => WriteError::ProducerSeqGap { expected },
        Refusal::DeadlineExceeded { writer_ms } => WriteError::DeadlineExceeded { writer_ms },
        Refusal::CursorOutOfRange { seq, next_seq } => {
            WriteError::CursorOutOfRange { seq, next_seq }
        }
    }
}
