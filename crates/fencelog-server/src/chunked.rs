//! Response bodies that carry records, streamed in bounded chunks: each
//! chunk takes its bytes from the global response budget before it is
//! encoded and gives them back once hyper has written it to the socket.
//! A reader that does not read therefore holds at most what hyper buffers
//! for its connection plus one chunk, never its whole response; when the
//! budget is spent, chunks wait for it (bounded by the write timeout, then
//! the connection is dropped).

use crate::budget::{leased, overloaded, MemoryBudget, Pool};
use crate::error::ApiError;
use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use fencelog_api::chunks::RecordArray;
use fencelog_engine::Record;
use std::time::Duration;

/// Bytes a chunk is encoded up to; one record's fixed fields and one
/// escape may overshoot it ([`CHUNK_SLACK_BYTES`]).
pub const CHUNK_BYTES: usize = 32 << 10;
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

/// Chunks of `framed`, each leased from `budget`, waiting at most `wait`
/// for budget per chunk.
pub struct Chunks {
    framed: Framed,
    budget: MemoryBudget,
    wait: Duration,
    finished: bool,
}

impl Chunks {
    pub fn new(framed: Framed, budget: MemoryBudget, wait: Duration) -> Self {
        Chunks {
            framed,
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
        let size = CHUNK_BYTES + CHUNK_SLACK_BYTES;
        let lease = self
            .budget
            .take(Pool::Responses, size, self.wait)
            .await
            .ok_or_else(|| overloaded("responses"))?;
        let mut out = Vec::with_capacity(size);
        self.finished = self.framed.next_chunk(&mut out);
        Ok(Some(leased(out, lease)))
    }
}

/// A JSON response of `framed`: whole (with a length) when it fits one
/// chunk, streamed otherwise. 503 `overloaded` when the first chunk gets
/// no budget within the budget's wait.
pub async fn json_response(
    framed: Framed,
    budget: &MemoryBudget,
    write_wait: Duration,
) -> Result<Response, ApiError> {
    let mut chunks = Chunks::new(framed, budget.clone(), budget.wait);
    let first = chunks.next().await?.unwrap_or_default();
    let content_type = [(
        header::CONTENT_TYPE,
        HeaderValue::from_static(fencelog_api::header::JSON),
    )];
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
