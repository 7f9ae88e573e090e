//! [`Snapshot::diff`]: what changed between two snapshots, path by path, by merging their
//! sorted entries. A rename is a delete and an add; a change of content, kind or mode is a
//! modification. And [`Snapshot::skipped_changes`]: what changed among the paths neither
//! snapshot could record (skipped or ignored), which a rewind cannot restore.
//!
//! The two never overlap: a path recorded on one side only is in the diff when it is absent
//! from the other, but in `skipped_changes` when the other side did not record what is there
//! (a file that grew over the size limit, became ignored, or is now inside an ignored
//! directory has not been deleted, and a restore leaves it alone). Missing (unreadable)
//! paths are not off the record in this sense: the diff counts one as absent, and a rewind
//! from a snapshot that could not read it still writes it back.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::path::RelPath;
use super::snapshot::{SkipReason, Snapshot};

/// How a path changed: the wire's own type, so a diff goes to clients as it is.
pub use amber_proto::ChangeStatus;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub path: RelPath,
    pub status: ChangeStatus,
}

impl Snapshot {
    /// The changes from `self` to `after` of the paths both recorded, sorted by path.
    pub fn diff(&self, after: &Snapshot) -> Vec<Change> {
        let (old, new) = (&self.entries, &after.entries);
        let mut changes = Vec::new();
        let (mut i, mut j) = (0, 0);
        let mut push = |path: &RelPath, status| {
            // Not recorded on the other side, rather than absent: a skipped change.
            let unrecorded = match status {
                ChangeStatus::Added => self.off_record(path),
                ChangeStatus::Deleted => after.off_record(path),
                ChangeStatus::Modified => false,
            };
            if !unrecorded {
                changes.push(Change {
                    path: path.clone(),
                    status,
                });
            }
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

/// What a snapshot knows of a path it did not record.
#[derive(PartialEq)]
enum Unrecorded<'a> {
    Skipped(&'a SkipReason),
    Ignored { dir: bool, size: u64, mtime_ns: i64 },
}

fn unrecorded(snap: &Snapshot) -> BTreeMap<&RelPath, Unrecorded<'_>> {
    let skipped = snap
        .skipped
        .iter()
        .map(|s| (&s.path, Unrecorded::Skipped(&s.reason)));
    let ignored = snap.ignored.iter().map(|i| {
        let state = Unrecorded::Ignored {
            dir: i.dir,
            size: i.size,
            mtime_ns: i.mtime_ns,
        };
        (&i.path, state)
    });
    skipped.chain(ignored).collect()
}

impl Snapshot {
    /// The paths whose change from `self` (before a turn) to `after` a rewind cannot undo,
    /// sorted and once each: a skipped or ignored path that appeared, disappeared, or
    /// changed its size or mtime (or why it is skipped), and a path one snapshot recorded
    /// and the other did not (see the module header). None of them is in [`Self::diff`].
    pub fn skipped_changes(&self, after: &Snapshot) -> Vec<RelPath> {
        let (before_off, after_off) = (unrecorded(self), unrecorded(after));
        let mut changed: BTreeSet<&RelPath> = BTreeSet::new();
        for (path, state) in &before_off {
            if after_off.get(path) != Some(state) {
                changed.insert(path);
            }
        }
        for (path, state) in &after_off {
            if before_off.get(path) != Some(state) {
                changed.insert(path);
            }
        }
        for (snap, other) in [(self, after), (after, self)] {
            for entry in &snap.entries {
                if other.get(&entry.path).is_none() && other.off_record(&entry.path) {
                    changed.insert(&entry.path);
                }
            }
        }
        changed.into_iter().cloned().collect()
    }
}
