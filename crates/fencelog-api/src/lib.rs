//! fencelog's wire contract, in one place for the server, the Rust client,
//! the CLI and the load generator: request and response bodies, the error
//! codes with their HTTP statuses, the record body rule (`body` or
//! `body_base64`), the binary batch body and the binary read format, header names, and the live
//! tail's events with their parser.
//!
//! Nothing here knows an HTTP library, so the client stays light and the
//! server's framework stays the server's business. serde lives here and
//! above, never in the engine. The values the engine answers with are
//! `fencelog_types`'s (the engine re-exports them), so this crate does not
//! depend on the engine; conversions from them are `From`s and
//! constructors on the wire types.

pub mod append;
pub mod batch;
pub mod chunks;
pub mod error;
pub mod fixed_json;
pub mod header;
pub mod producer;
pub mod read;
pub mod read_batch;
pub mod read_json;
pub mod record;
pub mod record_headers;
pub mod session;
pub mod sse;
pub mod stream;

pub use append::{AppendAck, AppendRequest, RecordInJson};
pub use error::{ErrorBody, ErrorCode, Field};
pub use producer::{
    BatchOpRequest, BatchRequest, CursorInfo, CursorList, CursorRequest, FenceJson, FenceList,
    ProducerInfo,
};
pub use read::{next_start_seq, ReadPage, ReadStart};
pub use record::{BodyError, BodyJson, RecordJson};
pub use record_headers::HeadersJson;
pub use sse::{SseEvent, SseParser};
pub use stream::{ConfigRequest, FenceRequest, StreamInfo, StreamList, TrimRequest};
