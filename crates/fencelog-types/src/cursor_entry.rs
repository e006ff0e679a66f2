//! A fenced cursor: a named consumer position on a stream.

/// A named, fenced consumer position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorEntry {
    /// The cursor's name.
    pub name: String,
    /// The highest token a commit of it carried.
    pub token: u64,
    /// The seq it points at (the next record to consume).
    pub seq: u64,
    /// When it was last committed (the writer's clock, Unix ms).
    pub timestamp_ms: u64,
}
