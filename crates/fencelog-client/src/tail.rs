//! Following a stream over Server-Sent Events: one connection at a time,
//! resumed with `Last-Event-ID` after any disconnect, each record handed
//! to the consumer exactly once, in order. The consumer also hears when
//! it caught up and when the connection was lost and regained.

use crate::error::{from_answer, with_causes};
use crate::{Client, ClientError};
use fencelog_api::read::param;
use fencelog_api::{header, sse, ReadStart, RecordJson, SseEvent, SseParser};
use fencelog_types::Record;
use futures_util::StreamExt;
use std::time::Duration;
use tokio::sync::mpsc;

/// The server sends a ping every 15 s; three missed pings mean the
/// connection is dead even if TCP has not noticed.
const TAIL_SILENCE_MAX: Duration = Duration::from_secs(45);
pub(crate) const TAIL_BACKOFF_MIN: Duration = Duration::from_millis(100);
const TAIL_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Records buffered between the tail's connection task and its consumer; a
/// slow consumer stops the task reading, and TCP pushes back on the server.
pub(crate) const TAIL_BUFFER_RECORDS: usize = 1024;

/// What a tail yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailEvent {
    Record(Record),
    /// The consumer has read everything durable; `next_seq` is the tail.
    /// Sent whenever the tail reaches the stream's end again.
    CaughtUp {
        next_seq: u64,
    },
    /// The stream is sealed and everything in it was delivered; the tail
    /// ends.
    Sealed {
        next_seq: u64,
    },
    /// The connection was lost or could not be made (`error` says why);
    /// the tail keeps retrying with backoff. Once per outage.
    Disconnected {
        error: String,
    },
    /// Connected again after [`TailEvent::Disconnected`]; records continue
    /// from `resume_seq` (`None` when nothing had told the tail a seq yet,
    /// so it started over from its original start).
    Reconnected {
        resume_seq: Option<u64>,
    },
}

/// Where a tail starts and whether it waits for a missing stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TailOptions {
    /// `start_seq`, `tail_offset` or `start_timestamp_ms`; only the first
    /// connection uses it, every later one resumes where the last stopped.
    pub start: ReadStart,
    /// Wait for a stream that does not exist yet instead of failing with
    /// [`ClientError::StreamNotFound`].
    pub wait_for_stream: bool,
}

type TailSender = mpsc::Sender<Result<TailEvent, ClientError>>;

/// The tail is over: the consumer went away, or it was handed an error
/// reconnecting cannot fix.
struct TailOver;

/// The connection loop's state: where to resume and whether the consumer
/// was told about an outage.
struct Cursor {
    /// The next seq to deliver, once any event said one.
    resume: Option<u64>,
    disconnected: bool,
}

impl Client {
    /// Follows a stream with `options`, yielding records and the tail's
    /// own events; see [`Client::tail`].
    pub fn tail_with(
        &self,
        stream: &str,
        options: TailOptions,
    ) -> impl futures_util::Stream<Item = Result<TailEvent, ClientError>> {
        let (tx, rx) = mpsc::channel(TAIL_BUFFER_RECORDS);
        let this = self.clone();
        let stream = stream.to_string();
        tokio::spawn(async move { this.run_tail(stream, options, tx).await });
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }

