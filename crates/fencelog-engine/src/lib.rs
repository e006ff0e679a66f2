//! fencelog: a fenced append-only log storage engine.
//!
//! Producers append records to named streams with a fencing token; the
//! engine remembers the highest token it has accepted per stream and
//! rejects anything older, atomically with the write and durably. An
//! acknowledgement always means "durable and fenced". See ARCHITECTURE.md
//! for the bird's-eye view and the invariants.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use bytes::Bytes;
//! let engine = fencelog_engine::Engine::open("./fencelog-data")?;
//! let ack = engine.append("orders", 41, vec![Bytes::from("hello")], None).await?;
//! assert_eq!(ack.first_seq, 0);
//! let stale = engine.append("orders", 40, vec![Bytes::from("late")], None).await;
//! assert!(matches!(stale, Err(fencelog_engine::WriteError::StaleToken { .. })));
//! # Ok(()) }
//! ```
//!
//! This file is the facade: every module is private and the items below
//! are what an embedder uses; the plain values among them (records, acks,
//! stream states and settings, fence history) are `fencelog_types`'s. The
//! simulated disk ([`sim`]), the internals the engine's own suites reach
//! into (`testing`), the fuzz target bodies (`fuzz`) and the deliberate
//! bugs (`set_mutation`) exist only with the `sim`, `fuzz` and `mutations`
//! features.

#![warn(missing_docs)]

#[macro_use]
mod mutation;

mod carried;
mod checks;
mod codec;
pub mod config;
mod engine;
mod error;
mod fence;
mod files;
mod frame_cache;
#[cfg(feature = "fuzz")]
pub mod fuzz;
mod index;
mod locks;
mod metrics;
mod name;
mod op;
mod reader;
mod reclaim;
mod reclaim_signal;
mod record;
mod recovery;
mod seek;
mod segment;
mod shared;
#[cfg(feature = "sim")]
pub mod sim;
mod storage;
mod stream;
#[cfg(feature = "sim")]
pub mod testing;
mod writer;

pub use checks::{validate_short_name, validate_stream_config, BATCH_OPS_MAX};
pub use codec::checkpoint::AppliedState;
/// The on-disk format version this build writes (the segment header's
/// version field), shown by `fencelog --version`.
pub use codec::FORMAT_VERSION;
pub use config::{Config, Durability};
pub use engine::Engine;
pub use error::{Corruption, OpenError, ReadError, StorageFailure, WriteError};
/// The plain values that cross the wire, under the names they always had
/// here.
pub use fencelog_types::{
    Ack, BatchAck, CursorEntry, FenceBy, FenceEvent, Header, ProducerEntry, Record, RecordIn,
    Retention, StreamConfig, StreamState,
};
pub use metrics::Metrics;
#[cfg(feature = "mutations")]
pub use mutation::{set_mutation, Mutation};
pub use name::{validate_stream_name, NameError};
pub use op::{AppendOptions, Applied, BatchAction, BatchOp, ProducerSeq, WriteOp};
pub use reader::ReadBatch;
pub use reclaim_signal::ReclaimReport;
pub use record::{
    validate_headers, HeaderError, HEADERS_PER_RECORD_MAX, HEADER_BYTES_PER_RECORD_MAX,
    HEADER_NAME_BYTES_MAX,
};
pub use recovery::{RecoveryReport, Truncation};
pub use segment::parse_segment_name;
pub use storage::{DirStorage, Storage, StorageFile, LOCK_FILE_NAME};
pub use writer::PendingWrite;
