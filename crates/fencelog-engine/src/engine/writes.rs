//! Writes: [`Engine::write`], the one way a write reaches the writer — the
//! checks that cost no writer time (`checks.rs`, with the engine's health
//! and the rejection fast path of `fence.rs` at their place in the order),
//! then the request, answered once it is durable — and the typed calls an
//! embedder makes, each one a [`WriteOp`] through it.

use super::Engine;
use crate::checks;
use crate::error::WriteError;
use crate::fence::{self, Refusal};
use crate::locks;
use crate::op::{AppendOptions, Applied, BatchOp, WriteOp};
use crate::writer::{Msg, PendingWrite, Request};
use bytes::Bytes;
use fencelog_types::{Ack, BatchAck, CursorEntry, StreamConfig, StreamState};
use std::sync::atomic::Ordering;

/// Which of the engine's checks a write gets besides its input's.
#[derive(Clone, Copy)]
struct Prechecks {
    /// The engine is neither poisoned nor shutting down.
    health: bool,
    /// The rejection fast path.
    fast_path: bool,
}

impl Prechecks {
    const ALL: Prechecks = Prechecks {
        health: true,
        fast_path: true,
    };
    const INPUT_AND_STATE: Prechecks = Prechecks {
        health: false,
        fast_path: true,
    };
    const INPUT: Prechecks = Prechecks {
        health: false,
        fast_path: false,
    };
}

impl Engine {
    /// Checks `op` and queues it for the writer. The returned
    /// [`PendingWrite`] answers once the write's group is durable, or with
    /// the reason it was refused; an error here is the answer given at
    /// once (bad input, a stale token on the fast path, a full queue), and
    /// nothing was queued. Queueing never waits, so writes queued one
    /// after another are planned in that order (an append session's).
    pub fn write(&self, op: WriteOp) -> Result<PendingWrite, WriteError> {
        self.prechecks(&op, Prechecks::ALL)?;
        let (request, pending) = op.into_request();
        self.enqueue(request)?;
        Ok(pending)
    }

    /// Every check [`Engine::write`] makes before it queues `op`, but the
    /// engine's own health: names, token 0, the limits, and the fast path
    /// against this engine's durable state. A cluster node asks its shard
    /// engine (whose durable state is what it applied) before it proposes
    /// `op`, so a node refuses what a single node refuses, the same way.
    pub fn check_write(&self, op: &WriteOp) -> Result<(), WriteError> {
        self.prechecks(op, Prechecks::INPUT_AND_STATE)
    }

    /// Only what `op` carries: names, token 0 and the limits, not the
    /// stream's state. A shard leader checks an append session's op so
    /// before it queues it: every op of a session is decided in apply, in
    /// the order sent, a stale one against the state the earlier ones
    /// leave.
    pub fn check_input(&self, op: &WriteOp) -> Result<(), WriteError> {
        self.prechecks(op, Prechecks::INPUT)
    }

    /// Only the fast path of [`Engine::check_write`]: `op` refused if its
    /// token is below the stream's durable highest. A shard leader asks
    /// again before it proposes an op a follower forwarded, against its
    /// own applied state.
    pub fn check_stale(&self, op: &WriteOp) -> Result<(), WriteError> {
        match self.fast_path_token(op) {
            Some(token) => self.fast_path(op.stream(), token),
            None => Ok(()),
        }
    }

    /// `checks::check_write` with the engine's part, as `which` says: its
    /// health, then the fast path.
    fn prechecks(&self, op: &WriteOp, which: Prechecks) -> Result<(), WriteError> {
        let config = &self.shared().config;
        checks::check_write(op, config, |stream, _| {
            if which.health {
                self.writable()?;
            }
            match self.fast_path_token(op) {
                Some(token) if which.fast_path => self.fast_path(stream, token),
                _ => Ok(()),
            }
        })
    }

    /// [`checks::fast_path_token`], and under the `ProducerRefusedEarly`
    /// mutation an idempotent producer's token too.
    fn fast_path_token(&self, op: &WriteOp) -> Option<u64> {
        match op {
            WriteOp::Append { token, .. }
                if mutated_as!(self.inner.mutation, ProducerRefusedEarly) =>
            {
                Some(*token)
            }
            op => checks::fast_path_token(op),
        }
    }

