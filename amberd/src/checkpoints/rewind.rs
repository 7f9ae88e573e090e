//! The files half of `session/rewind`: which paths the turns from the target on changed,
//! which of those were changed outside amber since (conflicts), the plan that puts the
//! rest back as they were before the target turn, and the journal that makes applying it
//! crash-safe.
//!
//! A path is a conflict when, at any point after a turn touched it, its content is not
//! what that turn left: between one checkpointed turn's end and the next one's checkpoint,
//! or between the last turn's end and now; or when a turn recorded it as changed by
//! someone else while the turn ran (`outside`, `windows.rs`). Conflicts are left alone
//! unless `force`. Never restored, even with `force`: a path in `.git` or `.amber`, and a
//! path whose directory is now a symlink or a file the rewind does not itself replace;
//! the restore (`amber_store::RestorePlan::apply`) enforces both again as it writes, so a
//! directory swapped for a link after the plan was made is refused too, and the paths it
//! refused join the conflicts.
//!
//! **Crash safety:** the plan is written to `rewind.json` in the session's directory and
//! synced before the workspace is touched; the journal is removed only after the files,
//! the context pop and the `rewound` event are all done. A session loaded with a journal
//! present finishes it (every step of a plan can be applied again), so a crash leaves the
//! rewind done, never half.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use amber_store::{Applied, Entry, RelPath, RestorePlan, Snapshot, protected};
use serde::{Deserialize, Serialize};

use super::CheckpointFailure;
use super::rows::TurnRow;
use super::session::SessionCheckpoints;

const JOURNAL_FILE: &str = "rewind.json";

/// Test hook: pause this long between a rewind's deletions and its writes, so a test can
/// kill the daemon in the middle.
const PAUSE_ENV: &str = "AMBER_TEST_REWIND_PAUSE_MS";

/// Why the files of a rewind cannot be restored.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RewindError {
    /// The target (or a later) checkpoint is incomplete or was never taken.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] CheckpointFailure),
}

/// What restoring the files will do.
#[derive(Debug, Clone, Default)]
pub(crate) struct FilesPlan {
    pub(crate) plan: RestorePlan,
    pub(crate) restored: Vec<String>,
    pub(crate) conflicts: Vec<String>,
}

/// A rewind in progress, as journaled.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Journal {
    pub(crate) turn_id: String,
    delete: Vec<RelPath>,
    remove_dirs: Vec<RelPath>,
    create_dirs: Vec<RelPath>,
    write: Vec<Entry>,
    /// Pop the context back to this many messages (a rewind of the conversation).
    pub(crate) context_len: Option<usize>,
    /// The session's last event seq before the rewind: a later one is its `rewound`.
    pub(crate) last_seq: u64,
    pub(crate) restored: Vec<String>,
    pub(crate) conflicts: Vec<String>,
    pub(crate) removed_turns: u32,
}

impl Journal {
    pub(crate) fn new(
        turn_id: &str,
        files: Option<&FilesPlan>,
        context_len: Option<usize>,
        last_seq: u64,
        removed_turns: u32,
    ) -> Self {
        let plan = files.map(|f| f.plan.clone()).unwrap_or_default();
        Self {
            turn_id: turn_id.to_owned(),
            delete: plan.delete,
            remove_dirs: plan.remove_dirs,
            create_dirs: plan.create_dirs,
            write: plan.write,
            context_len,
            last_seq,
            restored: files.map(|f| f.restored.clone()).unwrap_or_default(),
            conflicts: files.map(|f| f.conflicts.clone()).unwrap_or_default(),
            removed_turns,
        }
    }

    /// The paths restored and the conflicts, once the restore left `refused` alone.
    pub(crate) fn outcome(&self, refused: &[String]) -> (Vec<String>, Vec<String>) {
        let restored = self
            .restored
            .iter()
            .filter(|p| !refused.contains(p))
            .cloned()
            .collect();
        let mut conflicts: Vec<String> = self.conflicts.iter().chain(refused).cloned().collect();
        conflicts.sort();
        conflicts.dedup();
        (restored, conflicts)
    }

    fn plan(&self) -> RestorePlan {
        RestorePlan {
            delete: self.delete.clone(),
            remove_dirs: self.remove_dirs.clone(),
            create_dirs: self.create_dirs.clone(),
            write: self.write.clone(),
        }
    }
}

/// Whether restoring `a` over `b` would change nothing (both absent counts).
fn same(a: Option<&Entry>, b: Option<&Entry>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.same_content(b),
        _ => false,
    }
}

