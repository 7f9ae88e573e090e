//! Word wrapping of styled lines to a column width (unicode-width aware).
//!
//! Every cell of the transcript is pre-wrapped once per width and cached, so drawing a frame
//! only copies the visible lines into the buffer; this module is that one wrapping step.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Display width of a string in terminal columns.
pub fn str_width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// Wraps `line` to `width` columns, breaking after spaces where possible and inside a word
/// only when the word alone is wider than the line. Styles (span and line) are kept.
pub fn wrap_line(line: &Line<'_>, width: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    let total: usize = line.spans.iter().map(|s| str_width(&s.content)).sum();
    if total <= width {
        return vec![owned(line)];
    }
    let mut out = Vec::new();
    let mut cur: Vec<(char, Style)> = Vec::new();
    let mut cur_w = 0usize;
    // Index in `cur` just after the last space: where the line may break.
    let mut brk: Option<usize> = None;
    for span in &line.spans {
        for ch in span.content.chars() {
            let w = ch.width().unwrap_or(0);
            if cur_w + w > width && cur_w > 0 {
                if ch == ' ' {
                    // The line is full exactly at a space: break there and drop the space.
                    out.push(assemble(&cur, line.style));
                    cur.clear();
                    cur_w = 0;
                    brk = None;
                    continue;
                }
                match brk {
                    Some(b) if b > 0 && b < cur.len() => {
                        let rest = cur.split_off(b);
                        out.push(assemble(&cur, line.style));
                        cur = rest;
                    }
                    _ => {
                        out.push(assemble(&cur, line.style));
                        cur.clear();
                    }
                }
                cur_w = cur.iter().map(|(c, _)| c.width().unwrap_or(0)).sum();
                brk = cur.iter().rposition(|(c, _)| *c == ' ').map(|i| i + 1);
                if ch == ' ' && cur.is_empty() {
                    // A wrapped line never starts with the space it broke at.
                    continue;
                }
            }
            cur.push((ch, span.style));
            cur_w += w;
            if ch == ' ' {
                brk = Some(cur.len());
            }
        }
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(assemble(&cur, line.style));
    }
    out
}

/// Wraps every line of `lines`.
pub fn wrap_lines<'a>(
    lines: impl IntoIterator<Item = &'a Line<'a>>,
    width: usize,
) -> Vec<Line<'static>> {
    lines
        .into_iter()
        .flat_map(|l| wrap_line(l, width))
        .collect()
}

/// Wraps plain text (split at `\n`) in one style.
pub fn wrap_text(text: &str, style: Style, width: usize) -> Vec<Line<'static>> {
    text.split('\n')
        .flat_map(|l| wrap_line(&Line::from(Span::styled(l.to_owned(), style)), width))
        .collect()
}

/// Cuts `s` to at most `width` columns, ending in `…` when something was cut.
pub fn truncate(s: &str, width: usize) -> String {
    if str_width(s) <= width {
        return s.to_owned();
    }
    let mut out = String::new();
    let mut w = 0;
    for ch in s.chars() {
        let cw = ch.width().unwrap_or(0);
        if w + cw + 1 > width {
            break;
        }
        out.push(ch);
        w += cw;
    }
    out.push('…');
    out
}

fn owned(line: &Line<'_>) -> Line<'static> {
    let spans: Vec<Span<'static>> = line
        .spans
        .iter()
        .map(|s| Span::styled(s.content.to_string(), s.style))
        .collect();
    Line::from(spans).style(line.style)
}

fn assemble(chars: &[(char, Style)], line_style: Style) -> Line<'static> {
    let mut end = chars.len();
    while end > 0 && chars[end - 1].0 == ' ' {
        end -= 1;
    }
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut text = String::new();
    let mut style: Option<Style> = None;
    for &(ch, st) in &chars[..end] {
        if style.is_some_and(|s| s != st) {
            spans.push(Span::styled(
                std::mem::take(&mut text),
                style.unwrap_or_default(),
            ));
        }
        style = Some(st);
        text.push(ch);
    }
    if !text.is_empty() {
        spans.push(Span::styled(text, style.unwrap_or_default()));
    }
    Line::from(spans).style(line_style)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn wraps_at_spaces_and_splits_long_words() {
        let l = Line::from("hello wide world");
        assert_eq!(texts(&wrap_line(&l, 11)), ["hello wide", "world"]);
        let l = Line::from("abcdefghij");
        assert_eq!(texts(&wrap_line(&l, 4)), ["abcd", "efgh", "ij"]);
    }

    #[test]
    fn keeps_styles_across_breaks() {
        let bold = Style::default().add_modifier(ratatui::style::Modifier::BOLD);
        let l = Line::from(vec![Span::raw("aa "), Span::styled("bb cc", bold)]);
        let out = wrap_line(&l, 5);
        assert_eq!(texts(&out), ["aa bb", "cc"]);
        assert_eq!(out[1].spans[0].style, bold);
    }

    #[test]
    fn truncates_with_ellipsis() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
    }
}
