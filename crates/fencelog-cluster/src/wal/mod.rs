//! The node's one Raft WAL, shared by every shard's group, and each
//! group's log storage over it; it stands on `crate::raft`'s types and
//! the disk budget's byte count, and nothing below it knows it. From the
//! bottom: a record ([`WalRecord`]) names its shard; `codec` turns records
//! into salted, numbered groups and replays a file (pure, no I/O);
//! `shard_log` is one shard's log in memory as the records leave it;
//! `writer` is the WAL itself ([`Wal`]: open and replay, the group-commit
//! thread, rewrites); `log_store` is openraft's `RaftLogStorage` for one
//! shard over it ([`LogStore`]).

pub(crate) mod codec;
pub(crate) mod log_store;
pub(crate) mod record;
pub(crate) mod shard_log;
pub(crate) mod writer;

pub use codec::{
    encode_record, Damage, FILE_HEADER_BYTES, FILE_MAGIC, GROUP_HEADER_BYTES, RECORD_LEN_BYTES,
};
pub use log_store::{LogStore, APPEND_RPC_BYTES_MAX};
pub use record::WalRecord;
pub use shard_log::ShardLog;
pub use writer::{Done, Wal, WalOpenError, PREALLOC_BYTES, WAL_FILE_NAME};
