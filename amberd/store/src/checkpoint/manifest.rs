//! How a [`Snapshot`] is stored: git-style, one blob per directory (its files' entries by
//! name and its subdirectories' blob hashes) and a small root record naming the top
//! directory's blob with the snapshot's lists and stats.
//!
//! ```text
//! root   {"version":2,"maxFileBytes":…,"clockNs":…,"root":"<tree hash>","skipped":[…],…}
//! tree   {"files":[{"path":"<name>","kind":…,"hash":…},…],"dirs":[{"name":…,"tree":"<hash>"},…]}
//! ```
//!
//! **Why:** a directory whose entries did not change serialises to the same bytes, so its
//! blob is already stored and a snapshot costs only the directories that changed and their
//! ancestors — not a whole-tree manifest each time. Version 1 snapshots (one flat JSON
//! blob) still load.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::blob::BlobStore;
use super::error::CheckpointError;
use super::hash::Hash;
use super::path::RelPath;
use super::snapshot::{Entry, Ignored, Missing, Skipped, Snapshot, TakeStats};

/// The stored format version this module writes.
pub(crate) const TREE_VERSION: u32 = 2;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Root {
    version: u32,
    max_file_bytes: u64,
    clock_ns: i64,
    root: Hash,
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

/// Stores `snap` (trees bottom-up, then the root record) and returns the root's hash.
pub(crate) fn save(snap: &Snapshot, store: &BlobStore) -> Result<Hash, CheckpointError> {
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
    let root = root.ok_or_else(|| {
        CheckpointError::io(store.dir(), std::io::Error::other("no top-level tree"))
    })?;
    let record = Root {
        version: TREE_VERSION,
        max_file_bytes: snap.max_file_bytes,
        clock_ns: snap.clock_ns,
        root,
        skipped: snap.skipped.clone(),
        ignored: snap.ignored.clone(),
        missing: snap.missing.clone(),
        stats: snap.stats,
    };
    let hash = store.put(&encode(store, &record)?)?;
    store.sync()?;
    Ok(hash)
}

/// The snapshot stored as `hash`, in either format; `trees` gets the hashes of the tree
/// blobs it read.
pub(crate) fn load(
    store: &BlobStore,
    hash: &Hash,
    trees: &mut Vec<Hash>,
) -> Result<Snapshot, CheckpointError> {
    let bytes = store.get(hash)?;
    let version: Version = serde_json::from_slice(&bytes).map_err(|e| corrupt(*hash, e))?;
    if version.version < TREE_VERSION {
        return serde_json::from_slice(&bytes).map_err(|e| corrupt(*hash, e));
    }
    let root: Root = serde_json::from_slice(&bytes).map_err(|e| corrupt(*hash, e))?;
    let mut snap = Snapshot::new(root.max_file_bytes, root.clock_ns);
    snap.skipped = root.skipped;
    snap.ignored = root.ignored;
    snap.missing = root.missing;
    snap.stats = root.stats;
    let mut pending = vec![(Vec::new(), root.root)];
    while let Some((dir, tree_hash)) = pending.pop() {
        trees.push(tree_hash);
        let tree: Tree =
            serde_json::from_slice(&store.get(&tree_hash)?).map_err(|e| corrupt(tree_hash, e))?;
        for file in tree.files {
            let path = RelPath::from_bytes(join(&dir, file.path.as_bytes()));
            snap.entries.push(Entry { path, ..file });
        }
        for sub in tree.dirs {
            pending.push((join(&dir, sub.name.as_bytes()), sub.tree));
        }
    }
    snap.entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    Ok(snap)
}

/// Adds every blob the snapshot `hash` reaches (itself, its trees, its files' contents) to
/// `reached`. A tree already in `reached` is not read again: snapshots share most of their
/// trees, so marking many of them costs about what their distinct trees cost.
pub(crate) fn reach(
    store: &BlobStore,
    hash: &Hash,
    reached: &mut HashSet<Hash>,
) -> Result<(), CheckpointError> {
    if !reached.insert(*hash) {
        return Ok(());
    }
    let bytes = store.get(hash)?;
    let version: Version = serde_json::from_slice(&bytes).map_err(|e| corrupt(*hash, e))?;
    if version.version < TREE_VERSION {
        let flat: Snapshot = serde_json::from_slice(&bytes).map_err(|e| corrupt(*hash, e))?;
        reached.extend(flat.blobs());
        return Ok(());
    }
    let root: Root = serde_json::from_slice(&bytes).map_err(|e| corrupt(*hash, e))?;
    let mut pending = vec![root.root];
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