    /// Refuses every write once the engine is poisoned or shutting down.
    fn writable(&self) -> Result<(), WriteError> {
        let shared = self.shared();
        if let Some(f) = shared.poisoned.get() {
            return Err(WriteError::Poisoned(f.clone()));
        }
        if shared.shutting_down.load(Ordering::Acquire) {
            return Err(WriteError::ShuttingDown);
        }
        Ok(())
    }

    /// The rejection fast path: `token` against `stream`'s durable state
    /// by [`fence::check_durable`], at no writer time.
    fn fast_path(&self, stream: &str, token: u64) -> Result<(), WriteError> {
        let shared = self.shared();
        let streams = locks::read(&shared.streams);
        let Some(s) = streams.get(stream) else {
            return Ok(());
        };
        let state = s.fence_state();
        drop(streams);
        let Err(refusal) = fence::check_durable(state, token) else {
            return Ok(());
        };
        shared.metrics.stale_rejections.inc();
        match refusal {
            Refusal::Stale {
                presented,
                highest,
                next_seq,
            } => Err(WriteError::StaleToken {
                presented,
                highest,
                next_seq,
            }),
            other => unreachable!("the fast path refuses only stale tokens, not {other:?}"),
        }
    }

    /// Queues a request for the writer, or refuses it at once when the
    /// queue is full: an overloaded writer answers "later" instead of
    /// letting callers pile up without bound. Nothing of a refused request
    /// was applied.
    pub(crate) fn enqueue(&self, req: Request) -> Result<(), WriteError> {
        use tokio::sync::mpsc::error::TrySendError;
        match self.inner.tx.try_send(Msg::Write(req)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                self.shared().metrics.overload_rejections.inc();
                Err(WriteError::Overloaded {
                    queue_depth_max: self.shared().config.queue_depth_max,
                })
            }
            Err(TrySendError::Closed(_)) => Err(WriteError::ShuttingDown),
        }
    }

    /// [`Engine::write`], waited for.
    pub(super) async fn written(&self, op: WriteOp) -> Result<Applied, WriteError> {
        self.write(op)?.await
    }

    /// Appends a batch atomically. Answers once the batch is durable, or
    /// with the reason it was refused.
    pub async fn append(
        &self,
        stream: &str,
        fencing_token: u64,
        records: Vec<Bytes>,
        match_seq_num: Option<u64>,
    ) -> Result<Ack, WriteError> {
        let options = AppendOptions {
            match_seq_num,
            ..Default::default()
        };
        self.append_with(stream, fencing_token, records, options)
            .await
    }

    /// An append with an idempotent producer and a deadline: see
    /// [`AppendOptions`]. A producer's retry of its last applied append
    /// answers that append's ack with `duplicate` set — checked before the
    /// token, so a writer fenced out since learns its write landed — and
    /// writes nothing.
    pub async fn append_with(
        &self,
        stream: &str,
        fencing_token: u64,
        records: Vec<Bytes>,
        options: AppendOptions,
    ) -> Result<Ack, WriteError> {
        let op = WriteOp::Append {
            stream: stream.into(),
            token: fencing_token,
            records,
            headers: Vec::new(),
            options,
        };
        self.written(op).await.map(Applied::into_ack)
    }

    /// Raises the stream's highest token without writing a record, durably.
    /// Creates the stream if it does not exist, or recreates it from its
    /// tombstone with a token above the tombstone's.
    pub async fn fence(&self, stream: &str, fencing_token: u64) -> Result<StreamState, WriteError> {
        self.fence_with(stream, fencing_token, None).await
    }

    /// A fence accepted only if the writer's timestamp for it is at most
    /// `not_after_ms` (else [`WriteError::DeadlineExceeded`], nothing
    /// changed).
    pub async fn fence_with(
        &self,
        stream: &str,
        fencing_token: u64,
        not_after_ms: Option<u64>,
    ) -> Result<StreamState, WriteError> {
        let op = WriteOp::Fence {
            stream: stream.into(),
            token: fencing_token,
            not_after_ms,
        };
        self.written(op).await.map(Applied::into_state)
    }

    /// Makes the records below `trim_seq` unreadable: `first_seq` becomes
    /// `min(trim_seq, next_seq)` and never moves back (a lower `trim_seq`
    /// changes nothing but may raise the token). Fenced like an append; an
    /// accepted trim raises the highest token to `fencing_token`. Their
    /// space comes back once reclamation deletes or compacts the segments
    /// that held them.
    pub async fn trim(
        &self,
        stream: &str,
        fencing_token: u64,
        trim_seq: u64,
    ) -> Result<StreamState, WriteError> {
        self.trim_with(stream, fencing_token, trim_seq, None).await
    }

    /// A trim with a deadline, as [`Engine::fence_with`].
    pub async fn trim_with(
        &self,
        stream: &str,
        fencing_token: u64,
        trim_seq: u64,
        not_after_ms: Option<u64>,
    ) -> Result<StreamState, WriteError> {
        let op = WriteOp::Trim {
            stream: stream.into(),
            token: fencing_token,
            trim_seq,
            not_after_ms,
        };
        self.written(op).await.map(Applied::into_state)
    }

    /// Seals the stream: from now on every append, fence and trim is
    /// refused with [`WriteError::StreamSealed`], whatever its token; reads
    /// keep working. Sealing a sealed stream again with an accepted token
    /// changes nothing.
    pub async fn seal(&self, stream: &str, fencing_token: u64) -> Result<StreamState, WriteError> {
        self.seal_with(stream, fencing_token, None).await
    }

    /// A seal with a deadline, as [`Engine::fence_with`].
    pub async fn seal_with(
        &self,
        stream: &str,
        fencing_token: u64,
        not_after_ms: Option<u64>,
    ) -> Result<StreamState, WriteError> {
        let op = WriteOp::Seal {
            stream: stream.into(),
            token: fencing_token,
            not_after_ms,
        };
        self.written(op).await.map(Applied::into_state)
    }

    /// Deletes the stream: its records become unreadable and their space is
    /// reclaimed, but a tombstone keeps its highest token forever, so a
    /// later append or fence with that token or a lower one is stale; a
    /// higher one creates the stream afresh at its old `next_seq`.
    pub async fn delete(
        &self,
        stream: &str,
        fencing_token: u64,
    ) -> Result<StreamState, WriteError> {
        let op = WriteOp::Delete {
            stream: stream.into(),
            token: fencing_token,
        };
        self.written(op).await.map(Applied::into_state)
    }

    /// Replaces the stream's retention settings, durably. With a token the
    /// change is fenced (and refused on a sealed stream); without one it is
    /// an operator's and carries the stream's current token.
    pub async fn set_config(
        &self,
        stream: &str,
        fencing_token: Option<u64>,
        config: StreamConfig,
    ) -> Result<StreamState, WriteError> {
        let op = WriteOp::Config {
            stream: stream.into(),
            token: fencing_token,
            config,
        };
        self.written(op).await.map(Applied::into_state)
    }

    /// Commits cursor `name` of `stream` at `seq` with `fencing_token`,
    /// durably. A lower token than the cursor's is stale; the cursor never
    /// moves back except with a strictly higher token (a new owner may
    /// rewind); `seq` may not pass the stream's `next_seq`. The stream's
    /// own token is not touched.
    pub async fn commit_cursor(
        &self,
        stream: &str,
        name: &str,
        fencing_token: u64,
        seq: u64,
    ) -> Result<CursorEntry, WriteError> {
        let op = WriteOp::Cursor {
            stream: stream.into(),
            name: name.into(),
            token: fencing_token,
            seq,
        };
        self.written(op).await.map(Applied::into_cursor)
    }

    /// Applies `ops` — appends and fences on any streams, the same stream
    /// more than once too — atomically and durably as one unit: each is
    /// checked against the state the earlier ones leave, and if any is
    /// refused none is applied ([`WriteError::BatchRefused`] with every
    /// operation's outcome). All of them share `not_after_ms`. Malformed
    /// input is refused before the writer sees it.
    pub async fn batch(
        &self,
        ops: Vec<BatchOp>,
        not_after_ms: Option<u64>,
    ) -> Result<Vec<BatchAck>, WriteError> {
        let op = WriteOp::Batch { ops, not_after_ms };
        self.written(op).await.map(Applied::into_batch)
    }
}
