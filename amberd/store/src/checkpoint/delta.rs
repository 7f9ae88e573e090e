//! [`SnapshotDelta`]: a snapshot sent from the machine that took it to the one that keeps
//! it, as the entries that changed since a base both sides hold (or in full when the
//! sender does not know the receiver's base). The lists a snapshot keeps besides its
//! entries (skipped, ignored, missing) and its clock and stats always travel whole: they
//! are short.

use serde::{Deserialize, Serialize};

use super::error::CheckpointError;
use super::hash::Hash;
use super::path::RelPath;
use super::snapshot::{Entry, Ignored, Missing, Skipped, Snapshot, TakeStats};

/// A snapshot as the changes from a base, or whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotDelta {
    /// `changed` holds every entry and the receiver's base is not used.
    pub full: bool,
    pub max_file_bytes: u64,
    pub clock_ns: i64,
    /// Entries new or different since the base (all of them when `full`), sorted by path.
    #[serde(default)]
    pub changed: Vec<Entry>,
    /// Paths the base has and this snapshot does not.
    #[serde(default)]
    pub removed: Vec<RelPath>,
    #[serde(default)]
    pub skipped: Vec<Skipped>,
    #[serde(default)]
    pub ignored: Vec<Ignored>,
    #[serde(default)]
    pub missing: Vec<Missing>,
    #[serde(default)]
    pub stats: TakeStats,
}

impl Snapshot {
    /// This snapshot as the changes since `base` (whole without one).
    pub fn delta_from(&self, base: Option<&Snapshot>) -> SnapshotDelta {
        let (changed, removed) = match base {
            Some(base) => super::manifest::changes(&base.entries, &self.entries),
            None => (self.entries.clone(), Vec::new()),
        };
        SnapshotDelta {
            full: base.is_none(),
            max_file_bytes: self.max_file_bytes,
            clock_ns: self.clock_ns,
            changed,
            removed,
            skipped: self.skipped.clone(),
            ignored: self.ignored.clone(),
            missing: self.missing.clone(),
            stats: self.stats,
        }
    }
}

impl SnapshotDelta {
    /// The snapshot this delta describes, from `base` (the one it was made against; not
    /// used when it is whole). Refused when a delta comes without its base, or its lists
    /// are not sorted paths each named once.
    pub fn apply(self, base: Option<&Snapshot>) -> Result<Snapshot, CheckpointError> {
        let invalid = |reason: &str| CheckpointError::SnapshotCorrupt {
            hash: Hash::of(b""),
            reason: format!("a snapshot received: {reason}"),
        };
        if !strictly_sorted(self.changed.iter().map(|e| &e.path))
            || !strictly_sorted(self.removed.iter())
        {
            return Err(invalid("its entries are not sorted by path, each once"));
        }
        let entries = if self.full {
            self.changed
        } else {
            let base = base.ok_or_else(|| invalid("a delta without the snapshot it is from"))?;
            merge(&base.entries, self.changed, &self.removed)
        };
        let mut snap = Snapshot::new(self.max_file_bytes, self.clock_ns);
        snap.entries = entries;
        snap.skipped = self.skipped;
        snap.ignored = self.ignored;
        snap.missing = self.missing;
        snap.stats = self.stats;
        Ok(snap)
    }
}

fn strictly_sorted<'a>(mut paths: impl Iterator<Item = &'a RelPath>) -> bool {
    let Some(mut last) = paths.next() else {
        return true;
    };
    paths.all(|p| {
        let ordered = last < p;
        last = p;
        ordered
    })
}

/// `base` with `removed` taken out and `changed` put in (both sorted by path).
fn merge(base: &[Entry], changed: Vec<Entry>, removed: &[RelPath]) -> Vec<Entry> {
    let mut out = Vec::with_capacity(base.len() + changed.len());
    let mut changed = changed.into_iter().peekable();
    let mut removed = removed.iter().peekable();
    for old in base {
        while let Some(new) = changed.next_if(|n| n.path < old.path) {
            out.push(new);
        }
        while removed.next_if(|r| **r < old.path).is_some() {}
        if removed.next_if(|r| **r == old.path).is_some() {
            // A path removed and added again (a file that became a symlink) is in both.
            if let Some(new) = changed.next_if(|n| n.path == old.path) {
                out.push(new);
            }
            continue;
        }
        match changed.next_if(|n| n.path == old.path) {
            Some(new) => out.push(new),
            None => out.push(old.clone()),
        }
    }
    out.extend(changed);
    out
}
