//! A workspace under watch, for its checkpoints: after one full walk every directory has an
//! inotify watch (added before it is listed), and the next snapshot lists again only the
//! directories whose entries changed since (`Snapshot::rescan`). A full walk comes back
//! whenever the watcher cannot vouch for every change: no watch yet, the event queue
//! overflowed, an ignore file changed, the kernel ran out of watches, the size limit
//! changed — and at least every [`FULL_WALK_EVERY`], as a bound on what an event the
//! kernel never sent could cost.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use amber_store::{BlobSink, CheckpointError, Snapshot};
use amber_tools::watch::Watcher;

/// The longest a tree goes between full walks.
pub const FULL_WALK_EVERY: Duration = Duration::from_secs(600);

/// One workspace's watch and its newest snapshot.
pub struct WatchedTree {
    watcher: Option<Watcher>,
    /// The directories walked and watched now.
    known: HashSet<PathBuf>,
    /// Ignored directories watched for their own entries (a snapshot lists them by their
    /// metadata, which changes when a child is added, removed or renamed in them): a change
    /// there is one of their parent's listing.
    ignored: HashSet<PathBuf>,
    /// Directories to list again at the next take whatever the events say (an ignored
    /// directory that changed before its watch was added).
    pending: Vec<PathBuf>,
    latest: Option<Arc<Snapshot>>,
    walked_at: Option<Instant>,
    /// A watch could not be added: changes there would go unseen.
    blind: bool,
    /// Full walks so far.
    walks: u64,
}

impl Default for WatchedTree {
    fn default() -> Self {
        Self::new()
    }
}

impl WatchedTree {
    pub fn new() -> Self {
        Self {
            watcher: Watcher::new(),
            known: HashSet::new(),
            ignored: HashSet::new(),
            pending: Vec::new(),
            latest: None,
            walked_at: None,
            blind: false,
            walks: 0,
        }
    }

    /// How many times the tree was walked whole.
    pub fn walks(&self) -> u64 {
        self.walks
    }

    /// The snapshot the last take gave.
    pub fn latest(&self) -> Option<Arc<Snapshot>> {
        self.latest.clone()
    }

