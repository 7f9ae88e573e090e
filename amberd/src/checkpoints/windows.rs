//! Who changed a path during a turn: the turn's tools, or someone else. A turn's two
//! snapshots tell what changed between its checkpoint and its end, not by whom; a hand edit
//! made while the model was thinking lands in the same diff as the tools' writes. So each
//! batch of file-changing calls is timed on the filesystem's own clock ([`Window`]: a
//! marker file's mtime before and after the batch), and a path the turn added or modified
//! whose inode change time (ctime) lies in none of its windows was last changed by someone
//! else: it is recorded as `outside` and a rewind leaves it alone, as a conflict, unless
//! `force`. The ctime, not the mtime: no program can set it (`touch -d` and `mv` keep an
//! old mtime; both set the ctime to now).
//!
//! The rule errs one way only: what it cannot tell apart is counted as the user's, never
//! as the agent's. A process the agent left running that writes between calls, or a
//! filesystem that keeps coarser times than the data dir's makes the agent's own change a
//! conflict (`force` restores it). Limits: an edit made while a tool call runs, a deletion
//! (nothing is left to read a time from), and a path edited by hand and then again by a
//! tool in the same turn count as the turn's.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use amber_store::{ChangeStatus, Entry, RelPath, Snapshot};

/// Slack around a window, for clocks read on two filesystems.
const SLACK_NS: i64 = 1_000_000;
/// FAT keeps two-second times; a whole-second time is compared at that grain.
const COARSE_NS: i64 = 2_000_000_000;

/// A span of the filesystem clock during which a batch of the turn's file-changing calls
/// ran (ns since the epoch, both ends included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    start: i64,
    end: i64,
}

impl Window {
    /// From two readings of `BlobStore::clock_ns`; one that failed (`i64::MIN`) makes the
    /// window unbounded, so nothing is counted as someone else's on a guess.
    pub(crate) fn new(start: i64, end: i64) -> Self {
        if start == i64::MIN || end == i64::MIN {
            return Self {
                start: i64::MIN,
                end: i64::MAX,
            };
        }
        Self { start, end }
    }

    fn holds(&self, time_ns: i64) -> bool {
        let start = if time_ns % 1_000_000_000 == 0 {
            self.start.saturating_sub(self.start.rem_euclid(COARSE_NS))
        } else {
            self.start
        };
        start.saturating_sub(SLACK_NS) <= time_ns && time_ns <= self.end.saturating_add(SLACK_NS)
    }
}

/// The paths added or modified from `before` to `after` whose ctime (`ctime_ns`; `None`:
/// unknown, the path changed again since `after`) lies in none of `windows`: changed during
/// the turn, but not by its tools.
pub(crate) fn outside(
    before: &Snapshot,
    after: &Snapshot,
    windows: &[Window],
    ctime_ns: impl Fn(&Entry) -> Option<i64>,
) -> Vec<RelPath> {
    before
        .diff(after)
        .into_iter()
        .filter(|c| c.status != ChangeStatus::Deleted)
        .filter_map(|c| after.get(&c.path))
        .filter(|e| ctime_ns(e).is_none_or(|t| !windows.iter().any(|w| w.holds(t))))
        .map(|e| e.path.clone())
        .collect()
}

/// The ctime of `entry` under `root` now, if it is still the inode `entry` recorded.
pub(crate) fn ctime_now(root: &Path, entry: &Entry) -> Option<i64> {
    let meta = std::fs::symlink_metadata(entry.path.join_to(root)).ok()?;
    (meta.ino() == entry.ino).then(|| {
        meta.ctime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.ctime_nsec())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_holds_its_span_with_slack_and_coarse_times_at_their_grain() {
        let s = 10 * 1_000_000_000 + 500_000_000; // 10.5 s
        let w = Window::new(s, s + 100);
        for (time, held) in [
            (s, true),
            (s + 100, true),
            (s + 50, true),
            (s - SLACK_NS, true),
            (s - SLACK_NS - 1, false),
            (s + 100 + SLACK_NS + 1, false),
            // A two-second filesystem stores 10.5 s as 10 s.
            (10 * 1_000_000_000, true),
            (8 * 1_000_000_000, false),
        ] {
            assert_eq!(w.holds(time), held, "{time}");
        }
        let unknown = Window::new(i64::MIN, s);
        assert!(unknown.holds(0) && unknown.holds(i64::MAX));
    }
}
