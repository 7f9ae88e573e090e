//! Incremental rendering of a reply that arrives in deltas.
//!
//! Complete source lines are fed to a [`Chunker`]; each chunk it closes is rendered once
//! per width and its lines kept, and only the still-open tail chunk is rendered again after
//! a delta, so the cost of a frame is O(tail), not O(reply). The unterminated last line is
//! part of the tail up to what [`partial::shown_prefix`] lets through (a half-written `**bo`
//! never shows as raw markup), so a paragraph written as one long line grows on screen.

use std::ops::Range;

use ratatui::text::Line;

use super::chunk::Chunker;
use super::partial;
use super::render::append_chunk;

/// A markdown reply being streamed, rendered incrementally and cached per width.
///
/// ```text
/// let mut md = StreamingMarkdown::new();
/// md.push("# Ti");          // nothing shown yet: the line is incomplete
/// md.push("tle\nSome **bo");
/// md.lines(80);            // the heading only
/// md.finish();
/// md.lines(80);            // everything, identical to `render(md.source(), 80)`
/// ```
#[derive(Debug, Default)]
pub struct StreamingMarkdown {
    source: String,
    /// End of the last complete line fed to `chunker`.
    committed: usize,
    finished: bool,
    chunker: Chunker,
    /// Source ranges of the chunks the chunker has closed, in order.
    closed: Vec<Range<usize>>,
    cache: Cache,
}

#[derive(Debug, Default)]
struct Cache {
    width: Option<u16>,
    lines: Vec<Line<'static>>,
    /// How many of `closed` are rendered into `lines[..closed_lines]`.
    closed_chunks: usize,
    closed_lines: usize,
    tail_valid: bool,
    /// Source ranges rendered so far (tests check that a delta only renders the tail).
    #[cfg(test)]
    rendered: Vec<Range<usize>>,
}

impl StreamingMarkdown {
    /// An empty reply, still streaming.
    pub fn new() -> Self {
        Self::default()
    }

    /// A complete reply (e.g. from history): `push(text)` then `finish()`.
    pub fn from_complete(text: &str) -> Self {
        let mut md = Self::new();
        md.push(text);
        md.finish();
        md
    }

    /// Appends a delta of source text. Cheap: scans only the delta for line ends; rendering
    /// happens lazily in [`lines`](Self::lines).
    pub fn push(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        let searched = self.source.len();
        self.source.push_str(delta);
        // The unterminated last line is shown (in part) too: the tail changed.
        self.cache.tail_valid = false;
        let Some(last_nl) = self.source[searched..].rfind('\n') else {
            return;
        };
        let end = searched + last_nl + 1;
        let mut offset = self.committed;
        for line in self.source[self.committed..end].split_inclusive('\n') {
            let text = line.strip_suffix('\n').unwrap_or(line);
            if let Some(range) = self.chunker.feed(text, offset) {
                self.closed.push(range);
            }
            offset += line.len();
        }
        self.committed = end;
        self.cache.tail_valid = false;
    }

    /// Marks the reply complete: from now on the last, unterminated line is rendered too.
    pub fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            self.cache.tail_valid = false;
        }
    }

    /// Whether [`finish`](Self::finish) was called.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// All the source pushed so far.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The rendered lines at `width`, each at most `width` columns wide (see
    /// [`super::render`]); after `finish` they equal `render(self.source(), width)`.
    /// A new width re-renders everything from the source (reflow); otherwise only chunks
    /// closed since the last call and the open tail are rendered.
    pub fn lines(&mut self, width: u16) -> &[Line<'static>] {
        let cache = &mut self.cache;
        if cache.width != Some(width) {
            *cache = Cache {
                width: Some(width),
                ..Cache::default()
            };
        }
        let w = usize::from(width);
        if cache.closed_chunks < self.closed.len() {
            cache.lines.truncate(cache.closed_lines);
            for range in &self.closed[cache.closed_chunks..] {
                append_chunk(&self.source[range.clone()], w, &mut cache.lines);
                #[cfg(test)]
                cache.rendered.push(range.clone());
            }
            cache.closed_chunks = self.closed.len();
            cache.closed_lines = cache.lines.len();
            cache.tail_valid = false;
        }
        if !cache.tail_valid {
            cache.lines.truncate(cache.closed_lines);
            for range in tail_ranges(&self.chunker, &self.source, self.committed, self.finished) {
                append_chunk(&self.source[range.clone()], w, &mut cache.lines);
                #[cfg(test)]
                cache.rendered.push(range);
            }
            cache.tail_valid = true;
        }
        &cache.lines
    }

    /// Number of rendered lines at `width` (renders if needed).
    pub fn height(&mut self, width: u16) -> usize {
        self.lines(width).len()
    }

    /// Takes the log of rendered source ranges (test hook).
    #[cfg(test)]
    pub(crate) fn take_rendered(&mut self) -> Vec<Range<usize>> {
        std::mem::take(&mut self.cache.rendered)
    }
}

/// The not-yet-closed source: the chunker's open chunk up to the last complete line, plus
/// the unterminated last line — all of it once finished, else what may be shown of it
/// ([`partial::shown_prefix`]). That line may itself close the open chunk and start another.
fn tail_ranges(
    chunker: &Chunker,
    source: &str,
    committed: usize,
    finished: bool,
) -> Vec<Range<usize>> {
    let end = if finished {
        source.len()
    } else {
        committed + partial::shown_prefix(&source[committed..], chunker.in_fence())
    };
    let mut ranges = Vec::with_capacity(2);
    if end > committed {
        let mut chunker = chunker.clone();
        if let Some(range) = chunker.feed(&source[committed..end], committed) {
            ranges.push(range);
        }
        if let Some(start) = chunker.open_start() {
            ranges.push(start..end);
        }
    } else if let Some(start) = chunker.open_start() {
        ranges.push(start..committed);
    }
    ranges
}
