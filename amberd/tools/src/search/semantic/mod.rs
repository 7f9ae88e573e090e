//! `semantic` mode: ranked lexical search behind a small trait, so the BM25
//! index can later be swapped for something else.
//!
//! [`Bm25Backend`] keeps one [`Bm25Index`] per (root, glob) for the life of
//! the daemon (the tool instance is shared by every session), refreshes it
//! incrementally on each query and evicts the least recently used index past
//! [`MAX_CACHED_INDEXES`]. Snippets are re-read from disk.

pub mod bm25;
pub mod tokenize;

use amber_proto::sync::Locked;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

pub use bm25::{Bm25Index, Hit, RefreshStats};
use tokenize::{TokenKind, Tokenizer};

use super::walk::WalkSpec;

/// Indexes kept warm at once (one per distinct root and glob).
pub const MAX_CACHED_INDEXES: usize = 8;
/// Extra weight of a whole-identifier match over a match of one part.
pub const WHOLE_IDENT_BOOST: f32 = 1.5;
/// Results taken from one file at most.
pub const MAX_HITS_PER_FILE: usize = 3;
/// Lines of a chunk shown under a result.
pub const SNIPPET_LINES: usize = 3;

/// Why a semantic query could not run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SemanticError {
    #[error("the query has no searchable words (identifiers or words of 2+ letters or digits)")]
    EmptyQuery,
}

/// Ranked results and what the refresh before them did.
#[derive(Debug, Clone, Default)]
pub struct SemanticResult {
    pub hits: Vec<Hit>,
    pub refresh: RefreshStats,
    /// Files and chunks in the index after the refresh.
    pub files: usize,
    pub docs: u64,
}

/// A ranked search over the files of a walk. Blocking; call it off the
/// async runtime. `stop` cancels promptly and leaves any cache valid.
pub trait SemanticBackend: Send + Sync {
    fn query(
        &self,
        spec: &WalkSpec,
        query: &str,
        limit: usize,
        stop: &AtomicBool,
    ) -> Result<SemanticResult, SemanticError>;
}

type CacheKey = (PathBuf, Option<String>);

/// The BM25 backend and its per-(root, glob) cache.
#[derive(Default)]
pub struct Bm25Backend {
    cache: Mutex<Cache>,
    threads: usize,
}

#[derive(Default)]
struct Cache {
    clock: u64,
    entries: HashMap<CacheKey, (u64, Arc<Mutex<Bm25Index>>)>,
}

impl Bm25Backend {
    /// A backend using `threads` workers for walks and index builds.
    pub fn new(threads: usize) -> Self {
        Self {
            cache: Mutex::default(),
            threads: threads.max(1),
        }
    }

    /// The cached index of (root, glob), created empty if absent.
    fn index(&self, spec: &WalkSpec) -> Arc<Mutex<Bm25Index>> {
        let key = (
            spec.root.clone(),
            spec.glob.as_ref().map(|g| g.pattern().to_owned()),
        );
        let mut cache = self.cache.locked();
        cache.clock += 1;
        let now = cache.clock;
        if let Some((used, index)) = cache.entries.get_mut(&key) {
            *used = now;
            return Arc::clone(index);
        }
        if cache.entries.len() >= MAX_CACHED_INDEXES
            && let Some(oldest) = cache
                .entries
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(key, _)| key.clone())
        {
            cache.entries.remove(&oldest);
        }
        let index = Arc::new(Mutex::new(Bm25Index::new()));
        cache.entries.insert(key, (now, Arc::clone(&index)));
        index
    }

    /// How many indexes are cached.
    pub fn cached(&self) -> usize {
        self.cache.locked().entries.len()
    }
}

impl SemanticBackend for Bm25Backend {
    fn query(
        &self,
        spec: &WalkSpec,
        query: &str,
        limit: usize,
        stop: &AtomicBool,
    ) -> Result<SemanticResult, SemanticError> {
        let terms = tokenize::query_terms(query, WHOLE_IDENT_BOOST);
        if terms.is_empty() {
            return Err(SemanticError::EmptyQuery);
        }
        let index = self.index(spec);
        // Queries on one (root, glob) take turns; others run alongside.
        let mut index = index.locked();
        let refresh = index.refresh(spec, self.threads, stop);
        let hits = index.search(&terms, limit, MAX_HITS_PER_FILE);
        Ok(SemanticResult {
            hits,
            refresh,
            files: index.file_count(),
            docs: index.doc_count(),
        })
    }
}

