//! Reading fenced consumer cursors: a named position per stream with its
//! own highest token, committed through the writer like any write
//! ([`Engine::commit_cursor`]).

use super::Engine;
use crate::error::ReadError;
use crate::locks;
use crate::name::validate_stream_name;
use fencelog_types::CursorEntry;

impl Engine {
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
