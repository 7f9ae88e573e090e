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
//! is a temp file (or symlink) beside its target, renamed over it.
//!
//! **Re-appliable:** a plan serialises (so the daemon can journal it) and `apply` is
//! idempotent: run again over a tree a crash left half restored, it finishes the job. A
//! path already deleted, a file already removed from a directory that became a file, or a
//! deleted file whose place the plan has since made a directory counts as done; the
//! `.NAME.amber-restore-PID` temp files a crash left beside the plan's targets are removed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::fs::{self, File, Permissions};
use std::io::{ErrorKind, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::blob::BlobStore;
use super::error::CheckpointError;
use super::hash::Hash;
use super::path::RelPath;
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
                // Gone already, or its directory was replaced by a file: done before a crash.
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {}
                // A directory the plan itself creates: an earlier apply got that far.
                Err(_) if abs.is_dir() && self.create_dirs.contains(path) => {}
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
        self.remove_stale_temps(root);
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

impl RestorePlan {
    /// Removes the temp files an apply that crashed left beside this plan's targets (best
    /// effort: one left behind is only clutter).
    fn remove_stale_temps(&self, root: &Path) {
        let mut names: BTreeMap<Option<RelPath>, HashSet<&[u8]>> = BTreeMap::new();
        for entry in &self.write {
            let bytes = entry.path.as_bytes();
            let name = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
            names.entry(entry.path.parent()).or_default().insert(name);
        }
        for (dir, targets) in names {
            let dir = dir.map_or_else(|| root.to_path_buf(), |d| d.join_to(root));
            let Ok(children) = fs::read_dir(&dir) else {
                continue;
            };
            for child in children.flatten() {
                let name = child.file_name();
                if temp_target(name.as_bytes()).is_some_and(|t| targets.contains(t))
                    && let Err(e) = fs::remove_file(child.path())
                    && e.kind() != ErrorKind::NotFound
                {
                    tracing::warn!(path = %child.path().display(), error = %e, "stale restore temp file");
                }
            }
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

/// What a restore temp file's name has between its target's name and the writer's pid.
const TEMP_MARK: &str = ".amber-restore-";

fn tmp_beside(abs: &Path) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(abs.file_name().unwrap_or_default());
    name.push(TEMP_MARK);
    name.push(std::process::id().to_string());
    abs.with_file_name(name)
}
