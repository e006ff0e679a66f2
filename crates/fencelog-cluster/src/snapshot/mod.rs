//! Snapshots on disk, near the bottom of the crate (they know node ids
//! and a peer RPC's bytes, nothing of Raft): `dir` is a directory per
//! snapshot, captured by links and one copy, received in checked chunks
//! and removed with its last handle (the Raft type config's snapshot data
//! is its `ShardSnapshot`); above it, `shard_dir` is a shard engine's
//! directory and its atomic switch to an installed snapshot.

pub(crate) mod dir;
pub(crate) mod shard_dir;

pub use dir::{capture, Active, Chunk, Manifest, ShardSnapshot, SnapDir, SnapFile, CHUNK_BYTES};
pub use shard_dir::ShardDir;
