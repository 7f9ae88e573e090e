//! `grep` mode: ripgrep's library crates in-process. A parallel `ignore` walk
//! feeds a per-thread `grep-searcher` with a line-oriented `grep-regex`
//! matcher; binary files are dropped at their first NUL byte. Matches are
//! capped by `limit` (one over the cap is enough to know more exist), sorted
//! by path and line, and shown as `path:line:text`.

use amber_proto::sync::Locked;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};

use super::walk::WalkSpec;

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GrepMatch {
    pub path: PathBuf,
    pub line: u64,
    /// The line without its terminator, lossily decoded and cut to
    /// [`super::MAX_LINE_BYTES`].
    pub text: String,
}

/// What a grep found.
#[derive(Debug, Default)]
pub(crate) struct GrepResult {
    /// At most `limit` matches, sorted by path then line.
    pub matches: Vec<GrepMatch>,
    /// More matches exist beyond `limit`.
    pub truncated: bool,
    /// Files that could not be read (permissions, races).
    pub unreadable: usize,
    /// The stop flag was raised (cancelled turn).
    pub cancelled: bool,
    /// Files skipped because a deny rule hides them.
    pub hidden: usize,
}

/// Compile a pattern the way the tool does: regex syntax of `grep-regex`,
/// line-oriented (a literal `\n` is refused), NUL banned (binary detection
/// would make it unmatchable anyway).
pub(crate) fn matcher(pattern: &str) -> Result<RegexMatcher, String> {
    RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .ban_byte(Some(b'\0'))
        .build(pattern)
        .map_err(|err| err.to_string())
}

/// Search every file of `spec` for `matcher`, stopping at `limit` matches or
/// when `stop` is raised.
#[cfg(test)]
pub(crate) fn grep(
    spec: &WalkSpec,
    matcher: &RegexMatcher,
    limit: usize,
    threads: usize,
    stop: &AtomicBool,
) -> GrepResult {
    grep_except(spec, matcher, limit, threads, stop, &|_| false)
}

/// [`grep`], skipping (without reading) the files `hidden` says a deny rule hides.
pub(crate) fn grep_except(
    spec: &WalkSpec,
    matcher: &RegexMatcher,
    limit: usize,
    threads: usize,
    stop: &AtomicBool,
    hidden: &(dyn Fn(&Path) -> bool + Sync),
) -> GrepResult {
    let skipped = AtomicUsize::new(0);
    let shared = Shared {
        limit,
        stop,
        seen: AtomicUsize::new(0),
        truncated: AtomicBool::new(false),
        unreadable: AtomicUsize::new(0),
        matches: Mutex::new(Vec::new()),
    };
    spec.for_each_file(threads, stop, || {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\0'))
            .build();
        let shared = &shared;
        let skipped = &skipped;
        move |path: &Path, _entry: &ignore::DirEntry| {
            if hidden(path) {
                skipped.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            search_file(shared, &mut searcher, matcher, path)
        }
    });
    let mut matches = shared
        .matches
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    matches.sort_unstable_by(|a, b| a.path.cmp(&b.path).then(a.line.cmp(&b.line)));
    matches.truncate(limit);
    GrepResult {
        matches,
        truncated: shared.truncated.load(Ordering::Relaxed),
        unreadable: shared.unreadable.load(Ordering::Relaxed),
        cancelled: stop.load(Ordering::Relaxed) && !shared.truncated.load(Ordering::Relaxed),
        hidden: skipped.into_inner(),
    }
}

/// State shared by the walker threads.
struct Shared<'a> {
    limit: usize,
    stop: &'a AtomicBool,
    /// Matches claimed so far, across threads.
    seen: AtomicUsize,
    truncated: AtomicBool,
    unreadable: AtomicUsize,
    matches: Mutex<Vec<GrepMatch>>,
}

/// Search one file; `false` stops the walk (limit reached or stopped).
fn search_file(
    shared: &Shared<'_>,
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &Path,
) -> bool {
    let mut sink = FileSink {
        shared,
        path,
        found: Vec::new(),
        full: false,
    };
    if searcher.search_path(matcher, path, &mut sink).is_err() {
        shared.unreadable.fetch_add(1, Ordering::Relaxed);
    }
    let full = sink.full;
    if !sink.found.is_empty() {
        let mut all = shared.matches.locked();
        all.append(&mut sink.found);
    }
    !full && !shared.stop.load(Ordering::Relaxed)
}

/// Collects one file's matches; refuses more once the global cap is reached.
struct FileSink<'s, 'a> {
    shared: &'s Shared<'a>,
    path: &'s Path,
    found: Vec<GrepMatch>,
    full: bool,
}

impl Sink for FileSink<'_, '_> {
    type Error = std::io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if self.shared.stop.load(Ordering::Relaxed) {
            self.full = true;
            return Ok(false);
        }
        let claimed = self.shared.seen.fetch_add(1, Ordering::Relaxed);
        if claimed >= self.shared.limit {
            self.shared.truncated.store(true, Ordering::Relaxed);
            self.full = true;
            return Ok(false);
        }
        self.found.push(GrepMatch {
            path: self.path.to_path_buf(),
            line: mat.line_number().unwrap_or(0),
            text: super::cut_line(mat.bytes()),
        });
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, WalkSpec) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for i in 0..20 {
            std::fs::write(
                root.join(format!("f{i:02}.txt")),
                "alpha\nbeta\nalpha beta\n",
            )
            .unwrap();
        }
        let spec = WalkSpec {
            workspace: root.clone(),
            root,
            glob: None,
        };
        (dir, spec)
    }

    #[test]
    fn finds_sorted_matches_with_line_numbers() {
        let (_dir, spec) = tree();
        let m = matcher("beta$").unwrap();
        let res = grep(&spec, &m, 1000, 2, &AtomicBool::new(false));
        assert_eq!(res.matches.len(), 40);
        assert!(!res.truncated && !res.cancelled);
        assert!(res.matches[0].path.ends_with("f00.txt"));
        assert_eq!((res.matches[0].line, res.matches[1].line), (2, 3));
        assert_eq!(res.matches[1].text, "alpha beta");
        assert!(res.matches[39].path.ends_with("f19.txt"));
    }

    #[test]
    fn limit_caps_and_flags_truncation() {
        let (_dir, spec) = tree();
        let m = matcher("alpha").unwrap();
        let res = grep(&spec, &m, 5, 2, &AtomicBool::new(false));
        assert_eq!(res.matches.len(), 5);
        assert!(res.truncated);
        let res = grep(&spec, &m, 40, 1, &AtomicBool::new(false));
        assert_eq!(res.matches.len(), 40);
        assert!(!res.truncated);
    }

    #[test]
    fn a_raised_stop_flag_searches_nothing() {
        let (_dir, spec) = tree();
        let m = matcher("alpha").unwrap();
        let res = grep(&spec, &m, 100, 2, &AtomicBool::new(true));
        assert!(res.matches.is_empty());
        assert!(res.cancelled);
    }

    #[test]
    fn bad_patterns_are_reported() {
        assert!(matcher("fn (").unwrap_err().contains("unclosed group"));
        assert!(matcher("a\nb").is_err());
    }
}
