//! Live tail over Server-Sent Events; the events and their data are the
//! api crate's ([`fencelog_api::sse`]).
//!
//! - `records` carries the next batch; its `id` is the next seq to read.
//! - `caught_up` is sent whenever the consumer has everything durable:
//!   once the backlog is exhausted, and again after every run of `records`
//!   that brought it back to the tail (so a consumer always learns when
//!   it is live, not only on its first connection).
//! - `ping` after the ping interval (15 s) of silence, so proxies and
//!   clients can tell a quiet stream from a dead connection.
//! - `error` when a read fails, then the stream ends.
//! - `sealed` once a sealed stream's last record was sent, then the stream
//!   ends.
//!
//! A tail on a stream that does not exist is a 404 at once, so a typo is
//! never mistaken for a quiet stream — unless the request says
//! `wait_for_stream=true`: then the answer is 200 and the event stream
//! carries only `ping`s until an append or a fence creates the stream,
//! and starts (where `start_seq`, `tail_offset` or `start_timestamp_ms`
//! say, resolved at that moment) as soon as it exists.
//!
//! Every event is read from storage when the connection is ready to take
//! it, in batches bounded by `count` and `bytes`, and a `records` event is
//! written in chunks leased from the response budget ([`crate::routes::chunked`]):
//! a consumer that stops reading holds one chunk and what hyper buffers,
//! the record bytes it shares with every other follower (the engine hands
//! out slices of one copy), and its cursor. A socket that stays full past
//! the write timeout is closed; `Last-Event-ID` resumes at exactly the seq
//! it names.

use crate::decode::params::ReadParams;
use crate::error::{read_error, ApiError};
use crate::routes::chunked::{Chunks, Framed};
use crate::routes::start;
use crate::state::budget::MemoryBudget;
use crate::state::http_metrics::{HttpMetrics, TailGuard};
use crate::state::shutdown::Shutdown;
use crate::state::AppState;
use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use fencelog_api::sse::{self as events, CaughtUp};
use fencelog_api::{ErrorBody, ReadStart};
use fencelog_engine::{Engine, ReadError, Record};
use std::sync::Arc;
use std::time::Duration;

struct Tail {
    engine: Engine,
    stream: String,
    /// The next seq to send; `None` while waiting for the stream to exist.
    cursor: Option<u64>,
    /// Where to start once the stream exists.
    start: ReadStart,
    /// Below the first seq, start there instead of ending with 416.
    clamp: bool,
    count: usize,
    bytes: usize,
    ping_interval: Duration,
    shutdown: Shutdown,
    /// Whether the consumer still owes itself a `caught_up`.
    behind: bool,
    done: bool,
    metrics: Arc<HttpMetrics>,
    /// Counts this tail in `fencelog_tails_live` while it exists.
    _live: TailGuard,
}

/// What the tail sends next.
enum Next {
    Records(Vec<Record>),
    /// A whole small event, formatted.
    Event(Bytes),
}

fn event(name: &str, id: Option<u64>, data: &str) -> Bytes {
    let id = id.map(|i| format!("id: {i}\n")).unwrap_or_default();
    Bytes::from(format!("event: {name}\n{id}data: {data}\n\n"))
}

