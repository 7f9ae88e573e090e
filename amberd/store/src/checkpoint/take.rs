//! [`Snapshot::take`]: walk the workspace (`.gitignore`/`.ignore`-aware through `ignore`,
//! hidden files included, `.git` never entered), reuse the previous snapshot's hash for
//! every file whose `(size, mtime_ns, ino, mode)` did not change, and read, hash and store
//! the others — on several threads, since a new blob costs an fsync. An entry that was not
//! older than the previous snapshot's start (`clock_ns`) is read again whatever its
//! metadata says: timestamps are coarse, so it may have changed within the same tick.
//!
//! A file that cannot be read never fails the snapshot: it is listed in `missing` with the
//! reason. Only a failure of the store's directory sync is an error.
//!
//! **Ignored paths** are listed too, cheaply, so that a turn that changed one can say so:
//! as the (depth-first) walk leaves a directory, another thread lists it again, and every
//! direct child the walk did not yield there (other than `.git`) is ignored, recorded by
//! its `lstat` alone; that thread's work overlaps the walk, the reads and the sync. An
//! ignored directory is never entered (`target/` or `node_modules/` can be huge), so only
//! its own mtime tells of a change, and that moves only when a child is added, removed or
//! renamed directly inside it: a file edited, or created deeper down, goes unseen. An
//! ignored file rewritten within one clock tick at the same size is unseen too, and a path
//! created while the walk runs may be listed as ignored once.

use std::fs::{self, File, Metadata};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;

use super::blob::BlobStore;
use super::error::CheckpointError;
use super::hash::Hash;
use super::path::RelPath;
use super::sink::{BlobSink, HashesOnly};
use super::snapshot::{Entry, EntryKind, Ignored, Missing, SkipReason, Skipped, Snapshot};

/// The default for `[checkpoints] max_file_bytes`: 8 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Below this many files to read, reading stays on the calling thread.
const PARALLEL_FROM: usize = 32;
/// Threads reading at most; more than cores, since a new blob waits on an fsync.
const MAX_READERS: usize = 8;

/// A path found by the walk whose content must be read.
#[derive(Debug)]
pub(crate) struct Candidate {
    pub(crate) path: RelPath,
    pub(crate) abs: PathBuf,
    pub(crate) kind: EntryKind,
}

/// What reading one candidate gave.
#[derive(Debug)]
pub(crate) enum Outcome {
    Entry { entry: Entry, blob_bytes: u64 },
    Skipped(Skipped),
    Missing(Missing),
}

impl Snapshot {
    /// Records the workspace at `root` into `store`. With `previous` (a snapshot of the same
    /// root whose blobs are in `store`), unchanged files are not read again.
    pub fn take(
        root: &Path,
        previous: Option<&Snapshot>,
        store: &BlobStore,
        max_file_bytes: u64,
    ) -> Result<Snapshot, CheckpointError> {
        Self::take_excluding(root, previous, store, max_file_bytes, &[])
    }

    /// [`Snapshot::take`], leaving out the paths in `exclude` (absolute, inside `root`: amber's
    /// own data directory when it lies in the workspace) as if they did not exist.
    pub fn take_excluding(
        root: &Path,
        previous: Option<&Snapshot>,
        store: &BlobStore,
        max_file_bytes: u64,
        exclude: &[PathBuf],
    ) -> Result<Snapshot, CheckpointError> {
        Self::take_into(root, previous, store, max_file_bytes, exclude)
    }

    /// [`Snapshot::take_excluding`] where the snapshot's keeper is on another machine: every
    /// entry is hashed (or its hash reused from `previous`) but no content is kept; the
    /// keeper reads what it lacks from the workspace. `clock` is a store on this machine,
    /// for the filesystem clock and nothing else.
    pub fn take_hashes(
        root: &Path,
        previous: Option<&Snapshot>,
        clock: &BlobStore,
        max_file_bytes: u64,
        exclude: &[PathBuf],
    ) -> Result<Snapshot, CheckpointError> {
        Self::take_into(
            root,
            previous,
            &HashesOnly { clock },
            max_file_bytes,
            exclude,
        )
    }

