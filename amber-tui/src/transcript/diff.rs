//! Unified diffs drawn for reading: the renderer shared by tool cells (`edit`, `write`,
//! `apply_patch` — the daemon's `tool_call_completed.diff`, or the diff of the arguments
//! until it arrives) and the `/diff` cell (`checkpoint/diff`). Per file a header line (path,
//! `+N −M`), then its hunks: a gutter with the line number (the new line for context and
//! additions, the old line for removals) and the sign, additions green, removals red, `⋮`
//! between hunks; binary files named; the cut marker and notes dimmed. Tabs are expanded and
//! control characters replaced; long lines wrap under the text column when details are
//! expanded, else are cut with `…`. The `/rewind` preview draws with it too.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

use super::hunks::{self, Block, Diff, FileDiff, FileStatus, Row};
use super::style;
use super::tool::{collapse, push_behind_bar, truncate_line};
use crate::wrap::{str_width, truncate};

/// Diff lines a `/diff` cell shows while details are collapsed.
const COLLAPSED_LINES: usize = 24;
/// Columns of a tab stop.
const TAB: usize = 4;

/// What a rendered diff shows besides its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiffView {
    /// Line numbers in the gutter: only when they are the file's (a diff from the daemon).
    pub numbers: bool,
    /// A header line per file (path and counts).
    pub headers: bool,
}

impl DiffView {
    /// A diff from the daemon: real line numbers, one header per file.
    pub const DAEMON: DiffView = DiffView {
        numbers: true,
        headers: true,
    };
}

/// `diff` drawn at `width` columns (every line fits): all of it — folding is the caller's.
pub fn render(diff: &Diff, width: usize, expanded: bool, view: DiffView) -> Vec<Line<'static>> {
    let width = width.max(1);
    let digits = if view.numbers {
        diff.blocks
            .iter()
            .filter_map(|b| match b {
                Block::File(f) => Some(f),
                Block::Note(_) => None,
            })
            .flat_map(|f| f.hunks.iter().flat_map(|h| h.rows.iter()))
            .filter_map(Row::number)
            .max()
            .map_or(1, |n| n.to_string().len())
    } else {
        0
    };
    let gutter = Gutter {
        digits,
        numbers: view.numbers,
    };
    let mut out = Vec::new();
    for block in &diff.blocks {
        match block {
            Block::Note(text) => text_lines(&mut out, "", text, style::dim(), width, expanded),
            Block::File(file) => {
                if view.headers && !out.is_empty() {
                    // Files apart.
                    out.push(Line::default());
                }
                if view.headers {
                    out.push(file_header(file, width));
                } else if file.binary {
                    out.push(Line::from(Span::styled("binary file", style::dim())));
                }
                file_rows(&mut out, file, gutter, width, expanded);
            }
        }
    }
    out.into_iter().map(|l| truncate_line(l, width)).collect()
}

/// The gutter of a diff: `NNN ± ` with numbers, `± ` without.
#[derive(Debug, Clone, Copy)]
struct Gutter {
    digits: usize,
    numbers: bool,
}

impl Gutter {
    fn width(self) -> usize {
        if self.numbers { self.digits + 3 } else { 2 }
    }

    fn spans(
        self,
        number: Option<u64>,
        sign: &'static str,
        sign_style: Style,
    ) -> Vec<Span<'static>> {
        let mut spans = Vec::with_capacity(2);
        if self.numbers {
            let n = number.map(|n| n.to_string()).unwrap_or_default();
            spans.push(Span::styled(
                format!("{n:>w$} ", w = self.digits),
                style::dim(),
            ));
        }
        spans.push(Span::styled(format!("{sign} "), sign_style));
        spans
    }
}

fn file_rows(
    out: &mut Vec<Line<'static>>,
    file: &FileDiff,
    gutter: Gutter,
    width: usize,
    expanded: bool,
) {
    if file.binary {
        return;
    }
    for (i, hunk) in file.hunks.iter().enumerate() {
        if i > 0 {
            let mut sep = if gutter.numbers {
                format!("{:>w$}", "⋮", w = gutter.digits)
            } else {
                "⋮".to_owned()
            };
            if !hunk.section.is_empty() {
                sep = format!("{sep} {}", hunk.section);
            }
            out.push(Line::from(Span::styled(
                truncate(&clean(&sep), width),
                style::dim(),
            )));
        }
        for row in &hunk.rows {
            let (sign, st, text) = match row {
                Row::Context { text, .. } => (" ", Style::default(), text),
                Row::Added { text, .. } => ("+", style::added(), text),
                Row::Removed { text, .. } => ("-", style::removed(), text),
                Row::Note(text) => {
                    let pad = " ".repeat(gutter.width().min(width.saturating_sub(1)));
                    text_lines(out, &pad, text, style::dim(), width, expanded);
                    continue;
                }
            };
            let head = gutter.spans(row.number(), sign, st);
            let text_w = width.saturating_sub(gutter.width()).max(1);
            let text = clean(text);
            let pieces = if expanded {
                hard_wrap(&text, text_w)
            } else {
                vec![truncate(&text, text_w)]
            };
            for (j, piece) in pieces.into_iter().enumerate() {
                let mut spans = if j == 0 {
                    head.clone()
                } else {
                    vec![Span::raw(" ".repeat(gutter.width()))]
                };
                spans.push(Span::styled(piece, st));
                out.push(Line::from(spans));
            }
        }
    }
}

