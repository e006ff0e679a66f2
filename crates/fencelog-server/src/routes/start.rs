//! Where a read or a tail starts: `start_seq`, `tail_offset`,
//! `start_timestamp_ms` or a cursor's seq (`cursor=`), resolved against
//! the stream's durable state, and `clamp` for a start below the trim
//! point.

use crate::decode::params::QueryParams;
use crate::error::{read_error, ApiError};
use fencelog_api::read::param;
use fencelog_api::{ErrorCode, Field, ReadStart};
use fencelog_engine::{Engine, ReadError, StreamState};

/// The stream's durable state; a tombstone is [`ReadError::NotFound`], as
/// for reads (a deleted stream has no records to start from).
pub fn live_state(engine: &Engine, stream: &str) -> Result<StreamState, ReadError> {
    engine.state(stream).and_then(|s| {
        if s.deleted {
            Err(ReadError::NotFound)
        } else {
            Ok(s)
        }
    })
}

/// The seq a read of `stream` from `start` begins at: 404 when the stream
/// does not exist or is deleted. With `clamp`, a start below `first_seq`
/// (trimmed) is `first_seq`; without, it is the read's own 416, as is a
/// seq past the tail.
pub fn resolve(
    engine: &Engine,
    stream: &str,
    start: ReadStart,
    clamp: bool,
) -> Result<u64, ApiError> {
    let resolved = live_state(engine, stream).and_then(|s| {
        let seq = match start {
            ReadStart::Seq(seq) => seq,
            ReadStart::TailOffset(n) => s.next_seq.saturating_sub(n).max(s.first_seq),
            ReadStart::Timestamp(t) => engine.seq_at_timestamp(stream, t)?,
        };
        Ok(if clamp { seq.max(s.first_seq) } else { seq })
    });
    resolved.map_err(|e| read_error(stream, e))
}

/// Where `cursor=NAME` says a read or tail starts; with another start too
/// it is a 400 (which one?).
pub fn cursor_start(
    engine: &Engine,
    stream: &str,
    name: &str,
    q: &QueryParams,
) -> Result<ReadStart, ApiError> {
    let starts = [
        param::START_SEQ,
        param::TAIL_OFFSET,
        param::START_TIMESTAMP_MS,
    ];
    if let Some(other) = starts.iter().find(|p| q.str(p).is_some()) {
        return Err(ApiError::bad_request(format!(
            "give {other} or cursor, not both"
        )));
    }
    match engine.cursor(stream, name) {
        Ok(Some(c)) => Ok(ReadStart::Seq(c.seq)),
        Ok(None) => Err(cursor_not_found(stream, name)),
        Err(e) => Err(read_error(stream, e)),
    }
}

/// The 404 of a cursor the stream does not have.
pub fn cursor_not_found(stream: &str, name: &str) -> ApiError {
    ApiError::new(
        ErrorCode::CursorNotFound,
        format!("stream {stream} has no cursor {name:?}"),
    )
    .with(Field::Stream, stream)
    .with(Field::Cursor, name)
}
