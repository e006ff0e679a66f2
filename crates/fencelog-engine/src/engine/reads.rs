//! Reads of published (durable) state: stream states, listing, records,
//! the fence history, and waiting for a stream to grow.

use super::{Engine, WaiterGuard};
use crate::error::ReadError;
use crate::locks;
use crate::name::validate_stream_name;
use crate::reader::{self, ReadBatch};
use crate::seek;
use crate::stream::StreamShared;
use fencelog_types::{FenceEvent, ProducerEntry, StreamState};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

impl Engine {
    /// The stream's durable state. A tombstone is answered too (`deleted`
    /// set, no records); a name nobody wrote is [`ReadError::NotFound`].
    pub fn state(&self, stream: &str) -> Result<StreamState, ReadError> {
        validate_stream_name(stream).map_err(ReadError::InvalidStreamName)?;
        self.shared()
            .stream(stream)
            .map(|s| s.snapshot(stream, &self.shared().config))
            .ok_or(ReadError::NotFound)
    }

    /// The stream's highest accepted (durable) token, 0 for a stream that
    /// does not exist or a name that is not valid: [`Engine::state`]'s
    /// `highest_token` without the snapshot, for callers on the write path
    /// that only compare tokens.
    pub fn highest_token(&self, stream: &str) -> u64 {
        locks::read(&self.shared().streams)
            .get(stream)
            .map_or(0, |s| s.highest_token())
    }

    /// Whether an append of these arguments would write records if it
    /// were planned now: the fencing rule (`fence.rs`) against the durable
    /// state, its deadline aside. `false` when the rule refuses it or
    /// answers it as its producer's duplicate. A cluster shard's leader
    /// asks before it refuses an append for its disk budget, since the
    /// single node's plan checks the budget after the rule: a stale token
    /// or a producer's retry is answered as such, not 507.
    pub fn append_would_write(
        &self,
        stream: &str,
        token: u64,
        match_seq_num: Option<u64>,
        producer: Option<(&str, u64)>,
    ) -> bool {
        let none = crate::carried::Carried::default();
        let streams = locks::read(&self.shared().streams);
        let (fence, check) = match streams.get(stream) {
            Some(s) => {
                let inner = locks::lock(&s.inner);
                let carried = inner.carried().unwrap_or(&none);
                let check = producer.map(|(id, seq)| carried.producer_check(id, seq));
                (s.fence_state(), check)
            }
            None => {
                let check = producer.map(|(id, seq)| none.producer_check(id, seq));
                (crate::fence::FenceState::default(), check)
            }
        };
        let verdict = crate::fence::check_append(fence, token, match_seq_num, check, None);
        verdict == Ok(crate::fence::Verdict::Apply)
    }

