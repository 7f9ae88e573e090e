//! [`RestorePlan`]: what turns the workspace described by the current snapshot into the
//! target one — files to delete, directories left empty to remove, directories to create,
//! files and symlinks to write from blobs — and [`RestorePlan::apply`], which carries out
//! exactly the lists it is given (a caller drops conflicting paths first).
//!
//! A path either snapshot did not record — skipped or ignored, inside an ignored directory,
//! or a directory holding such a path — is never deleted or written: the restore leaves it
//! as it finds it, and [`Snapshot::skipped_changes`] is what tells that it differs.
//!
//! Every blob the plan writes is read and verified before the workspace is touched, so a
//! missing or corrupt blob refuses the restore instead of leaving it half done. Each write
//! is a temp file (or symlink) beside its target, renamed over it, relative to the fd of
//! its directory (`beneath.rs`): nothing is written through a symlink, outside the
//! workspace, or in `.git`/`.amber`, whatever the plan says; such paths come back in
//! [`Applied::refused`].
//!
//! **Re-appliable:** a plan serialises (so the daemon can journal it) and `apply` is
//! idempotent: run again over a tree a crash left half restored, it finishes the job. A
//! path already deleted, a file already removed from a directory that became a file, or a
//! deleted file whose place the plan has since made a directory counts as done; the
//! `.NAME.amber-restore-PID` temp files a crash left beside the plan's targets are removed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::ErrorKind;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::beneath::{BeneathError, Refusal, TEMP_MARK, Tree};
use super::error::CheckpointError;
use super::hash::Hash;
use super::path::RelPath;
use super::sink::BlobSource;
use super::snapshot::{Entry, EntryKind, Snapshot};

/// The steps from the current workspace to a target snapshot, in the order `apply` runs them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestorePlan {
    /// Files and symlinks the target does not have.
    pub delete: Vec<RelPath>,
    /// Directories that held only deleted entries, deepest first; removed only if empty
    /// (an ignored or skipped file keeps its directory).
    pub remove_dirs: Vec<RelPath>,
    /// Directories the written entries need, shallowest first.
    pub create_dirs: Vec<RelPath>,
    /// Target entries absent or different (content, kind or mode) in the current snapshot.
    pub write: Vec<Entry>,
}

/// What [`RestorePlan::apply`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub written: Vec<RelPath>,
    pub deleted: Vec<RelPath>,
    /// Paths left alone: a parent is a symlink or not a directory, or they are protected.
    pub refused: Vec<Refused>,
}

/// A path [`RestorePlan::apply`] did not change, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub path: RelPath,
    pub refusal: Refusal,
}

