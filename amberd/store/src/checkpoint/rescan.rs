//! [`Snapshot::rescan`]: a snapshot of a watched workspace that lists again only the
//! directories a watcher saw change. Every other record is the base snapshot's, so a
//! checkpoint with 10 files changed in a tree of 100,000 costs the 10 directories they are in,
//! not a walk of the tree.
//!
//! Each changed directory is listed again one level deep (its files read or reused as in an
//! incremental [`Snapshot::take`], its ignored children listed). A child directory the
//! watcher does not know (new, moved in, or made again after its watch went) is walked
//! whole; one the base knew and that is gone now takes its records with it.
//!
//! **The watcher's side of the bargain:** every directory of the tree is watched from
//! before it was listed, and every change of a direct child (created, deleted, moved,
//! written, its attributes changed) marks its directory. When it cannot promise that (its
//! queue overflowed, an ignore file changed, it ran out of watches), the caller takes a
//! full snapshot instead.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;

use super::error::CheckpointError;
use super::path::RelPath;
use super::sink::BlobSink;
use super::snapshot::{Missing, Snapshot};
use super::take::{Dirs, Scope, list_ignored, read_all, record, walk};

/// What [`Snapshot::rescan`] gives.
#[derive(Debug)]
pub struct Rescanned {
    pub snapshot: Snapshot,
    /// Directories the base knew that are gone (their watches can go too).
    pub vanished: Vec<PathBuf>,
}

/// The key of a directory: its path relative to the root, empty for the root.
type Key = Vec<u8>;

fn key_of(root: &Path, dir: &Path) -> Option<Key> {
    if dir == root {
        return Some(Vec::new());
    }
    RelPath::under(root, dir).map(|r| r.as_bytes().to_vec())
}

/// The directory a record's path is directly in.
fn parent_key(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(cut) => &path[..cut],
        None => &[],
    }
}

/// Whether `path` lies below the directory `dir` (not `dir` itself).
fn below(path: &[u8], dir: &[u8]) -> bool {
    dir.is_empty() || (path.len() > dir.len() && path.starts_with(dir) && path[dir.len()] == b'/')
}

