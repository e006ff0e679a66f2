//! The storage seam: every file operation durability depends on goes through
//! [`Storage`] and [`StorageFile`]. This is the one module that calls
//! `sync_data` and syncs directories, and the one place a simulated disk
//! plugs in to inject crashes and I/O errors.
//!
//! The seam is deliberately narrow: a flat directory of named files that are
//! appended to, read at offsets, synced, truncated and viewed whole.

use bytes::Bytes;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A flat directory of files.
pub trait Storage: Send + Sync + 'static {
    /// Names of the regular files in the directory, in no particular order.
    fn list(&self) -> io::Result<Vec<String>>;
    /// Creates a new empty file; fails if it exists. The new name is not
    /// durable until [`Storage::sync_dir`] returns.
    fn create(&self, name: &str) -> io::Result<Arc<dyn StorageFile>>;
    /// Opens an existing file for reading and appending.
    fn open(&self, name: &str) -> io::Result<Arc<dyn StorageFile>>;
    /// Removes a file. Durable only after [`Storage::sync_dir`].
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Renames `from` to `to`, atomically replacing `to` if it exists.
    /// Durable only after [`Storage::sync_dir`].
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// Makes creations and removals durable (fsync of the directory).
    fn sync_dir(&self) -> io::Result<()>;
    /// Takes an exclusive lock so two processes never write one log.
    fn lock(&self) -> io::Result<()>;
}

/// One file of a [`Storage`].
#[allow(
    clippy::len_without_is_empty,
    reason = "a file's length is an I/O result, not a property"
)]
pub trait StorageFile: Send + Sync {
    /// The file's current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Reads exactly `buf.len()` bytes at `offset` (error if past the end).
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`. Not durable until [`Self::sync_data`].
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every byte written so far durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    /// Cuts the file to `len` bytes. Durable after [`Self::sync_data`].
    fn truncate(&self, len: u64) -> io::Result<()>;
    /// The first `len` bytes as an immutable view. The real implementation
    /// memory-maps, so only call it on bytes that will never change again
    /// (sealed segments, or a prefix recovery has just verified).
    fn view(&self, len: u64) -> io::Result<Bytes>;
}

/// A length of file bytes as the length of a buffer or map holding them;
/// an error where it does not fit this platform's address space.
pub(crate) fn buffer_len(len: u64) -> io::Result<usize> {
    usize::try_from(len).map_err(|_| {
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("{len} bytes do not fit in memory on this platform"),
        )
    })
}

/// The real thing: a directory on a local filesystem.
pub struct DirStorage {
    dir: PathBuf,
    lock_file: std::sync::Mutex<Option<File>>,
}

/// The file whose flock guards the directory against a second process.
pub const LOCK_FILE_NAME: &str = "LOCK";

impl DirStorage {
    /// Creates the directory if needed.
    pub fn new(dir: impl AsRef<Path>) -> io::Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir)?;
        Ok(DirStorage {
            dir,
            lock_file: std::sync::Mutex::new(None),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn file_path(&self, name: &str) -> PathBuf {
        // Only our own segment names reach here; stream names never do.
        debug_assert!(!name.contains('/') && name != "." && name != "..");
        self.dir.join(name)
    }
}

impl Storage for DirStorage {
    fn list(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type()?.is_dir() {
                // A directory is not ours but cannot be a segment either;
                // listing it lets recovery name it as foreign.
                out.push(format!("{name}/"));
            } else {
                out.push(name);
            }
        }
        Ok(out)
    }

    fn create(&self, name: &str) -> io::Result<Arc<dyn StorageFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(self.file_path(name))?;
        Ok(Arc::new(DiskFile { file }))
    }

    fn open(&self, name: &str) -> io::Result<Arc<dyn StorageFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.file_path(name))?;
        Ok(Arc::new(DiskFile { file }))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        fs::remove_file(self.file_path(name))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        fs::rename(self.file_path(from), self.file_path(to))
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }

    fn lock(&self) -> io::Result<()> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.file_path(LOCK_FILE_NAME))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "data directory {} is locked by another fencelog process",
                        self.dir.display()
                    ),
                ))
            }
            Err(fs::TryLockError::Error(e)) => return Err(e),
        }
        *crate::locks::lock(&self.lock_file) = Some(file);
        Ok(())
    }
}

struct DiskFile {
    file: File,
}

impl StorageFile for DiskFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(&self.file, buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(&self.file, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    #[allow(
        unsafe_code,
        reason = "the engine's one `unsafe`: another writer could change mapped bytes under us"
    )]
    fn view(&self, len: u64) -> io::Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        let len = buffer_len(len)?;
        // SAFETY: fencelog never rewrites bytes below a length it has handed
        // out a view of (segments are append-only and truncation only ever
        // cuts an unverified tail before any view exists), and the LOCK file
        // keeps other fencelog processes out. An outside process modifying
        // the file is outside the fault model (see ARCHITECTURE.md).
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(&self.file)? };
        Ok(Bytes::from_owner(map))
    }
}
