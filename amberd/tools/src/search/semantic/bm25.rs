//! The BM25 (Okapi) index behind `semantic` mode, refreshed incrementally.
//!
//! Documents are chunks of files ([`CHUNK_LINES`] lines, fewer when lines are
//! long). Terms are 64-bit token keys ([`super::tokenize`]); each term owns a
//! posting list of `(doc, tf)` pairs, delta + varint encoded in one byte
//! vector, appended in doc order. Nothing of the text is kept: results are
//! `(file, first line, line count)` and snippets are re-read from disk.
//!
//! A refresh finds what changed by mtime + size ([`scan`]: a full walk the
//! first time, then stats of the known files and directories), re-indexes
//! changed and new files (in parallel when there are many) and drops deleted
//! ones. A dropped document is only marked dead (length 0);
//! queries skip it, and once dead documents outnumber live ones the postings
//! are rewritten without them.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

use crate::search::walk::WalkSpec;

mod build;
mod postings;
mod scan;

use postings::PostingList;
use scan::{Scan, Seen, TreeState};

/// Lines per document.
pub const CHUNK_LINES: usize = 40;
/// A chunk is closed early at a line end past this many bytes.
pub const CHUNK_BYTES: usize = 6 * 1024;
/// Larger files are not indexed (generated data, bundles).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Okapi BM25 parameters.
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// Term keys are already well mixed: hash them by identity.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// One document: a chunk of a file. `len == 0` marks it dead.
#[derive(Debug, Clone, Copy)]
struct Doc {
    /// Index into `Bm25Index::paths`.
    file: u32,
    /// 1-based first line.
    line: u32,
    lines: u32,
    /// Tokens in the chunk (BM25 document length).
    len: u32,
}

/// What the index knows of one file.
#[derive(Debug, Clone)]
struct FileEntry {
    mtime: SystemTime,
    size: u64,
    docs: Range<u32>,
    /// Refresh generation that last saw the file.
    seen: u64,
}

/// One ranked result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub path: Arc<Path>,
    /// 1-based first line of the chunk.
    pub line: u32,
    pub lines: u32,
    pub score: f32,
}

/// What a refresh did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefreshStats {
    /// Files known after the refresh (ignore rules and glob applied; files
    /// over the size cap and binaries count, with no documents).
    pub files: usize,
    /// Files (re)read: new or changed.
    pub indexed: usize,
    /// Files forgotten: deleted, renamed away, or no longer visible.
    pub removed: usize,
    /// The stop flag cut the refresh short: the index is valid but partial.
    pub cancelled: bool,
}

/// An inverted index over the chunks of the files under one (root, glob).
#[derive(Debug, Default)]
pub struct Bm25Index {
    paths: Vec<Arc<Path>>,
    files: HashMap<Arc<Path>, FileEntry>,
    docs: Vec<Doc>,
    terms: KeyMap<u32>,
    postings: Vec<PostingList>,
    live_docs: u64,
    live_len: u64,
    generation: u64,
    tree: TreeState,
}

impl Bm25Index {
    /// An empty index; refreshes use inotify where available.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty index whose refreshes always stat the whole tree.
    pub fn stat_only() -> Self {
        Self {
            tree: TreeState::new(false),
            ..Self::default()
        }
    }

    /// Whether refreshes are driven by file-system events (inotify).
    pub fn watching(&self) -> bool {
        self.tree.watching()
    }

    /// Files currently indexed.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Live documents (chunks).
    pub fn doc_count(&self) -> u64 {
        self.live_docs
    }

    /// Distinct terms ever seen.
    pub fn term_count(&self) -> usize {
        self.terms.len()
    }

