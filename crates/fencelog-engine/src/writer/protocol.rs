//! What the engine handle sends the writer, and how the writer answers.

use crate::codec::frame_len;
use crate::error::WriteError;
use crate::fence::Refusal;
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

/// One append or fence, checked by the handle (name, limits, the fast path)
/// and waiting for the writer.
pub(crate) struct Request {
    pub stream: Box<str>,
    pub token: u64,
    pub op: Op,
}

pub(crate) enum Op {
    Append {
        records: Vec<Bytes>,
        match_seq_num: Option<u64>,
        reply: oneshot::Sender<Result<Ack, WriteError>>,
    },
    Fence {
        reply: oneshot::Sender<Result<StreamState, WriteError>>,
    },
}

impl Request {
    /// Bytes its frame will take in the group.
    pub(super) fn encoded_len(&self) -> usize {
        match &self.op {
            Op::Append { records, .. } => frame_len(&self.stream, records),
            Op::Fence { .. } => frame_len::<&[u8]>(&self.stream, &[]),
        }
    }

    /// Answers with `err` without deciding anything.
    pub(super) fn refuse(self, err: WriteError) {
        // A caller that gave up (dropped its future) is not an error.
        match self.op {
            Op::Append { reply, .. } => {
                let _ = reply.send(Err(err));
            }
            Op::Fence { reply } => {
                let _ = reply.send(Err(err));
            }
        }
    }
}

/// A request's answer, held until the group is durable.
pub(super) enum Answer {
    Append(
        oneshot::Sender<Result<Ack, WriteError>>,
        Result<Ack, WriteError>,
    ),
    Fence(
        oneshot::Sender<Result<StreamState, WriteError>>,
        Result<StreamState, WriteError>,
    ),
}

impl Answer {
    pub(super) fn send(self) {
        // A caller that gave up (dropped its future) is not an error: the
        // write happened or not regardless of who listens.
        match self {
            Answer::Append(tx, r) => {
                let _ = tx.send(r);
            }
            Answer::Fence(tx, r) => {
                let _ = tx.send(r);
            }
        }
    }

    /// Sends `err` instead of the planned answer.
    pub(super) fn fail(self, err: WriteError) {
        match self {
            Answer::Append(tx, _) => {
                let _ = tx.send(Err(err));
            }
            Answer::Fence(tx, _) => {
                let _ = tx.send(Err(err));
            }
        }
    }
}

/// The error a refusal of the fencing rule is answered with.
pub(super) fn refusal_error(r: Refusal) -> WriteError {
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
        r => unreachable!("the writer plans no write that can be refused with {r:?}"),
    }
}
