//! [`RestorePlan`]: what turns the workspace described by the current snapshot into the
//! target one — files to delete, directories left empty to remove, directories to create,
//! files and symlinks to write from blobs — and [`RestorePlan::apply`], which carries out
//! exactly the lists it is given (a caller drops conflicting paths first).
//!
//! Every blob the plan writes is read and verified before the workspace is touched, so a
//! missing or corrupt blob refuses the restore instead of leaving it half done. Each write
//! is a temp file (or symlink) beside its target, renamed over it. Crash safety across the
//! whole plan (a journal) is a later step.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::fs::{self, File, Permissions};
use std::io::{ErrorKind, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::blob::BlobStore;
use super::error::CheckpointError;
use super::hash::Hash;
use super::path::RelPath;
use super::snapshot::{Entry, EntryKind, Snapshot};

/// The steps from the current workspace to a target snapshot, in the order `apply` runs them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
}

impl RestorePlan {
    /// The plan from `current` to `target`; refused when `target` is incomplete.
    pub fn new(current: &Snapshot, target: &Snapshot) -> Result<Self, CheckpointError> {
        if let Some(first) = target.missing.first() {
            return Err(CheckpointError::Incomplete {
                count: target.missing.len(),
                first: first.path.clone(),
                reason: first.reason.clone(),
            });
        }
        let delete: Vec<RelPath> = current
            .entries
            .iter()
            .filter(|e| target.get(&e.path).is_none())
            .map(|e| e.path.clone())
            .collect();
        let write: Vec<Entry> = target
            .entries
            .iter()
            .filter(|t| current.get(&t.path).is_none_or(|c| !c.same_content(t)))
            .cloned()
            .collect();
        let target_dirs = ancestors(target.entries.iter().map(|e| &e.path));
        let mut remove_dirs: Vec<RelPath> = ancestors(delete.iter())
            .into_iter()
            .filter(|d| !target_dirs.contains(d))
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

    /// Carries out the plan under `root`, reading blobs from `store`.
    pub fn apply(&self, root: &Path, store: &BlobStore) -> Result<Applied, CheckpointError> {
        let mut blobs: HashMap<Hash, Vec<u8>> = HashMap::new();
        for entry in &self.write {
            if let std::collections::hash_map::Entry::Vacant(slot) = blobs.entry(entry.hash) {
                slot.insert(store.get(&entry.hash)?);
            }
        }
        let mut applied = Applied::default();
        for path in &self.delete {
            let abs = path.join_to(root);
            match fs::remove_file(&abs) {
                Ok(()) => applied.deleted.push(path.clone()),
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(CheckpointError::io(abs, e)),
            }
        }
        for dir in &self.remove_dirs {
            // Not empty (an ignored file) or already gone: either way it stays as it is.
            let _ = fs::remove_dir(dir.join_to(root));
        }
        for dir in &self.create_dirs {
            let abs = dir.join_to(root);
            fs::create_dir_all(&abs).map_err(|e| CheckpointError::io(abs, e))?;
        }
        for entry in &self.write {
            let bytes = blobs
                .get(&entry.hash)
                .ok_or(CheckpointError::BlobNotFound(entry.hash))?;
            let abs = entry.path.join_to(root);
            write_entry(&abs, entry, bytes).map_err(|e| CheckpointError::io(&abs, e))?;
            applied.written.push(entry.path.clone());
        }
        Ok(applied)
    }
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

fn write_entry(abs: &Path, entry: &Entry, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = tmp_beside(abs);
    let made = match entry.kind {
        EntryKind::File => (|| {
            let mut file = File::create(&tmp)?;
            file.write_all(bytes)?;
            file.set_permissions(Permissions::from_mode(entry.mode))?;
            file.sync_all()
        })(),
        EntryKind::Symlink => {
            std::os::unix::fs::symlink(PathBuf::from(OsString::from_vec(bytes.to_vec())), &tmp)
        }
    };
    if let Err(e) = made.and_then(|()| fs::rename(&tmp, abs)) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

fn tmp_beside(abs: &Path) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(abs.file_name().unwrap_or_default());
    name.push(format!(".amber-restore-{}", std::process::id()));
    abs.with_file_name(name)
}
