//! [`Snapshot`]: the manifest of a workspace at one moment — its recorded files and
//! symlinks sorted by path, what was deliberately left out (`skipped`: too large or not a
//! file; `ignored`: left out by the ignore rules, known by metadata only) and what could not
//! be read (`missing`). Serialised as JSON and stored as a blob itself.

use serde::{Deserialize, Serialize};

use super::blob::BlobStore;
use super::error::CheckpointError;
use super::hash::Hash;
use super::path::RelPath;

/// The format version of new snapshots (`manifest.rs` stores them as trees; version 1
/// snapshots were one flat blob and still load).
const SNAPSHOT_VERSION: u32 = super::manifest::TREE_VERSION;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    /// Its blob holds the link target's bytes.
    Symlink,
}

/// One recorded file or symlink. `size`, `mtime_ns`, `ino` and `mode` are what an
/// incremental snapshot compares to reuse `hash` without reading the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub path: RelPath,
    pub kind: EntryKind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub size: u64,
    pub mtime_ns: i64,
    pub ino: u64,
    pub hash: Hash,
}

impl Entry {
    /// Whether restoring `self` over `other` would change anything (content, kind or mode).
    pub fn same_content(&self, other: &Entry) -> bool {
        self.kind == other.kind && self.hash == other.hash && self.mode == other.mode
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "reason"
)]
pub enum SkipReason {
    /// Larger than the snapshot's `max_file_bytes`. `mtime_ns` tells a change that kept the
    /// size (0 in snapshots written before it was recorded).
    Oversized {
        size: u64,
        #[serde(default)]
        mtime_ns: i64,
    },
    /// Not a regular file or symlink (a FIFO, socket or device).
    Special,
}

/// A path deliberately not recorded: a restore leaves it as it finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub path: RelPath,
    #[serde(flatten)]
    pub reason: SkipReason,
}

/// A direct child of a walked directory that the ignore rules leave out (`.git` aside),
/// known only by its `lstat`: its content is not read and an ignored directory is not
/// entered, so it shows a change only through its own size or mtime (for a directory,
/// a child added, removed or renamed directly inside it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ignored {
    pub path: RelPath,
    pub dir: bool,
    pub size: u64,
    pub mtime_ns: i64,
}

impl Ignored {
    /// Whether `other` (the same path at another moment) looks unchanged.
    pub fn same_metadata(&self, other: &Ignored) -> bool {
        self.dir == other.dir && self.size == other.size && self.mtime_ns == other.mtime_ns
    }
}

/// A path that should have been recorded but could not be (unreadable, vanished mid-scan,
/// the store failed): the snapshot is incomplete and cannot be restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missing {
    pub path: RelPath,
    pub reason: String,
}

/// What taking a snapshot cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TakeStats {
    /// Files (and symlinks) read and hashed because the previous snapshot did not match.
    pub files_read: u64,
    pub bytes_read: u64,
    /// Entries whose hash was reused from the previous snapshot without reading.
    pub reused: u64,
    /// New blobs written, and their size on disk (compressed).
    pub blobs_written: u64,
    pub blob_bytes_written: u64,
}

/// The manifest of a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub version: u32,
    /// The file-size limit it was taken with.
    pub max_file_bytes: u64,
    /// The filesystem clock when the walk started: an entry whose `mtime_ns` is not older
    /// is read again by the next snapshot even if its metadata did not change.
    #[serde(default)]
    pub clock_ns: i64,
    /// Sorted by path bytes, one per path.
    pub entries: Vec<Entry>,
    /// Sorted by path bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// Sorted by path bytes; never below another ignored path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<Ignored>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<Missing>,
    #[serde(default)]
    pub stats: TakeStats,
    /// Where it is stored, once saved or loaded: the next snapshot can be stored as a delta
    /// from it (`manifest.rs`). Not part of its value.
    #[serde(skip)]
    pub(crate) stored: StoredAt,
}

