//! A shard engine's directory and its atomic replacement by a snapshot.
//!
//! `shard-{k:03}/CURRENT` names the generation whose directory
//! `gen-{n:06}/` holds the engine. A snapshot is installed into
//! `gen-{n+1}.staging/` (files synced), renamed to `gen-{n+1}/`, and only
//! then does CURRENT move (temp, sync, rename, directory sync). A crash
//! anywhere leaves CURRENT naming the old or the new complete directory;
//! [`ShardDir::open`] removes whatever else it finds, snapshot directories
//! (`snap-*`, `recv-*`, [`super::dir`]) included: they are
//! rebuilt on demand.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::dir::{capture, Active};

const CURRENT: &str = "CURRENT";

/// A shard's directory.
#[derive(Debug, Clone)]
pub struct ShardDir {
    root: PathBuf,
    generation: u64,
}

fn gen_name(g: u64) -> String {
    format!("gen-{g:06}")
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes `name` in `dir` durably (temp, sync, rename, directory sync).
pub fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

impl ShardDir {
    /// Opens (or creates) `root`, tidying leftovers of an interrupted
    /// install.
    pub fn open(root: &Path) -> io::Result<ShardDir> {
        fs::create_dir_all(root)?;
        let generation = match fs::read_to_string(root.join(CURRENT)) {
            Ok(s) => s.trim().parse::<u64>().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: CURRENT is not a generation: {s:?}", root.display()),
                )
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                write_durably(root, CURRENT, b"0")?;
                0
            }
            Err(e) => return Err(e),
        };
        let dir = ShardDir {
            root: root.to_path_buf(),
            generation,
        };
        dir.remove_others(true)?;
        fs::create_dir_all(dir.engine_dir())?;
        Ok(dir)
    }

    /// The current engine's directory.
    pub fn engine_dir(&self) -> PathBuf {
        self.root.join(gen_name(self.generation))
    }

    /// The directory of a snapshot this node builds (`n` unique while the
    /// node runs).
    pub fn snapshot_path(&self, n: u64) -> PathBuf {
        self.root.join(format!("snap-{n:06}"))
    }

    /// The directory a snapshot received from another node goes to (`n`
    /// unique while the node runs).
    pub fn receive_path(&self, n: u64) -> PathBuf {
        self.root.join(format!("recv-{n:06}"))
    }

    /// Removes every generation but the current one, and with `snapshots`
    /// every snapshot directory (only at open: later, live handles own
    /// theirs).
    fn remove_others(&self, snapshots: bool) -> io::Result<()> {
        let keep = gen_name(self.generation);
        for entry in fs::read_dir(&self.root)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            let snapshot = name.starts_with("snap-") || name.starts_with("recv-");
            if (name.starts_with("gen-") && name != keep) || (snapshots && snapshot) {
                fs::remove_dir_all(self.root.join(&name))?;
            }
        }
        sync_dir(&self.root)
    }

    /// Makes the snapshot in `src` the next generation and makes it
    /// current: captured into a staging directory (links, and a copy of
    /// the active segment, [`capture`]; every file synced),
    /// so `src` stays a snapshot others may still be sent. The caller
    /// opens the engine in [`Self::engine_dir`] afterwards and then calls
    /// [`Self::remove_previous`].
    pub fn install(&mut self, src: &Path) -> io::Result<()> {
        let next = self.generation + 1;
        let staging = self.root.join(format!("{}.staging", gen_name(next)));
        if staging.exists() {
            fs::remove_dir_all(&staging)?;
        }
        capture(src, &staging, true, Active::Copied)?;
        fs::rename(&staging, self.root.join(gen_name(next)))?;
        sync_dir(&self.root)?;
        write_durably(&self.root, CURRENT, next.to_string().as_bytes())?;
        self.generation = next;
        Ok(())
    }

    /// Removes every generation but the current one.
    pub fn remove_previous(&self) -> io::Result<()> {
        self.remove_others(false)
    }
}