/// Whether a directory above `path` is a file or symlink in `current` that the rewind does
/// not itself restore (delete or replace): writing `path` would need to go through it.
fn blocked_parent(current: &Snapshot, restore: &BTreeSet<RelPath>, path: &RelPath) -> bool {
    let mut at = path.parent();
    while let Some(dir) = at {
        if current.get(&dir).is_some() && !restore.contains(&dir) {
            return true;
        }
        at = dir.parent();
    }
    false
}

/// `snap` with only the entries at `paths` (its skipped and missing lists kept whole).
fn restricted(snap: &Snapshot, paths: &BTreeSet<RelPath>) -> Snapshot {
    let mut out = snap.clone();
    out.entries.retain(|e| paths.contains(&e.path));
    out.missing.retain(|m| paths.contains(&m.path));
    out
}

impl SessionCheckpoints {
    /// Plans restoring the workspace to its state before `rows[from]`. Blocking: takes a
    /// snapshot of the workspace now and loads the checkpoints involved.
    pub(crate) fn plan_files(
        self: &Arc<Self>,
        rows: &[TurnRow],
        from: usize,
        force: bool,
    ) -> Result<FilesPlan, RewindError> {
        // A rewind never claims more than it can restore: every turn from the target on
        // must have left what it changed recoverable (a turn without a checkpoint called no
        // file-changing tool, so it changed nothing to put back).
        let later = rows.get(from..).unwrap_or_default();
        for (i, row) in later.iter().enumerate() {
            if let Some(reason) = row.unrestorable(from + i + 1) {
                return Err(RewindError::Refused(format!(
                    "{reason}; rewind the conversation only (files: false)"
                )));
            }
        }
        let turns: Vec<&TurnRow> = later.iter().filter(|r| r.has_checkpoint()).collect();
        if turns.is_empty() {
            // No turn from there on changed files through amber: nothing to restore.
            return Ok(FilesPlan::default());
        }
        let mut befores = Vec::with_capacity(turns.len());
        for row in &turns {
            // Checked above: every one names a complete snapshot.
            let hash = row
                .before
                .as_ref()
                .and_then(|b| b.snapshot.clone())
                .ok_or_else(|| {
                    RewindError::Refused(format!("turn {} has no checkpoint", row.turn_id))
                })?;
            befores.push(self.load(&hash)?);
        }
        let (current, _) = self.snapshot_now()?;
        let mut afters = Vec::with_capacity(turns.len());
        for (i, row) in turns.iter().enumerate() {
            let after = match row.after.as_ref().and_then(|a| a.snapshot.clone()) {
                Some(hash) => self.load(&hash)?,
                // Cut short by a crash: the next checkpoint, or now, is its end.
                None => befores.get(i + 1).unwrap_or(&current).clone(),
            };
            afters.push(after);
        }
        let mut touched = BTreeSet::new();
        for (before, after) in befores.iter().zip(&afters) {
            touched.extend(before.diff(after).into_iter().map(|c| c.path));
        }
        // Changed during a turn, but not by its tools (`windows.rs`).
        let outside: BTreeSet<&RelPath> = turns
            .iter()
            .filter_map(|r| r.after.as_ref())
            .flat_map(|a| &a.outside)
            .collect();
        let conflicts: BTreeSet<RelPath> = touched
            .iter()
            .filter(|path| {
                let gaps = afters
                    .iter()
                    .zip(befores.iter().skip(1).chain(std::iter::once(&current)));
                outside.contains(path)
                    || gaps
                        .into_iter()
                        .any(|(left, next)| !same(left.get(path), next.get(path)))
            })
            .cloned()
            .collect();
        let target = &befores[0];
        // A path already as it was before the target turn has nothing to restore: whatever
        // happened to it in between, it is no conflict.
        let conflicts: BTreeSet<RelPath> = conflicts
            .into_iter()
            .filter(|path| !same(current.get(path), target.get(path)))
            .collect();
        let mut restore: BTreeSet<RelPath> = if force {
            touched.clone()
        } else {
            touched.difference(&conflicts).cloned().collect()
        };
        // Never restored, even with `force`: a protected path, and a path whose directory
        // is now a file or symlink the rewind would not replace (it is not restored
        // itself): that link is never followed (`amber_store::Refusal`).
        let refused: BTreeSet<RelPath> = restore
            .iter()
            .filter(|path| protected(path) || blocked_parent(&current, &restore, path))
            .cloned()
            .collect();
        restore.retain(|path| !refused.contains(path));
        let conflicts: BTreeSet<RelPath> = conflicts.into_iter().chain(refused).collect();
        let plan = RestorePlan::new(
            &restricted(&current, &restore),
            &restricted(target, &restore),
        )
        .map_err(|e| RewindError::Refused(e.to_string()))?;
        let mut restored: Vec<String> = plan
            .delete
            .iter()
            .chain(plan.write.iter().map(|e| &e.path))
            .map(ToString::to_string)
            .collect();
        restored.sort();
        restored.dedup();
        Ok(FilesPlan {
            plan,
            restored,
            conflicts: conflicts.iter().map(ToString::to_string).collect(),
        })
    }

