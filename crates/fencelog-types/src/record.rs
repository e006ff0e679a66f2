//! Records as the engine takes and returns them: a body and an optional
//! list of headers.
//!
//! Headers are (name, value) byte pairs in the order given; names may
//! repeat. Names are 1..=255 bytes (UTF-8 recommended, not required),
//! values any bytes. The limits on a record's headers, and their check,
//! are the engine's (`fencelog_engine::validate_headers`).

use bytes::Bytes;

/// One header of a record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Header {
    /// 1..=255 bytes.
    pub name: Bytes,
    /// Any bytes, within the record's header budget.
    pub value: Bytes,
}

impl Header {
    /// A header from anything that turns into bytes.
    pub fn new(name: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        Header {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// A record to append: its body and its headers (usually none).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecordIn {
    /// The record's bytes.
    pub body: Bytes,
    /// In order; empty for most records.
    pub headers: Vec<Header>,
}

impl RecordIn {
    /// A record without headers.
    pub fn new(body: impl Into<Bytes>) -> Self {
        RecordIn {
            body: body.into(),
            headers: Vec::new(),
        }
    }

    /// The same record with one more header.
    pub fn with_header(mut self, name: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        self.headers.push(Header::new(name, value));
        self
    }
}

/// One record as a reader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its place in the stream: seqs run from 0 without gaps.
    pub seq: u64,
    /// The token of the append that wrote it.
    pub fencing_token: u64,
    /// When the writer committed it (Unix ms, never decreasing per stream).
    pub timestamp_ms: u64,
    /// Its headers, in the order they were appended; empty for most.
    pub headers: Vec<Header>,
    /// A zero-copy slice of the segment where the segment is memory-mapped.
    pub body: Bytes,
}
