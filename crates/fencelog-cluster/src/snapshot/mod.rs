//! Snapshots on disk, and the shard directory they replace.

pub(crate) mod dir;
pub(crate) mod shard_dir;

pub use dir::{capture, Active, Chunk, Manifest, SnapFile, CHUNK_BYTES};
pub use shard_dir::ShardDir;
