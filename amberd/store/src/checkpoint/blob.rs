//! [`BlobStore`]: content-addressed, compressed blobs in one directory, fanned out by the
//! first byte of the hash. A blob file is one tag byte then the payload: `0` raw, `1` LZ4
//! (size-prefixed block); raw is kept when compression does not make it smaller.
//! Writes go to `tmp/`, are fsynced and renamed into place; the directories renamed into
//! are fsynced by [`BlobStore::sync`], once per batch rather than once per blob.
//!
//! Reading trusts no size a blob file declares: an LZ4 size prefix above [`MAX_BLOB_BYTES`]
//! or above what its payload could expand to (LZ4 expands at most 255 to 1) is corrupt,
//! and is refused before anything is allocated for it.

use amber_proto::sync::Locked;
use std::collections::{BTreeSet, HashSet};
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::error::CheckpointError;
use super::hash::Hash;

const TMP_DIR: &str = "tmp";
const TAG_RAW: u8 = 0;
const TAG_LZ4: u8 = 1;

/// The largest blob [`BlobStore::get`] decompresses: well above any file a snapshot
/// records or any snapshot's own JSON, far below what a corrupt size prefix could ask for.
pub(crate) const MAX_BLOB_BYTES: usize = 1 << 30;
/// LZ4's block format expands one input byte into at most 255 output bytes.
const LZ4_MAX_RATIO: usize = 255;

/// A content-addressed store of compressed blobs under one directory.
#[derive(Debug)]
pub struct BlobStore {
    dir: PathBuf,
    /// Shard directories a blob was renamed into since the last [`BlobStore::sync`].
    dirty: Mutex<BTreeSet<PathBuf>>,
    /// Blobs known to be stored (written or found by this handle): a snapshot puts every
    /// directory of the tree, and most are there already — this spares a `stat` each.
    /// Cleared by [`BlobStore::sweep`].
    known: Mutex<HashSet<Hash>>,
    written: AtomicU64,
    written_bytes: AtomicU64,
    tmp_seq: AtomicU64,
}

/// What [`BlobStore::sweep`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepStats {
    pub removed: usize,
    pub bytes_freed: u64,
    pub kept: usize,
}