    /// [`Snapshot::take_excluding`] into any sink, calling `enter` with each directory the
    /// walk enters (the root first) before it is listed: where a watcher adds its watch.
    pub fn take_watching(
        root: &Path,
        previous: Option<&Snapshot>,
        store: &dyn BlobSink,
        max_file_bytes: u64,
        exclude: &[PathBuf],
        enter: &mut dyn FnMut(&Path),
    ) -> Result<Snapshot, CheckpointError> {
        Self::take_scoped(root, previous, store, max_file_bytes, exclude, enter)
    }

    fn take_into(
        root: &Path,
        previous: Option<&Snapshot>,
        store: &dyn BlobSink,
        max_file_bytes: u64,
        exclude: &[PathBuf],
    ) -> Result<Snapshot, CheckpointError> {
        Self::take_scoped(root, previous, store, max_file_bytes, exclude, &mut |_| {})
    }

    fn take_scoped(
        root: &Path,
        previous: Option<&Snapshot>,
        store: &dyn BlobSink,
        max_file_bytes: u64,
        exclude: &[PathBuf],
        enter: &mut dyn FnMut(&Path),
    ) -> Result<Snapshot, CheckpointError> {
        let excluded: Vec<RelPath> = exclude
            .iter()
            .filter_map(|p| RelPath::under(root, p))
            .collect();
        let mut snap = Snapshot::new(max_file_bytes, store.clock_ns());
        thread::scope(|scope| {
            // Ignored paths are listed on another thread as the walk leaves each directory,
            // so that listing overlaps the walk, the reads and the final sync.
            let (done, inbox) = mpsc::channel();
            let lister = scope.spawn(|| list_ignored(root, inbox, &excluded));
            let scope = Scope {
                start: root,
                depth: None,
                enter,
            };
            let to_read = walk(
                root,
                scope,
                previous,
                max_file_bytes,
                &mut snap,
                Dirs::new(None, done),
                exclude,
            )
            .read;
            record(&mut snap, read_all(&to_read, store, max_file_bytes));
            store.sync()?;
            snap.entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
            snap.skipped.sort_by(|a, b| a.path.cmp(&b.path));
            match lister.join() {
                Ok(mut ignored) => {
                    ignored.sort_by(|a, b| a.path.cmp(&b.path));
                    snap.ignored = ignored;
                }
                Err(_) => snap.missing.push(Missing {
                    path: RelPath::from("."),
                    reason: "the checkpoint thread listing ignored paths panicked".into(),
                }),
            }
            snap.missing.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(snap)
        })
    }
}

/// Where a walk starts (a directory under the workspace root, or the root), how deep it goes
/// (`Some(1)`: the directory's own children), and what to call as it enters a directory.
pub(crate) struct Scope<'a> {
    pub(crate) start: &'a Path,
    pub(crate) depth: Option<usize>,
    pub(crate) enter: &'a mut dyn FnMut(&Path),
}

/// What a walk found besides what it put in the snapshot.
pub(crate) struct Walked {
    /// The files to read.
    pub(crate) read: Vec<Candidate>,
    /// The directories at the scope's depth, found but not entered.
    pub(crate) dirs_below: Vec<PathBuf>,
}

