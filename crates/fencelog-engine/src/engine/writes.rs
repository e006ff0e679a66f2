//! Writes: the checks that cost no writer time (names, limits, and the
//! token against the stream's durable highest token — the rejection fast
//! path), then the request to the writer, whose answer comes once it is
//! durable.

use super::Engine;
use crate::error::WriteError;
use crate::locks;
use crate::name::validate_stream_name;
use crate::record::{header_bytes, validate_headers};
use crate::writer::{AppendExtra, AppendOptions, Msg, Op, Reply, Request};
use bytes::Bytes;
use fencelog_types::{Ack, Header, StreamConfig, StreamState};
use std::sync::atomic::Ordering;
use tokio::sync::oneshot;

impl Engine {
    /// Checks that cost no writer time: the name, the engine's health, and
    /// `token` (if the write carries one) against the stream's durable
    /// highest token. A sealed stream is left to the writer, whose rule
    /// answers `stream_sealed` before it looks at the token.
    pub(crate) fn precheck(&self, stream: &str, token: Option<u64>) -> Result<(), WriteError> {
        validate_stream_name(stream).map_err(WriteError::InvalidStreamName)?;
        if token == Some(0) {
            return Err(WriteError::ZeroToken);
        }
        let shared = self.shared();
        if let Some(f) = shared.poisoned.get() {
            return Err(WriteError::Poisoned(f.clone()));
        }
        if shared.shutting_down.load(Ordering::Acquire) {
            return Err(WriteError::ShuttingDown);
        }
        let Some(token) = token else {
            return Ok(());
        };
        let streams = locks::read(&shared.streams);
        if let Some(s) = streams.get(stream) {
            let highest = s.highest_token();
            if token < highest && !s.is_sealed() {
                let next_seq = s.next_seq();
                drop(streams);
                shared.metrics.stale_rejections.inc();
                return Err(WriteError::StaleToken {
                    presented: token,
                    highest,
                    next_seq,
                });
            }
        }
        Ok(())
    }

    /// The batch against the record and byte limits; `header_bytes` are
    /// the names and values of its headers, which count like body bytes.
    pub(super) fn check_batch(
        &self,
        records: &[Bytes],
        header_bytes: usize,
    ) -> Result<(), WriteError> {
        let c = &self.shared().config;
        if records.is_empty() {
            return Err(WriteError::EmptyBatch);
        }
        if records.len() > c.batch_records_max {
            return Err(WriteError::TooLarge {
                what: "records in the batch",
                limit: c.batch_records_max as u64,
                actual: records.len() as u64,
            });
        }
        let bytes: usize = records.iter().map(|r| r.len()).sum::<usize>() + header_bytes;
        if bytes > c.batch_bytes_max {
            return Err(WriteError::TooLarge {
                what: "bytes in the batch",
                limit: c.batch_bytes_max as u64,
                actual: bytes as u64,
            });
        }
        Ok(())
    }

    /// Queues a request for the writer, or refuses it at once when the
    /// queue is full: an overloaded writer answers "later" instead of
    /// letting callers pile up without bound. Nothing of a refused request
    /// was applied.
    pub(crate) async fn submit(&self, req: Request) -> Result<(), WriteError> {
        self.enqueue(req)
    }

