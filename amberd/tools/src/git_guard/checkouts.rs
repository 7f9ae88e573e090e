//! The nested checkouts of a workspace (submodules `.gitmodules` names and the index's
//! gitlinks, which a user's `git status` descends into) and a stamp of what git reads in
//! each, so the guard sees which ones a command made or changed.
//!
//! The index is parsed only when it changed since the last look (a process-wide memo by
//! its inode and change time): a large repository's index is megabytes, and the guard
//! looks twice per command.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use super::git_admin;

/// How many repositories' gitlinks the memo keeps.
const MEMO_REPOSITORIES: usize = 64;
/// The largest `.gitmodules` read.
const MAX_GITMODULES: u64 = 1 << 20;
/// The largest index read.
const MAX_INDEX: u64 = 256 << 20;

/// A file's identity and last change, or its absence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    ctime: i64,
    ctime_nsec: i64,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    Other,
}

impl Stamp {
    pub(super) fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        let kind = if meta.is_file() {
            Kind::File
        } else if meta.is_dir() {
            Kind::Dir
        } else {
            Kind::Other
        };
        Some(Self {
            dev: meta.dev(),
            ino: meta.ino(),
            ctime: meta.ctime(),
            ctime_nsec: meta.ctime_nsec(),
            kind,
        })
    }

    pub(super) fn kind(&self) -> Kind {
        self.kind
    }
}

/// What git reads in one checkout's `.git`: the entry itself and, for a directory, its
/// config and hooks (a change inside a directory does not change the directory's stamp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CheckoutStamp {
    pub(super) git: Option<Stamp>,
    config: Option<Stamp>,
    hooks: Option<Stamp>,
}

impl CheckoutStamp {
    pub(super) fn of(root: &Path) -> Self {
        let git = root.join(".git");
        Self {
            git: Stamp::of(&git),
            config: Stamp::of(&git.join("config")),
            hooks: Stamp::of(&git.join("hooks")),
        }
    }
}

/// The checkouts nested in the workspace, relative to it: the submodules its `.gitmodules`
/// names and its index's gitlinks, and theirs in turn, when the path is a real directory
/// (git does not descend through a link).
pub(super) fn nested(workspace: &Path) -> Vec<PathBuf> {
    /// How deep submodules of submodules are followed.
    const DEPTH: usize = 6;
    let mut found: Vec<PathBuf> = Vec::new();
    let mut pending = vec![(PathBuf::new(), 0usize)];
    while let Some((rel, depth)) = pending.pop() {
        if depth >= DEPTH {
            continue;
        }
        let root = workspace.join(&rel);
        let mut paths = read_bounded(&root.join(".gitmodules"), MAX_GITMODULES)
            .map(|text| git_admin::submodule_paths(&String::from_utf8_lossy(&text)))
            .unwrap_or_default();
        if let Some(index) = index_of(&root) {
            paths.extend(gitlinks(&index).iter().cloned());
        }
        for path in paths {
            let nested = rel.join(&path);
            let real = workspace.join(&nested);
            let is_checkout = std::fs::canonicalize(&real)
                .is_ok_and(|canonical| canonical == real && canonical != workspace);
            if is_checkout && !found.contains(&nested) {
                found.push(nested.clone());
                pending.push((nested, depth + 1));
            }
        }
    }
    found.sort();
    found
}

/// The git dirs below `<git dir>/modules` (submodules' own repositories), canonical.
pub(super) fn module_dirs(git_dir: &Path) -> Vec<PathBuf> {
    const DEPTH: usize = 6;
    let mut found = Vec::new();
    let mut stack = vec![(git_dir.join("modules"), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if path.join("HEAD").is_file() {
                found.push(path.clone());
                if depth < DEPTH {
                    stack.push((path.join("modules"), depth + 1));
                }
            } else if depth < DEPTH {
                stack.push((path, depth + 1));
            }
        }
    }
    found
}

/// The workspace's git dir: `.git` itself, or the directory a `gitdir: …` file names.
pub(super) fn git_dir_of(workspace: &Path) -> Option<PathBuf> {
    let git = workspace.join(".git");
    let meta = std::fs::symlink_metadata(&git).ok()?;
    if meta.is_dir() {
        return std::fs::canonicalize(&git).ok();
    }
    gitdir_named_by(&git)
}

/// The directory a `.git` file (`gitdir: PATH`) names, canonical.
pub(super) fn gitdir_named_by(file: &Path) -> Option<PathBuf> {
    let text = read_bounded(file, 4096)?;
    let text = String::from_utf8(text).ok()?;
    let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let target = std::fs::canonicalize(file.parent()?.join(named)).ok()?;
    target.is_dir().then_some(target)
}

/// The index file of the checkout at `root` and its stamp.
fn index_of(root: &Path) -> Option<(PathBuf, Stamp)> {
    let index = git_dir_of(root)?.join("index");
    let stamp = Stamp::of(&index)?;
    Some((index, stamp))
}

type Memo = HashMap<PathBuf, (Stamp, Arc<Vec<PathBuf>>)>;

/// The gitlinks of an index, parsed again only when it changed.
fn gitlinks((path, stamp): &(PathBuf, Stamp)) -> Arc<Vec<PathBuf>> {
    static MEMO: LazyLock<Mutex<Memo>> = LazyLock::new(|| Mutex::new(HashMap::new()));
    if let Ok(memo) = MEMO.lock()
        && let Some((seen, links)) = memo.get(path)
        && seen == stamp
    {
        return Arc::clone(links);
    }
    let links = Arc::new(
        read_bounded(path, MAX_INDEX)
            .and_then(|bytes| git_admin::gitlinks(&bytes))
            .unwrap_or_default(),
    );
    if let Ok(mut memo) = MEMO.lock() {
        if memo.len() >= MEMO_REPOSITORIES && !memo.contains_key(path) {
            memo.clear();
        }
        memo.insert(path.clone(), (*stamp, Arc::clone(&links)));
    }
    links
}

/// A regular file's content when it is at most `max` bytes (not through a link).
fn read_bounded(path: &Path, max: u64) -> Option<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    (meta.is_file() && meta.len() <= max)
        .then(|| std::fs::read(path).ok())
        .flatten()
}
