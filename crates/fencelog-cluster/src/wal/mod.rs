//! The node's one Raft WAL, its bytes, and each shard's log storage over
//! it.

pub(crate) mod codec;
pub(crate) mod log_store;
pub(crate) mod record;
pub(crate) mod shard_log;
pub(crate) mod writer;

pub use codec::{
    encode_record, FILE_HEADER_BYTES, FILE_MAGIC, GROUP_HEADER_BYTES, RECORD_LEN_BYTES,
};
pub use log_store::LogStore;
pub use record::WalRecord;
pub use writer::{Wal, WalOpenError, PREALLOC_BYTES, WAL_FILE_NAME};