/// Starts a tail at `resume` (a `Last-Event-ID`) or where the parameters
/// say. Errors the request normally (404 for a stream that does not exist
/// unless `wait_for_stream`, 416 past the tail) before any event is sent.
pub fn tail(
    state: AppState,
    engine: Engine,
    stream: String,
    resume: Option<u64>,
    params: &ReadParams,
) -> Result<Response, ApiError> {
    let start = resume.map_or(params.start, ReadStart::Seq);
    let exists = match start::live_state(&engine, &stream) {
        Ok(_) => true,
        Err(ReadError::NotFound) if params.wait_for_stream => false,
        Err(e) => return Err(read_error(&stream, e)),
    };
    let cursor = match exists {
        true => Some(first_cursor(&engine, &stream, start, params.clamp)?),
        false => None,
    };
    let tail = Tail {
        engine,
        stream,
        cursor,
        start,
        clamp: params.clamp,
        count: params.count,
        bytes: params.bytes,
        ping_interval: state.limits.ping_interval,
        shutdown: state.shutdown.clone(),
        behind: true,
        done: false,
        metrics: state.http_metrics.clone(),
        _live: state.http_metrics.tail_opened(),
    };
    let body = Body::from_stream(body(tail, state.budget.clone(), state.limits.write_timeout));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(fencelog_api::header::EVENT_STREAM),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Reverse proxies that buffer responses would hold events back.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// The event stream as body chunks.
fn body(
    tail: Tail,
    budget: MemoryBudget,
    wait: Duration,
) -> impl futures_util::Stream<Item = std::io::Result<Bytes>> {
    futures_util::stream::unfold((tail, None::<Chunks>), move |(mut tail, mut chunks)| {
        let budget = budget.clone();
        async move {
            loop {
                if let Some(c) = &mut chunks {
                    match c.next().await {
                        Ok(Some(chunk)) => return Some((Ok(chunk), (tail, chunks))),
                        Ok(None) => {}
                        Err(e) => {
                            // Budget never came: drop the connection; the
                            // client resumes from its last event's id.
                            tail.done = true;
                            let e = std::io::Error::other(e.body.message);
                            return Some((Err(e), (tail, None)));
                        }
                    }
                }
                match tail.next().await? {
                    Next::Event(bytes) => return Some((Ok(bytes), (tail, None))),
                    Next::Records(records) => {
                        let id = tail.cursor.expect("records are sent only from a cursor");
                        let before = format!("event: {}\nid: {id}\ndata: ", events::RECORDS);
                        let framed = Framed::new(before.into_bytes(), records, b"\n\n".to_vec());
                        chunks = Some(Chunks::new(framed, budget.clone(), wait));
                    }
                }
            }
        }
    })
}

/// The first seq to send on an existing stream; 416 past its tail or
/// below its first seq (unless `clamp`), 404 when it is deleted.
fn first_cursor(
    engine: &Engine,
    stream: &str,
    start: ReadStart,
    clamp: bool,
) -> Result<u64, ApiError> {
    let seq = start::resolve(engine, stream, start, clamp)?;
    let s = start::live_state(engine, stream).map_err(|e| read_error(stream, e))?;
    if seq > s.next_seq || seq < s.first_seq {
        return Err(read_error(
            stream,
            ReadError::OutOfRange {
                start_seq: seq,
                first_seq: s.first_seq,
                next_seq: s.next_seq,
            },
        ));
    }
    Ok(seq)
}

fn error_event(body: &ErrorBody) -> Next {
    let data = serde_json::to_string(body).expect("error bodies serialize");
    Next::Event(event(events::ERROR, None, &data))
}

fn ping() -> Next {
    Next::Event(event(events::PING, None, events::PING_DATA))
}

fn caught_up(cursor: u64) -> Next {
    let data = serde_json::to_string(&CaughtUp { next_seq: cursor }).expect("caught_up serializes");
    Next::Event(event(events::CAUGHT_UP, Some(cursor), &data))
}

impl Tail {
    /// The next event, or None when the tail should end (shutdown, error).
    async fn next(&mut self) -> Option<Next> {
        if self.done {
            return None;
        }
        loop {
            let Some(cursor) = self.cursor else {
                match self.wait_for_stream().await? {
                    Ok(Some(cursor)) => self.cursor = Some(cursor),
                    Ok(None) => return Some(ping()),
                    Err(event) => return Some(event),
                }
                continue;
            };
            let batch = match self
                .engine
                .read(&self.stream, cursor, self.count, self.bytes)
            {
                Ok(batch) => batch,
                Err(e) => {
                    self.done = true;
                    return Some(error_event(&read_error(&self.stream, e).body));
                }
            };
            if let Some(last) = batch.records.last() {
                self.cursor = Some(last.seq + 1);
                // Whether this batch reached the tail or not, the consumer
                // learns it is live only from the empty read after it.
                self.behind = true;
                self.metrics.tail_event(&batch.records);
                return Some(Next::Records(batch.records));
            }
            if batch.sealed {
                self.done = true;
                let data = serde_json::to_string(&events::Sealed { next_seq: cursor })
                    .expect("sealed serializes");
                return Some(Next::Event(event(events::SEALED, Some(cursor), &data)));
            }
            if self.behind {
                self.behind = false;
                return Some(caught_up(cursor));
            }
            if self.shutdown.is_triggered() {
                return None;
            }
            if !self.wait(cursor).await? {
                return Some(ping());
            }
        }
    }

    /// Waits for a record past `cursor`, up to the ping interval: true
    /// when one arrived, `None` on shutdown.
    async fn wait(&mut self, cursor: u64) -> Option<bool> {
        let mut shutdown = self.shutdown.clone();
        if self.engine.is_healthy() {
            tokio::select! {
                waited = self.engine.wait_for(&self.stream, cursor, self.ping_interval) => {
                    // Sealed (or deleted) while waiting: the read says so
                    // at once, no ping in between.
                    Some(
                        matches!(waited, Ok(next) if next > cursor)
                            || self.engine.state(&self.stream).is_ok_and(|s| s.sealed || s.deleted),
                    )
                }
                _ = shutdown.wait() => None,
            }
        } else {
            // wait_for returns at once on an engine that takes no more
            // writes; nothing new can arrive, so just keep the tail alive.
            tokio::select! {
                _ = tokio::time::sleep(self.ping_interval) => Some(false),
                _ = shutdown.wait() => None,
            }
        }
    }

    /// Waits up to a ping interval for the stream to exist. `None` on
    /// shutdown; `Ok(None)` when it still does not; `Err` with the event
    /// that ends the tail when the start cannot be resolved.
    async fn wait_for_stream(&mut self) -> Option<Result<Option<u64>, Next>> {
        if self.shutdown.is_triggered() {
            return None;
        }
        let mut shutdown = self.shutdown.clone();
        let exists = if self.engine.is_healthy() {
            tokio::select! {
                waited = self.engine.wait_for_stream(&self.stream, self.ping_interval) => {
                    matches!(waited, Ok(true))
                }
                _ = shutdown.wait() => return None,
            }
        } else {
            tokio::select! {
                _ = tokio::time::sleep(self.ping_interval) => false,
                _ = shutdown.wait() => return None,
            }
        };
        if !exists {
            return Some(Ok(None));
        }
        Some(
            first_cursor(&self.engine, &self.stream, self.start, self.clamp)
                .map(Some)
                .map_err(|e| {
                    self.done = true;
                    error_event(&e.body)
                }),
        )
    }
}