impl BlobStore {
    /// Opens (creating it if needed) the store at `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, CheckpointError> {
        let dir = dir.into();
        let tmp = dir.join(TMP_DIR);
        // Blobs are copies of workspace files (`.env` among them): the owner's alone.
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&tmp)
            .map_err(|e| CheckpointError::io(&tmp, e))?;
        Ok(Self {
            dir,
            dirty: Mutex::new(BTreeSet::new()),
            known: Mutex::new(HashSet::new()),
            written: AtomicU64::new(0),
            written_bytes: AtomicU64::new(0),
            tmp_seq: AtomicU64::new(0),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stores `bytes` and returns their hash; a blob already stored is not written again.
    pub fn put(&self, bytes: &[u8]) -> Result<Hash, CheckpointError> {
        let hash = Hash::of(bytes);
        self.put_hashed(hash, bytes)?;
        Ok(hash)
    }

    /// Stores `bytes` whose hash the caller computed as `hash`.
    /// Returns the bytes written on disk, 0 when the blob was already there.
    pub(crate) fn put_hashed(&self, hash: Hash, bytes: &[u8]) -> Result<u64, CheckpointError> {
        if self.is_known(&hash) {
            return Ok(0);
        }
        let path = self.path_of(&hash);
        if path.exists() {
            self.remember(hash);
            return Ok(0);
        }
        let encoded = encode(bytes);
        let shard = self.shard_of(&hash);
        if let Err(e) = fs::DirBuilder::new().mode(0o700).create(&shard)
            && e.kind() != ErrorKind::AlreadyExists
        {
            return Err(CheckpointError::io(&shard, e));
        }
        let tmp = self.tmp_path();
        let written = (|| {
            let mut file = private_file(&tmp)?;
            file.write_all(&encoded)?;
            file.sync_all()
        })();
        if let Err(e) = written.and_then(|()| fs::rename(&tmp, &path)) {
            let _ = fs::remove_file(&tmp);
            return Err(CheckpointError::io(&path, e));
        }
        self.remember(hash);
        self.written.fetch_add(1, Ordering::Relaxed);
        self.written_bytes
            .fetch_add(encoded.len() as u64, Ordering::Relaxed);
        if let Ok(mut dirty) = self.dirty.lock() {
            dirty.insert(shard);
        }
        Ok(encoded.len() as u64)
    }

    fn is_known(&self, hash: &Hash) -> bool {
        self.known.locked().contains(hash)
    }

    fn remember(&self, hash: Hash) {
        self.known.locked().insert(hash);
    }

    /// The bytes of the blob `hash`, verified against it.
    pub fn get(&self, hash: &Hash) -> Result<Vec<u8>, CheckpointError> {
        let path = self.path_of(hash);
        let raw = match fs::read(&path) {
            Ok(raw) => raw,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(CheckpointError::BlobNotFound(*hash));
            }
            Err(e) => return Err(CheckpointError::io(&path, e)),
        };
        let bytes = decode(&raw).map_err(|reason| CheckpointError::BlobCorrupt {
            hash: *hash,
            reason,
        })?;
        if Hash::of(&bytes) != *hash {
            return Err(CheckpointError::BlobCorrupt {
                hash: *hash,
                reason: "content does not match its hash".into(),
            });
        }
        Ok(bytes)
    }

    /// Whether the blob is stored; one this handle wrote or found before is not looked
    /// up again (a sweep forgets them all).
    pub fn contains(&self, hash: &Hash) -> bool {
        if self.is_known(hash) {
            return true;
        }
        let found = self.path_of(hash).exists();
        if found {
            self.remember(*hash);
        }
        found
    }

    /// Makes the renames of the blobs written since the last call durable (fsyncs the
    /// directories they went into).
    pub fn sync(&self) -> Result<(), CheckpointError> {
        let dirty = match self.dirty.lock() {
            Ok(mut dirty) => std::mem::take(&mut *dirty),
            Err(_) => return Ok(()),
        };
        for dir in dirty
            .iter()
            .map(PathBuf::as_path)
            .chain([self.dir.as_path()])
        {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| CheckpointError::io(dir, e))?;
        }
        Ok(())
    }

    /// Blobs written by this handle and their size on disk (compressed), since it opened.
    pub fn written(&self) -> (u64, u64) {
        (
            self.written.load(Ordering::Relaxed),
            self.written_bytes.load(Ordering::Relaxed),
        )
    }

    /// Removes every blob not in `keep`, and whatever `tmp/` holds (left by a crash).
    /// Must not run while a snapshot is being taken into the same store.
    pub fn sweep(&self, keep: &HashSet<Hash>) -> Result<SweepStats, CheckpointError> {
        let mut stats = SweepStats::default();
        self.known.locked().clear();
        let read = |dir: &Path| fs::read_dir(dir).map_err(|e| CheckpointError::io(dir, e));
        for shard in read(&self.dir)? {
            let shard = shard.map_err(|e| CheckpointError::io(&self.dir, e))?;
            let shard_name = shard.file_name();
            let shard_path = shard.path();
            let Some(prefix) = shard_name.to_str().filter(|n| n.len() == 2) else {
                if shard_name == TMP_DIR {
                    for tmp in read(&shard_path)? {
                        let tmp = tmp.map_err(|e| CheckpointError::io(&shard_path, e))?;
                        remove(&tmp.path(), &mut stats)?;
                    }
                }
                continue;
            };
            for blob in read(&shard_path)? {
                let blob = blob.map_err(|e| CheckpointError::io(&shard_path, e))?;
                let name = blob.file_name();
                let Some(rest) = name.to_str() else { continue };
                let Ok(hash) = format!("{prefix}{rest}").parse::<Hash>() else {
                    continue;
                };
                if keep.contains(&hash) {
                    stats.kept += 1;
                } else {
                    remove(&blob.path(), &mut stats)?;
                }
            }
        }
        Ok(stats)
    }

    /// The filesystem clock now: the mtime of a marker file written in `tmp/`. Timestamps
    /// are coarse (a clock tick), so a file whose mtime is not older than this when a
    /// snapshot starts may still change unseen within the same tick; the next snapshot
    /// reads it again (git's "racy clean" rule). `i64::MIN` when the marker cannot be
    /// written, so that everything is read again.
    pub fn clock_ns(&self) -> i64 {
        let marker = self.tmp_path();
        let written = private_file(&marker).and_then(|mut f| {
            f.write_all(b"clock")?;
            f.metadata()
        });
        let _ = fs::remove_file(&marker);
        written.map_or(i64::MIN, |meta| {
            use std::os::unix::fs::MetadataExt;
            meta.mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec())
        })
    }

    fn shard_of(&self, hash: &Hash) -> PathBuf {
        self.dir.join(&hash.to_hex()[..2])
    }

    fn path_of(&self, hash: &Hash) -> PathBuf {
        let hex = hash.to_hex();
        self.dir.join(&hex[..2]).join(&hex[2..])
    }

    fn tmp_path(&self) -> PathBuf {
        let seq = self.tmp_seq.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        self.dir
            .join(TMP_DIR)
            .join(format!("{}-{nanos}-{seq}", std::process::id()))
    }
}