/// Walks `scope` of the workspace at `root` into `snap` (entries reused from `previous`,
/// skipped, missing) and returns the files to read; every directory it enters goes through
/// `dirs`.
pub(crate) fn walk(
    root: &Path,
    scope: Scope<'_>,
    previous: Option<&Snapshot>,
    max_file_bytes: u64,
    snap: &mut Snapshot,
    mut dirs: Dirs,
    exclude: &[PathBuf],
) -> Walked {
    let mut to_read = Vec::new();
    let mut dirs_below = Vec::new();
    (scope.enter)(scope.start);
    let mut builder = walker(scope.start, exclude);
    builder.max_depth(scope.depth);
    for found in builder.build() {
        let dent = match found {
            Ok(dent) => dent,
            Err(err) => {
                if let Some((depth, name)) = walk_error(root, &err, snap) {
                    dirs.yielded(depth, &name);
                }
                continue;
            }
        };
        if dent.depth() == 0 {
            continue;
        }
        let Some(path) = RelPath::under(root, dent.path()) else {
            continue;
        };
        dirs.yielded(dent.depth(), dent.file_name().as_bytes());
        let Some(file_type) = dent.file_type() else {
            continue;
        };
        if file_type.is_dir() {
            if scope.depth.is_some_and(|max| dent.depth() >= max) {
                dirs_below.push(dent.into_path());
            } else {
                (scope.enter)(dent.path());
                dirs.enter(path, dent.depth());
            }
            continue;
        }
        let kind = if file_type.is_symlink() {
            EntryKind::Symlink
        } else if file_type.is_file() {
            EntryKind::File
        } else {
            snap.skipped.push(Skipped {
                path,
                reason: SkipReason::Special,
            });
            continue;
        };
        let meta = match dent.metadata() {
            Ok(meta) => meta,
            Err(err) => {
                snap.missing.push(Missing {
                    path,
                    reason: err.to_string(),
                });
                continue;
            }
        };
        if kind == EntryKind::File && meta.len() > max_file_bytes {
            snap.skipped.push(Skipped {
                path,
                reason: SkipReason::Oversized {
                    size: meta.len(),
                    mtime_ns: mtime_ns(&meta),
                },
            });
            continue;
        }
        let reused = previous.and_then(|p| {
            p.get(&path)
                .filter(|old| old.mtime_ns < p.clock_ns)
                .filter(|old| old.kind == kind && unchanged(old, &meta))
        });
        match reused {
            Some(old) => {
                snap.stats.reused += 1;
                snap.entries.push(old.clone());
            }
            None => to_read.push(Candidate {
                path,
                abs: dent.into_path(),
                kind,
            }),
        }
    }
    Walked {
        read: to_read,
        dirs_below,
    }
}

/// A directory the walk entered (`None`: the root) and the names of the children it
/// yielded there, each followed by a 0 byte (which no name holds).
#[derive(Debug)]
pub(crate) struct Dir {
    path: Option<RelPath>,
    depth: usize,
    names: Vec<u8>,
}

/// The directories the walk is inside. The walk is depth first, so a directory is complete
/// once an entry no deeper than it comes: then it goes to the lister.
pub(crate) struct Dirs {
    open: Vec<Dir>,
    done: mpsc::Sender<Dir>,
}

impl Dirs {
    /// Dirs of a walk that starts at `start` (`None`: the root).
    pub(crate) fn new(start: Option<RelPath>, done: mpsc::Sender<Dir>) -> Self {
        let root = Dir {
            path: start,
            depth: 0,
            names: Vec::new(),
        };
        Self {
            open: vec![root],
            done,
        }
    }

    /// The walk yielded `name` at `depth` (1 for the root's children).
    fn yielded(&mut self, depth: usize, name: &[u8]) {
        while self.open.last().is_some_and(|d| d.depth >= depth) {
            self.close();
        }
        if let Some(parent) = self.open.last_mut().filter(|d| d.depth + 1 == depth) {
            parent.names.extend_from_slice(name);
            parent.names.push(0);
        }
    }

    fn enter(&mut self, path: RelPath, depth: usize) {
        self.open.push(Dir {
            path: Some(path),
            depth,
            names: Vec::new(),
        });
    }

    fn close(&mut self) {
        if let Some(dir) = self.open.pop() {
            // The lister only hangs up by panicking, which `take` reports.
            let _ = self.done.send(dir);
        }
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        while !self.open.is_empty() {
            self.close();
        }
    }
}

