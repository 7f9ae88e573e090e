//! How a [`Snapshot`] is stored: a small root record with the snapshot's lists and stats,
//! naming either a full tree — git-style, one blob per directory (its files' entries by
//! name, its subdirectories' blob hashes) — or a base snapshot and the entries that changed
//! since it.
//!
//! ```text
//! full   {"version":2,…,"root":"<tree hash>","skipped":[…],…}
//! delta  {"version":2,…,"base":"<snapshot hash>","depth":3,"changed":[Entry…],"removed":[path…]}
//! tree   {"files":[{"path":"<name>","kind":…,"hash":…},…],"dirs":[{"name":…,"tree":"<hash>"},…]}
//! ```
//!
//! **Why:** a turn's checkpoint is taken incrementally from the previous one; stored as a
//! delta it costs the entries that changed, not the tree. A chain is at most
//! [`MAX_DEPTH`] deltas long and a delta at most a quarter of the entries; beyond, the
//! snapshot is stored in full, where a directory that did not change is a blob already
//! stored. Loading follows the chain to its full tree; collection (`reach`) keeps every
//! link of a kept snapshot's chain. Version 1 snapshots (one flat JSON blob) still load.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::blob::BlobStore;
use super::error::CheckpointError;
use super::hash::Hash;
use super::path::RelPath;
use super::snapshot::{Entry, Ignored, Missing, Skipped, Snapshot, StoredAt, TakeStats};

/// The stored format version this module writes.
pub(crate) const TREE_VERSION: u32 = 2;
/// Most deltas between a snapshot and the full tree its chain starts from.
pub(crate) const MAX_DEPTH: u32 = 32;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Root {
    version: u32,
    max_file_bytes: u64,
    clock_ns: i64,
    /// A full snapshot's top directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    root: Option<Hash>,
    /// A delta's base snapshot, and how many deltas lead from this one to a full tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base: Option<Hash>,
    #[serde(default)]
    depth: u32,
    /// A delta's entries that are new or differ from the base's (full paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    changed: Vec<Entry>,
    /// A delta's paths the base has and this snapshot does not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    removed: Vec<RelPath>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    skipped: Vec<Skipped>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ignored: Vec<Ignored>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    missing: Vec<Missing>,
    #[serde(default)]
    stats: TakeStats,
}

/// One directory: its files (each entry's `path` is its name) and subdirectories.
#[derive(Default, Serialize, Deserialize)]
struct Tree {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    files: Vec<Entry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    dirs: Vec<Sub>,
}

#[derive(Serialize, Deserialize)]
struct Sub {
    name: RelPath,
    tree: Hash,
}

/// Only the version, to tell the stored formats apart.
#[derive(Deserialize)]
struct Version {
    version: u32,
}

fn corrupt(hash: Hash, reason: impl ToString) -> CheckpointError {
    CheckpointError::SnapshotCorrupt {
        hash,
        reason: reason.to_string(),
    }
}

fn encode<T: Serialize>(store: &BlobStore, value: &T) -> Result<Vec<u8>, CheckpointError> {
    serde_json::to_vec(value)
        .map_err(|e| CheckpointError::io(store.dir(), std::io::Error::other(e.to_string())))
}

/// `path` split at its last `/`: (directory, name); the top level's directory is empty.
fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(cut) => (&path[..cut], &path[cut + 1..]),
        None => (&[], path),
    }
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        return name.to_vec();
    }
    let mut out = Vec::with_capacity(dir.len() + 1 + name.len());
    out.extend_from_slice(dir);
    out.push(b'/');
    out.extend_from_slice(name);
    out
}

fn depth(dir: &[u8]) -> usize {
    if dir.is_empty() {
        0
    } else {
        1 + dir.iter().filter(|&&b| b == b'/').count()
    }
}

