//! fencelog's plain value types: what the engine takes and answers, and
//! what the wire contract (`fencelog-api`) and the Rust client carry,
//! without the engine itself.
//!
//! Records and their headers, an append's acknowledgement, a stream's
//! state and retention settings, its fence history, producers and
//! cursors. Values only: no I/O, no checks, no encoding. The engine
//! re-exports every item under the same name and owns the rules (the
//! header limits, name validation) and the on-disk encoding.

#![warn(missing_docs)]

mod ack;
mod cursor_entry;
mod fence_event;
mod producer_entry;
mod record;
mod stream_config;
mod stream_state;

pub use ack::{Ack, BatchAck};
pub use cursor_entry::CursorEntry;
pub use fence_event::{FenceBy, FenceEvent};
pub use producer_entry::ProducerEntry;
pub use record::{Header, Record, RecordIn};
pub use stream_config::{Retention, StreamConfig};
pub use stream_state::StreamState;
