//! Snapshots on disk: a directory per snapshot, never its bytes in memory.
//!
//! A shard's snapshot is the files of its engine directory at one LogId.
//! Reading them into memory (as the first version did) cost a node the
//! size of every shard it snapshots, every `snapshot_logs` entries, and
//! capped a shard at one RPC body. Here a snapshot is a directory beside
//! the engine's generations (`shard-k/snap-*`, `shard-k/recv-*`):
//!
//! - **Capture** ([`capture`]) hard-links every file of the source but the
//!   highest-numbered segment, and copies that one. Sound because the
//!   engine changes no file but its active (highest) segment in place:
//!   a roll cuts the old segment's preallocated zeros *before* the next
//!   segment exists, compaction copies frames forward and deletes whole
//!   files, checkpoints and the MANIFEST are replaced by rename (the link
//!   keeps the old inode), and recovery cuts only the last segment. So a
//!   capture is a few links and one copy of at most a segment, in the
//!   kernel, whatever the shard's size.
//! - **Transfer** goes in chunks of at most [`CHUNK_BYTES`], each checked
//!   by its CRC-32 and written at the end of its file ([`Receiving`]), so
//!   a node holds one chunk per transfer in memory.
//! - **Lifetime**: a [`SnapDir`] removes its directory when the last
//!   handle to it goes (a newer snapshot replaced it and no transfer still
//!   reads it), and a node's start removes any it finds (they are rebuilt
//!   on demand).

use crate::ids::NodeId;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes of file data in one snapshot chunk at most: small next to the
/// RPC body limit, large next to a round trip.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Bytes of one snapshot file at most (a segment is at most
/// `SEGMENT_BYTES_LIMIT`, 2 GiB, plus its preallocation).
pub const FILE_BYTES_MAX: u64 = 4 << 30;
/// Files in one snapshot at most (the engine keeps one checkpoint, one
/// MANIFEST and its segments).
pub const FILES_MAX: usize = 1 << 16;

/// A physical snapshot of a shard engine (the Raft type config's
/// `SnapshotData`): a directory holding the files of its engine
/// directory, captured while no apply runs. It holds no file bytes in
/// memory; clones share the directory, removed when the last one goes.
#[derive(Debug, Clone, Default)]
pub struct ShardSnapshot {
    /// The directory (`None` only for the empty handle openraft asks
    /// `begin_receiving_snapshot` for).
    pub dir: Option<Arc<SnapDir>>,
    /// Its files, in name order.
    pub files: Vec<SnapFile>,
}

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapFile {
    /// Its name in the engine directory.
    pub name: String,
    /// Its length in bytes.
    pub len: u64,
}

/// A snapshot directory, removed when the last handle goes.
#[derive(Debug)]
pub struct SnapDir {
    path: PathBuf,
}

impl SnapDir {
    /// Takes ownership of `path` (removed on drop).
    pub fn own(path: PathBuf) -> SnapDir {
        SnapDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SnapDir {
    fn drop(&mut self) {
        match fs::remove_dir_all(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %self.path.display(), error = %e, "could not remove a snapshot directory");
            }
        }
    }
}

fn refused(m: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m)
}

/// Refuses a file name that could leave the directory or that is not an
/// engine file's (the lock is never part of a snapshot).
pub fn check_name(name: &str) -> io::Result<()> {
    let bad = name.is_empty()
        || name.len() > 64
        || name.starts_with('.')
        || name == fencelog_engine::LOCK_FILE_NAME
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    match bad {
        true => Err(refused(format!("snapshot file name {name:?} refused"))),
        false => Ok(()),
    }
}

