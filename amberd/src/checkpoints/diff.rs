//! `checkpoint/diff`: the unified diff of what one turn changed — its checkpoint against
//! the workspace when it ended (or, for a turn a crash cut short, the next checkpoint or
//! the workspace now). Contents come from the blob store, so the diff is the same however
//! the workspace has changed since.

use std::sync::Arc;

use amber_proto::{ChangedPath, CheckpointDiffResult};
use amber_store::{Entry, Snapshot};

use super::CheckpointFailure;
use super::session::{SessionCheckpoints, changes};
use amber_tools::diff::{FileChange, unified};

/// Why a diff cannot be given.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DiffError {
    #[error("turnId: {0}")]
    NoCheckpoint(String),
    #[error("the checkpoint of turn {turn_id} could not be taken: {why}")]
    Untaken { turn_id: String, why: String },
    #[error(transparent)]
    Store(#[from] CheckpointFailure),
}

impl SessionCheckpoints {
    /// The diff of turn `turn_id`, restricted to `path` when given. Blocking.
    pub(crate) fn diff_blocking(
        self: &Arc<Self>,
        turn_id: &str,
        path: Option<&str>,
    ) -> Result<CheckpointDiffResult, DiffError> {
        let (before, after) = self.turn_snapshots(turn_id)?;
        let (mut changed, _) = changes(&before, &after);
        let wanted = |p: &str| path.is_none_or(|want| want.trim_end_matches('/') == p);
        changed.retain(|c| wanted(&c.path));
        let store = self.daemon.store()?;
        let _reading = self.daemon.reading();
        let mut owned = Vec::with_capacity(changed.len());
        for c in &changed {
            let rel = amber_store::RelPath::from(c.path.as_str());
            let content = |snap: &Snapshot| -> Result<Option<Vec<u8>>, DiffError> {
                snap.get(&rel)
                    .map(|e: &Entry| store.get(&e.hash).map_err(|e| DiffError::Store(e.into())))
                    .transpose()
            };
            owned.push((c.path.clone(), content(&before)?, content(&after)?));
        }
        let files: Vec<FileChange<'_>> = owned
            .iter()
            .map(|(path, old, new)| FileChange {
                old_path: path,
                new_path: path,
                old: old.as_deref(),
                new: new.as_deref(),
            })
            .collect();
        Ok(CheckpointDiffResult {
            diff: unified(&files),
            changed,
        })
    }

    /// The turn's checkpoint and the workspace after it.
    fn turn_snapshots(&self, turn_id: &str) -> Result<(Snapshot, Snapshot), DiffError> {
        let rows = self.rows();
        let at = rows
            .iter()
            .position(|r| r.turn_id == turn_id && r.has_checkpoint())
            .ok_or_else(|| {
                DiffError::NoCheckpoint(format!("no checkpoint of turn {turn_id} in this session"))
            })?;
        let row = &rows[at];
        let before_hash = row
            .before
            .as_ref()
            .and_then(|b| b.snapshot.clone())
            .ok_or_else(|| {
                let why = row.before.as_ref().and_then(|b| b.incomplete.clone());
                DiffError::Untaken {
                    turn_id: turn_id.to_owned(),
                    why: why.unwrap_or_default(),
                }
            })?;
        let before = self.load(&before_hash)?;
        let after_hash = row
            .after
            .as_ref()
            .and_then(|a| a.snapshot.clone())
            .or_else(|| {
                rows[at + 1..]
                    .iter()
                    .find_map(|r| r.before.as_ref().and_then(|b| b.snapshot.clone()))
            });
        let after = match after_hash {
            Some(hash) => self.load(&hash)?,
            None => self.snapshot_now()?.0,
        };
        Ok((before, after))
    }
}

/// The changes as the protocol names them.
pub(super) fn changed_paths(changes: &[amber_store::Change]) -> Vec<ChangedPath> {
    changes
        .iter()
        .map(|c| ChangedPath {
            path: c.path.to_string(),
            status: c.status,
        })
        .collect()
}
