//! Layout of the block tree into lines of a given width.
//!
//! Containers render their children at a narrower width and then prefix every line:
//! quotes with a dim `│ `, list items with their marker on the first line and a hanging
//! indent on the others. Blocks are separated by one blank line (none inside tight lists).

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::ast::{Block, parse};
use super::table::render_table;
use super::theme;
use super::wrap::{wrap_code, wrap_inlines, wrap_text};

/// Renders one self-contained piece of markdown and appends its lines to `out`, after a
/// blank line when `out` already has lines and this piece renders to anything.
pub(crate) fn append_chunk(src: &str, width: usize, out: &mut Vec<Line<'static>>) {
    let mark = out.len();
    if mark > 0 {
        out.push(Line::default());
    }
    blocks_into(&parse(src), width.max(1), 0, true, out);
    if out.len() == mark + 1 && mark > 0 {
        out.truncate(mark);
    }
}

/// Renders `blocks` into `out`, with a blank line between blocks when `spaced`.
fn blocks_into(
    blocks: &[Block],
    width: usize,
    depth: usize,
    spaced: bool,
    out: &mut Vec<Line<'static>>,
) {
    let start = out.len();
    for block in blocks {
        let mark = out.len();
        let sep = spaced && mark > start;
        if sep {
            out.push(Line::default());
        }
        block_into(block, width, depth, out);
        if sep && out.len() == mark + 1 {
            out.truncate(mark);
        }
    }
}

fn block_into(block: &Block, width: usize, depth: usize, out: &mut Vec<Line<'static>>) {
    match block {
        Block::Para(inlines) | Block::Heading(inlines) => out.extend(wrap_inlines(inlines, width)),
        Block::Quote(children) => {
            let mut inner = Vec::new();
            blocks_into(children, narrower(width, 2), depth, true, &mut inner);
            out.extend(inner.into_iter().map(|line| {
                let bar = if line.spans.is_empty() { "│" } else { "│ " };
                prefixed(line, Span::styled(bar, theme::DECOR))
            }));
        }
        Block::List {
            start,
            loose,
            items,
        } => list_into(*start, *loose, items, width, depth, out),
        Block::Code { lang, text } => code_into(lang, text, width, out),
        Block::Html(html) => {
            for line in html.trim_end_matches('\n').split('\n') {
                let lines = wrap_text(line, Style::default(), width);
                if lines.is_empty() {
                    out.push(Line::default());
                }
                out.extend(lines);
            }
        }
        Block::Rule => out.push(Line::from(Span::styled("─".repeat(width), theme::DECOR))),
        Block::Table(table) => render_table(table, width, out),
    }
}

fn list_into(
    start: Option<u64>,
    loose: bool,
    items: &[Vec<Block>],
    width: usize,
    depth: usize,
    out: &mut Vec<Line<'static>>,
) {
    let last = start.map(|s| s.saturating_add(items.len().saturating_sub(1) as u64));
    let digits = last.map_or(0, |n| n.to_string().len());
    for (i, item) in items.iter().enumerate() {
        if loose && i > 0 {
            out.push(Line::default());
        }
        let marker = match start {
            Some(s) => format!("{:>digits$}. ", s.saturating_add(i as u64)),
            None if depth.is_multiple_of(2) => "• ".to_owned(),
            None => "◦ ".to_owned(),
        };
        let indent = marker.chars().count();
        let mut inner = Vec::new();
        blocks_into(item, narrower(width, indent), depth + 1, loose, &mut inner);
        if inner.is_empty() {
            inner.push(Line::default());
        }
        let pad = " ".repeat(indent);
        for (j, line) in inner.into_iter().enumerate() {
            if j == 0 {
                out.push(prefixed(line, Span::raw(marker.clone())));
            } else if line.spans.is_empty() {
                out.push(line);
            } else {
                out.push(prefixed(line, Span::raw(pad.clone())));
            }
        }
    }
}

/// A code block: a dim label line (`─ lang ─`, or `───` without a language), then the code
/// hard-wrapped at `width` in the code style.
fn code_into(lang: &str, text: &str, width: usize, out: &mut Vec<Line<'static>>) {
    let label = if lang.is_empty() {
        "───".to_owned()
    } else {
        format!("─ {lang} ─")
    };
    wrap_code(&label, theme::DECOR, width, out);
    let body = text.strip_suffix('\n').unwrap_or(text);
    if body.is_empty() && text.is_empty() {
        return;
    }
    for line in body.split('\n') {
        wrap_code(
            line.strip_suffix('\r').unwrap_or(line),
            theme::CODE,
            width,
            out,
        );
    }
}

fn narrower(width: usize, by: usize) -> usize {
    width.saturating_sub(by).max(1)
}

fn prefixed(mut line: Line<'static>, prefix: Span<'static>) -> Line<'static> {
    line.spans.insert(0, prefix);
    line
}
