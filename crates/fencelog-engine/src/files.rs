//! The data directory's files other than segments: the MANIFEST and
//! checkpoints, their names, and the one way both are replaced — whole,
//! through a temp file, `fdatasync`, an atomic rename and a directory
//! fsync, so the name always holds a complete old or new version.

use crate::codec::manifest::Manifest;
use crate::error::StorageFailure;
use crate::locks;
use crate::storage::{buffer_len, Storage, StorageFile};
use std::io;
use std::sync::{Arc, Mutex};

pub const MANIFEST_NAME: &str = "MANIFEST";
pub const MANIFEST_TMP_NAME: &str = "MANIFEST.tmp";
const CHECKPOINT_SUFFIX: &str = ".ckpt";
const TMP_SUFFIX: &str = ".tmp";
const GENERATION_DIGITS: usize = 20;

/// The file name of checkpoint `generation`.
pub fn checkpoint_name(generation: u64) -> String {
    format!("{generation:0GENERATION_DIGITS$}{CHECKPOINT_SUFFIX}")
}

/// The temp name a checkpoint is written under before its rename.
pub fn checkpoint_tmp_name(generation: u64) -> String {
    format!("{}{TMP_SUFFIX}", checkpoint_name(generation))
}

/// The generation in a checkpoint's file name, and whether it is the temp
/// name; `None` for any other name.
pub fn parse_checkpoint_name(name: &str) -> Option<(u64, bool)> {
    let (name, tmp) = match name.strip_suffix(TMP_SUFFIX) {
        Some(n) => (n, true),
        None => (name, false),
    };
    let digits = name.strip_suffix(CHECKPOINT_SUFFIX)?;
    if digits.len() != GENERATION_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, tmp))
}

/// Creates `name`, replacing a leftover of an earlier attempt.
pub fn create_replacing(storage: &dyn Storage, name: &str) -> io::Result<Arc<dyn StorageFile>> {
    match storage.create(name) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            storage.remove(name)?;
            storage.create(name)
        }
        r => r,
    }
}

/// Replaces `name` with `bytes`: written to `tmp` (replacing a leftover),
/// synced, renamed over `name`, and the directory synced.
pub fn replace_whole(storage: &dyn Storage, tmp: &str, name: &str, bytes: &[u8]) -> io::Result<()> {
    let file = create_replacing(storage, tmp)?;
    file.write_all_at(bytes, 0)?;
    file.sync_data()?;
    storage.rename(tmp, name)?;
    storage.sync_dir()
}

/// A whole small file.
pub fn read_whole(storage: &dyn Storage, name: &str) -> io::Result<Vec<u8>> {
    let file = storage.open(name)?;
    let len = file.len()?;
    let mut buf = vec![0u8; buffer_len(len)?];
    file.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

/// The MANIFEST as last written, and the lock every rewrite holds: the
/// writer rewrites it at a roll, the reclaimer after a checkpoint and
/// before a deletion.
pub struct ManifestFile {
    current: Mutex<Manifest>,
    /// Bytes of the file.
    bytes: std::sync::atomic::AtomicU64,
}

impl ManifestFile {
    /// The MANIFEST recovery wrote or read.
    pub fn new(m: Manifest) -> Self {
        let bytes = m.encode().len() as u64;
        ManifestFile {
            current: Mutex::new(m),
            bytes: bytes.into(),
        }
    }

    /// A copy of what it says now.
    pub fn get(&self) -> Manifest {
        locks::lock(&self.current).clone()
    }

    /// Bytes of the file.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Rewrites the MANIFEST with `change` applied and the generation
    /// raised. On failure the file may hold the old or the new version:
    /// the caller poisons the engine, which is what makes either safe.
    pub fn rewrite(
        &self,
        storage: &dyn Storage,
        change: impl FnOnce(&mut Manifest),
    ) -> Result<(), StorageFailure> {
        let mut current = locks::lock(&self.current);
        let mut next = current.clone();
        change(&mut next);
        next.generation += 1;
        let bytes = next.encode();
        replace_whole(storage, MANIFEST_TMP_NAME, MANIFEST_NAME, &bytes)
            .map_err(|e| StorageFailure::new("write MANIFEST", MANIFEST_NAME, &e))?;
        *current = next;
        self.bytes
            .store(bytes.len() as u64, std::sync::atomic::Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Resolution, SimStorage};

    #[test]
    fn checkpoint_names_sort_and_round_trip() {
        assert_eq!(checkpoint_name(7), "00000000000000000007.ckpt");
        assert_eq!(parse_checkpoint_name(&checkpoint_name(7)), Some((7, false)));
        assert_eq!(
            parse_checkpoint_name(&checkpoint_tmp_name(9)),
            Some((9, true))
        );
        assert_eq!(parse_checkpoint_name("7.ckpt"), None);
        assert_eq!(parse_checkpoint_name("00000000000000000007.seg"), None);
    }

    #[test]
    fn a_replaced_file_is_old_or_new_after_any_crash() {
        let sim = SimStorage::new();
        replace_whole(&sim, "x.tmp", "x", b"old").unwrap();
        for point in 0..8 {
            let disk = sim.fork();
            disk.crash_at(disk.op_count() + point);
            let _ = replace_whole(&disk, "x.tmp", "x", b"new!");
            for res in [
                Resolution::DropAll,
                Resolution::KeepAll,
                Resolution::Random(point),
            ] {
                let d = disk.fork();
                d.crash(res);
                let got = read_whole(&d, "x").unwrap();
                assert!(
                    got == b"old" || got == b"new!",
                    "point {point} {res:?}: {got:?}"
                );
            }
        }
    }
}