impl RestorePlan {
    /// The plan from `current` to `target`; refused when `target` is incomplete. Paths
    /// either snapshot did not record are left out (see the module header).
    pub fn new(current: &Snapshot, target: &Snapshot) -> Result<Self, CheckpointError> {
        if let Some(first) = target.missing.first() {
            return Err(CheckpointError::Incomplete {
                count: target.missing.len(),
                first: first.path.clone(),
                reason: first.reason.clone(),
            });
        }
        let recorded_by_both =
            |path: &RelPath| !current.off_record(path) && !target.off_record(path);
        let delete: Vec<RelPath> = current
            .entries
            .iter()
            .filter(|e| target.get(&e.path).is_none() && recorded_by_both(&e.path))
            .map(|e| e.path.clone())
            .collect();
        let write: Vec<Entry> = target
            .entries
            .iter()
            .filter(|t| current.get(&t.path).is_none_or(|c| !c.same_content(t)))
            .filter(|t| recorded_by_both(&t.path))
            .cloned()
            .collect();
        let target_dirs = ancestors(target.entries.iter().map(|e| &e.path));
        let mut remove_dirs: Vec<RelPath> = ancestors(delete.iter())
            .into_iter()
            .filter(|d| !target_dirs.contains(d) && recorded_by_both(d))
            .collect();
        remove_dirs.sort_by_key(|d| std::cmp::Reverse(d.depth()));
        let mut create_dirs: Vec<RelPath> = ancestors(write.iter().map(|e| &e.path))
            .into_iter()
            .collect();
        create_dirs.sort_by_key(RelPath::depth);
        Ok(Self {
            delete,
            remove_dirs,
            create_dirs,
            write,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.delete.is_empty() && self.write.is_empty() && self.remove_dirs.is_empty()
    }

    /// Carries out the plan under `root`, reading blobs from `store` (all of them, verified, before
    /// anything is touched). Every change goes
    /// through `beneath.rs`: a path whose parent is a symlink or not a directory, or that
    /// lies in `.git` or `.amber`, is left alone and listed in [`Applied::refused`].
    pub fn apply<S: BlobSource + ?Sized>(
        &self,
        root: &Path,
        store: &S,
    ) -> Result<Applied, CheckpointError> {
        let mut blobs: HashMap<Hash, Vec<u8>> = HashMap::new();
        for entry in &self.write {
            if let std::collections::hash_map::Entry::Vacant(slot) = blobs.entry(entry.hash) {
                slot.insert(store.get(&entry.hash)?);
            }
        }
        let tree = Tree::open(root).map_err(|e| CheckpointError::io(root, e))?;
        let written: HashSet<&RelPath> = self.write.iter().map(|e| &e.path).collect();
        let mut applied = Applied::default();
        for path in &self.delete {
            match self.delete_one(&tree, path, &written) {
                Ok(true) => applied.deleted.push(path.clone()),
                Ok(false) => {}
                Err(e) => applied.refuse(root, path, e)?,
            }
        }
        for dir in &self.remove_dirs {
            // Not empty (an ignored file), already gone or refused: it stays as it is.
            if let Ok((parent, name)) = tree.parent_of(dir) {
                let _ = parent.remove_dir(&name);
            }
        }
        for dir in &self.create_dirs {
            match tree.make_dirs(dir) {
                // A refused one refuses the writes below it, which name it.
                Ok(()) | Err(BeneathError::Refused(_)) => {}
                Err(BeneathError::Io(e)) => return Err(CheckpointError::io(dir.join_to(root), e)),
            }
        }
        self.remove_stale_temps(&tree);
        for entry in &self.write {
            let bytes = blobs
                .get(&entry.hash)
                .ok_or(CheckpointError::BlobNotFound(entry.hash))?;
            let (dir, name) = match tree.parent_of(&entry.path) {
                Ok(found) => found,
                Err(e) => {
                    applied.refuse(root, &entry.path, e)?;
                    continue;
                }
            };
            let made = match entry.kind {
                EntryKind::File => dir.write_file(&name, bytes, entry.mode),
                EntryKind::Symlink => dir.write_symlink(&name, bytes),
            };
            made.map_err(|e| CheckpointError::io(entry.path.join_to(root), e))?;
            applied.written.push(entry.path.clone());
        }
        Ok(applied)
    }

    /// Deletes one file or symlink; `false` when there was nothing to delete.
    fn delete_one(
        &self,
        tree: &Tree,
        path: &RelPath,
        written: &HashSet<&RelPath>,
    ) -> Result<bool, BeneathError> {
        let (dir, name) =
            match tree.parent_of(path) {
                Ok(found) => found,
                // Its directory became a file or link the plan writes: done before a crash.
                Err(BeneathError::Refused(
                    Refusal::Symlink { at } | Refusal::NotADirectory { at },
                )) if written.contains(&at) => return Ok(false),
                // Its directory is gone: so is the file.
                Err(BeneathError::Io(e)) if e.kind() == ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(e),
            };
        match dir.remove_file(&name) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            // A directory the plan itself creates: an earlier apply got that far.
            Err(_) if dir.is_dir(&name) && self.create_dirs.contains(path) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the temp files an apply that crashed left beside this plan's targets (best
    /// effort: one left behind is only clutter).
    fn remove_stale_temps(&self, tree: &Tree) {
        let mut names: BTreeMap<Option<RelPath>, HashSet<&[u8]>> = BTreeMap::new();
        for entry in &self.write {
            let bytes = entry.path.as_bytes();
            let name = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
            names.entry(entry.path.parent()).or_default().insert(name);
        }
        for (rel, targets) in names {
            let Ok(dir) = tree.dir(rel.as_ref()) else {
                continue;
            };
            let Ok(children) = dir.names() else {
                continue;
            };
            for name in children {
                if temp_target(&name).is_some_and(|t| targets.contains(t))
                    && let Err(e) = dir.remove_file(&name)
                    && e.kind() != ErrorKind::NotFound
                {
                    tracing::warn!(name = %String::from_utf8_lossy(&name), error = %e, "stale restore temp file");
                }
            }
        }
    }
}

impl Applied {
    /// Records `path` as refused, or passes an I/O error on.
    fn refuse(
        &mut self,
        root: &Path,
        path: &RelPath,
        err: BeneathError,
    ) -> Result<(), CheckpointError> {
        match err {
            BeneathError::Refused(refusal) => {
                self.refused.push(Refused {
                    path: path.clone(),
                    refusal,
                });
                Ok(())
            }
            BeneathError::Io(e) => Err(CheckpointError::io(path.join_to(root), e)),
        }
    }
}

/// The target name of a restore temp file name (`.NAME.amber-restore-PID` gives `NAME`).
pub(crate) fn temp_target(name: &[u8]) -> Option<&[u8]> {
    let rest = name.strip_prefix(b".")?;
    let at = rest
        .windows(TEMP_MARK.len())
        .rposition(|w| w == TEMP_MARK.as_bytes())?;
    let (target, pid) = (&rest[..at], &rest[at + TEMP_MARK.len()..]);
    (!target.is_empty() && !pid.is_empty() && pid.iter().all(u8::is_ascii_digit)).then_some(target)
}

/// Every proper ancestor directory of `paths`.
fn ancestors<'a>(paths: impl Iterator<Item = &'a RelPath>) -> BTreeSet<RelPath> {
    let mut dirs = BTreeSet::new();
    for path in paths {
        let mut at = path.parent();
        while let Some(dir) = at {
            at = dir.parent();
            if !dirs.insert(dir) {
                break;
            }
        }
    }
    dirs
}
