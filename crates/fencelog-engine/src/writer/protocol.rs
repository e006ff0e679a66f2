//! What the engine handle (and the reclaimer) send the writer, and how the
//! writer answers.

use crate::codec::{frame_len, StreamConfig, FRAME_HEADER_BYTES};
use crate::error::WriteError;
use crate::fence::Refusal;
use crate::record::Header;
use crate::stream::StreamState;
use bytes::Bytes;
use tokio::sync::oneshot;

/// What a successful append returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// Seq of the batch's first record.
    pub first_seq: u64,
    /// Seq of the batch's last record.
    pub last_seq: u64,
    /// The stream's `next_seq` right after the batch.
    pub next_seq: u64,
    /// The token the batch was accepted with.
    pub fencing_token: u64,
    /// The timestamp every record of the batch carries (Unix ms).
    pub timestamp_ms: u64,
}

/// A message on the writer's queue.
pub(crate) enum Msg {
    Write(Request),
    /// Commit everything queued so far, then stop.
    Shutdown(oneshot::Sender<()>),
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
        /// Empty for a plain append (no allocation, today's bytes); else
        /// one list per record, checked against the limits, at least one
        /// not empty.
        headers: Vec<Vec<Header>>,
        match_seq_num: Option<u64>,
        reply: Reply<Ack>,
    },
    Fence {
        token: u64,
        reply: Reply<StreamState>,
    },
    Trim {
        token: u64,
        trim_seq: u64,
        reply: Reply<StreamState>,
    },
    Seal {
        token: u64,
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
    /// Retention's trim to `first_seq`, made by the reclaimer.
    Retain { first_seq: u64, reply: Reply<()> },
    /// Compaction's copies of live frames, made by the reclaimer.
    Relocate {
        frames: Vec<Relocation>,
        reply: Reply<Relocated>,
    },
}

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
            Op::Append {
                records, headers, ..
            } => records_frame_len(&self.stream, records, headers),
            Op::Relocate { frames, .. } => frames.iter().map(|f| f.bytes.len()).sum(),
            Op::Config { .. } => FRAME_HEADER_BYTES + self.stream.len() + 24,
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
            Op::Relocate { reply, .. } => drop(reply.send(Err(err))),
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
    Unit(Reply<()>, Result<(), WriteError>),
    Relocated(Reply<Relocated>, Result<Relocated, WriteError>),
}

impl Answer {
    pub(super) fn send(self) {
        // A caller that gave up (dropped its future) is not an error: the
        // write happened or not regardless of who listens.
        match self {
            Answer::Append(tx, r) => drop(tx.send(r)),
            Answer::State(tx, r) => drop(tx.send(r)),
            Answer::Unit(tx, r) => drop(tx.send(r)),
            Answer::Relocated(tx, r) => drop(tx.send(r)),
        }
    }

    /// Sends `err` instead of the planned answer.
    pub(super) fn fail(self, err: WriteError) {
        match self {
            Answer::Append(tx, _) => drop(tx.send(Err(err))),
            Answer::State(tx, _) => drop(tx.send(Err(err))),
            Answer::Unit(tx, _) => drop(tx.send(Err(err))),
            Answer::Relocated(tx, _) => drop(tx.send(Err(err))),
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
        r @ (Refusal::ProducerFenced { .. }
        | Refusal::ProducerSeqStale { .. }
        | Refusal::ProducerSeqGap { .. }
        | Refusal::DeadlineExceeded { .. }
        | Refusal::CursorOutOfRange { .. }) => {
            unreachable!("the writer plans no write that can be refused with {r:?} (issue 11)")
        }
    }
}