    /// Approximate heap bytes held by the index.
    pub fn heap_bytes(&self) -> usize {
        let postings: usize = self.postings.iter().map(PostingList::heap_bytes).sum();
        let paths: usize = self.paths.iter().map(|p| p.as_os_str().len() + 16).sum();
        postings
            + self.postings.capacity() * std::mem::size_of::<PostingList>()
            + self.docs.capacity() * std::mem::size_of::<Doc>()
            + self.terms.capacity() * 16
            + self.files.capacity() * (std::mem::size_of::<FileEntry>() + 24)
            + paths
    }

    /// Bring the index in line with the tree: walk, re-index what changed,
    /// forget what is gone.
    pub fn refresh(&mut self, spec: &WalkSpec, threads: usize, stop: &AtomicBool) -> RefreshStats {
        let (changed, gone) = match self.tree.scan(&self.files, spec, threads, stop) {
            // A cut scan says nothing about deletions: keep the index as is.
            Scan::Stopped => {
                return RefreshStats {
                    cancelled: true,
                    ..RefreshStats::default()
                };
            }
            Scan::Full(walked) => self.diff(walked),
            Scan::Delta { changed, gone } => (changed, gone),
        };
        for path in &gone {
            self.forget(path);
        }
        let (indexed, cancelled) = build::index_files(self, changed, threads, stop);
        self.maybe_compact();
        RefreshStats {
            files: self.files.len(),
            indexed,
            removed: gone.len(),
            cancelled,
        }
    }

    /// Split a full walk into changed (or new) files and known files gone.
    fn diff(&mut self, walked: Vec<Seen>) -> (Vec<Seen>, Vec<PathBuf>) {
        self.generation += 1;
        let generation = self.generation;
        let mut changed = Vec::new();
        for seen in walked {
            match self.files.get_mut(seen.path.as_path()) {
                Some(entry) => {
                    entry.seen = generation;
                    if seen.racy() || entry.mtime != seen.mtime || entry.size != seen.size {
                        changed.push(seen);
                    }
                }
                None => changed.push(seen),
            }
        }
        let gone = self
            .files
            .iter()
            .filter(|(_, entry)| entry.seen != generation)
            .map(|(path, _)| path.to_path_buf())
            .collect();
        (changed, gone)
    }

    /// Drop a file and kill its documents.
    fn forget(&mut self, path: &Path) {
        if let Some(entry) = self.files.remove(path) {
            for id in entry.docs {
                if let Some(doc) = self.docs.get_mut(id as usize)
                    && doc.len > 0
                {
                    self.live_docs -= 1;
                    self.live_len -= u64::from(doc.len);
                    doc.len = 0;
                }
            }
        }
    }

    /// Add one tokenized file; its chunks become the next documents.
    fn add_file(&mut self, seen: &Seen, chunks: &build::FileChunks) {
        if self.files.contains_key(seen.path.as_path()) {
            // Changed since the last refresh: its old documents die.
            self.forget(&seen.path);
        }
        let path: Arc<Path> = Arc::from(seen.path.as_path());
        let file = u32::try_from(self.paths.len()).unwrap_or(u32::MAX);
        self.paths.push(Arc::clone(&path));
        let first = u32::try_from(self.docs.len()).unwrap_or(u32::MAX);
        for chunk in &chunks.chunks {
            let doc = u32::try_from(self.docs.len()).unwrap_or(u32::MAX);
            self.docs.push(Doc {
                file,
                line: chunk.line,
                lines: chunk.lines,
                len: chunk.len,
            });
            self.live_docs += 1;
            self.live_len += u64::from(chunk.len);
            for &(key, tf) in &chunks.terms[chunk.terms.clone()] {
                let next = u32::try_from(self.postings.len()).unwrap_or(u32::MAX);
                let term = *self.terms.entry(key).or_insert(next);
                if term == next {
                    self.postings.push(PostingList::default());
                }
                if let Some(list) = self.postings.get_mut(term as usize) {
                    list.push(doc, tf);
                }
            }
        }
        let last = u32::try_from(self.docs.len()).unwrap_or(u32::MAX);
        self.files.insert(
            path,
            FileEntry {
                mtime: seen.mtime,
                size: seen.size,
                docs: first..last,
                seen: self.generation,
            },
        );
    }