/// Stores `snap` — as a delta from `base` when that is stored and close, else in full — and
/// returns the hash of its root record, which `snap` remembers.
pub(crate) fn save(
    snap: &mut Snapshot,
    base: Option<&Snapshot>,
    store: &BlobStore,
) -> Result<Hash, CheckpointError> {
    let mut record = Root {
        version: TREE_VERSION,
        max_file_bytes: snap.max_file_bytes,
        clock_ns: snap.clock_ns,
        root: None,
        base: None,
        depth: 0,
        changed: Vec::new(),
        removed: Vec::new(),
        skipped: snap.skipped.clone(),
        ignored: snap.ignored.clone(),
        missing: snap.missing.clone(),
        stats: snap.stats,
    };
    let delta = base
        .and_then(|b| b.stored.0.map(|(hash, depth)| (b, hash, depth)))
        .filter(|(_, _, depth)| *depth < MAX_DEPTH)
        .and_then(|(b, hash, depth)| {
            let (changed, removed) = changes(&b.entries, &snap.entries);
            let small = changed.len() + removed.len() <= snap.entries.len().max(16) / 4;
            small.then_some((hash, depth + 1, changed, removed))
        });
    match delta {
        Some((base, depth, changed, removed)) => {
            record.base = Some(base);
            record.depth = depth;
            record.changed = changed;
            record.removed = removed;
        }
        None => record.root = Some(save_trees(snap, store)?),
    }
    let hash = store.put(&encode(store, &record)?)?;
    store.sync()?;
    snap.stored = StoredAt(Some((hash, record.depth)));
    Ok(hash)
}

/// The entries of `new` that are not in `old` as they are, and the paths of `old` that
/// `new` lacks; both sorted lists by path.
pub(crate) fn changes(old: &[Entry], new: &[Entry]) -> (Vec<Entry>, Vec<RelPath>) {
    let (mut changed, mut removed) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    loop {
        match (old.get(i), new.get(j)) {
            (None, None) => break,
            (Some(o), None) => {
                removed.push(o.path.clone());
                i += 1;
            }
            (None, Some(n)) => {
                changed.push(n.clone());
                j += 1;
            }
            (Some(o), Some(n)) => match o.path.cmp(&n.path) {
                std::cmp::Ordering::Less => {
                    removed.push(o.path.clone());
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    changed.push(n.clone());
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    if o != n {
                        changed.push(n.clone());
                    }
                    i += 1;
                    j += 1;
                }
            },
        }
    }
    (changed, removed)
}

/// Stores the snapshot's directories bottom-up; returns the top one's hash.
fn save_trees(snap: &Snapshot, store: &BlobStore) -> Result<Hash, CheckpointError> {
    let mut trees: BTreeMap<Vec<u8>, Tree> = BTreeMap::new();
    trees.insert(Vec::new(), Tree::default());
    for entry in &snap.entries {
        let (dir, name) = split(entry.path.as_bytes());
        let mut ancestor = dir;
        while !trees.contains_key(ancestor) {
            trees.insert(ancestor.to_vec(), Tree::default());
            ancestor = split(ancestor).0;
        }
        if let Some(tree) = trees.get_mut(dir) {
            tree.files.push(Entry {
                path: RelPath::from_bytes(name.to_vec()),
                ..entry.clone()
            });
        }
    }
    let mut dirs: Vec<Vec<u8>> = trees.keys().cloned().collect();
    dirs.sort_by_key(|d| Reverse(depth(d)));
    let mut root = None;
    for dir in dirs {
        let Some(mut tree) = trees.remove(&dir) else {
            continue;
        };
        tree.dirs.sort_by(|a, b| a.name.cmp(&b.name));
        let hash = store.put(&encode(store, &tree)?)?;
        if dir.is_empty() {
            root = Some(hash);
        } else {
            let (parent, name) = split(&dir);
            if let Some(parent) = trees.get_mut(parent) {
                parent.dirs.push(Sub {
                    name: RelPath::from_bytes(name.to_vec()),
                    tree: hash,
                });
            }
        }
    }
    root.ok_or_else(|| CheckpointError::io(store.dir(), std::io::Error::other("no top-level tree")))
}

fn read_root(store: &BlobStore, hash: &Hash) -> Result<Result<Root, Snapshot>, CheckpointError> {
    let bytes = store.get(hash)?;
    let version: Version = serde_json::from_slice(&bytes).map_err(|e| corrupt(*hash, e))?;
    if version.version < TREE_VERSION {
        let flat: Snapshot = serde_json::from_slice(&bytes).map_err(|e| corrupt(*hash, e))?;
        return Ok(Err(flat));
    }
    serde_json::from_slice(&bytes)
        .map(Ok)
        .map_err(|e| corrupt(*hash, e))
}