/// The files of `dir` a snapshot holds, in name order (the lock and
/// anything that is not a plain file left out).
pub fn list(dir: &Path) -> io::Result<Vec<SnapFile>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == fencelog_engine::LOCK_FILE_NAME || !entry.file_type()?.is_file() {
            continue;
        }
        files.push(SnapFile {
            name,
            len: entry.metadata()?.len(),
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// The one file a capture copies: the highest-numbered segment, the only
/// one the engine writes in place.
fn active_segment(files: &[SnapFile]) -> Option<&str> {
    files
        .iter()
        .filter_map(|f| fencelog_engine::parse_segment_name(&f.name).map(|i| (i, &f.name)))
        .max()
        .map(|(_, n)| n.as_str())
}

/// How a capture treats the active segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Active {
    /// Copied (as shipped).
    Copied,
    /// Linked like the others: the `SnapshotLinksActiveSegment` mutation.
    Linked,
}

/// Makes `dst` (which must not exist) hold `src`'s files as they are now:
/// links for the files the engine never changes in place, a copy of its
/// active segment (see the module comment). With `durable`, every file and
/// `dst` are synced. The caller keeps `src` unchanged while this runs.
pub fn capture(src: &Path, dst: &Path, durable: bool, how: Active) -> io::Result<Vec<SnapFile>> {
    let files = list(src)?;
    let active = match how {
        Active::Copied => active_segment(&files).map(str::to_owned),
        Active::Linked => None,
    };
    fs::create_dir(dst)?;
    for f in &files {
        check_name(&f.name)?;
        let (from, to) = (src.join(&f.name), dst.join(&f.name));
        let linked =
            Some(f.name.as_str()) != active.as_deref() && fs::hard_link(&from, &to).is_ok();
        if !linked {
            // The active segment, or another filesystem: a copy (in the
            // kernel, copy_file_range).
            fs::copy(&from, &to)?;
        }
        if durable {
            File::open(&to)?.sync_all()?;
        }
    }
    if durable {
        File::open(dst)?.sync_all()?;
    }
    Ok(files)
}

/// One chunk of a snapshot file. On the wire ([`Chunk::to_wire`]) its
/// fields but `data` go as postcard and `data` follows as it is: postcard
/// would write a `Vec<u8>` byte by byte through serde.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The sending node (two senders never share a receiving directory).
    pub from: NodeId,
    /// The snapshot's id.
    pub snapshot_id: String,
    /// The file.
    pub name: String,
    /// Where in the file `data` goes: 0 starts the file again, anything
    /// else must be the length received so far.
    pub offset: u64,
    /// CRC-32 of `data`.
    pub crc32: u32,
    /// At most [`CHUNK_BYTES`].
    pub data: Vec<u8>,
}

/// A chunk's fields but its bytes, as they go on the wire.
#[derive(Serialize, Deserialize)]
struct ChunkHeader {
    from: NodeId,
    snapshot_id: String,
    name: String,
    offset: u64,
    crc32: u32,
    len: u32,
}

impl Chunk {
    /// The RPC body: the wire's version byte, the header, the bytes.
    pub fn to_wire(&self) -> Vec<u8> {
        let header = ChunkHeader {
            from: self.from,
            snapshot_id: self.snapshot_id.clone(),
            name: self.name.clone(),
            offset: self.offset,
            crc32: self.crc32,
            len: u32::try_from(self.data.len()).expect("a chunk holds at most CHUNK_BYTES"),
        };
        let mut out = crate::rpc::encode(&header);
        out.extend_from_slice(&self.data);
        out
    }

    /// Reads [`Chunk::to_wire`]'s bytes; the length must be exact.
    pub fn from_wire(b: &[u8]) -> Result<Chunk, String> {
        let rest = crate::rpc::payload(b)?;
        let (h, data): (ChunkHeader, &[u8]) =
            postcard::take_from_bytes(rest).map_err(|e| e.to_string())?;
        if data.len() != h.len as usize {
            return Err(format!("a chunk of {} bytes says {}", data.len(), h.len));
        }
        Ok(Chunk {
            from: h.from,
            snapshot_id: h.snapshot_id,
            name: h.name,
            offset: h.offset,
            crc32: h.crc32,
            data: data.to_vec(),
        })
    }
}

/// The last message of a transfer: what the chunks made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The sending node.
    pub from: NodeId,
    /// Every file and its length, in name order.
    pub files: Vec<SnapFile>,
}

