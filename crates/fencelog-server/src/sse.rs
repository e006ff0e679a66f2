//! Live tail over Server-Sent Events; the events and their data are the
//! api crate's ([`fencelog_api::sse`]).
//!
//! - `records` carries the next batch; its `id` is the next seq to read.
//! - `caught_up` is sent when the backlog is exhausted, and again whenever
//!   a consumer that had fallen more than a batch behind reaches the tail
//!   once more.
//! - `ping` after the ping interval (15 s) of silence, so proxies and
//!   clients can tell a quiet stream from a dead connection.
//! - `error` when a read fails, then the stream ends.
//! - `sealed` once a sealed stream's last record was sent, then the stream
//!   ends.
//!
//! Every event is read from storage when the connection is ready to take
//! it, in batches bounded by `count` and `bytes`, and a `records` event is
//! written in chunks leased from the response budget ([`crate::chunked`]):
//! a consumer that stops reading holds one chunk and what hyper buffers,
//! the record bytes it shares with every other follower (the engine hands
//! out slices of one copy), and its cursor. A socket that stays full past
//! the write timeout is closed; `Last-Event-ID` resumes at exactly the seq
//! it names.

use crate::budget::MemoryBudget;
use crate::chunked::{Chunks, Framed};
use crate::error::{read_error, ApiError};
use crate::params::ReadParams;
use crate::state::{AppState, Shutdown};
use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use fencelog_api::sse::{self as events, CaughtUp};
use fencelog_engine::{Engine, Record};
use std::time::Duration;

struct Tail {
    engine: Engine,
    stream: String,
    /// The next seq to send.
    cursor: u64,
    count: usize,
    bytes: usize,
    ping_interval: Duration,
    shutdown: Shutdown,
    /// Whether the consumer still owes itself a `caught_up`.
    behind: bool,
    done: bool,
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

/// Starts a tail at `start_seq`. Errors the request normally (404 for a
/// stream that does not exist, 416 past the tail) before any event is sent,
/// so a client never mistakes a typo for a quiet stream.
pub fn tail(
    state: AppState,
    stream: String,
    start_seq: u64,
    params: &ReadParams,
) -> Result<Response, ApiError> {
    let current = state
        .engine
        .state(&stream)
        .map_err(|e| read_error(&stream, e))?;
    if start_seq > current.next_seq || start_seq < current.first_seq || current.deleted {
        return Err(read_error(
            &stream,
            match current.deleted {
                true => fencelog_engine::ReadError::NotFound,
                false => fencelog_engine::ReadError::OutOfRange {
                    start_seq,
                    first_seq: current.first_seq,
                    next_seq: current.next_seq,
                },
            },
        ));
    }
    let tail = Tail {
        engine: state.engine.clone(),
        stream,
        cursor: start_seq,
        count: params.count,
        bytes: params.bytes,
        ping_interval: state.limits.ping_interval,
        shutdown: state.shutdown.clone(),
        behind: true,
        done: false,
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
                        let before =
                            format!("event: {}\nid: {}\ndata: ", events::RECORDS, tail.cursor);
                        let framed = Framed::new(before.into_bytes(), records, b"\n\n".to_vec());
                        chunks = Some(Chunks::new(framed, budget.clone(), wait));
                    }
                }
            }
        }
    })
}

impl Tail {
    /// The next event, or None when the tail should end (shutdown, error).
    async fn next(&mut self) -> Option<Next> {
        if self.done {
            return None;
        }
        loop {
            let batch = match self
                .engine
                .read(&self.stream, self.cursor, self.count, self.bytes)
            {
                Ok(batch) => batch,
                Err(e) => {
                    self.done = true;
                    let body = serde_json::to_string(&read_error(&self.stream, e).body)
                        .expect("error bodies serialize");
                    return Some(Next::Event(event(events::ERROR, None, &body)));
                }
            };
            if let Some(last) = batch.records.last() {
                self.cursor = last.seq + 1;
                if self.cursor < batch.next_seq {
                    self.behind = true;
                }
                return Some(Next::Records(batch.records));
            }
            if batch.sealed {
                self.done = true;
                let data = serde_json::to_string(&events::Sealed {
                    next_seq: self.cursor,
                })
                .expect("sealed serializes");
                return Some(Next::Event(event(events::SEALED, Some(self.cursor), &data)));
            }
            if self.behind {
                self.behind = false;
                let data = serde_json::to_string(&CaughtUp {
                    next_seq: self.cursor,
                })
                .expect("caught_up serializes");
                return Some(Next::Event(event(
                    events::CAUGHT_UP,
                    Some(self.cursor),
                    &data,
                )));
            }
            if self.shutdown.is_triggered() {
                return None;
            }
            if !self.wait().await? {
                return Some(Next::Event(event(events::PING, None, events::PING_DATA)));
            }
        }
    }

    /// Waits for a record past the cursor, up to the ping interval: true
    /// when one arrived, `None` on shutdown.
    async fn wait(&mut self) -> Option<bool> {
        let mut shutdown = self.shutdown.clone();
        if self.engine.is_healthy() {
            tokio::select! {
                waited = self.engine.wait_for(&self.stream, self.cursor, self.ping_interval) => {
                    // Sealed (or deleted) while waiting: the read says so
                    // at once, no ping in between.
                    Some(
                        matches!(waited, Ok(next) if next > self.cursor)
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
}
