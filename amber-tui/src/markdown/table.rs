//! Tables: aligned columns separated by a dim ` │ ` with a `─┼─` rule under the header
//! when they fit the width; otherwise each row as a wrapped line of ` │ `-separated cells.

use pulldown_cmark::Alignment;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::ast::Table;
use super::theme;
use super::wrap::{Inline, LineBuf, text_width, wrap_inlines};

const SEP: &str = " │ ";
const SEP_WIDTH: usize = 3;

pub(crate) fn render_table(table: &Table, width: usize, out: &mut Vec<Line<'static>>) {
    let cols = table
        .rows
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(0)
        .max(table.aligns.len());
    if cols == 0 {
        return;
    }
    let mut widths = vec![1usize; cols];
    for row in &table.rows {
        for (c, cell) in row.iter().enumerate() {
            widths[c] = widths[c].max(cell_width(cell));
        }
    }
    let total = widths.iter().sum::<usize>() + SEP_WIDTH * (cols - 1);
    if total > width {
        return plain_rows(table, width, out);
    }
    for (r, row) in table.rows.iter().enumerate() {
        if r > 0 && r == table.head_rows {
            out.push(rule(&widths));
        }
        let mut line = LineBuf::default();
        for (c, &w) in widths.iter().enumerate() {
            if c > 0 {
                line.push(SEP, theme::DECOR, SEP_WIDTH);
            }
            let cell = row.get(c).map_or(&[][..], Vec::as_slice);
            let free = w.saturating_sub(cell_width(cell));
            let align = table.aligns.get(c).copied().unwrap_or(Alignment::None);
            let last = c + 1 == cols;
            let (before, after) = match align {
                Alignment::Right => (free, 0),
                Alignment::Center => (free / 2, free - free / 2),
                Alignment::Left | Alignment::None => (0, free),
            };
            pad(&mut line, before);
            for inline in cell {
                match inline {
                    Inline::Text(text, style) => line.push(text, *style, text_width(text)),
                    Inline::Soft | Inline::Hard => line.push(" ", Style::default(), 1),
                }
            }
            if !last {
                pad(&mut line, after);
            }
        }
        line.trim_end();
        out.push(line.take());
    }
    if table.head_rows == table.rows.len() && table.head_rows > 0 {
        out.push(rule(&widths));
    }
}

/// Display width of a cell laid out on one line.
fn cell_width(cell: &[Inline]) -> usize {
    cell.iter()
        .map(|i| match i {
            Inline::Text(text, _) => text_width(text),
            Inline::Soft | Inline::Hard => 1,
        })
        .sum()
}

fn pad(line: &mut LineBuf, n: usize) {
    if n > 0 {
        line.push(&" ".repeat(n), Style::default(), n);
    }
}

/// The `───┼───` line under the header.
fn rule(widths: &[usize]) -> Line<'static> {
    let text = widths
        .iter()
        .map(|&w| "─".repeat(w))
        .collect::<Vec<_>>()
        .join("─┼─");
    Line::from(Span::styled(text, theme::DECOR))
}

/// Too wide to align: each row wrapped as prose, cells separated by ` │ `.
fn plain_rows(table: &Table, width: usize, out: &mut Vec<Line<'static>>) {
    for (r, row) in table.rows.iter().enumerate() {
        if r > 0 && r == table.head_rows {
            out.push(Line::from(Span::styled("─".repeat(width), theme::DECOR)));
        }
        let mut inlines = Vec::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                inlines.push(Inline::Text(SEP.to_owned(), theme::DECOR));
            }
            inlines.extend(cell.iter().map(|i| match i {
                Inline::Hard => Inline::Soft,
                other => other.clone(),
            }));
        }
        let lines = wrap_inlines(&inlines, width);
        if lines.is_empty() {
            out.push(Line::default());
        }
        out.extend(lines);
    }
}