/// The lines of a hit worth showing: up to [`SNIPPET_LINES`] lines of the
/// chunk with the most query-term weight, in line order, and the best line's
/// number. A chunk that no longer matches (edited since) shows its first
/// non-blank line.
pub fn snippet(path: &Path, hit: &Hit, query: &str) -> (u32, Vec<(u32, String)>) {
    let terms = tokenize::query_terms(query, WHOLE_IDENT_BOOST);
    let Ok(text) = std::fs::read(path) else {
        return (hit.line, Vec::new());
    };
    let first = hit.line.saturating_sub(1) as usize;
    let mut tokenizer = Tokenizer::new();
    let mut scored: Vec<(f32, u32, &[u8])> = Vec::new();
    let lines = text
        .split(|&b| b == b'\n')
        .skip(first)
        .take(hit.lines as usize);
    for (k, line) in (hit.line..).zip(lines) {
        let mut found: Vec<u64> = Vec::new();
        let mut weight = 0.0f32;
        tokenizer.tokens(line, |key, _kind: TokenKind| {
            if found.contains(&key) {
                return;
            }
            if let Some((_, w)) = terms.iter().find(|(t, _)| *t == key) {
                found.push(key);
                weight += w;
            }
        });
        scored.push((weight, k, line));
    }
    let fallback = scored
        .iter()
        .find(|(_, _, line)| !line.trim_ascii().is_empty())
        .map(|&(_, k, line)| (k, super::cut_line(line)));
    scored.retain(|(w, _, _)| *w > 0.0);
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(SNIPPET_LINES);
    let Some(&(_, best, _)) = scored.first() else {
        return match fallback {
            Some((k, line)) => (k, vec![(k, line)]),
            None => (hit.line, Vec::new()),
        };
    };
    scored.sort_by_key(|&(_, k, _)| k);
    let shown = scored
        .into_iter()
        .map(|(_, k, line)| (k, super::cut_line(line)))
        .collect();
    (best, shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(root: &Path) -> WalkSpec {
        WalkSpec {
            workspace: root.to_path_buf(),
            root: root.to_path_buf(),
            glob: None,
        }
    }

    #[test]
    fn caches_per_root_and_glob_and_evicts_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("a.rs"), "fn user_name() {}\n").unwrap();
        let settled = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::open(root.join("a.rs"))
            .unwrap()
            .set_modified(settled)
            .unwrap();
        let backend = Bm25Backend::new(1);
        let stop = AtomicBool::new(false);
        let mut s = spec(&root);
        let res = backend.query(&s, "userName", 5, &stop).unwrap();
        assert_eq!(res.hits.len(), 1);
        assert_eq!(res.refresh.indexed, 1);
        let res = backend.query(&s, "user", 5, &stop).unwrap();
        assert_eq!(res.refresh.indexed, 0, "warm: nothing re-indexed");
        assert_eq!(backend.cached(), 1);
        for i in 0..MAX_CACHED_INDEXES + 2 {
            s.glob = Some(crate::search::walk::GlobFilter::new(&format!("*.r{i}")).unwrap());
            backend.query(&s, "user", 5, &stop).unwrap();
        }
        assert_eq!(backend.cached(), MAX_CACHED_INDEXES);
        assert_eq!(
            backend.query(&s, "!!", 5, &stop).unwrap_err(),
            SemanticError::EmptyQuery
        );
    }

    #[test]
    fn snippets_pick_the_matching_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.rs");
        std::fs::write(
            &path,
            "// header\nfn other() {}\nfn user_name() {}\n\nlet user = 1;\n",
        )
        .unwrap();
        let hit = Hit {
            path: Arc::from(path.as_path()),
            line: 1,
            lines: 5,
            score: 1.0,
        };
        let (best, lines) = snippet(&path, &hit, "userName");
        assert_eq!(best, 3);
        assert_eq!(
            lines,
            [
                (3, "fn user_name() {}".to_owned()),
                (5, "let user = 1;".to_owned())
            ]
        );
        let (best, lines) = snippet(&path, &hit, "nothing here");
        assert_eq!((best, lines), (1, vec![(1, "// header".to_owned())]));
    }
}
