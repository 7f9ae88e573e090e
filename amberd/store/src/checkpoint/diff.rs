//! [`Snapshot::diff`]: what changed between two snapshots, path by path, by merging their
//! sorted entries. A rename is a delete and an add; a change of content, kind or mode is a
//! modification. Skipped and missing paths are not entries, so they are not in the diff.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::path::RelPath;
use super::snapshot::Snapshot;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeStatus {
    Added,
    Modified,
    Deleted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub path: RelPath,
    pub status: ChangeStatus,
}

impl Snapshot {
    /// The changes from `self` to `after`, sorted by path.
    pub fn diff(&self, after: &Snapshot) -> Vec<Change> {
        let (old, new) = (&self.entries, &after.entries);
        let mut changes = Vec::new();
        let (mut i, mut j) = (0, 0);
        let mut push = |path: &RelPath, status| {
            changes.push(Change {
                path: path.clone(),
                status,
            });
        };
        loop {
            match (old.get(i), new.get(j)) {
                (None, None) => break,
                (Some(b), None) => {
                    push(&b.path, ChangeStatus::Deleted);
                    i += 1;
                }
                (None, Some(a)) => {
                    push(&a.path, ChangeStatus::Added);
                    j += 1;
                }
                (Some(b), Some(a)) => match b.path.cmp(&a.path) {
                    Ordering::Less => {
                        push(&b.path, ChangeStatus::Deleted);
                        i += 1;
                    }
                    Ordering::Greater => {
                        push(&a.path, ChangeStatus::Added);
                        j += 1;
                    }
                    Ordering::Equal => {
                        if !b.same_content(a) {
                            push(&a.path, ChangeStatus::Modified);
                        }
                        i += 1;
                        j += 1;
                    }
                },
            }
        }
        changes
    }
}
