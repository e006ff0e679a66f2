//! Header names and media types of the API. Names are lowercase, as HTTP/1
//! libraries send them; header names match case-insensitively.

/// The fencing token of a raw or binary-batch append.
pub const FENCING_TOKEN: &str = "fencing-token";
/// Append only if the stream's `next_seq` equals it (raw and batch appends).
pub const MATCH_SEQ_NUM: &str = "match-seq-num";
/// An idempotent producer's id on a raw or binary-batch append.
pub const PRODUCER_ID: &str = "producer-id";
/// The producer's seq for this append; required with `Producer-Id`.
pub const PRODUCER_SEQ: &str = "producer-seq";
/// The write's deadline, Unix ms of the writer's clock.
pub const NOT_AFTER_MS: &str = "not-after-ms";
/// SSE resume: the next seq to send, as the last event's `id` said.
pub const LAST_EVENT_ID: &str = "last-event-id";
/// In cluster mode, on every write's answer: the shard leader as
/// `id=host:port`, so a client can send that stream's next writes there.
pub const LEADER: &str = "fencelog-leader";

/// The media type of a live tail (request `Accept`, response type).
pub const EVENT_STREAM: &str = "text/event-stream";
/// A JSON append or fence.
pub const JSON: &str = "application/json";
/// A raw append: the whole body is one record. (Any type that is neither
/// JSON nor a batch means the same; this is the one clients send.)
pub const OCTET_STREAM: &str = "application/octet-stream";
pub use crate::batch::CONTENT_TYPE as BATCH;