    /// A snapshot of `root` now, its content into `sink` (an executor's keeps hashes only;
    /// amberd's own, a local session's, stores it). Listed again where the watcher saw
    /// changes since the last one; else walked whole, reusing `previous`'s hashes where
    /// metadata did not change (whose content must be in `sink` already). The caller hands
    /// it back with [`WatchedTree::set_latest`]. Blocking.
    pub fn take(
        &mut self,
        root: &Path,
        previous: Option<&Snapshot>,
        sink: &dyn BlobSink,
        max_file_bytes: u64,
        exclude: &[PathBuf],
    ) -> Result<Snapshot, CheckpointError> {
        let dirty = self.watcher.as_mut().map(Watcher::drain);
        let base = self
            .latest
            .clone()
            .filter(|b| b.max_file_bytes == max_file_bytes);
        let fresh_enough = self
            .walked_at
            .is_some_and(|at| at.elapsed() < FULL_WALK_EVERY);
        let adder = self.watcher.as_ref().map(Watcher::adder);
        let mut added: Vec<(i32, PathBuf)> = Vec::new();
        let mut refused = false;
        let mut enter = |dir: &Path| match adder.clone().and_then(|mut a| a.add(dir)) {
            Some(id) => added.push((id, dir.to_path_buf())),
            None => refused = true,
        };
        let snap = match (dirty, base) {
            (Some(dirty), Some(base))
                if !dirty.rescan && !dirty.walk && !self.blind && fresh_enough =>
            {
                for gone in &dirty.unwatched {
                    self.known.retain(|k| !k.starts_with(gone));
                    self.ignored.retain(|k| !k.starts_with(gone));
                }
                let mut changed: Vec<PathBuf> = dirty.dirs.into_iter().collect();
                changed.extend(
                    dirty
                        .files
                        .iter()
                        .filter_map(|f| f.parent().map(Path::to_path_buf)),
                );
                changed.append(&mut self.pending);
                // A change inside an ignored directory is its parent's to list.
                for dir in &mut changed {
                    if self.ignored.contains(dir.as_path())
                        && let Some(parent) = dir.parent()
                    {
                        *dir = parent.to_path_buf();
                    }
                }
                let known = &self.known;
                let rescanned = Snapshot::rescan(
                    root,
                    &base,
                    &changed,
                    &|dir| known.contains(dir),
                    sink,
                    max_file_bytes,
                    exclude,
                    &mut enter,
                )?;
                for gone in &rescanned.vanished {
                    self.known.retain(|k| !k.starts_with(gone));
                }
                rescanned.snapshot
            }
            _ => {
                self.known.clear();
                self.ignored.clear();
                self.pending.clear();
                self.blind = false;
                self.walked_at = Some(Instant::now());
                self.walks += 1;
                Snapshot::take_watching(root, previous, sink, max_file_bytes, exclude, &mut enter)?
            }
        };
        self.blind |= refused;
        let Some(watcher) = self.watcher.as_mut() else {
            return Ok(snap);
        };
        for (id, dir) in added {
            self.known.insert(dir.clone());
            watcher.register(id, dir);
        }
        let mut adder = watcher.adder();
        for record in snap.ignored.iter().filter(|i| i.dir) {
            let dir = record.path.join_to(root);
            if self.ignored.contains(&dir) {
                continue;
            }
            let Some(id) = adder.add(&dir) else {
                self.blind = true;
                continue;
            };
            watcher.register(id, dir.clone());
            // Changed between its listing and its watch: listed again next time.
            let now = std::fs::symlink_metadata(&dir).map(|m| {
                use std::os::unix::fs::MetadataExt;
                m.mtime() * 1_000_000_000 + m.mtime_nsec()
            });
            if now.ok() != Some(record.mtime_ns)
                && let Some(parent) = dir.parent()
            {
                self.pending.push(parent.to_path_buf());
            }
            self.ignored.insert(dir);
        }
        Ok(snap)
    }

    /// The snapshot the last take gave, once its caller saved it (the next one is stored
    /// as a delta from it).
    pub fn set_latest(&mut self, snap: Arc<Snapshot>) {
        self.latest = Some(snap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_store::HashesOnly;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};

    const MAX: u64 = 1 << 20;

    fn write(root: &Path, rel: &str, body: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, body).unwrap();
    }