/// `path  +N −M`; an added or deleted file says so, a moved one names both paths, a binary
/// one says it is (no counts, no rows). A long path loses its head.
fn file_header(file: &FileDiff, width: usize) -> Line<'static> {
    let label = match file.status() {
        FileStatus::Moved => format!(
            "{} → {}",
            file.old_path.as_deref().unwrap_or(""),
            file.new_path.as_deref().unwrap_or("")
        ),
        _ => file.path().to_owned(),
    };
    let mut tags: Vec<&str> = Vec::new();
    match file.status() {
        FileStatus::Added => tags.push("new"),
        FileStatus::Deleted => tags.push("deleted"),
        FileStatus::Moved | FileStatus::Modified => {}
    }
    if file.binary {
        tags.push("binary");
    }
    let mut tail: Vec<Span<'static>> = Vec::new();
    if !tags.is_empty() {
        tail.push(Span::styled(
            format!(" ({})", tags.join(", ")),
            style::dim(),
        ));
    }
    if !file.binary {
        tail.push(Span::raw("  "));
        tail.push(Span::styled(format!("+{}", file.added()), style::added()));
        tail.push(Span::raw(" "));
        tail.push(Span::styled(
            format!("−{}", file.removed()),
            style::removed(),
        ));
    }
    let tail_w: usize = tail.iter().map(|s| str_width(&s.content)).sum();
    let mut spans = vec![Span::styled(
        truncate_head(&clean(&label), width.saturating_sub(tail_w).max(8)),
        style::bold(),
    )];
    spans.extend(tail);
    Line::from(spans)
}

/// Text behind `lead`, wrapped (expanded) or cut at `width`.
fn text_lines(
    out: &mut Vec<Line<'static>>,
    lead: &str,
    text: &str,
    st: Style,
    width: usize,
    expanded: bool,
) {
    let text = clean(text);
    let w = width.saturating_sub(str_width(lead)).max(1);
    let pieces = if expanded {
        hard_wrap(&text, w)
    } else {
        vec![truncate(&text, w)]
    };
    for piece in pieces {
        out.push(Line::from(vec![
            Span::raw(lead.to_owned()),
            Span::styled(piece, st),
        ]));
    }
}

/// Tabs expanded to stops of [`TAB`] columns; other control characters (which would drive
/// the terminal) shown as `�`.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut col = 0;
    for ch in text.chars() {
        if ch == '\t' {
            let n = TAB - col % TAB;
            out.extend(std::iter::repeat_n(' ', n));
            col += n;
        } else if ch.is_control() {
            out.push('\u{fffd}');
            col += 1;
        } else {
            out.push(ch);
            col += ch.width().unwrap_or(0);
        }
    }
    out
}

/// `text` in pieces of at most `width` columns, cut anywhere (code has no word breaks to
/// prefer, and every space matters).
fn hard_wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut w = 0;
    for ch in text.chars() {
        let cw = ch.width().unwrap_or(0);
        if w + cw > width && w > 0 {
            out.push(std::mem::take(&mut cur));
            w = 0;
        }
        cur.push(ch);
        w += cw;
    }
    out.push(cur);
    out
}

