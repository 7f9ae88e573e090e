//! What changed under (root, glob) since the last refresh, by mtime.
//!
//! The first scan is a full walk (ignore rules, glob) that records every
//! directory's mtime and the `.gitignore` / `.ignore` files found. Later scans
//! avoid the walk. With a [`Watcher`] (inotify) they stat only the paths the
//! events name; without one they stat every known directory and file (in
//! parallel). Either way a changed file is re-read, a vanished one dropped,
//! and a directory whose entries changed is listed again one level deep, new
//! subdirectories walked. A changed ignore file falls back to a full walk,
//! since it can change what is visible anywhere.
//!
//! File-system timestamps are coarse (a clock tick, or worse), so an mtime
//! close to the scan's start could be shared by a later change: such "racy"
//! mtimes are not trusted (recorded as the epoch), and the file is re-read or
//! the directory re-listed by the next scan, until its mtime has settled.

use amber_proto::sync::Locked;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use ignore::WalkState;

use super::{FileEntry, MAX_FILE_BYTES};
use crate::search::walk::WalkSpec;
use crate::watch::{Adder, Dirty, Watcher};

/// Ignore files whose changes force a full walk.
const IGNORE_FILES: [&str; 2] = [".gitignore", ".ignore"];
/// Below this many stats a scan does them on the calling thread.
const PARALLEL_STATS_FROM: usize = 512;
/// mtimes younger than this at the start of a scan are not trusted.
const RACY: Duration = Duration::from_secs(2);
const EPOCH: SystemTime = SystemTime::UNIX_EPOCH;

/// `mtime`, or the epoch (never equal to a real mtime) when it is too recent
/// to rule out a later change within the same timestamp tick.
fn settled(mtime: SystemTime, now: SystemTime) -> SystemTime {
    match now.duration_since(mtime) {
        Ok(age) if age >= RACY => mtime,
        _ => EPOCH,
    }
}

/// A file as the walk saw it (`mtime` settled).
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub path: PathBuf,
    pub mtime: SystemTime,
    pub size: u64,
}

impl Seen {
    /// Its mtime is racy: it must be re-read next time whatever it says.
    pub(crate) fn racy(&self) -> bool {
        self.mtime == EPOCH
    }
}

/// What a scan found.
#[derive(Debug)]
pub(crate) enum Scan {
    /// Every file there is: the index diffs against it.
    Full(Vec<Seen>),
    /// Only the differences: new or modified files, and files gone.
    Delta {
        changed: Vec<Seen>,
        gone: Vec<PathBuf>,
    },
    /// The stop flag was raised: nothing may be concluded.
    Stopped,
}

/// Directory and ignore-file mtimes from the last scan, and the watcher.
#[derive(Debug)]
pub(crate) struct TreeState {
    dirs: HashMap<PathBuf, SystemTime>,
    ignores: HashMap<PathBuf, SystemTime>,
    warm: bool,
    /// Use inotify when it is available.
    watch: bool,
    watcher: Option<Watcher>,
    /// Files last seen with a racy mtime: checked again next time.
    recheck: HashSet<PathBuf>,
    /// Full walks done (the first and those forced by ignore-file changes).
    pub full_walks: u64,
}

/// Everything one walk found.
#[derive(Debug, Default)]
struct Found {
    files: Vec<Seen>,
    dirs: Vec<(PathBuf, SystemTime)>,
    ignores: Vec<(PathBuf, SystemTime)>,
    watched: Vec<(i32, PathBuf)>,
    watch_failed: bool,
}

impl Found {
    fn append(&mut self, other: &mut Found) {
        self.files.append(&mut other.files);
        self.dirs.append(&mut other.dirs);
        self.ignores.append(&mut other.ignores);
        self.watched.append(&mut other.watched);
        self.watch_failed |= other.watch_failed;
    }
}

impl Default for TreeState {
    fn default() -> Self {
        Self::new(true)
    }
}

/// Changes gathered by an incremental scan.
#[derive(Default)]
struct Delta {
    changed: HashMap<PathBuf, Seen>,
    gone: HashSet<PathBuf>,
}

impl TreeState {
    /// `watch`: let refreshes use inotify where available.
    pub(crate) fn new(watch: bool) -> Self {
        Self {
            dirs: HashMap::new(),
            ignores: HashMap::new(),
            warm: false,
            watch,
            watcher: None,
            recheck: HashSet::new(),
            full_walks: 0,
        }
    }

    /// Whether refreshes are driven by inotify events.
    pub(crate) fn watching(&self) -> bool {
        self.watcher.is_some()
    }