/// A snapshot's stored hash and how many deltas lead from it to a full tree; equal to any
/// other (two snapshots of the same workspace state are equal however they were stored).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StoredAt(pub(crate) Option<(Hash, u32)>);

impl PartialEq for StoredAt {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for StoredAt {}

impl Snapshot {
    pub(crate) fn new(max_file_bytes: u64, clock_ns: i64) -> Self {
        Self {
            version: SNAPSHOT_VERSION,
            max_file_bytes,
            clock_ns,
            entries: Vec::new(),
            skipped: Vec::new(),
            ignored: Vec::new(),
            missing: Vec::new(),
            stats: TakeStats::default(),
            stored: StoredAt::default(),
        }
    }

    /// Whether every file that should be recorded was (a restore needs that).
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty()
    }

    /// The entry at `path`.
    pub fn get(&self, path: &RelPath) -> Option<&Entry> {
        self.entries
            .binary_search_by(|e| e.path.cmp(path))
            .ok()
            .and_then(|i| self.entries.get(i))
    }

    /// Whether a restore must leave `path` alone because this snapshot did not record what
    /// is there: the path is skipped or ignored, lies inside an ignored directory, or is a
    /// directory holding a skipped or ignored path.
    pub(crate) fn off_record(&self, path: &RelPath) -> bool {
        if self.skipped.is_empty() && self.ignored.is_empty() {
            return false;
        }
        let path = path.as_bytes();
        let mut below = path.to_vec();
        below.push(b'/');
        near(&self.skipped, |s| s.path.as_bytes(), path, &below)
            || near(&self.ignored, |i| i.path.as_bytes(), path, &below)
    }

    /// The content blobs of its files (the blobs of the stored snapshot itself, its root
    /// and directories, are [`Snapshot::reach`]'s).
    pub fn blobs(&self) -> impl Iterator<Item = Hash> + '_ {
        self.entries.iter().map(|e| e.hash)
    }

    /// Stores the snapshot in full (one blob per directory and a root record:
    /// `manifest.rs`); the root's hash names the checkpoint.
    pub fn save(&mut self, store: &BlobStore) -> Result<Hash, CheckpointError> {
        super::manifest::save(self, None, store)
    }

    /// Stores the snapshot as what changed since `base` (a snapshot saved or loaded from
    /// `store`, usually the one this was taken incrementally from) when that is small, else
    /// in full: a checkpoint then costs about the entries that changed.
    pub fn save_after(
        &mut self,
        base: Option<&Snapshot>,
        store: &BlobStore,
    ) -> Result<Hash, CheckpointError> {
        super::manifest::save(self, base, store)
    }

    /// The snapshot stored as `hash`.
    pub fn load(store: &BlobStore, hash: &Hash) -> Result<Self, CheckpointError> {
        super::manifest::load(store, hash)
    }

    /// Adds every blob the snapshot stored as `hash` reaches — its own, its directories',
    /// its files' — to `reached` (for [`BlobStore::sweep`]'s keep set). Directories already
    /// in `reached` are not read again, so marking many snapshots that share most of their
    /// tree is cheap.
    pub fn reach(
        store: &BlobStore,
        hash: &Hash,
        reached: &mut std::collections::HashSet<Hash>,
    ) -> Result<(), CheckpointError> {
        super::manifest::reach(store, hash, reached)
    }
}

/// Whether `sorted` (by path bytes) holds `path`, one of its ancestors, or a path below it
/// (`below` is `path` followed by `/`).
fn near<T>(sorted: &[T], key: impl Fn(&T) -> &[u8], path: &[u8], below: &[u8]) -> bool {
    let holds = |p: &[u8]| sorted.binary_search_by(|t| key(t).cmp(p)).is_ok();
    let ancestor = path
        .iter()
        .enumerate()
        .any(|(i, &b)| b == b'/' && holds(&path[..i]));
    // Paths starting with `below` sort together, right after everything that sorts before it.
    let first_below = sorted.partition_point(|t| key(t) < below);
    holds(path)
        || ancestor
        || sorted
            .get(first_below)
            .is_some_and(|t| key(t).starts_with(below))
}
