//! Response bodies that carry records, streamed in bounded chunks: each
//! chunk takes its bytes from the global response budget before it is
//! encoded and gives them back once hyper has written it to the socket.
//! A reader that does not read therefore holds at most what hyper buffers
//! for its connection plus one chunk, never its whole response; when the
//! budget is spent, chunks wait for it (bounded by the write timeout, then
//! the connection is dropped).

use crate::error::ApiError;
use crate::state::budget::{leased, overloaded, MemoryBudget, Pool};
use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use fencelog_api::chunks::RecordArray;
use fencelog_api::read_batch::{self, RecordFrames};
use fencelog_engine::Record;
use std::time::Duration;

/// Bytes a JSON chunk is encoded up to; one record's fixed fields and one
/// escape may overshoot it ([`CHUNK_SLACK_BYTES`]).
pub const CHUNK_BYTES: usize = 32 << 10;
/// Bytes a binary chunk is written up to: bodies are copied, not encoded,
/// so a chunk is cheap to fill and the per-chunk costs (a budget lease, a
/// body frame, a socket write) dominate unless chunks are larger. 64 KiB
/// keeps 200 idle readers (two chunks each) under half the default budget.
pub const BINARY_CHUNK_BYTES: usize = 64 << 10;
const CHUNK_SLACK_BYTES: usize = 256;

/// A JSON value around a record array: what goes before and after it.
pub struct Framed {
    pub before: Vec<u8>,
    pub records: RecordArray,
    pub after: Vec<u8>,
}

impl Framed {
    pub fn new(before: Vec<u8>, records: Vec<Record>, after: Vec<u8>) -> Self {
        Framed {
            before,
            records: RecordArray::new(records),
            after,
        }
    }

    /// The next chunk; `None` once everything was written.
    fn next_chunk(&mut self, out: &mut Vec<u8>) -> bool {
        if !self.before.is_empty() {
            out.append(&mut self.before);
        }
        if !self.records.is_done() && !self.records.write(out, CHUNK_BYTES) {
            return false;
        }
        out.append(&mut self.after);
        true
    }
}

/// What a chunked body is made of: JSON around records, or a page in the
/// binary read format.
pub enum Source {
    Json(Framed),
    Binary(RecordFrames),
}

impl From<Framed> for Source {
    fn from(f: Framed) -> Self {
        Source::Json(f)
    }
}

impl Source {
    fn chunk_bytes(&self) -> usize {
        match self {
            Source::Json(_) => CHUNK_BYTES,
            Source::Binary(_) => BINARY_CHUNK_BYTES,
        }
    }

    /// Fills `out` with the next chunk; whether it was the last.
    fn next_chunk(&mut self, out: &mut Vec<u8>) -> bool {
        match self {
            Source::Json(f) => f.next_chunk(out),
            Source::Binary(b) => b.write(out, BINARY_CHUNK_BYTES),
        }
    }

    fn content_type(&self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Source::Json(_) => fencelog_api::header::JSON,
            Source::Binary(_) => read_batch::CONTENT_TYPE,
        })
    }
}

/// Chunks of `framed`, each leased from `budget`, waiting at most `wait`
/// for budget per chunk.
pub struct Chunks {
    source: Source,
    budget: MemoryBudget,
    wait: Duration,
    finished: bool,
}

impl Chunks {
    pub fn new(source: impl Into<Source>, budget: MemoryBudget, wait: Duration) -> Self {
        Chunks {
            source: source.into(),
            budget,
            wait,
            finished: false,
        }
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The next chunk, `Ok(None)` at the end, `Err` when budget did not
    /// come within the wait.
    pub async fn next(&mut self) -> Result<Option<Bytes>, ApiError> {
        if self.finished {
            return Ok(None);
        }
        let size = self.source.chunk_bytes() + CHUNK_SLACK_BYTES;
        let lease = self
            .budget
            .take(Pool::Responses, size, self.wait)
            .await
            .ok_or_else(|| overloaded("responses"))?;
        let mut out = Vec::with_capacity(size);
        self.finished = self.source.next_chunk(&mut out);
        Ok(Some(leased(out, lease)))
    }
}

/// A response of `source` (JSON or binary records): whole (with a length)
/// when it fits one chunk, streamed otherwise. 503 `overloaded` when the
/// first chunk gets no budget within the budget's wait.
pub async fn records_response(
    source: Source,
    budget: &MemoryBudget,
    write_wait: Duration,
) -> Result<Response, ApiError> {
    let content_type = [(header::CONTENT_TYPE, source.content_type())];
    let mut chunks = Chunks::new(source, budget.clone(), budget.wait);
    let first = chunks.next().await?.unwrap_or_default();
    if chunks.is_finished() {
        return Ok((content_type, Body::from(first)).into_response());
    }
    chunks.wait = write_wait;
    let rest = futures_util::stream::unfold(chunks, |mut c| async move {
        match c.next().await {
            Ok(Some(chunk)) => Some((Ok::<_, std::io::Error>(chunk), c)),
            Ok(None) => None,
            // Headers are gone already: ending the body with an error makes
            // hyper drop the connection, so the client sees a cut, not a
            // complete but short answer.
            Err(e) => {
                c.finished = true;
                Some((Err(std::io::Error::other(e.body.message)), c))
            }
        }
    });
    let first = futures_util::stream::once(async move { Ok(first) });
    use futures_util::StreamExt;
    Ok((content_type, Body::from_stream(first.chain(rest))).into_response())
}