    /// Scan for changes against the `known` files of the index.
    pub(crate) fn scan(
        &mut self,
        known: &HashMap<Arc<Path>, FileEntry>,
        spec: &WalkSpec,
        threads: usize,
        stop: &AtomicBool,
    ) -> Scan {
        if self.warm {
            let dirty = match self.watcher.as_mut() {
                Some(watcher) => watcher.drain(),
                None => Dirty {
                    rescan: true,
                    ..Dirty::default()
                },
            };
            if !dirty.walk {
                let scan = match dirty.rescan {
                    true => self.stat_all(known, spec, threads, stop),
                    false => self.apply(dirty, known, spec, threads, stop),
                };
                if let Some(scan) = scan {
                    return self.finish(scan);
                }
            }
        }
        self.watcher = if self.watch { Watcher::new() } else { None };
        let adder = self.watcher.as_ref().map(Watcher::adder);
        let found = walk(
            spec,
            &spec.root,
            None,
            threads,
            stop,
            SystemTime::now(),
            adder,
        );
        if stop.load(Ordering::Relaxed) {
            self.warm = false;
            self.watcher = None;
            return Scan::Stopped;
        }
        self.register(&found);
        self.dirs = found.dirs.into_iter().collect();
        self.ignores = found.ignores.into_iter().collect();
        self.warm = true;
        self.full_walks += 1;
        self.finish(Scan::Full(found.files))
    }

    /// Remember which files came out racy.
    fn finish(&mut self, scan: Scan) -> Scan {
        match &scan {
            Scan::Full(files) | Scan::Delta { changed: files, .. } => {
                self.recheck = files
                    .iter()
                    .filter(|f| f.racy())
                    .map(|f| f.path.clone())
                    .collect();
            }
            Scan::Stopped => {}
        }
        scan
    }

    /// Record the watches a walk added; any refusal ends watching.
    fn register(&mut self, found: &Found) {
        if found.watch_failed {
            self.watcher = None;
        }
        if let Some(watcher) = self.watcher.as_mut() {
            for (id, dir) in &found.watched {
                watcher.register(*id, dir.clone());
            }
        }
    }

    /// Without events: stat every ignore file, directory and known file.
    /// `None` when a full walk is needed.
    fn stat_all(
        &mut self,
        known: &HashMap<Arc<Path>, FileEntry>,
        spec: &WalkSpec,
        threads: usize,
        stop: &AtomicBool,
    ) -> Option<Scan> {
        let ignores: Vec<(&PathBuf, &SystemTime)> = self.ignores.iter().collect();
        let moved = par_map(&ignores, threads, |(path, mtime)| {
            mtime_of(path) != Some(**mtime)
        });
        if moved.into_iter().any(|m| m) {
            return None;
        }
        let dirs: Vec<(PathBuf, SystemTime)> =
            self.dirs.iter().map(|(p, t)| (p.clone(), *t)).collect();
        let dir_now = par_map(&dirs, threads, |(path, _)| dir_mtime(path));
        let changed_dirs: HashSet<PathBuf> = dirs
            .into_iter()
            .zip(dir_now)
            .filter(|((_, before), now)| *now != Some(*before))
            .map(|((dir, _), _)| dir)
            .collect();
        let files: Vec<&Arc<Path>> = known.keys().collect();
        let start = SystemTime::now();
        let mut delta = Delta::default();
        let file_now = par_map(&files, threads, |path| file_meta(path));
        for (path, now) in files.into_iter().zip(file_now) {
            check_file(path, now, known, start, &mut delta);
        }
        self.dirs_changed(changed_dirs, known, spec, threads, stop, start, delta)
    }

    /// With events: stat what they name (and the racy leftovers).
    fn apply(
        &mut self,
        dirty: Dirty,
        known: &HashMap<Arc<Path>, FileEntry>,
        spec: &WalkSpec,
        threads: usize,
        stop: &AtomicBool,
    ) -> Option<Scan> {
        let start = SystemTime::now();
        let mut delta = Delta::default();
        let recheck = std::mem::take(&mut self.recheck);
        for path in dirty.files.iter().chain(&recheck) {
            if known.contains_key(path.as_path()) {
                check_file(path, file_meta(path), known, start, &mut delta);
            }
        }
        let mut dirs = dirty.dirs;
        dirs.extend(
            self.dirs
                .iter()
                .filter(|(_, t)| **t == EPOCH)
                .map(|(d, _)| d.clone()),
        );
        dirs.retain(|d| self.dirs.contains_key(d));
        self.dirs_changed(dirs, known, spec, threads, stop, start, delta)
    }