/// The children of each directory from `inbox` that the walk did not yield, `.git` aside:
/// what its ignore rules left out. One that vanished since is simply not listed.
pub(crate) fn list_ignored(
    root: &Path,
    inbox: mpsc::Receiver<Dir>,
    excluded: &[RelPath],
) -> Vec<Ignored> {
    let mut ignored = Vec::new();
    let mut rel = Vec::new();
    for dir in inbox {
        let abs = dir
            .path
            .as_ref()
            .map_or_else(|| root.to_path_buf(), |d| d.join_to(root));
        // Unreadable: the walk already listed it as missing.
        let Ok(children) = fs::read_dir(&abs) else {
            continue;
        };
        let mut yielded: Vec<&[u8]> = dir.names.split(|&b| b == 0).collect();
        yielded.sort_unstable();
        for child in children.flatten() {
            let name = child.file_name();
            let name = name.as_bytes();
            if name == b".git" || yielded.binary_search(&name).is_ok() {
                continue;
            }
            // `DirEntry::metadata` does not follow a symlink: this is the `lstat`.
            let Ok(meta) = child.metadata() else {
                continue;
            };
            rel.clear();
            if let Some(dir) = &dir.path {
                rel.extend_from_slice(dir.as_bytes());
                rel.push(b'/');
            }
            rel.extend_from_slice(name);
            if excluded.iter().any(|e| e.as_bytes() == rel.as_slice()) {
                continue;
            }
            ignored.push(Ignored {
                path: RelPath::from_bytes(rel.clone()),
                dir: meta.is_dir(),
                size: meta.len(),
                mtime_ns: mtime_ns(&meta),
            });
        }
    }
    ignored
}

fn walker(root: &Path, exclude: &[PathBuf]) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(root);
    let exclude = exclude.to_vec();
    builder
        .hidden(false)
        .follow_links(false)
        .require_git(false)
        .filter_entry(move |dent| {
            dent.file_name().as_bytes() != b".git" && !exclude.iter().any(|p| p == dent.path())
        });
    builder
}

fn unchanged(old: &Entry, meta: &Metadata) -> bool {
    old.size == meta.len()
        && old.mtime_ns == mtime_ns(meta)
        && old.ino == meta.ino()
        && old.mode == mode(meta)
}