impl Snapshot {
    /// A snapshot of `root` now, from `base` (the last snapshot of this watched tree) and
    /// `changed` (the directories whose direct children changed since, absolute). `known`
    /// says whether a directory is watched; `enter` is called with each directory walked
    /// anew, before it is listed.
    #[allow(clippy::too_many_arguments)]
    pub fn rescan(
        root: &Path,
        base: &Snapshot,
        changed: &[PathBuf],
        known: &dyn Fn(&Path) -> bool,
        store: &dyn BlobSink,
        max_file_bytes: u64,
        exclude: &[PathBuf],
        enter: &mut dyn FnMut(&Path),
    ) -> Result<Rescanned, CheckpointError> {
        let excluded: Vec<RelPath> = exclude
            .iter()
            .filter_map(|p| RelPath::under(root, p))
            .collect();
        let mut dirty: Vec<Key> = changed
            .iter()
            .filter(|d| !exclude.iter().any(|e| d.starts_with(e)))
            .filter_map(|d| key_of(root, d))
            .filter(|k| !k.split(|&b| b == b'/').any(|c| c == b".git"))
            .collect();
        dirty.sort();
        dirty.dedup();
        let mut part = Snapshot::new(max_file_bytes, store.clock_ns());
        // Listed one level deep, and walked whole.
        let mut shallow: BTreeSet<Key> = BTreeSet::new();
        let mut deep: BTreeSet<Key> = BTreeSet::new();
        let mut vanished: Vec<Key> = Vec::new();
        let mut to_read = Vec::new();
        let under_deep =
            |deep: &BTreeSet<Key>, k: &[u8]| deep.iter().any(|d| d.as_slice() == k || below(k, d));
        let ignored = thread::scope(|scope| {
            let (done, inbox) = mpsc::channel();
            let lister = scope.spawn(|| list_ignored(root, inbox, &excluded));
            for dir in &dirty {
                if under_deep(&deep, dir) {
                    continue;
                }
                let abs = if dir.is_empty() {
                    root.to_path_buf()
                } else {
                    RelPath::from_bytes(dir.clone()).join_to(root)
                };
                // Gone, or no longer a directory: its parent's listing says so.
                if !std::fs::symlink_metadata(&abs).is_ok_and(|m| m.is_dir()) {
                    continue;
                }
                shallow.insert(dir.clone());
                let start = (!dir.is_empty()).then(|| RelPath::from_bytes(dir.clone()));
                let walked = walk(
                    root,
                    Scope {
                        start: &abs,
                        depth: Some(1),
                        enter: &mut |_| {},
                    },
                    Some(base),
                    max_file_bytes,
                    &mut part,
                    Dirs::new(start, done.clone()),
                    exclude,
                );
                to_read.extend(walked.read);
                let mut present: BTreeSet<Key> = BTreeSet::new();
                for child in walked.dirs_below {
                    let Some(key) = key_of(root, &child) else {
                        continue;
                    };
                    present.insert(key.clone());
                    if !known(&child) {
                        // Walked whole: nothing of it is known.
                        let start = RelPath::from_bytes(key.clone());
                        let walked = walk(
                            root,
                            Scope {
                                start: &child,
                                depth: None,
                                enter,
                            },
                            Some(base),
                            max_file_bytes,
                            &mut part,
                            Dirs::new(Some(start), done.clone()),
                            exclude,
                        );
                        to_read.extend(walked.read);
                        deep.insert(key);
                    }
                }
                vanished.extend(
                    known_children(base, dir)
                        .into_iter()
                        .filter(|c| !present.contains(c)),
                );
            }
            drop(done);
            lister.join()
        });
        let mut ignored = ignored.unwrap_or_else(|_| {
            part.missing.push(Missing {
                path: RelPath::from("."),
                reason: "the checkpoint thread listing ignored paths panicked".into(),
            });
            Vec::new()
        });
        record(&mut part, read_all(&to_read, store, max_file_bytes));
        store.sync()?;
        // A base record stays unless it was listed again, or lies in what was walked whole
        // or is gone.
        let replaced = |path: &[u8]| {
            shallow.contains(parent_key(path))
                || deep.iter().any(|d| d.as_slice() == path || below(path, d))
                || vanished
                    .iter()
                    .any(|v| v.as_slice() == path || below(path, v))
        };
        let mut snap = part;
        let listed = snap.entries.len();
        snap.entries.extend(
            base.entries
                .iter()
                .filter(|e| !replaced(e.path.as_bytes()))
                .cloned(),
        );
        snap.stats.reused += (snap.entries.len() - listed) as u64;
        snap.entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        snap.skipped.extend(
            base.skipped
                .iter()
                .filter(|s| !replaced(s.path.as_bytes()))
                .cloned(),
        );
        snap.skipped.sort_by(|a, b| a.path.cmp(&b.path));
        ignored.extend(
            base.ignored
                .iter()
                .filter(|i| !replaced(i.path.as_bytes()))
                .cloned(),
        );
        ignored.sort_by(|a, b| a.path.cmp(&b.path));
        snap.ignored = ignored;
        snap.missing.extend(
            base.missing
                .iter()
                .filter(|m| !replaced(m.path.as_bytes()))
                .cloned(),
        );
        snap.missing.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Rescanned {
            snapshot: snap,
            vanished: vanished
                .into_iter()
                .map(|k| RelPath::from_bytes(k).join_to(root))
                .collect(),
        })
    }
}

/// The child directories of `dir` that `base` holds records below.
fn known_children(base: &Snapshot, dir: &[u8]) -> BTreeSet<Key> {
    let mut children = BTreeSet::new();
    let mut note = |path: &[u8]| {
        if !below(path, dir) {
            return;
        }
        let rest = if dir.is_empty() {
            path
        } else {
            &path[dir.len() + 1..]
        };
        if let Some(cut) = rest.iter().position(|&b| b == b'/') {
            let end = if dir.is_empty() {
                cut
            } else {
                dir.len() + 1 + cut
            };
            children.insert(path[..end].to_vec());
        }
    };
    // Records below `dir` sort together: from the first one on.
    let mut prefix = dir.to_vec();
    if !prefix.is_empty() {
        prefix.push(b'/');
    }
    let from = base
        .entries
        .partition_point(|e| e.path.as_bytes() < prefix.as_slice());
    for e in base.entries[from..]
        .iter()
        .take_while(|e| e.path.as_bytes().starts_with(&prefix))
    {
        note(e.path.as_bytes());
    }
    for p in base
        .skipped
        .iter()
        .map(|s| &s.path)
        .chain(base.ignored.iter().map(|i| &i.path))
        .chain(base.missing.iter().map(|m| &m.path))
    {
        note(p.as_bytes());
    }
    children
}