    fn journal_path(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(JOURNAL_FILE))
    }

    /// Writes the journal and syncs it (and its directory) before anything is touched.
    pub(crate) fn write_journal(&self, journal: &Journal) -> Result<(), CheckpointFailure> {
        let Some(path) = self.journal_path() else {
            return Ok(());
        };
        let bytes = serde_json::to_vec(journal).map_err(|e| CheckpointFailure::Io {
            path: path.clone(),
            source: e.into(),
        })?;
        let tmp = path.with_extension("json.tmp");
        let written = (|| {
            let mut file = File::create(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            fs::rename(&tmp, &path)?;
            if let Some(dir) = path.parent() {
                File::open(dir)?.sync_all()?;
            }
            Ok::<_, std::io::Error>(())
        })();
        written.map_err(|source| CheckpointFailure::Io { path, source })
    }

    /// The journal of a rewind a crash interrupted, if there is one.
    pub(crate) fn pending_journal(&self) -> Option<Journal> {
        let path = self.journal_path()?;
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return None,
            Err(err) => {
                tracing::error!(path = %path.display(), %err, "cannot read a rewind journal");
                return None;
            }
        };
        match serde_json::from_slice(&bytes) {
            Ok(journal) => Some(journal),
            Err(err) => {
                // Written whole and synced before use: unreadable means it never got that
                // far (the temp file is renamed in only when complete).
                tracing::error!(path = %path.display(), %err, "ignoring an unreadable rewind journal");
                None
            }
        }
    }

    /// The rewind is complete: its journal goes.
    pub(crate) fn remove_journal(&self) {
        if let Some(path) = self.journal_path()
            && let Err(err) = fs::remove_file(&path)
            && err.kind() != ErrorKind::NotFound
        {
            tracing::error!(path = %path.display(), %err, "cannot remove the rewind journal");
        }
    }

    /// Carries out the journal's plan on the workspace. Blocking; safe to run again on a
    /// workspace it already changed in part. `live`: a rewind being asked for now (the
    /// test pause applies), not one finished after a restart.
    /// Returns the paths it left alone (`amber_store::Refused`): their directory became a
    /// symlink or a file after the plan was made, or they are protected.
    pub(crate) fn apply_journal(
        &self,
        journal: &Journal,
        live: bool,
    ) -> Result<Vec<String>, CheckpointFailure> {
        let plan = journal.plan();
        if plan.is_empty() {
            return Ok(Vec::new());
        }
        let _reading = self.daemon.reading();
        let pause = amber_exec::test_switches::var(PAUSE_ENV)
            .filter(|_| live)
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_millis);
        let (first, second) = match pause {
            // Deletions first, then the writes: the test kills the daemon in between.
            Some(_) => (
                RestorePlan {
                    write: Vec::new(),
                    ..plan.clone()
                },
                Some(RestorePlan {
                    write: plan.write.clone(),
                    ..RestorePlan::default()
                }),
            ),
            None => (plan, None),
        };
        let mut refused = self.refused(self.apply_plan(&first))?;
        if let (Some(second), Some(pause)) = (second, pause) {
            std::thread::sleep(pause);
            refused.extend(self.refused(self.apply_plan(&second))?);
        }
        Ok(refused)
    }

    /// The paths an apply left alone, each logged with the reason.
    fn refused(
        &self,
        applied: Result<Applied, CheckpointFailure>,
    ) -> Result<Vec<String>, CheckpointFailure> {
        let applied = applied?;
        Ok(applied
            .refused
            .into_iter()
            .map(|r| {
                tracing::warn!(workspace = %self.workspace.display(), path = %r.path, reason = %r.refusal, "rewind left a path alone");
                r.path.to_string()
            })
            .collect())
    }
}