/// The snapshot stored as `hash`, in any format: the chain of deltas is followed to its full
/// tree (or flat version 1 snapshot) and applied back up.
pub(crate) fn load(store: &BlobStore, hash: &Hash) -> Result<Snapshot, CheckpointError> {
    let mut deltas: Vec<Root> = Vec::new();
    let mut at = *hash;
    let base_entries = loop {
        if deltas.len() > MAX_DEPTH as usize {
            return Err(corrupt(*hash, "its chain of deltas is longer than allowed"));
        }
        match read_root(store, &at)? {
            Err(flat) => break flat.entries,
            Ok(root) => match (root.base, root.root) {
                (Some(base), _) => {
                    at = base;
                    deltas.push(root);
                }
                (None, Some(top)) => {
                    let entries = load_trees(store, top)?;
                    deltas.push(root);
                    break entries;
                }
                (None, None) => return Err(corrupt(at, "names neither a tree nor a base")),
            },
        }
    };
    let Some(newest) = deltas.first() else {
        // The hash itself is a flat version 1 snapshot.
        let Err(mut flat) = read_root(store, hash)? else {
            return Err(corrupt(*hash, "unreadable"));
        };
        flat.stored = StoredAt(None);
        return Ok(flat);
    };
    let mut snap = Snapshot::new(newest.max_file_bytes, newest.clock_ns);
    snap.skipped = newest.skipped.clone();
    snap.ignored = newest.ignored.clone();
    snap.missing = newest.missing.clone();
    snap.stats = newest.stats;
    snap.stored = StoredAt(Some((*hash, newest.depth)));
    let mut entries: BTreeMap<RelPath, Entry> = base_entries
        .into_iter()
        .map(|e| (e.path.clone(), e))
        .collect();
    for delta in deltas.iter().rev() {
        for path in &delta.removed {
            entries.remove(path);
        }
        for entry in &delta.changed {
            entries.insert(entry.path.clone(), entry.clone());
        }
    }
    snap.entries = entries.into_values().collect();
    Ok(snap)
}

/// The entries of the full tree whose top directory is `top`.
fn load_trees(store: &BlobStore, top: Hash) -> Result<Vec<Entry>, CheckpointError> {
    let mut entries = Vec::new();
    let mut pending = vec![(Vec::new(), top)];
    while let Some((dir, tree_hash)) = pending.pop() {
        let tree: Tree =
            serde_json::from_slice(&store.get(&tree_hash)?).map_err(|e| corrupt(tree_hash, e))?;
        for file in tree.files {
            let path = RelPath::from_bytes(join(&dir, file.path.as_bytes()));
            entries.push(Entry { path, ..file });
        }
        for sub in tree.dirs {
            pending.push((join(&dir, sub.name.as_bytes()), sub.tree));
        }
    }
    entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    Ok(entries)
}

/// Adds every blob the snapshot `hash` reaches (its root record, its chain's, their trees
/// and changed entries, its files' contents) to `reached`. What is already in `reached` is
/// not read again: snapshots share most of their chains and trees, so marking many of them
/// costs about what their distinct parts cost.
pub(crate) fn reach(
    store: &BlobStore,
    hash: &Hash,
    reached: &mut HashSet<Hash>,
) -> Result<(), CheckpointError> {
    let mut at = *hash;
    let mut links = 0;
    while reached.insert(at) {
        links += 1;
        if links > MAX_DEPTH as usize + 1 {
            return Err(corrupt(*hash, "its chain of deltas is longer than allowed"));
        }
        let root = match read_root(store, &at)? {
            Err(flat) => {
                reached.extend(flat.blobs());
                return Ok(());
            }
            Ok(root) => root,
        };
        reached.extend(root.changed.iter().map(|e| e.hash));
        match (root.base, root.root) {
            (Some(base), _) => at = base,
            (None, Some(top)) => return reach_trees(store, top, reached),
            (None, None) => return Err(corrupt(at, "names neither a tree nor a base")),
        }
    }
    Ok(())
}

fn reach_trees(
    store: &BlobStore,
    top: Hash,
    reached: &mut HashSet<Hash>,
) -> Result<(), CheckpointError> {
    let mut pending = vec![top];
    while let Some(tree_hash) = pending.pop() {
        if !reached.insert(tree_hash) {
            continue;
        }
        let tree: Tree =
            serde_json::from_slice(&store.get(&tree_hash)?).map_err(|e| corrupt(tree_hash, e))?;
        reached.extend(tree.files.iter().map(|f| f.hash));
        pending.extend(tree.dirs.iter().map(|d| d.tree));
    }
    Ok(())
}
