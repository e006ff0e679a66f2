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
//! Every event is read from storage when the connection is ready to take it,
//! in batches bounded by `count` and `bytes`, so a slow consumer costs a
//! cursor and never a buffer, and cannot miss a record. `Last-Event-ID`
//! resumes at exactly the seq it names.

use crate::error::{read_error, ApiError};
use crate::params::ReadParams;
use crate::state::{AppState, Shutdown};
use axum::http::HeaderValue;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use fencelog_api::sse::{self as events, CaughtUp};
use fencelog_api::RecordJson;
use fencelog_engine::Engine;
use std::convert::Infallible;
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
    let events = futures_util::stream::unfold(tail, |mut t| async move {
        let event = t.next_event().await?;
        Some((Ok::<_, Infallible>(event), t))
    });
    let mut response = Sse::new(events).into_response();
    // Reverse proxies that buffer responses would hold events back.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

impl Tail {
    /// The next event, or None when the tail should end (shutdown, error).
    async fn next_event(&mut self) -> Option<Event> {
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
                    return Some(Event::default().event(events::ERROR).data(body));
                }
            };
            if let Some(last) = batch.records.last() {
                self.cursor = last.seq + 1;
                if self.cursor < batch.next_seq {
                    self.behind = true;
                }
                let data = serde_json::to_string(&RecordJson::all(&batch.records))
                    .expect("records serialize");
                return Some(
                    Event::default()
                        .event(events::RECORDS)
                        .id(self.cursor.to_string())
                        .data(data),
                );
            }
            if batch.sealed {
                self.done = true;
                let data = serde_json::to_string(&events::Sealed {
                    next_seq: self.cursor,
                })
                .expect("sealed serializes");
                return Some(
                    Event::default()
                        .event(events::SEALED)
                        .id(self.cursor.to_string())
                        .data(data),
                );
            }
            if self.behind {
                self.behind = false;
                return Some(
                    Event::default()
                        .event(events::CAUGHT_UP)
                        .id(self.cursor.to_string())
                        .data(
                            serde_json::to_string(&CaughtUp {
                                next_seq: self.cursor,
                            })
                            .expect("caught_up serializes"),
                        ),
                );
            }
            if self.shutdown.is_triggered() {
                return None;
            }
            let mut shutdown = self.shutdown.clone();
            let progressed = if self.engine.is_healthy() {
                tokio::select! {
                    waited = self.engine.wait_for(&self.stream, self.cursor, self.ping_interval) => {
                        // Sealed (or deleted) while waiting: the read says
                        // so at once, no ping in between.
                        matches!(waited, Ok(next) if next > self.cursor)
                            || self.engine.state(&self.stream).is_ok_and(|s| s.sealed || s.deleted)
                    }
                    _ = shutdown.wait() => return None,
                }
            } else {
                // wait_for returns at once on an engine that takes no more
                // writes; nothing new can arrive, so just keep the tail alive.
                tokio::select! {
                    _ = tokio::time::sleep(self.ping_interval) => false,
                    _ = shutdown.wait() => return None,
                }
            };
            if !progressed {
                return Some(Event::default().event(events::PING).data(events::PING_DATA));
            }
        }
    }
}
