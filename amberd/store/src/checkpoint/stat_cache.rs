//! [`StatCache`]: the newest snapshot taken of each workspace, by its root path, kept across
//! sessions and restarts. A snapshot's entries are a stat cache — `(size, mtime, inode,
//! mode)` and the hash they stood for — so the first checkpoint a new session takes of a
//! workspace someone checkpointed before reads only the files that changed since.
//!
//! ```text
//! <dir>/<BLAKE3 of the root path, hex>   the hash of that workspace's newest snapshot
//! ```
//!
//! A pointer is only a hint: one whose snapshot cannot be loaded is ignored (and whoever
//! sweeps the store removes the pointers to what it removed, see [`StatCache::retain`]).

use std::ffi::OsStr;
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::error::CheckpointError;
use super::hash::Hash;

/// The newest snapshot of each workspace, one small file per workspace under a directory.
#[derive(Debug, Clone)]
pub struct StatCache {
    dir: PathBuf,
}

impl StatCache {
    /// The cache in `dir` (made, private, on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn pointer(&self, root: &Path) -> PathBuf {
        self.dir
            .join(Hash::of(root.as_os_str().as_bytes()).to_hex())
    }

    /// The newest snapshot recorded for the workspace at `root`, if any.
    pub fn get(&self, root: &Path) -> Option<Hash> {
        let text = fs::read_to_string(self.pointer(root)).ok()?;
        Hash::from_str(text.trim()).ok()
    }

    /// Records `snapshot` as the newest of the workspace at `root` (written whole, then
    /// renamed into place: a reader sees the old pointer or the new one).
    pub fn set(&self, root: &Path, snapshot: &Hash) -> Result<(), CheckpointError> {
        match fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&self.dir)
        {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(CheckpointError::io(&self.dir, e)),
        }
        let path = self.pointer(root);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let written = fs::File::options()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(snapshot.to_hex().as_bytes()))
            .and_then(|()| fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(CheckpointError::io(&path, e));
        }
        Ok(())
    }

    /// Every snapshot a pointer names (for a sweep's keep set, or to check them).
    pub fn snapshots(&self) -> Vec<Hash> {
        self.pointers().into_iter().map(|(_, hash)| hash).collect()
    }

    /// Removes the pointers whose snapshot `keep` rejects (a sweep is about to remove it).
    pub fn retain(&self, keep: impl Fn(&Hash) -> bool) {
        for (path, hash) in self.pointers() {
            if !keep(&hash) {
                let _ = fs::remove_file(path);
            }
        }
    }

    fn pointers(&self) -> Vec<(PathBuf, Hash)> {
        let Ok(dir) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        dir.flatten()
            .filter(|d| d.file_name().len() == 64 && is_hex(&d.file_name()))
            .filter_map(|d| {
                let text = fs::read_to_string(d.path()).ok()?;
                Some((d.path(), Hash::from_str(text.trim()).ok()?))
            })
            .collect()
    }
}

fn is_hex(name: &OsStr) -> bool {
    name.as_bytes().iter().all(u8::is_ascii_hexdigit)
}