/// A snapshot being received: one per sending node and shard (a new
/// transfer from the same node replaces an unfinished one, whose
/// directory then goes).
#[derive(Debug)]
pub struct Receiving {
    from: NodeId,
    snapshot_id: String,
    dir: Arc<SnapDir>,
}

impl Receiving {
    /// Whether this is the transfer of `snapshot_id` from `from`.
    pub fn is(&self, from: NodeId, snapshot_id: &str) -> bool {
        self.from == from && self.snapshot_id == snapshot_id
    }

    /// Starts receiving into `dir` (which must not exist yet).
    pub fn start(from: NodeId, snapshot_id: &str, dir: PathBuf) -> io::Result<Receiving> {
        fs::create_dir(&dir)?;
        Ok(Receiving {
            from,
            snapshot_id: snapshot_id.to_owned(),
            dir: Arc::new(SnapDir::own(dir)),
        })
    }

    /// The files received so far and their lengths, in name order.
    pub fn files(&self) -> io::Result<Vec<SnapFile>> {
        list(self.dir.path())
    }

    /// Writes `chunk` (checked) at the end of its file.
    pub fn write(&self, chunk: &Chunk) -> io::Result<()> {
        check_name(&chunk.name)?;
        if chunk.data.len() > CHUNK_BYTES {
            return Err(refused(format!(
                "a snapshot chunk of {} bytes",
                chunk.data.len()
            )));
        }
        if crc32fast::hash(&chunk.data) != chunk.crc32 {
            return Err(refused(format!(
                "snapshot chunk of {} at {} fails its CRC",
                chunk.name, chunk.offset
            )));
        }
        let end = chunk.offset + chunk.data.len() as u64;
        if end > FILE_BYTES_MAX {
            return Err(refused(format!(
                "snapshot file {} over {FILE_BYTES_MAX} bytes",
                chunk.name
            )));
        }
        let path = self.dir.path().join(&chunk.name);
        // A chunk sent again (an attempt whose answer was lost, arriving
        // after the next attempt resumed past it) is a no-op: refusing it
        // would drop the transfer, truncating at 0 would cut the file.
        // Same id, same capture, so equal bytes are the same chunk.
        if arrived_already(&path, chunk.offset, &chunk.data)? {
            return Ok(());
        }
        let mut f = match chunk.offset {
            0 => File::create(&path)?,
            at => {
                let f = OpenOptions::new().append(true).open(&path)?;
                let len = f.metadata()?.len();
                if len != at {
                    return Err(refused(format!(
                        "snapshot chunk of {} at {at}, but {len} bytes were received",
                        chunk.name
                    )));
                }
                f
            }
        };
        f.write_all(&chunk.data)
    }

    /// Checks that exactly `manifest`'s files arrived whole and hands the
    /// directory over (the install's capture syncs what it keeps).
    pub fn finish(self, manifest: &Manifest) -> io::Result<(Arc<SnapDir>, Vec<SnapFile>)> {
        if manifest.files.len() > FILES_MAX {
            return Err(refused(format!(
                "a snapshot of {} files",
                manifest.files.len()
            )));
        }
        let got = list(self.dir.path())?;
        if got != manifest.files {
            return Err(refused(format!(
                "snapshot {} arrived as {got:?}, its manifest says {:?}",
                self.snapshot_id, manifest.files
            )));
        }
        Ok((self.dir, got))
    }
}

/// Whether `path` already holds `data` at `offset` (a chunk written
/// before). An empty chunk never has: it only makes its file exist.
fn arrived_already(path: &Path, offset: u64, data: &[u8]) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let end = offset + data.len() as u64;
    if data.is_empty() || f.metadata()?.len() < end {
        return Ok(false);
    }
    let mut held = vec![0; data.len()];
    f.read_exact_at(&mut held, offset)?;
    Ok(held == data)
}

#[cfg(test)]
#[path = "dir_tests.rs"]
mod tests;
