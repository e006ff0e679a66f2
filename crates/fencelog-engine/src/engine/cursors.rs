//! Fenced consumer cursors (issue 11 §6): a named position per stream with
//! its own highest token, committed through the writer like any write.

use super::writes::validate_short_name;
use super::Engine;
use crate::error::{ReadError, WriteError};
use crate::locks;
use crate::name::validate_stream_name;
use crate::writer::Op;
use fencelog_types::CursorEntry;

impl Engine {
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
        validate_short_name("cursor name", name)?;
        if fencing_token == 0 {
            return Err(WriteError::ZeroToken);
        }
        // The stream's token does not fence a cursor: no token fast path.
        self.precheck(stream, None)?;
        self.request(stream, |reply| Op::Cursor {
            name: name.into(),
            token: fencing_token,
            seq,
            reply,
        })
        .await
    }

    /// Cursor `name` of `stream`, if it was ever committed.
    pub fn cursor(&self, stream: &str, name: &str) -> Result<Option<CursorEntry>, ReadError> {
        Ok(self.cursors(stream)?.into_iter().find(|c| c.name == name))
    }

    /// Every cursor of `stream`, in name order.
    pub fn cursors(&self, stream: &str) -> Result<Vec<CursorEntry>, ReadError> {
        validate_stream_name(stream).map_err(ReadError::InvalidStreamName)?;
        let s = self.shared().stream(stream).ok_or(ReadError::NotFound)?;
        if s.is_deleted() {
            return Err(ReadError::NotFound);
        }
        let inner = locks::lock(&s.inner);
        let mut all = inner
            .carried()
            .map(|c| c.cursors.clone())
            .unwrap_or_default();
        drop(inner);
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }
}
