//! Turning files into documents: read, skip binaries, cut into line chunks,
//! count term frequencies per chunk — on worker threads when many files
//! changed — and merge the results into the index on the calling thread.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use super::super::tokenize::Tokenizer;
use super::{Bm25Index, CHUNK_BYTES, CHUNK_LINES, KeyMap, Seen};

/// Term counts of the chunk being built (reused across chunks).
pub(super) type Counts = KeyMap<u32>;

/// Bytes sniffed for NUL to detect binary files.
const SNIFF_BYTES: usize = 8192;
/// Below this many files a refresh indexes on the calling thread.
const PARALLEL_FROM: usize = 64;

/// One chunk of a file, its term counts in `FileChunks::terms[terms]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Chunk {
    pub line: u32,
    pub lines: u32,
    pub len: u32,
    pub terms: Range<usize>,
}

/// A tokenized file: chunks and their `(term key, tf)` pairs.
#[derive(Debug, Default)]
pub(super) struct FileChunks {
    pub chunks: Vec<Chunk>,
    pub terms: Vec<(u64, u32)>,
}

/// Cut `text` into chunks of [`CHUNK_LINES`] lines (closed early past
/// [`CHUNK_BYTES`]) and count their terms. Chunks without tokens are dropped.
pub(super) fn chunk(text: &[u8], tokenizer: &mut Tokenizer, counts: &mut Counts) -> FileChunks {
    let mut out = FileChunks {
        chunks: Vec::with_capacity(text.len() / 1024 + 1),
        terms: Vec::with_capacity(text.len() / 12),
    };
    let mut start = 0usize;
    let mut line = 1u32;
    while start < text.len() {
        let mut end = start;
        let mut lines = 0u32;
        for nl in memchr::memchr_iter(b'\n', &text[start..]) {
            end = start + nl + 1;
            lines += 1;
            if lines as usize == CHUNK_LINES || end - start >= CHUNK_BYTES {
                break;
            }
        }
        if lines as usize != CHUNK_LINES && end - start < CHUNK_BYTES {
            // Ran out of newlines: the rest (maybe an unterminated line) joins.
            if end < text.len() {
                lines += 1;
            }
            end = text.len();
        }
        counts.clear();
        let mut len = 0u32;
        tokenizer.tokens(&text[start..end], |key, _| {
            *counts.entry(key).or_insert(0) += 1;
            len = len.saturating_add(1);
        });
        if len > 0 {
            let first = out.terms.len();
            out.terms.extend(counts.drain());
            out.chunks.push(Chunk {
                line,
                lines,
                len,
                terms: first..out.terms.len(),
            });
        }
        line = line.saturating_add(lines);
        start = end;
    }
    out
}

/// Read and chunk one file. Unreadable, binary and too large files give no
/// chunks (and stay recorded, so they are not re-read until they change).
fn tokenize_file(seen: &Seen, tokenizer: &mut Tokenizer, counts: &mut Counts) -> FileChunks {
    if super::scan::too_large(seen.size) {
        return FileChunks::default();
    }
    match std::fs::read(&seen.path) {
        Ok(text) if !text[..text.len().min(SNIFF_BYTES)].contains(&0) => {
            chunk(&text, tokenizer, counts)
        }
        _ => FileChunks::default(),
    }
}

/// Index `files` into `index`; returns how many were indexed and whether the
/// stop flag cut the work short.
pub(super) fn index_files(
    index: &mut Bm25Index,
    files: Vec<Seen>,
    threads: usize,
    stop: &AtomicBool,
) -> (usize, bool) {
    if files.len() < PARALLEL_FROM || threads <= 1 {
        let mut tokenizer = Tokenizer::new();
        let mut counts = Counts::default();
        for (done, seen) in files.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                return (done, true);
            }
            let chunks = tokenize_file(seen, &mut tokenizer, &mut counts);
            index.add_file(seen, &chunks);
        }
        return (files.len(), false);
    }
    let next = AtomicUsize::new(0);
    let mut done = 0usize;
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel::<(usize, FileChunks)>(threads * 32);
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, files) = (&next, &files);
            scope.spawn(move || {
                let mut tokenizer = Tokenizer::new();
                let mut counts = Counts::default();
                loop {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(seen) = files.get(i) else {
                        break;
                    };
                    let chunks = tokenize_file(seen, &mut tokenizer, &mut counts);
                    if tx.send((i, chunks)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, chunks) in rx {
            if let Some(seen) = files.get(i) {
                index.add_file(seen, &chunks);
                done += 1;
            }
        }
    });
    (done, stop.load(Ordering::Relaxed) && done < files.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(text: &str) -> Vec<(u32, u32)> {
        chunk(
            text.as_bytes(),
            &mut Tokenizer::new(),
            &mut Counts::default(),
        )
        .chunks
        .iter()
        .map(|c| (c.line, c.lines))
        .collect()
    }

    #[test]
    fn chunks_are_line_windows() {
        let text: String = (1..=100).map(|i| format!("word{i}\n")).collect();
        assert_eq!(chunks(&text), [(1, 40), (41, 40), (81, 20)]);
        let text: String = (1..=41).map(|i| format!("word{i}\n")).collect();
        assert_eq!(chunks(text.trim_end()), [(1, 40), (41, 1)]);
        assert_eq!(chunks("only line"), [(1, 1)]);
        assert_eq!(chunks(""), []);
    }

    #[test]
    fn long_lines_close_a_chunk_early_and_empty_chunks_are_dropped() {
        let long = "token ".repeat(CHUNK_BYTES / 6 + 10);
        let text = format!("{long}\nnext line\n");
        assert_eq!(chunks(&text), [(1, 1), (2, 1)]);
        let blank = "\n".repeat(45) + "word\n";
        assert_eq!(chunks(&blank), [(41, 6)]);
    }

    #[test]
    fn term_frequencies_are_counted_per_chunk() {
        let out = chunk(
            b"user user name\n",
            &mut Tokenizer::new(),
            &mut Counts::default(),
        );
        assert_eq!(out.chunks[0].len, 3);
        let mut tfs: Vec<u32> = out.terms.iter().map(|t| t.1).collect();
        tfs.sort_unstable();
        assert_eq!(tfs, [1, 2]);
    }
}
