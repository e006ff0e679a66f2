//! [`WriteOp`], the one type a write has from the route that parsed it to
//! the writer's plan, and the one conversion it makes there: into the
//! writer's [`Request`] (the op plus the channel its answer goes back on,
//! an append's rare fields boxed), with the [`PendingWrite`] that waits
//! for that answer.

use super::protocol::{
    records_frame_len, trailer_len, Ack, AppendExtra, AppendOptions, Applied, BatchAck, BatchOp,
    Op, Reply, Request,
};
use crate::codec::checkpoint::CursorEntry;
use crate::codec::{StreamConfig, FRAME_HEADER_BYTES};
use crate::error::WriteError;
use crate::record::Header;
use crate::stream::StreamState;
use bytes::Bytes;
use tokio::sync::oneshot;

/// A write, as every front hands it to the engine: a single node's HTTP
/// routes and append sessions ([`crate::Engine::write`]), and a cluster's
/// Raft entries ([`crate::Engine::apply_entries`]), which carry the op the
/// leader's route made. [`crate::Engine::check_write`] is every check it
/// gets before the writer; apply re-checks only the format's own caps (the
/// same on every node) and the fencing rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    /// An append, like [`crate::Engine::append`].
    Append {
        /// The stream.
        stream: String,
        /// The writer's fencing token.
        token: u64,
        /// The records, 1..=4096.
        records: Vec<Bytes>,
        /// Empty when no record has headers; else one list per record,
        /// as [`crate::Engine::append_records`] takes them.
        headers: Vec<Vec<Header>>,
        /// `match_seq_num`, the idempotent producer and the deadline. In a
        /// Raft entry the deadline is compared with the entry's timestamp
        /// (the leader's, clamped per stream), so every replica decides it
        /// the same.
        options: AppendOptions,
    },
    /// A fence, like [`crate::Engine::fence`].
    Fence {
        /// The stream.
        stream: String,
        /// The new token.
        token: u64,
        /// Refuse the fence if the entry's timestamp is past it.
        not_after_ms: Option<u64>,
    },
    /// A trim, like [`crate::Engine::trim_with`].
    Trim {
        /// The stream.
        stream: String,
        /// The writer's fencing token.
        token: u64,
        /// Records below `min(trim_seq, next_seq)` become unreadable.
        trim_seq: u64,
        /// A deadline, as for a fence.
        not_after_ms: Option<u64>,
    },
    /// A seal, like [`crate::Engine::seal_with`].
    Seal {
        /// The stream.
        stream: String,
        /// The writer's fencing token.
        token: u64,
        /// A deadline, as for a fence.
        not_after_ms: Option<u64>,
    },
    /// A delete, like [`crate::Engine::delete`].
    Delete {
        /// The stream.
        stream: String,
        /// The writer's fencing token.
        token: u64,
    },
    /// New retention settings, like [`crate::Engine::set_config`]
    /// (`token: None` is an operator's change).
    Config {
        /// The stream.
        stream: String,
        /// Fences the change when given.
        token: Option<u64>,
        /// The settings.
        config: StreamConfig,
    },
    /// A cursor commit, like [`crate::Engine::commit_cursor`].
    Cursor {
        /// The stream.
        stream: String,
        /// The cursor's name.
        name: String,
        /// The cursor's own fencing token.
        token: u64,
        /// The seq it moves to.
        seq: u64,
    },
    /// A multi-stream batch, like [`crate::Engine::batch`]: all of it or
    /// none, every stream in this engine (the cluster refuses a batch
    /// across shards before proposing).
    Batch {
        /// 1..=64 ops.
        ops: Vec<BatchOp>,
        /// Shared by every op, compared with the entry's timestamp.
        not_after_ms: Option<u64>,
    },
    /// A retention trim, as a single node's reclaimer makes it: the
    /// stream's front moves to `min(first_seq, next_seq)` under its own
    /// token, if that is forward and the stream is no tombstone. The
    /// shard leader chose `first_seq` from its own clock and applied
    /// state ([`crate::Engine::retention_due`]); apply reads no clock.
    Retain {
        /// The stream.
        stream: String,
        /// The front the leader's retention wants.
        first_seq: u64,
    },
}

impl WriteOp {
    /// The stream the op changes.
    pub fn stream(&self) -> &str {
        match self {
            WriteOp::Append { stream, .. }
            | WriteOp::Fence { stream, .. }
            | WriteOp::Trim { stream, .. }
            | WriteOp::Seal { stream, .. }
            | WriteOp::Delete { stream, .. }
            | WriteOp::Config { stream, .. }
            | WriteOp::Cursor { stream, .. }
            | WriteOp::Retain { stream, .. } => stream,
            // Checked non-empty in apply before anything asks.
            WriteOp::Batch { ops, .. } => ops.first().map_or("", |o| o.stream.as_str()),
        }
    }

    pub(super) fn encoded_len(&self) -> usize {
        match self {
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
            WriteOp::Cursor { stream, name, .. } => {
                FRAME_HEADER_BYTES + stream.len() + 1 + name.len()
            }
            WriteOp::Batch { ops, .. } => ops.iter().map(BatchOp::encoded_len).sum(),
        }
    }
}

impl WriteOp {
    /// The writer's request for this op, and the answer to come. An
    /// append whose header lists are all empty is a plain append, byte
    /// for byte.
    pub(crate) fn into_request(self) -> (Request, PendingWrite) {
        let stream: Box<str> = self.stream().into();
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