fn remove(path: &Path, stats: &mut SweepStats) -> Result<(), CheckpointError> {
    let len = fs::metadata(path).map_or(0, |m| m.len());
    match fs::remove_file(path) {
        Ok(()) => {
            stats.removed += 1;
            stats.bytes_freed += len;
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CheckpointError::io(path, e)),
    }
}

fn encode(bytes: &[u8]) -> Vec<u8> {
    let compressed = lz4_flex::block::compress_prepend_size(bytes);
    let (tag, payload) = if compressed.len() < bytes.len() {
        (TAG_LZ4, compressed.as_slice())
    } else {
        (TAG_RAW, bytes)
    };
    let mut out = Vec::with_capacity(payload.len() + 1);
    out.push(tag);
    out.extend_from_slice(payload);
    out
}

fn decode(raw: &[u8]) -> Result<Vec<u8>, String> {
    match raw.split_first() {
        Some((&TAG_RAW, payload)) => Ok(payload.to_vec()),
        Some((&TAG_LZ4, payload)) => decode_lz4(payload),
        Some((tag, _)) => Err(format!("unknown encoding tag {tag}")),
        None => Err("empty blob file".into()),
    }
}

/// A size-prefixed LZ4 block whose prefix is checked before the output is allocated.
fn decode_lz4(payload: &[u8]) -> Result<Vec<u8>, String> {
    let (prefix, block) = payload
        .split_first_chunk::<4>()
        .ok_or("LZ4 blob shorter than its size prefix")?;
    let size = usize::try_from(u32::from_le_bytes(*prefix)).unwrap_or(usize::MAX);
    let limit = MAX_BLOB_BYTES.min(block.len().saturating_mul(LZ4_MAX_RATIO));
    if size > limit {
        return Err(format!(
            "declared size {size} exceeds the {limit} bytes a {}-byte LZ4 block can hold",
            block.len()
        ));
    }
    let bytes = lz4_flex::block::decompress(block, size).map_err(|e| e.to_string())?;
    if bytes.len() != size {
        return Err(format!(
            "decompressed to {} bytes, {size} declared",
            bytes.len()
        ));
    }
    Ok(bytes)
}

/// A new file only its owner may read (`create`, truncating, mode 0600).
fn private_file(path: &Path) -> std::io::Result<File> {
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}