    /// List changed directories again; drop the vanished ones with their files.
    #[allow(clippy::too_many_arguments)]
    fn dirs_changed(
        &mut self,
        dirs: HashSet<PathBuf>,
        known: &HashMap<Arc<Path>, FileEntry>,
        spec: &WalkSpec,
        threads: usize,
        stop: &AtomicBool,
        start: SystemTime,
        mut delta: Delta,
    ) -> Option<Scan> {
        let mut vanished = Vec::new();
        for dir in dirs {
            if stop.load(Ordering::Relaxed) {
                return Some(Scan::Stopped);
            }
            if dir_mtime(&dir).is_none() {
                self.dirs.retain(|d, _| !d.starts_with(&dir));
                vanished.push(dir);
                continue;
            }
            let adder = self.watcher.as_ref().map(Watcher::adder);
            let listed = walk(spec, &dir, Some(1), 1, stop, start, adder.clone());
            self.register(&listed);
            if listed
                .ignores
                .iter()
                .any(|(p, _)| !self.ignores.contains_key(p))
            {
                return None;
            }
            for (sub, mtime) in listed.dirs {
                if sub == dir {
                    self.dirs.insert(sub, mtime);
                } else if !self.dirs.contains_key(&sub) {
                    let new = walk(spec, &sub, None, threads, stop, start, adder.clone());
                    self.register(&new);
                    if !new.ignores.is_empty() {
                        return None;
                    }
                    self.dirs.extend(new.dirs);
                    delta
                        .changed
                        .extend(new.files.into_iter().map(|f| (f.path.clone(), f)));
                }
            }
            let fresh = listed
                .files
                .into_iter()
                .filter(|f| !known.contains_key(f.path.as_path()));
            delta.changed.extend(fresh.map(|f| (f.path.clone(), f)));
        }
        if !vanished.is_empty() {
            for path in known.keys() {
                if vanished.iter().any(|dir| path.starts_with(dir)) {
                    delta.gone.insert(path.to_path_buf());
                    delta.changed.remove(&**path);
                }
            }
        }
        if stop.load(Ordering::Relaxed) {
            return Some(Scan::Stopped);
        }
        Some(Scan::Delta {
            changed: delta.changed.into_values().collect(),
            gone: delta.gone.into_iter().collect(),
        })
    }
}

/// Compare a known file's current metadata with what the index holds.
fn check_file(
    path: &Path,
    now: Option<(SystemTime, u64)>,
    known: &HashMap<Arc<Path>, FileEntry>,
    start: SystemTime,
    delta: &mut Delta,
) {
    let Some(entry) = known.get(path) else {
        return;
    };
    match now {
        Some((mtime, size)) if mtime == entry.mtime && size == entry.size => {}
        Some((mtime, size)) => {
            let seen = Seen {
                path: path.to_path_buf(),
                mtime: settled(mtime, start),
                size,
            };
            delta.changed.insert(seen.path.clone(), seen);
        }
        None => {
            delta.gone.insert(path.to_path_buf());
        }
    }
}

/// Walk from `start` (at most `depth` levels): files that pass the glob with
/// their settled mtime and size, directories with their settled mtime (taken
/// before they are listed, and watched by `adder` before that), ignore files.
fn walk(
    spec: &WalkSpec,
    start: &Path,
    depth: Option<usize>,
    threads: usize,
    stop: &AtomicBool,
    now: SystemTime,
    adder: Option<Adder>,
) -> Found {
    let out = Mutex::new(Found::default());
    let mut builder = spec.builder_at(start, threads);
    builder.max_depth(depth);
    builder.build_parallel().run(|| {
        let mut adder = adder.clone();
        let mut collector = Collector {
            local: Found::default(),
            out: &out,
        };
        Box::new(move |entry| {
            if stop.load(Ordering::Relaxed) {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            let Some(kind) = entry.file_type() else {
                return WalkState::Continue;
            };
            let path = entry.path();
            if kind.is_dir()
                && let Some(adder) = adder.as_mut()
            {
                match adder.add(path) {
                    Some(id) => collector.local.watched.push((id, path.to_path_buf())),
                    None => collector.local.watch_failed = true,
                }
            }
            let Ok(meta) = entry.metadata() else {
                return WalkState::Continue;
            };
            let mtime = settled(meta.modified().unwrap_or(EPOCH), now);
            if kind.is_dir() {
                collector.local.dirs.push((path.to_path_buf(), mtime));
                for name in IGNORE_FILES {
                    let ignore = path.join(name);
                    if let Some(mtime) = mtime_of(&ignore) {
                        collector.local.ignores.push((ignore, mtime));
                    }
                }
            } else if kind.is_file() && spec.accepts(path) {
                collector.local.files.push(Seen {
                    path: path.to_path_buf(),
                    mtime,
                    size: meta.len(),
                });
            }
            WalkState::Continue
        })
    });
    out.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// A walker thread's findings, handed over when the thread's visitor drops.
struct Collector<'a> {
    local: Found,
    out: &'a Mutex<Found>,
}

impl Drop for Collector<'_> {
    fn drop(&mut self) {
        self.out.locked().append(&mut self.local);
    }
}

/// mtime of anything at `path` (not following symlinks).
fn mtime_of(path: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(path).ok()?.modified().ok()
}

/// mtime of the directory at `path`, `None` if it is no longer a directory.
fn dir_mtime(path: &Path) -> Option<SystemTime> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.is_dir().then(|| meta.modified().ok()).flatten()
}

/// mtime and size of the regular file at `path`, `None` if it is gone.
fn file_meta(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.is_file()
        .then(|| Some((meta.modified().ok()?, meta.len())))
        .flatten()
}

/// `f` over `items`, split across `threads` scoped threads when there are
/// many; results in input order.
fn par_map<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if threads <= 1 || items.len() < PARALLEL_STATS_FROM {
        return items.iter().map(&f).collect();
    }
    let per = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|chunk| scope.spawn(|| chunk.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// Whether a file is too large to index (recorded, never read).
pub(crate) fn too_large(size: u64) -> bool {
    size > MAX_FILE_BYTES
}
