//! Where a read or a tail starts: `start_seq`, `tail_offset` or
//! `start_timestamp_ms`, resolved against the stream's durable state.

use crate::error::{read_error, ApiError};
use fencelog_api::ReadStart;
use fencelog_engine::Engine;

/// The seq a read of `stream` from `start` begins at: 404 when the stream
/// does not exist. A seq past the tail is the read's own 416.
pub fn resolve(engine: &Engine, stream: &str, start: ReadStart) -> Result<u64, ApiError> {
    let resolved = match start {
        ReadStart::Seq(seq) => engine.state(stream).map(|_| seq),
        ReadStart::TailOffset(n) => engine
            .state(stream)
            .map(|s| s.next_seq.saturating_sub(n).max(s.first_seq)),
        ReadStart::Timestamp(t) => engine.seq_at_timestamp(stream, t),
    };
    resolved.map_err(|e| read_error(stream, e))
}