    /// Streams whose names start with `prefix`, in name order, starting
    /// after `start_after` (for pagination), at most `limit` of them.
    /// Tombstones are not listed.
    pub fn list_streams(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Vec<StreamState> {
        let streams = locks::read(&self.shared().streams);
        let lower = match start_after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        streams
            .range::<str, _>((lower, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(_, s)| !s.is_deleted())
            .take(limit)
            .map(|(k, s)| s.snapshot(k, &self.shared().config))
            .collect()
    }

    /// Reads durable records from `start_seq`: at most `max_records`, and at
    /// most `max_bytes` of bodies and header names and values, except that
    /// the first record is always returned whole so a reader can make
    /// progress. Below the stream's
    /// `first_seq` (trimmed) or past its `next_seq` is
    /// [`ReadError::OutOfRange`]; a tombstone is [`ReadError::NotFound`].
    pub fn read(
        &self,
        stream: &str,
        start_seq: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<ReadBatch, ReadError> {
        reader::read(
            self.shared(),
            stream,
            start_seq,
            max_records,
            max_bytes,
            None,
        )
    }

    /// [`Engine::read`] that stops before the first record whose timestamp
    /// is at or after `until_timestamp_ms` (the first record is not exempt:
    /// a read that starts there returns nothing).
    pub fn read_until(
        &self,
        stream: &str,
        start_seq: u64,
        max_records: usize,
        max_bytes: usize,
        until_timestamp_ms: u64,
    ) -> Result<ReadBatch, ReadError> {
        reader::read(
            self.shared(),
            stream,
            start_seq,
            max_records,
            max_bytes,
            Some(until_timestamp_ms),
        )
    }

    /// The seq of the first durable record whose timestamp is at or after
    /// `timestamp_ms`, or the stream's `next_seq` when there is none (so a
    /// read from it returns what arrives next). Trimmed records are not
    /// searched; a tombstone is [`ReadError::NotFound`]. Timestamps never
    /// decrease within a stream, so this is a binary search: at most
    /// `⌈log2(n + 1)⌉` checksum-verified frame reads for `n` records.
    pub fn seq_at_timestamp(&self, stream: &str, timestamp_ms: u64) -> Result<u64, ReadError> {
        seek::seq_at_timestamp(self.shared(), stream, timestamp_ms)
    }

    /// The tokens that took effect on the stream, oldest first: up to the
    /// last 64, each with the stream's `next_seq` when it did, its time and
    /// what carried it. Kept across restarts and reclamation.
    pub fn fence_history(&self, stream: &str) -> Result<Vec<FenceEvent>, ReadError> {
        validate_stream_name(stream).map_err(ReadError::InvalidStreamName)?;
        let s = self.shared().stream(stream).ok_or(ReadError::NotFound)?;
        let inner = locks::lock(&s.inner);
        Ok(inner.history(s.highest_token()))
    }

    /// Producer `id`'s last applied append on `stream` ("did my write
    /// land?"), if the stream remembers the producer: `None` for one it
    /// never saw or has evicted.
    pub fn producer(&self, stream: &str, id: &str) -> Result<Option<ProducerEntry>, ReadError> {
        validate_stream_name(stream).map_err(ReadError::InvalidStreamName)?;
        let s = self.shared().stream(stream).ok_or(ReadError::NotFound)?;
        let inner = locks::lock(&s.inner);
        Ok(inner.carried().and_then(|c| c.producer(id)).cloned())
    }

    /// Waits until the stream's durable `next_seq` passes `seq` (a record at
    /// `seq` exists), the timeout elapses, the stream is sealed or deleted
    /// (nothing more can come), or the engine stops accepting writes.
    /// Returns the durable `next_seq` then (0 for a stream that does not
    /// exist). No polling: the writer wakes waiters of the streams each
    /// group touched.
    pub async fn wait_for(
        &self,
        stream: &str,
        seq: u64,
        timeout: Duration,
    ) -> Result<u64, ReadError> {
        let durable_next = |s: Option<&StreamShared>| s.map(|s| s.next_seq()).unwrap_or(0);
        let ended = |s: Option<&StreamShared>| s.is_some_and(|s| s.is_sealed() || s.is_deleted());
        self.wait_until(stream, timeout, |s| durable_next(s) > seq || ended(s))
            .await
            .map(|s| durable_next(s.as_deref()))
    }

    /// Waits until the stream exists and is not a tombstone (an append or
    /// a fence created it, or a higher token created it afresh), the
    /// timeout elapses, or the engine stops accepting writes; returns
    /// whether it exists then. Like [`Engine::wait_for`], without polling.
    pub async fn wait_for_stream(
        &self,
        stream: &str,
        timeout: Duration,
    ) -> Result<bool, ReadError> {
        let live = |s: Option<&StreamShared>| s.is_some_and(|s| !s.is_deleted());
        self.wait_until(stream, timeout, live)
            .await
            .map(|s| live(s.as_deref()))
    }

    /// Waits until `ready` holds for the stream's durable state (`None`
    /// while it does not exist), the timeout elapses, or the engine stops
    /// accepting writes (nothing more can arrive); returns the state then.
    async fn wait_until(
        &self,
        stream: &str,
        timeout: Duration,
        ready: impl Fn(Option<&StreamShared>) -> bool,
    ) -> Result<Option<Arc<StreamShared>>, ReadError> {
        validate_stream_name(stream).map_err(ReadError::InvalidStreamName)?;
        let shared = self.shared();
        let notify = locks::lock(&shared.waiters)
            .entry(stream.into())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone();
        let guard = WaiterGuard {
            shared,
            name: stream,
            notify: Some(notify.clone()),
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let state = loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Checked after enabling the wake-up, so a publish between the
            // check and the wait is not missed.
            let state = shared.stream(stream);
            if ready(state.as_deref()) || !self.is_healthy() {
                break state;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break shared.stream(stream);
            }
        };
        drop(notify);
        drop(guard);
        Ok(state)
    }
}