    /// [`Engine::submit`] without the `async`: queueing never waits, so a
    /// caller can queue requests one after another in a known order.
    fn enqueue(&self, req: Request) -> Result<(), WriteError> {
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

    /// Sends `op` (made with its reply channel) for `stream` and waits for
    /// the answer.
    pub(super) async fn request<T>(
        &self,
        stream: &str,
        op: impl FnOnce(Reply<T>) -> Op,
    ) -> Result<T, WriteError> {
        let (reply, rx) = oneshot::channel();
        self.submit(Request {
            stream: stream.into(),
            op: op(reply),
        })
        .await?;
        rx.await.map_err(|_| WriteError::ShuttingDown)?
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
        let op = self.prepare_append(stream, fencing_token, records, Vec::new(), options)?;
        self.request(stream, op).await
    }

    /// An append with an idempotent producer and a deadline (issue 11):
    /// see [`AppendOptions`]. A producer's retry of its last applied
    /// append answers that append's ack with `duplicate` set — checked
    /// before the token, so a writer fenced out since learns its write
    /// landed — and writes nothing.
    pub async fn append_with(
        &self,
        stream: &str,
        fencing_token: u64,
        records: Vec<Bytes>,
        options: AppendOptions,
    ) -> Result<Ack, WriteError> {
        let op = self.prepare_append(stream, fencing_token, records, Vec::new(), options)?;
        self.request(stream, op).await
    }

    /// [`Engine::append_with`] in two halves, for a pipelined append
    /// session: the same checks and the same request, queued for the
    /// writer now — so appends queued one after another are planned in
    /// that order — and answered by the returned [`PendingAppend`] once
    /// the writer has made the append durable (or refused it). An error
    /// here is the answer the plain append would have given at once
    /// (a stale token on the fast path, a bad name, a full queue).
    pub fn queue_append(
        &self,
        stream: &str,
        fencing_token: u64,
        records: Vec<Bytes>,
        options: AppendOptions,
    ) -> Result<PendingAppend, WriteError> {
        let op = self.prepare_append(stream, fencing_token, records, Vec::new(), options)?;
        let (reply, rx) = oneshot::channel();
        self.enqueue(Request {
            stream: stream.into(),
            op: op(reply),
        })?;
        Ok(PendingAppend(rx))
    }

    /// [`Engine::append_with`] with record headers (`headers` is empty
    /// for none, or one list per record).
    pub(crate) async fn append_checked(
        &self,
        stream: &str,
        fencing_token: u64,
        records: Vec<Bytes>,
        headers: Vec<Vec<Header>>,
        options: AppendOptions,
    ) -> Result<Ack, WriteError> {
        let op = self.prepare_append(stream, fencing_token, records, headers, options)?;
        self.request(stream, op).await
    }

    /// Every append's checks before anything is queued — the name, token
    /// and producer, then the headers and the batch limits — and the
    /// request they make. Synchronous and shared, so each public append is
    /// one future around [`Engine::request`] (un-nesting them measured
    /// within noise under callgrind; the saving was the boxed fields).
    fn prepare_append(
        &self,
        stream: &str,
        fencing_token: u64,
        records: Vec<Bytes>,
        headers: Vec<Vec<Header>>,
        options: AppendOptions,
    ) -> Result<impl FnOnce(Reply<Ack>) -> Op, WriteError> {
        match &options.producer {
            // A duplicate is answered whatever the token: no fast path.
            Some(p) => {
                validate_short_name("producer_id", &p.id)?;
                if fencing_token == 0 {
                    return Err(WriteError::ZeroToken);
                }
                self.precheck(stream, None)?;
            }
            None => self.precheck(stream, Some(fencing_token))?,
        }
        debug_assert!(headers.is_empty() || headers.len() == records.len());
        for (record, h) in headers.iter().enumerate() {
            validate_headers(h).map_err(|error| WriteError::BadHeaders { record, error })?;
        }
        let header_bytes = headers.iter().map(|h| header_bytes(h)).sum();
        self.check_batch(&records, header_bytes)?;
        let match_seq_num = options.match_seq_num;
        let extra = AppendExtra::boxed(headers, options.producer, options.not_after_ms);
        Ok(move |reply| Op::Append {
            token: fencing_token,
            records,
            match_seq_num,
            extra,
            reply,
        })
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
        self.precheck(stream, Some(fencing_token))?;
        self.request(stream, |reply| Op::Fence {
            token: fencing_token,
            not_after_ms,
            reply,
        })
        .await
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
        self.precheck(stream, Some(fencing_token))?;
        self.request(stream, |reply| Op::Trim {
            token: fencing_token,
            trim_seq,
            not_after_ms,
            reply,
        })
        .await
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
        self.precheck(stream, Some(fencing_token))?;
        self.request(stream, |reply| Op::Seal {
            token: fencing_token,
            not_after_ms,
            reply,
        })
        .await
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
        self.precheck(stream, Some(fencing_token))?;
        self.request(stream, |reply| Op::Delete {
            token: fencing_token,
            reply,
        })
        .await
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
        self.precheck(stream, fencing_token)?;
        validate_stream_config(&config)?;
        self.request(stream, |reply| Op::Config {
            token: fencing_token,
            config,
            reply,
        })
        .await
    }
}

/// The ranges a stream's retention settings must be in (also checked in
/// a shard engine's apply, issue 14: the same on every node).
pub fn validate_stream_config(config: &StreamConfig) -> Result<(), WriteError> {
    let limit = crate::config::RETENTION_AGE_S_LIMIT;
    if let Some(age) = config.retention_age_s.effective(None) {
        if age == 0 || age > limit {
            return Err(WriteError::BadConfig(format!(
                "retention_age_s must be in 1..={limit}, got {age}"
            )));
        }
    }
    if config.retention_bytes.effective(None) == Some(0) {
        return Err(WriteError::BadConfig(
            "retention_bytes must be at least 1".into(),
        ));
    }
    Ok(())
}

/// Producer ids and cursor names: 1..=64 bytes of `[A-Za-z0-9._:-]`.
pub fn validate_short_name(what: &str, name: &str) -> Result<(), WriteError> {
    crate::codec::check_short_name(name.as_bytes(), crate::codec::PRODUCER_ID_BYTES_MAX)
        .map_err(|e| WriteError::BadInput(format!("{what} {name:?}: {e}")))
}

/// The answer to come of an append queued by [`Engine::queue_append`]:
/// the writer sends it after the append's group is durable (or with the
/// reason it was refused), exactly what [`Engine::append_with`] returns.
#[derive(Debug)]
pub struct PendingAppend(oneshot::Receiver<Result<Ack, WriteError>>);

impl PendingAppend {
    /// The answer if the writer has sent it, without waiting.
    pub fn try_answer(&mut self) -> Option<Result<Ack, WriteError>> {
        use tokio::sync::oneshot::error::TryRecvError;
        match self.0.try_recv() {
            Ok(answer) => Some(answer),
            Err(TryRecvError::Empty) => None,
            // The writer drops a reply only when it stops.
            Err(TryRecvError::Closed) => Some(Err(WriteError::ShuttingDown)),
        }
    }

    /// Waits for the answer.
    pub async fn answer(&mut self) -> Result<Ack, WriteError> {
        (&mut self.0).await.map_err(|_| WriteError::ShuttingDown)?
    }
}
