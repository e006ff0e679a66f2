//! The one conversion a [`WriteOp`] makes on its way from a front to the
//! writer's plan: into the writer's [`Request`] (the op plus the channel
//! its answer goes back on, an append's rare fields boxed), with the
//! [`PendingWrite`] that waits for that answer. A Raft entry's apply makes
//! the same request ([`super::apply`]).

use super::protocol::{AppendExtra, Op, Reply, Request};
use crate::error::WriteError;
use crate::op::{Applied, WriteOp};
use fencelog_types::{Ack, BatchAck, CursorEntry, StreamState};
use tokio::sync::oneshot;

impl WriteOp {
    /// The writer's request for this op, and the answer to come. An
    /// append whose header lists are all empty is a plain append, byte
    /// for byte.
    pub(crate) fn into_request(mut self) -> (Request, PendingWrite) {
        // The op's own name, moved (a batch's: its first stream's, copied).
        let stream = match self.stream_mut() {
            Some(name) => std::mem::take(name).into_boxed_str(),
            None => self.stream().into(),
        };
        let (op, pending) = match self {
            WriteOp::Append {
                token,
                records,
                headers,
                options,
                ..
            } => {
                let headers = if headers.iter().all(Vec::is_empty) {
                    Vec::new()
                } else {
                    headers
                };
                let (reply, rx) = oneshot::channel();
                let extra = AppendExtra::boxed(headers, options.producer, options.not_after_ms);
                let op = Op::Append {
                    token,
                    records,
                    match_seq_num: options.match_seq_num,
                    extra,
                    reply,
                };
                (op, PendingWrite::Ack(rx))
            }
            WriteOp::Cursor {
                name, token, seq, ..
            } => {
                let (reply, rx) = oneshot::channel();
                let name = name.into_boxed_str();
                let op = Op::Cursor {
                    name,
                    token,
                    seq,
                    reply,
                };
                (op, PendingWrite::Cursor(rx))
            }
            WriteOp::Batch { ops, not_after_ms } => {
                let (reply, rx) = oneshot::channel();
                let op = Op::Batch {
                    ops,
                    not_after_ms,
                    reply,
                };
                (op, PendingWrite::Batch(rx))
            }
            changes_state => state_request(changes_state),
        };
        (Request { stream, op }, pending)
    }
}

/// The request of a fence, trim, seal, delete, config or retention trim:
/// each answers the stream's state.
fn state_request(op: WriteOp) -> (Op, PendingWrite) {
    let (reply, rx): (Reply<StreamState>, _) = oneshot::channel();
    let op = match op {
        WriteOp::Fence {
            token,
            not_after_ms,
            ..
        } => Op::Fence {
            token,
            not_after_ms,
            reply,
        },
        WriteOp::Trim {
            token,
            trim_seq,
            not_after_ms,
            ..
        } => Op::Trim {
            token,
            trim_seq,
            not_after_ms,
            reply,
        },
        WriteOp::Seal {
            token,
            not_after_ms,
            ..
        } => Op::Seal {
            token,
            not_after_ms,
            reply,
        },
        WriteOp::Delete { token, .. } => Op::Delete { token, reply },
        WriteOp::Config { token, config, .. } => Op::Config {
            token,
            config,
            reply,
        },
        WriteOp::Retain { first_seq, .. } => Op::Retain { first_seq, reply },
        other => unreachable!("{other:?} does not answer a state"),
    };
    (op, PendingWrite::State(rx))
}

/// The answer to come of a write queued by [`crate::Engine::write`]: the
/// writer sends it once the write's group is durable, or with the reason
/// it was refused.
#[derive(Debug)]
pub enum PendingWrite {
    /// An append's ack.
    Ack(oneshot::Receiver<Result<Ack, WriteError>>),
    /// A fence's, trim's, seal's, delete's, config's or retention trim's:
    /// the stream's state after it.
    State(oneshot::Receiver<Result<StreamState, WriteError>>),
    /// A cursor commit's cursor.
    Cursor(oneshot::Receiver<Result<CursorEntry, WriteError>>),
    /// A batch's acks.
    Batch(oneshot::Receiver<Result<Vec<BatchAck>, WriteError>>),
}

impl PendingWrite {
    /// The answer if the writer has sent it, without waiting.
    pub fn try_answer(&mut self) -> Option<Result<Applied, WriteError>> {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};
        let mut cx = Context::from_waker(Waker::noop());
        match std::pin::Pin::new(self).poll(&mut cx) {
            Poll::Ready(answer) => Some(answer),
            Poll::Pending => None,
        }
    }

    /// Waits for the answer.
    pub async fn answer(&mut self) -> Result<Applied, WriteError> {
        self.await
    }
}

impl std::future::Future for PendingWrite {
    type Output = Result<Applied, WriteError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        fn ready<T>(
            r: Poll<Result<Result<T, WriteError>, oneshot::error::RecvError>>,
            f: fn(T) -> Applied,
        ) -> Poll<Result<Applied, WriteError>> {
            // The writer drops a reply only when it stops.
            r.map(|r| r.map_err(|_| WriteError::ShuttingDown)?.map(f))
        }
        let state = |s: StreamState| Applied::State(s);
        match self.get_mut() {
            PendingWrite::Ack(rx) => ready(std::pin::Pin::new(rx).poll(cx), Applied::Appended),
            PendingWrite::State(rx) => ready(std::pin::Pin::new(rx).poll(cx), state),
            PendingWrite::Cursor(rx) => ready(std::pin::Pin::new(rx).poll(cx), Applied::Cursor),
            PendingWrite::Batch(rx) => ready(std::pin::Pin::new(rx).poll(cx), Applied::Batch),
        }
    }
}
