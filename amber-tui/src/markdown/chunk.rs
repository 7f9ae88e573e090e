//! Splits markdown source into independent top-level chunks, line by line.
//!
//! A chunk ends at a blank line when the next non-blank line starts in column 0, outside a
//! fenced code block, and does not continue a list (a list marker after a chunk that holds
//! a list). Such a line cannot continue anything before the blank line in CommonMark (no
//! lazy continuation after a blank line, and list items continue only indented), so every
//! chunk parses on its own exactly as it would inside the whole text. Known exceptions,
//! accepted: a link reference definition only applies inside its own chunk, and the rare
//! HTML blocks that survive blank lines (`<pre>`, `<!-- -->`, …) are cut at them.
//!
//! The decision for a line depends only on the lines before it and the line itself, so
//! feeding a growing text line by line gives the same chunks as feeding it whole: this is
//! what lets [`super::StreamingMarkdown`] render closed chunks once and match
//! [`super::render`] exactly.

use std::ops::Range;

/// An open code fence: its character, run length and indentation.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Fence {
    ch: u8,
    len: usize,
    indent: usize,
}

/// Line-by-line chunk boundary finder.
#[derive(Debug, Clone, Default)]
pub(crate) struct Chunker {
    /// Byte offset of the first line of the open chunk.
    start: Option<usize>,
    fence: Option<Fence>,
    blank_seen: bool,
    list_open: bool,
}

impl Chunker {
    /// Feeds one line (without its `\n`) starting at byte `offset`; returns the range of the
    /// chunk this line closes, if it starts a new one.
    pub(crate) fn feed(&mut self, line: &str, offset: usize) -> Option<Range<usize>> {
        if let Some(fence) = self.fence {
            if closes(line, fence) {
                self.fence = None;
            }
            return None;
        }
        if is_blank(line) {
            self.blank_seen = self.start.is_some();
            return None;
        }
        let col0 = !line.starts_with([' ', '\t']);
        let marker = col0 && is_list_marker(line);
        let mut closed = None;
        match self.start {
            None => {
                self.start = Some(offset);
                self.list_open = marker;
            }
            Some(start) if self.blank_seen && col0 && !(marker && self.list_open) => {
                closed = Some(start..offset);
                self.start = Some(offset);
                self.list_open = marker;
            }
            Some(_) => self.list_open |= marker,
        }
        self.blank_seen = false;
        self.fence = open_fence(line);
        closed
    }

    /// Whether the lines fed so far leave a code fence open.
    pub(crate) fn in_fence(&self) -> bool {
        self.fence.is_some()
    }

    /// Start of the chunk still open (the tail), if any line was non-blank.
    pub(crate) fn open_start(&self) -> Option<usize> {
        self.start
    }
}

/// Calls `f` with every chunk of `text`, in order.
pub(crate) fn for_each_chunk<'t>(text: &'t str, mut f: impl FnMut(&'t str)) {
    let mut chunker = Chunker::default();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if let Some(r) = chunker.feed(line.strip_suffix('\n').unwrap_or(line), offset) {
            f(&text[r]);
        }
        offset += line.len();
    }
    if let Some(start) = chunker.open_start() {
        f(&text[start..]);
    }
}

fn is_blank(line: &str) -> bool {
    line.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

/// `-`, `*`, `+` or `1.`/`1)` (up to 9 digits) followed by a space, tab or the line end.
fn is_list_marker(line: &str) -> bool {
    let b = line.as_bytes();
    let after = match b.first() {
        Some(b'-' | b'*' | b'+') => 1,
        Some(c) if c.is_ascii_digit() => {
            let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
            match b.get(digits) {
                Some(b'.' | b')') if digits <= 9 => digits + 1,
                _ => return false,
            }
        }
        _ => return false,
    };
    matches!(b.get(after), None | Some(b' ' | b'\t' | b'\r'))
}

fn indent_of(line: &str) -> usize {
    line.bytes()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .map(|b| if b == b'\t' { 4 } else { 1 })
        .sum()
}

/// A line opening a fenced code block (at any indentation, to stay on the safe side).
fn open_fence(line: &str) -> Option<Fence> {
    let rest = line.trim_start_matches([' ', '\t']);
    let ch = *rest.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = rest.bytes().take_while(|&b| b == ch).count();
    if len < 3 || (ch == b'`' && rest[len..].contains('`')) {
        return None;
    }
    Some(Fence {
        ch,
        len,
        indent: indent_of(line),
    })
}

/// A line closing `fence`: the same character at least as many times, nothing else.
fn closes(line: &str, fence: Fence) -> bool {
    if indent_of(line) > fence.indent + 3 {
        return false;
    }
    let rest = line.trim_start_matches([' ', '\t']);
    let len = rest.bytes().take_while(|&b| b == fence.ch).count();
    len >= fence.len && rest[len..].trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(text: &str) -> Vec<&str> {
        let mut v = Vec::new();
        for_each_chunk(text, |c| v.push(c));
        v
    }

    #[test]
    fn splits_at_blank_lines_before_column_zero() {
        assert_eq!(chunks("a\nb\n\nc\n\n\n# d"), ["a\nb\n\n", "c\n\n\n", "# d"]);
        assert_eq!(chunks("\n\na"), ["a"]);
        assert_eq!(chunks(""), Vec::<&str>::new());
    }

    #[test]
    fn keeps_indented_continuations_and_lists_together() {
        assert_eq!(
            chunks("- a\n\n  more\n\n- b\n\npara"),
            ["- a\n\n  more\n\n- b\n\n", "para"]
        );
        assert_eq!(chunks("    code\n\n    more"), ["    code\n\n    more"]);
        assert_eq!(chunks("1. a\n\n2. b"), ["1. a\n\n2. b"]);
        assert_eq!(chunks("para\n\n- a"), ["para\n\n", "- a"]);
    }

    #[test]
    fn never_splits_inside_fences() {
        let text = "```rust\nfn a() {}\n\nfn b() {}\n```\n\nafter";
        assert_eq!(
            chunks(text),
            ["```rust\nfn a() {}\n\nfn b() {}\n```\n\n", "after"]
        );
        let text = "````\n```\n\nx\n````\n\ny";
        assert_eq!(chunks(text), ["````\n```\n\nx\n````\n\n", "y"]);
        assert_eq!(chunks("```\nopen\n\nstill"), ["```\nopen\n\nstill"]);
        // An inline code span at a line start is no fence.
        assert_eq!(chunks("```a``` b\n\nc"), ["```a``` b\n\n", "c"]);
    }

    #[test]
    fn list_markers() {
        for yes in ["- a", "* a", "+ a", "-", "1. a", "10) b", "1.", "2.\tx"] {
            assert!(is_list_marker(yes), "{yes}");
        }
        for no in ["-a", "1.a", "a. b", "1234567890. x", "# h", ""] {
            assert!(!is_list_marker(no), "{no}");
        }
    }
}