    async fn run_tail(self, stream: String, options: TailOptions, tx: TailSender) {
        let url = self.stream_url(&stream, "/records");
        let mut backoff = TAIL_BACKOFF_MIN;
        let mut cursor = Cursor {
            resume: None,
            disconnected: false,
        };
        loop {
            let (key, value) = cursor.resume.map_or(options.start, ReadStart::Seq).query();
            let mut req = self
                .http
                .get(&url)
                .header("accept", header::EVENT_STREAM)
                .query(&[(key, value.to_string())]);
            if options.wait_for_stream {
                req = req.query(&[(param::WAIT_FOR_STREAM, "true")]);
            }
            if let Some(seq) = cursor.resume {
                req = req.header(header::LAST_EVENT_ID, seq.to_string());
            }
            let lost = match req.send().await {
                Ok(r) if r.status().is_success() => {
                    backoff = TAIL_BACKOFF_MIN;
                    if cursor.disconnected {
                        cursor.disconnected = false;
                        let ev = TailEvent::Reconnected {
                            resume_seq: cursor.resume,
                        };
                        if tx.send(Ok(ev)).await.is_err() {
                            return;
                        }
                    }
                    match follow(r, &mut cursor, &tx).await {
                        Ok(lost) => lost,
                        Err(TailOver) => return,
                    }
                }
                Ok(r) => {
                    let status = r.status().as_u16();
                    let bytes = r.bytes().await.unwrap_or_default();
                    let err = from_answer(status, &bytes, &url);
                    let retryable = matches!(
                        err,
                        ClientError::Unavailable { .. } | ClientError::InsufficientStorage { .. }
                    );
                    if !retryable {
                        let _ = tx.send(Err(err)).await;
                        return;
                    }
                    err.to_string()
                }
                Err(e) => format!("could not reach the server: {}", with_causes(&e)),
            };
            if tx.is_closed() {
                return;
            }
            if !cursor.disconnected {
                cursor.disconnected = true;
                let ev = TailEvent::Disconnected { error: lost };
                if tx.send(Ok(ev)).await.is_err() {
                    return;
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(TAIL_BACKOFF_MAX);
        }
    }
}

/// Reads one connection's events until it ends; returns why it ended.
async fn follow(
    resp: reqwest::Response,
    cursor: &mut Cursor,
    tx: &TailSender,
) -> Result<String, TailOver> {
    let mut body = resp.bytes_stream();
    let mut parser = SseParser::new();
    loop {
        let chunk = match tokio::time::timeout(TAIL_SILENCE_MAX, body.next()).await {
            Ok(Some(Ok(c))) => c,
            Ok(Some(Err(e))) => return Ok(format!("connection lost: {}", with_causes(&e))),
            Ok(None) => return Ok("the server closed the connection".to_string()),
            Err(_) => {
                let secs = TAIL_SILENCE_MAX.as_secs();
                return Ok(format!("nothing heard from the server for {secs} s"));
            }
        };
        for ev in parser.push(&chunk) {
            deliver(ev, cursor, tx).await?;
        }
        if tx.is_closed() {
            return Err(TailOver);
        }
    }
}

/// Hands one event to the tail's consumer: a `records` event's records,
/// each seq once, moving the resume point past them; a `caught_up` as
/// [`TailEvent::CaughtUp`]; a `sealed` ends the tail after
/// [`TailEvent::Sealed`]. Every event with an `id` moves the resume point
/// to it. Pings and event types newer than this client only show
/// the connection is alive.
async fn deliver(ev: SseEvent, cursor: &mut Cursor, tx: &TailSender) -> Result<(), TailOver> {
    let id: Option<u64> = ev.id.as_deref().and_then(|i| i.parse().ok());
    match ev.event.as_str() {
        sse::RECORDS => {
            let wire: Vec<RecordJson> = match serde_json::from_str(&ev.data) {
                Ok(w) => w,
                Err(e) => {
                    let body = format!("bad records event: {e}");
                    return give_up(tx, ClientError::Protocol { status: 200, body }).await;
                }
            };
            for w in wire {
                // A resumed connection may repeat what we already
                // delivered; deliver each seq once.
                if cursor.resume.is_some_and(|next| w.seq < next) {
                    continue;
                }
                let rec = match crate::decode_record(w) {
                    Ok(r) => r,
                    Err(e) => return give_up(tx, e).await,
                };
                cursor.resume = Some(rec.seq + 1);
                tx.send(Ok(TailEvent::Record(rec)))
                    .await
                    .map_err(|_| TailOver)?;
            }
        }
        sse::CAUGHT_UP => {
            let at = id.or(cursor.resume).unwrap_or(0);
            tx.send(Ok(TailEvent::CaughtUp { next_seq: at }))
                .await
                .map_err(|_| TailOver)?;
        }
        sse::SEALED => {
            // Everything was delivered and nothing more can come.
            let at = id.or(cursor.resume).unwrap_or(0);
            let _ = tx.send(Ok(TailEvent::Sealed { next_seq: at })).await;
            return Err(TailOver);
        }
        sse::ERROR => {
            let status = 200;
            let err = match fencelog_api::ErrorBody::decode(ev.data.as_bytes()) {
                Some(answer) => from_answer(answer.status(), ev.data.as_bytes(), ""),
                None => ClientError::Protocol {
                    status,
                    body: ev.data,
                },
            };
            return give_up(tx, err).await;
        }
        _ => {}
    }
    if let Some(id) = id {
        cursor.resume = Some(cursor.resume.map_or(id, |r| r.max(id)));
    }
    Ok(())
}

async fn give_up(tx: &TailSender, err: ClientError) -> Result<(), TailOver> {
    let _ = tx.send(Err(err)).await;
    Err(TailOver)
}
