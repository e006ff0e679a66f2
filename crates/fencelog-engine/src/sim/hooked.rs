//! [`HookedStorage`]: any real [`Storage`] with a hook run before every call
//! that changes the disk, so tests can fail or hold calls on a real
//! directory (the simulated disk is in [`super::disk`]).

use crate::locks;
use crate::storage::{Storage, StorageFile};
use bytes::Bytes;
use std::io;
use std::sync::Arc;

/// A call that changes the disk, as a [`HookedStorage`] hook sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookedCall {
    /// [`StorageFile::write_all_at`].
    Write,
    /// [`StorageFile::sync_data`].
    SyncData,
    /// [`StorageFile::truncate`].
    Truncate,
    /// [`Storage::create`].
    Create,
    /// [`Storage::remove`].
    Remove,
    /// [`Storage::rename`].
    Rename,
    /// [`Storage::sync_dir`].
    SyncDir,
}

type Hook = dyn Fn(HookedCall) -> io::Result<()> + Send + Sync;

/// Any [`Storage`] with a hook run before every call that changes the disk:
/// the hook may fail the call or hold it (a gate a test opens later). For
/// tests that need a real directory with injected faults; the simulated
/// disk in [`crate::sim`] models power loss as well.
pub struct HookedStorage<S> {
    inner: S,
    hook: Arc<Hook>,
}

impl<S: Storage> HookedStorage<S> {
    /// `inner` with `hook` run before every call that changes the disk; an
    /// error from the hook is the call's result.
    pub fn new(
        inner: S,
        hook: impl Fn(HookedCall) -> io::Result<()> + Send + Sync + 'static,
    ) -> Self {
        HookedStorage {
            inner,
            hook: Arc::new(hook),
        }
    }

    /// A disk that breaks (or fills up) when a test says so: while `switch`
    /// holds an error kind, every write and `sync_data` fails with it.
    pub fn failing_when(inner: S, switch: Arc<std::sync::Mutex<Option<io::ErrorKind>>>) -> Self {
        Self::new(inner, move |call| match (call, *locks::lock(&switch)) {
            (HookedCall::Write | HookedCall::SyncData, Some(kind)) => {
                Err(io::Error::new(kind, "injected by the test"))
            }
            _ => Ok(()),
        })
    }

    fn wrap(&self, inner: Arc<dyn StorageFile>) -> Arc<dyn StorageFile> {
        Arc::new(HookedFile {
            inner,
            hook: self.hook.clone(),
        })
    }
}

impl<S: Storage> Storage for HookedStorage<S> {
    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }
    fn create(&self, name: &str) -> io::Result<Arc<dyn StorageFile>> {
        (self.hook)(HookedCall::Create)?;
        Ok(self.wrap(self.inner.create(name)?))
    }
    fn open(&self, name: &str) -> io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(self.inner.open(name)?))
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        (self.hook)(HookedCall::Remove)?;
        self.inner.remove(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        (self.hook)(HookedCall::Rename)?;
        self.inner.rename(from, to)
    }
    fn sync_dir(&self) -> io::Result<()> {
        (self.hook)(HookedCall::SyncDir)?;
        self.inner.sync_dir()
    }
    fn lock(&self) -> io::Result<()> {
        self.inner.lock()
    }
}

struct HookedFile {
    inner: Arc<dyn StorageFile>,
    hook: Arc<Hook>,
}

impl StorageFile for HookedFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (self.hook)(HookedCall::Write)?;
        self.inner.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        (self.hook)(HookedCall::SyncData)?;
        self.inner.sync_data()
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        (self.hook)(HookedCall::Truncate)?;
        self.inner.truncate(len)
    }
    fn view(&self, len: u64) -> io::Result<Bytes> {
        self.inner.view(len)
    }
}
