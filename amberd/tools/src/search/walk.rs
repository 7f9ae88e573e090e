//! The file walk shared by both search modes: ripgrep's `ignore` walker with
//! its standard filters (`.gitignore` — also outside git repositories —,
//! `.ignore`, git excludes, hidden files and `.git` skipped, symlinks not
//! followed) plus the `glob` argument, and a stop flag polled per entry.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use globset::{Glob, GlobBuilder, GlobMatcher};
use ignore::{WalkBuilder, WalkState};

/// The `glob` argument: a pattern with a `/` matches the path relative to the
/// search root (or to the workspace); one without matches the file name at any
/// depth (`*.rs`). Brace alternatives work: `*.{rs,toml}`.
#[derive(Debug, Clone)]
pub struct GlobFilter {
    pattern: String,
    matcher: GlobMatcher,
    by_name: bool,
}

impl GlobFilter {
    /// Compile a glob; the error text names the problem.
    pub fn new(pattern: &str) -> Result<Self, String> {
        let pattern = pattern.trim();
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        let by_name = !pattern.contains('/');
        let glob: Glob = GlobBuilder::new(pattern)
            .literal_separator(!by_name)
            .backslash_escape(true)
            .build()
            .map_err(|err| err.kind().to_string())?;
        Ok(Self {
            pattern: pattern.to_owned(),
            matcher: glob.compile_matcher(),
            by_name,
        })
    }

    /// The pattern as compiled (trimmed, without a leading `./`).
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Whether a file passes, given its paths relative to the search root and
    /// to the workspace.
    pub fn matches(&self, rel_root: &Path, rel_workspace: &Path) -> bool {
        if self.by_name {
            return rel_root
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name));
        }
        self.matcher.is_match(rel_root) || self.matcher.is_match(rel_workspace)
    }
}

/// Where and what to walk.
#[derive(Debug, Clone)]
pub struct WalkSpec {
    /// Canonical workspace root (paths are shown relative to it).
    pub workspace: PathBuf,
    /// The confined search root: a directory or a single file.
    pub root: PathBuf,
    pub glob: Option<GlobFilter>,
}

impl WalkSpec {
    /// Whether a walked file passes the glob filter.
    pub fn accepts(&self, path: &Path) -> bool {
        let Some(glob) = &self.glob else {
            return true;
        };
        let rel_root = path.strip_prefix(&self.root).unwrap_or(path);
        let rel_root = if rel_root.as_os_str().is_empty() {
            // The root is the file itself: match its name.
            Path::new(path.file_name().unwrap_or(path.as_os_str()))
        } else {
            rel_root
        };
        let rel_ws = path.strip_prefix(&self.workspace).unwrap_or(path);
        glob.matches(rel_root, rel_ws)
    }

    /// A walker over `start` (the root or a directory under it) with the
    /// tool's filters; `glob` is applied by the caller ([`Self::accepts`]).
    pub fn builder_at(&self, start: &Path, threads: usize) -> WalkBuilder {
        let mut builder = WalkBuilder::new(start);
        builder
            .standard_filters(true)
            .require_git(false)
            .follow_links(false)
            .current_dir(self.workspace.clone())
            .threads(threads);
        builder
    }

    /// Walk in parallel; `visit` is built once per thread and called with
    /// every regular file that passes the filters. It returns `false` to stop
    /// the whole walk. The walk also stops when `stop` is set.
    pub fn for_each_file<F, V>(&self, threads: usize, stop: &AtomicBool, mut make_visitor: F)
    where
        F: FnMut() -> V,
        V: FnMut(&Path, &ignore::DirEntry) -> bool + Send,
    {
        self.builder_at(&self.root, threads)
            .build_parallel()
            .run(|| {
                let mut visit = make_visitor();
                Box::new(move |entry| {
                    if stop.load(Ordering::Relaxed) {
                        return WalkState::Quit;
                    }
                    let Ok(entry) = entry else {
                        // Unreadable directories and broken entries are skipped.
                        return WalkState::Continue;
                    };
                    if !entry.file_type().is_some_and(|t| t.is_file()) {
                        return WalkState::Continue;
                    }
                    let path = entry.path();
                    if !self.accepts(path) {
                        return WalkState::Continue;
                    }
                    if visit(path, &entry) {
                        WalkState::Continue
                    } else {
                        WalkState::Quit
                    }
                })
            });
    }
}

/// Worker threads for walks and index builds: the machine's parallelism,
/// capped (more threads only contend on the disk).
pub fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(glob: &str) -> WalkSpec {
        WalkSpec {
            workspace: PathBuf::from("/ws"),
            root: PathBuf::from("/ws/src"),
            glob: Some(GlobFilter::new(glob).unwrap()),
        }
    }

    #[test]
    fn name_globs_match_at_any_depth() {
        let s = spec("*.rs");
        assert!(s.accepts(Path::new("/ws/src/a.rs")));
        assert!(s.accepts(Path::new("/ws/src/deep/er/b.rs")));
        assert!(!s.accepts(Path::new("/ws/src/a.ts")));
        let s = spec("*.{rs,toml}");
        assert!(s.accepts(Path::new("/ws/src/Cargo.toml")));
    }

    #[test]
    fn path_globs_match_relative_to_root_or_workspace() {
        let s = spec("tools/**/*.rs");
        assert!(s.accepts(Path::new("/ws/src/tools/a.rs")));
        assert!(s.accepts(Path::new("/ws/src/tools/x/y/a.rs")));
        assert!(!s.accepts(Path::new("/ws/src/other/tools.rs")));
        let s = spec("src/*.rs");
        assert!(s.accepts(Path::new("/ws/src/a.rs")));
        assert!(!s.accepts(Path::new("/ws/src/x/a.rs")));
    }

    #[test]
    fn a_file_root_matches_by_name() {
        let mut s = spec("*.rs");
        s.root = PathBuf::from("/ws/src/a.rs");
        assert!(s.accepts(Path::new("/ws/src/a.rs")));
    }

    #[test]
    fn bad_globs_are_reported() {
        let err = GlobFilter::new("src/[a-").unwrap_err();
        assert!(err.contains("unclosed"), "{err}");
    }
}