    /// Rewrite postings without dead documents once they outnumber live ones.
    fn maybe_compact(&mut self) {
        let dead = self.docs.len() as u64 - self.live_docs;
        if dead < 64 || dead <= self.live_docs {
            return;
        }
        let mut remap = vec![u32::MAX; self.docs.len()];
        let mut docs = Vec::with_capacity(self.live_docs as usize);
        let mut file_remap: HashMap<u32, u32> = HashMap::new();
        let mut paths = Vec::with_capacity(self.files.len());
        for (old, doc) in self.docs.iter().enumerate() {
            if doc.len == 0 {
                continue;
            }
            let file = *file_remap.entry(doc.file).or_insert_with(|| {
                paths.push(Arc::clone(&self.paths[doc.file as usize]));
                u32::try_from(paths.len() - 1).unwrap_or(u32::MAX)
            });
            remap[old] = u32::try_from(docs.len()).unwrap_or(u32::MAX);
            docs.push(Doc { file, ..*doc });
        }
        for list in &mut self.postings {
            *list = list.remapped(&remap);
        }
        for entry in self.files.values_mut() {
            let start = remap
                .get(entry.docs.start as usize)
                .copied()
                .unwrap_or(u32::MAX);
            let len = entry.docs.end - entry.docs.start;
            entry.docs = if start == u32::MAX {
                0..0
            } else {
                start..start + len
            };
        }
        self.docs = docs;
        self.paths = paths;
    }

    /// The `limit` best documents for weighted query terms, at most
    /// `per_file` of them from one file.
    pub fn search(&self, terms: &[(u64, f32)], limit: usize, per_file: usize) -> Vec<Hit> {
        if self.live_docs == 0 || limit == 0 {
            return Vec::new();
        }
        let n = self.live_docs as f32;
        let avgdl = (self.live_len as f32 / n).max(1.0);
        let mut scores = vec![0f32; self.docs.len()];
        let mut touched: Vec<u32> = Vec::new();
        let mut scratch: Vec<(u32, u32)> = Vec::new();
        for &(key, weight) in terms {
            let Some(&term) = self.terms.get(&key) else {
                continue;
            };
            let Some(list) = self.postings.get(term as usize) else {
                continue;
            };
            scratch.clear();
            list.for_each(|doc, tf| {
                if self.docs.get(doc as usize).is_some_and(|d| d.len > 0) {
                    scratch.push((doc, tf));
                }
            });
            let df = scratch.len() as f32;
            if df == 0.0 {
                continue;
            }
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln() * weight;
            for &(doc, tf) in &scratch {
                let len = self.docs[doc as usize].len as f32;
                let tf = tf as f32;
                let s = idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avgdl));
                let slot = &mut scores[doc as usize];
                if *slot == 0.0 {
                    touched.push(doc);
                }
                *slot += s;
            }
        }
        // Scores are positive, so their bit patterns order like the floats.
        let mut heap: BinaryHeap<(u32, Reverse<u32>)> = touched
            .into_iter()
            .map(|doc| (scores[doc as usize].to_bits(), Reverse(doc)))
            .collect();
        let mut per: HashMap<u32, usize> = HashMap::new();
        let mut hits = Vec::new();
        while let Some((_, Reverse(doc))) = heap.pop() {
            let d = self.docs[doc as usize];
            let count = per.entry(d.file).or_default();
            if *count >= per_file {
                continue;
            }
            *count += 1;
            hits.push(Hit {
                path: Arc::clone(&self.paths[d.file as usize]),
                line: d.line,
                lines: d.lines,
                score: scores[doc as usize],
            });
            if hits.len() == limit {
                break;
            }
        }
        hits
    }
}

#[cfg(test)]
mod tests;