fn mtime_ns(meta: &Metadata) -> i64 {
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

fn mode(meta: &Metadata) -> u32 {
    meta.mode() & 0o7777
}

/// A walk error: an I/O one makes what it is about missing; a bad ignore file only warns.
/// Returns the depth and name of the path it is about, when it tells them.
fn walk_error(root: &Path, err: &ignore::Error, snap: &mut Snapshot) -> Option<(usize, Vec<u8>)> {
    if err.io_error().is_none() {
        tracing::warn!(error = %err, "checkpoint walk");
        return None;
    }
    let path = error_path(err).and_then(|p| RelPath::under(root, p));
    snap.missing.push(Missing {
        path: path.clone().unwrap_or_else(|| RelPath::from(".")),
        reason: err.to_string(),
    });
    let name = path?.as_bytes().rsplit(|&b| b == b'/').next()?.to_vec();
    Some((error_depth(err)?, name))
}

fn error_depth(err: &ignore::Error) -> Option<usize> {
    match err {
        ignore::Error::WithDepth { depth, .. } => Some(*depth),
        ignore::Error::WithPath { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_depth(err)
        }
        _ => None,
    }
}

fn error_path(err: &ignore::Error) -> Option<&Path> {
    match err {
        ignore::Error::WithPath { path, .. } => Some(path),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        ignore::Error::Loop { child, .. } => Some(child),
        ignore::Error::Partial(errs) => errs.iter().find_map(error_path),
        _ => None,
    }
}

/// Puts what reading gave into `snap`: entries, skipped and missing paths, and the cost.
pub(crate) fn record(snap: &mut Snapshot, outcomes: Vec<Outcome>) {
    for outcome in outcomes {
        match outcome {
            Outcome::Entry { entry, blob_bytes } => {
                snap.stats.files_read += 1;
                snap.stats.bytes_read += entry.size;
                if blob_bytes > 0 {
                    snap.stats.blobs_written += 1;
                    snap.stats.blob_bytes_written += blob_bytes;
                }
                snap.entries.push(entry);
            }
            Outcome::Skipped(s) => snap.skipped.push(s),
            Outcome::Missing(m) => snap.missing.push(m),
        }
    }
}

/// Reads every candidate, on up to [`MAX_READERS`] threads when there are many.
pub(crate) fn read_all(
    to_read: &[Candidate],
    store: &dyn BlobSink,
    max_file_bytes: u64,
) -> Vec<Outcome> {
    if to_read.len() < PARALLEL_FROM {
        return to_read
            .iter()
            .map(|c| read_one(c, store, max_file_bytes))
            .collect();
    }
    let readers = thread::available_parallelism()
        .map_or(2, |n| n.get() * 2)
        .min(MAX_READERS);
    let next = AtomicUsize::new(0);
    thread::scope(|scope| {
        let workers: Vec<_> = (0..readers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    while let Some(c) = to_read.get(next.fetch_add(1, Ordering::Relaxed)) {
                        done.push(read_one(c, store, max_file_bytes));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                w.join().unwrap_or_else(|_| {
                    vec![Outcome::Missing(Missing {
                        path: RelPath::from("."),
                        reason: "a checkpoint reader thread panicked".into(),
                    })]
                })
            })
            .collect()
    })
}

/// Reads, hashes and stores one file or symlink target. The metadata recorded is the
/// open file's own (fstat), so a file replaced between walk and read is recorded as read.
pub(crate) fn read_one(c: &Candidate, store: &dyn BlobSink, max_file_bytes: u64) -> Outcome {
    let missing = |reason: String| {
        Outcome::Missing(Missing {
            path: c.path.clone(),
            reason,
        })
    };
    let read = match c.kind {
        EntryKind::Symlink => fs::symlink_metadata(&c.abs).and_then(|meta| {
            let target = fs::read_link(&c.abs)?;
            Ok((meta, target.as_os_str().as_bytes().to_vec()))
        }),
        EntryKind::File => (|| {
            let mut file = File::open(&c.abs)?;
            let meta = file.metadata()?;
            let mut bytes = Vec::new();
            if meta.is_file() && meta.len() <= max_file_bytes {
                bytes.reserve_exact(usize::try_from(meta.len()).unwrap_or(0));
                file.read_to_end(&mut bytes)?;
            }
            Ok((meta, bytes))
        })(),
    };
    let (meta, bytes) = match read {
        Ok(read) => read,
        Err(err) => return missing(err.to_string()),
    };
    if c.kind == EntryKind::File {
        if !meta.is_file() {
            return Outcome::Skipped(Skipped {
                path: c.path.clone(),
                reason: SkipReason::Special,
            });
        }
        if meta.len() > max_file_bytes || bytes.len() as u64 > max_file_bytes {
            return Outcome::Skipped(Skipped {
                path: c.path.clone(),
                reason: SkipReason::Oversized {
                    size: meta.len().max(bytes.len() as u64),
                    mtime_ns: mtime_ns(&meta),
                },
            });
        }
    }
    let hash = Hash::of(&bytes);
    let blob_bytes = match store.put_hashed(hash, &bytes) {
        Ok(n) => n,
        Err(err) => return missing(err.to_string()),
    };
    Outcome::Entry {
        entry: Entry {
            path: c.path.clone(),
            kind: c.kind,
            mode: mode(&meta),
            size: bytes.len() as u64,
            mtime_ns: mtime_ns(&meta),
            ino: meta.ino(),
            hash,
        },
        blob_bytes,
    }
}
