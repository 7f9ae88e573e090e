//! inotify (Linux) as a shortcut for a scan of a whole tree: every directory the
//! walk visits gets a watch (added before it is listed), and a refresh drains the
//! events to learn which files to stat and which directories to list again,
//! instead of stat-ing the whole tree. An event queue overflow asks for a full
//! stat scan; a touched ignore file asks for a full walk. Elsewhere, or when
//! inotify is unavailable or out of watches, [`Watcher::new`] gives `None` and
//! the caller keeps to full scans. Used by the search index and by the
//! checkpoints an executor takes.

use std::collections::HashSet;
use std::path::PathBuf;

/// What the events since the last drain ask for.
#[derive(Debug, Default)]
pub struct Dirty {
    /// Paths whose metadata may have changed.
    pub files: HashSet<PathBuf>,
    /// Directories whose entries changed (or that may be gone).
    pub dirs: HashSet<PathBuf>,
    /// Events were lost: stat everything.
    pub rescan: bool,
    /// An ignore file changed: walk again.
    pub walk: bool,
    /// Directories no longer watched (removed, or moved away): a directory found at
    /// such a path again is a new one.
    pub unwatched: HashSet<PathBuf>,
}

#[cfg(target_os = "linux")]
pub use linux::{Adder, Watcher};

#[cfg(not(target_os = "linux"))]
pub use other::{Adder, Watcher};

/// Whether a file name is one of the ignore files the walk honours.
fn is_ignore_file(name: &std::ffi::OsStr) -> bool {
    name == ".gitignore" || name == ".ignore"
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};

    use super::{Dirty, is_ignore_file};
    use inotify::{EventMask, Inotify, WatchMask, Watches};

    const BUFFER_BYTES: usize = 64 * 1024;

    fn mask() -> WatchMask {
        WatchMask::MODIFY
            | WatchMask::CLOSE_WRITE
            | WatchMask::ATTRIB
            | WatchMask::CREATE
            | WatchMask::DELETE
            | WatchMask::MOVED_FROM
            | WatchMask::MOVED_TO
            | WatchMask::DELETE_SELF
            | WatchMask::MOVE_SELF
            | WatchMask::ONLYDIR
            | WatchMask::DONT_FOLLOW
            | WatchMask::EXCL_UNLINK
    }

    /// One inotify instance and the directories it watches.
    pub struct Watcher {
        inotify: Inotify,
        dirs: HashMap<i32, PathBuf>,
        buffer: Vec<u8>,
    }

    impl std::fmt::Debug for Watcher {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Watcher")
                .field("dirs", &self.dirs.len())
                .finish()
        }
    }

    /// Adds watches from walker threads.
    #[derive(Clone)]
    pub struct Adder(Watches);

    impl Adder {
        /// Watch `dir`; the watch id, or `None` when the kernel refuses
        /// (typically out of watches).
        pub fn add(&mut self, dir: &Path) -> Option<i32> {
            self.0
                .add(dir, mask())
                .ok()
                .map(|wd| wd.get_watch_descriptor_id())
        }
    }

    impl Watcher {
        pub fn new() -> Option<Self> {
            Some(Self {
                inotify: Inotify::init().ok()?,
                dirs: HashMap::new(),
                buffer: vec![0; BUFFER_BYTES],
            })
        }

        pub fn adder(&self) -> Adder {
            Adder(self.inotify.watches())
        }

        /// Remember which directory a watch id stands for.
        pub fn register(&mut self, id: i32, dir: PathBuf) {
            self.dirs.insert(id, dir);
        }

        /// Read every pending event (never blocks).
        pub fn drain(&mut self) -> Dirty {
            let mut dirty = Dirty::default();
            loop {
                let events = match self.inotify.read_events(&mut self.buffer) {
                    Ok(events) => events,
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        dirty.rescan = true;
                        break;
                    }
                };
                for event in events {
                    let id = event.wd.get_watch_descriptor_id();
                    if event.mask.contains(EventMask::Q_OVERFLOW) {
                        dirty.rescan = true;
                        continue;
                    }
                    if event.mask.contains(EventMask::IGNORED) {
                        if let Some(dir) = self.dirs.remove(&id) {
                            dirty.unwatched.insert(dir);
                        }
                        continue;
                    }
                    let Some(dir) = self.dirs.get(&id) else {
                        continue;
                    };
                    if event
                        .mask
                        .intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF)
                    {
                        dirty.dirs.insert(dir.clone());
                        if event.mask.contains(EventMask::MOVE_SELF) {
                            // Its later events would carry the old path.
                            let dir = dir.clone();
                            self.dirs.remove(&id);
                            dirty.unwatched.insert(dir);
                        }
                        continue;
                    }
                    let Some(name) = event.name else {
                        continue;
                    };
                    if is_ignore_file(name) {
                        dirty.walk = true;
                    }
                    let path = dir.join(name);
                    let entries_changed = event.mask.intersects(
                        EventMask::CREATE
                            | EventMask::DELETE
                            | EventMask::MOVED_FROM
                            | EventMask::MOVED_TO,
                    );
                    if entries_changed {
                        dirty.dirs.insert(dir.clone());
                        if event.mask.contains(EventMask::ISDIR) {
                            dirty.dirs.insert(path.clone());
                        }
                    }
                    dirty.files.insert(path);
                }
            }
            dirty
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod other {
    use std::path::{Path, PathBuf};

    use super::Dirty;

    /// No watcher off Linux: refreshes stat the tree.
    #[derive(Debug)]
    pub struct Watcher;

    #[derive(Clone)]
    pub struct Adder;

    impl Adder {
        pub fn add(&mut self, _dir: &Path) -> Option<i32> {
            None
        }
    }

    impl Watcher {
        pub fn new() -> Option<Self> {
            None
        }
        pub fn adder(&self) -> Adder {
            Adder
        }
        pub fn register(&mut self, _id: i32, _dir: PathBuf) {}
        pub fn drain(&mut self) -> Dirty {
            Dirty {
                rescan: true,
                ..Dirty::default()
            }
        }
    }
}