/// Cuts `s` to at most `width` columns keeping its end, starting with `…` when cut.
fn truncate_head(s: &str, width: usize) -> String {
    if str_width(s) <= width {
        return s.to_owned();
    }
    let mut kept: Vec<char> = Vec::new();
    let mut w = 0;
    for ch in s.chars().rev() {
        let cw = ch.width().unwrap_or(0);
        if w + cw + 1 > width {
            break;
        }
        kept.push(ch);
        w += cw;
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

/// A `/diff` cell: a header line, then the diff behind a bar, collapsed to its head unless
/// details are expanded (then long lines wrap instead of being cut).
pub fn cell_lines(title: &str, diff: &str, width: u16, expanded: bool) -> Vec<Line<'static>> {
    let width = usize::from(width.max(8));
    let mut out = vec![Line::from(vec![
        Span::styled("± ", style::accent()),
        Span::styled(
            crate::wrap::truncate(title, width.saturating_sub(2)),
            style::bold(),
        ),
    ])];
    let body_width = width.saturating_sub(4).max(4);
    let body = if diff.trim().is_empty() {
        vec![Line::from(Span::styled("no changes", style::dim()))]
    } else {
        collapse(
            render(&hunks::parse(diff), body_width, expanded, DiffView::DAEMON),
            COLLAPSED_LINES,
            expanded,
            true,
        )
    };
    push_behind_bar(&mut out, body, body_width, expanded);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_collapses_long_diffs_to_their_head() {
        let diff: String = (0..40).map(|i| format!("+line {i}\n")).collect();
        let collapsed = cell_lines("turn 2", &diff, 40, false);
        assert_eq!(collapsed.len(), 1 + COLLAPSED_LINES);
        let expanded = cell_lines("turn 2", &diff, 40, true);
        assert_eq!(expanded.len(), 41);
        let empty = cell_lines("turn 2", "", 40, false);
        assert_eq!(empty.len(), 2);
    }

    fn text(line: &Line<'_>) -> String {
        line.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(text).collect()
    }

    const TWO_HUNKS: &str = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -7,3 +7,3 @@\n a\n-b\n+B\n c\n@@ -98,3 +98,4 @@\n x\n y\n+z\n w\n";

    #[test]
    fn one_number_column_as_wide_as_the_largest_number() {
        let lines = render(&hunks::parse(TWO_HUNKS), 80, false, DiffView::DAEMON);
        assert_eq!(
            texts(&lines),
            [
                "src/lib.rs  +2 −1",
                "  7   a",
                "  8 - b",
                "  8 + B",
                "  9   c",
                "  ⋮",
                " 98   x",
                " 99   y",
                "100 + z",
                "101   w",
            ]
        );
        assert_eq!(lines[2].spans[1].style, style::removed());
        assert_eq!(lines[2].spans[2].style, style::removed());
        assert_eq!(lines[3].spans[2].style, style::added());
        assert_eq!(lines[1].spans[0].style, style::dim());
        assert_eq!(lines[5].spans[0].style, style::dim());
    }

    #[test]
    fn without_numbers_only_the_sign_is_in_the_gutter() {
        let view = DiffView {
            numbers: false,
            headers: false,
        };
        let lines = render(&hunks::parse(TWO_HUNKS), 80, false, view);
        assert_eq!(
            texts(&lines),
            ["  a", "- b", "+ B", "  c", "⋮", "  x", "  y", "+ z", "  w"]
        );
    }

    #[test]
    fn binary_files_the_cut_marker_and_notes_are_dimmed() {
        let diff = "Binary files a/img.png and b/img.png differ\n--- a/a\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n\\ No newline at end of file\n\\ amber: diff cut at 10 of 99 bytes (over 131072)\n";
        let lines = render(&hunks::parse(diff), 80, false, DiffView::DAEMON);
        assert_eq!(
            texts(&lines),
            [
                "img.png (binary)",
                "",
                "a (deleted)  +0 −1",
                "1 - x",
                "    \\ No newline at end of file",
                "\\ amber: diff cut at 10 of 99 bytes (over 131072)",
            ]
        );
        assert_eq!(lines[0].spans[1].style, style::dim());
        assert_eq!(lines[4].spans[1].style, style::dim());
        assert_eq!(lines[5].spans[1].style, style::dim());
    }

    #[test]
    fn tabs_are_expanded_and_control_characters_replaced() {
        let diff = "--- a/a\n+++ b/a\n@@ -1 +1 @@\n-\tx\n+ab\ty\u{1b}[2J\n";
        let lines = render(&hunks::parse(diff), 80, false, DiffView::DAEMON);
        assert_eq!(texts(&lines)[1..], ["1 -     x", "1 + ab  y\u{fffd}[2J"]);
    }

    #[test]
    fn every_line_fits_at_20_80_and_120_columns() {
        let long = "漢字 and\ttabs ".repeat(20);
        let diff = format!(
            "--- a/some/very/long/directory/name/that/goes/on/file.rs\n+++ b/some/very/long/directory/name/that/goes/on/file.rs\n@@ -1,2 +1,2 @@ {long}\n {long}\n-{long}\n+x\n\\ amber: diff cut at 1 of 2 bytes (over 131072) {long}\n"
        );
        let parsed = hunks::parse(&diff);
        for width in [20, 80, 120] {
            for expanded in [false, true] {
                let lines = render(&parsed, width, expanded, DiffView::DAEMON);
                for l in &lines {
                    assert!(
                        l.width() <= width,
                        "{width} cols, expanded {expanded}: {:?} is {} wide",
                        text(l),
                        l.width()
                    );
                }
                if expanded {
                    // Wrapped under the text column: every piece of the context line, in order.
                    let rows: String = lines[1..]
                        .iter()
                        .map(text)
                        .take_while(|t| !t.starts_with("2 - "))
                        .map(|t| t[4..].to_owned())
                        .collect();
                    assert_eq!(rows, clean(&long), "{width} cols");
                } else {
                    assert_eq!(lines.len(), 5, "{width} cols: one row per line");
                }
            }
        }
        let header = render(&parsed, 20, false, DiffView::DAEMON);
        assert_eq!(text(&header[0]), "…s/on/file.rs  +1 −1");
    }
}
