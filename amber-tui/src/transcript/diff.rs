//! Unified diffs as `checkpoint/diff` sends them (git-style headers, hunks, binary files
//! named): coloured line by line for the `/diff` cell and the `/rewind` preview.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::style;
use super::tool::{collapse, push_behind_bar};

/// Diff lines a `/diff` cell shows while details are collapsed.
const COLLAPSED_LINES: usize = 24;

/// The style of one line of a unified diff.
fn line_style(line: &str) -> Style {
    if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff ") {
        style::bold()
    } else if line.starts_with('+') {
        style::added()
    } else if line.starts_with('-') {
        style::removed()
    } else if line.starts_with("@@") {
        style::accent()
    } else if line.starts_with(' ') || line.is_empty() {
        Style::default()
    } else {
        // `index …`, `new file mode …`, `Binary files … differ`, `\ No newline …`.
        style::dim()
    }
}

/// Every line of `diff`, coloured; tabs become four spaces.
pub fn unified_lines(diff: &str) -> Vec<Line<'static>> {
    diff.trim_end_matches('\n')
        .split('\n')
        .map(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            Line::from(Span::styled(l.replace('\t', "    "), line_style(l)))
        })
        .collect()
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
        collapse(unified_lines(diff), COLLAPSED_LINES, expanded, true)
    };
    push_behind_bar(&mut out, body, body_width, expanded);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_coloured_by_their_first_characters() {
        let diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n ctx\n\tBinary files a/y and b/y differ\n";
        let lines = unified_lines(diff);
        let styles: Vec<Style> = lines.iter().map(|l| l.spans[0].style).collect();
        assert_eq!(
            styles,
            [
                style::bold(),
                style::bold(),
                style::bold(),
                style::accent(),
                style::removed(),
                style::added(),
                Style::default(),
                style::dim(),
            ]
        );
        assert_eq!(
            lines[7].spans[0].content,
            "    Binary files a/y and b/y differ"
        );
    }

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
}