    /// The records a snapshot makes of the tree (what a rewind and a diff read).
    fn records(s: &Snapshot) -> String {
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}",
            s.entries, s.skipped, s.ignored, s.missing
        )
    }

    type Step = (&'static str, fn(&Path));

    #[test]
    fn a_watched_snapshot_equals_a_full_walk_after_every_kind_of_change() {
        let ws = tempfile::tempdir().unwrap();
        let here = tempfile::tempdir().unwrap();
        let clock = amber_store::BlobStore::open(here.path().join("clock")).unwrap();
        let root = ws.path();
        write(root, ".gitignore", "*.log\nbuild/\n");
        write(root, "README.md", "# r\n");
        write(root, "src/main.rs", "fn main() {}\n");
        write(root, "src/deep/a/b/c.rs", "c\n");
        write(root, "docs/guide.md", "guide\n");
        write(root, "build/out.o", "obj\n");
        let steps: &[Step] = &[
            ("nothing", |_| {}),
            ("a file edited deep down", |r| {
                write(r, "src/deep/a/b/c.rs", "changed c\n")
            }),
            ("a file made at the top", |r| write(r, "new.txt", "new\n")),
            ("a file deleted", |r| {
                fs::remove_file(r.join("README.md")).unwrap()
            }),
            ("a new tree of directories", |r| {
                write(r, "pkg/x/y/z.rs", "z\n");
                write(r, "pkg/x/w.rs", "w\n");
            }),
            ("a directory renamed", |r| {
                fs::rename(r.join("docs"), r.join("manual")).unwrap()
            }),
            ("a file edited in the renamed directory", |r| {
                write(r, "manual/guide.md", "guide v2\n")
            }),
            ("a tree deleted", |r| {
                fs::remove_dir_all(r.join("pkg")).unwrap()
            }),
            ("a file replaced by a directory", |r| {
                fs::remove_file(r.join("new.txt")).unwrap();
                write(r, "new.txt/inner.txt", "inner\n");
            }),
            ("a directory replaced by a file", |r| {
                fs::remove_dir_all(r.join("new.txt")).unwrap();
                write(r, "new.txt", "a file again\n");
            }),
            ("a mode changed", |r| {
                fs::set_permissions(r.join("src/main.rs"), fs::Permissions::from_mode(0o755))
                    .unwrap()
            }),
            ("a symlink made, then pointed elsewhere", |r| {
                symlink("src/main.rs", r.join("link")).unwrap();
                fs::remove_file(r.join("link")).unwrap();
                symlink("manual/guide.md", r.join("link")).unwrap();
            }),
            ("an ignored file made", |r| {
                write(r, "src/debug.log", "log\n")
            }),
            ("an ignored directory filled", |r| {
                write(r, "build/more.o", "more\n")
            }),
            ("a directory deleted and made again, deeper", |r| {
                fs::remove_dir_all(r.join("src/deep")).unwrap();
                write(r, "src/deep/a/b/c.rs", "again\n");
                write(r, "src/deep/a/b/d/e.rs", "e\n");
            }),
            ("a file edited inside the made-again directory", |r| {
                write(r, "src/deep/a/b/d/e.rs", "e v2\n")
            }),
            ("a directory moved out and back in", |r| {
                fs::rename(r.join("manual"), r.join("../manual-out")).unwrap();
                fs::rename(r.join("../manual-out"), r.join("manual")).unwrap();
            }),
            ("a file edited in the directory moved back", |r| {
                write(r, "manual/guide.md", "guide v3\n")
            }),
            ("the ignore rules changed", |r| {
                write(r, ".gitignore", "*.log\n")
            }),
            ("a file edited after the full walk", |r| {
                write(r, "build/out.o", "obj v2\n")
            }),
        ];
        let mut tree = WatchedTree::new();
        assert!(tree.watcher.is_some(), "inotify is available here");
        let first = tree
            .take(root, None, &HashesOnly { clock: &clock }, MAX, &[])
            .unwrap();
        tree.set_latest(Arc::new(first));
        let mut rules_changed = false;
        for (name, change) in steps {
            change(root);
            let watched = tree
                .take(root, None, &HashesOnly { clock: &clock }, MAX, &[])
                .unwrap();
            let full = Snapshot::take_hashes(root, None, &clock, MAX, &[]).unwrap();
            assert_eq!(records(&watched), records(&full), "after: {name}");
            tree.set_latest(Arc::new(watched));
            // Only a change of the ignore rules walks the tree again.
            rules_changed |= *name == "the ignore rules changed";
            let walks = if rules_changed { 2 } else { 1 };
            assert_eq!(tree.walks, walks, "after: {name}");
        }
        assert_eq!(tree.walks, 2);
    }

    #[test]
    fn an_unchanged_tree_is_not_walked_again() {
        let ws = tempfile::tempdir().unwrap();
        let here = tempfile::tempdir().unwrap();
        let clock = amber_store::BlobStore::open(here.path().join("clock")).unwrap();
        for d in 0..20 {
            for f in 0..10 {
                write(ws.path(), &format!("d{d}/f{f}.txt"), "x\n");
            }
        }
        let mut tree = WatchedTree::new();
        let first = tree
            .take(ws.path(), None, &HashesOnly { clock: &clock }, MAX, &[])
            .unwrap();
        assert_eq!(first.stats.files_read, 200);
        tree.set_latest(Arc::new(first));
        write(ws.path(), "d3/f1.txt", "changed\n");
        let second = tree
            .take(ws.path(), None, &HashesOnly { clock: &clock }, MAX, &[])
            .unwrap();
        // Only d3 was listed again: its 10 files looked at, one read.
        assert_eq!(second.stats.files_read, 1, "{:?}", second.stats);
        assert_eq!(second.entries.len(), 200);
    }
}
