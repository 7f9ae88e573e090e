//! The bottom of the screen: queued prompts, the rule with the turn state, the editor and
//! the status line (the daemon's status segments).

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};

use crate::app::App;
use crate::transcript::style;
use crate::wrap::{str_width, truncate};

const PROMPT: &str = "› ";
const PLACEHOLDER: &str = "Ask amber · / commands · @ files · ? help";

/// Rows the editor needs at `width`.
pub fn input_rows(app: &App, width: u16) -> u16 {
    let (rows, _) = app.input.layout(usize::from(width.saturating_sub(2)));
    rows.len().max(1) as u16
}

pub fn queued(app: &App, area: Rect, buf: &mut Buffer) {
    let skip = app.queued.len().saturating_sub(usize::from(area.height));
    for (i, q) in app.queued.iter().skip(skip).enumerate() {
        let text = q.text.replace('\n', " ⏎ ");
        let label = " queued";
        let room = usize::from(area.width).saturating_sub(2 + label.len());
        let line = Line::from(vec![
            Span::styled(PROMPT, style::dim()),
            Span::styled(truncate(&text, room), style::dim()),
            Span::styled(label, style::warn()),
        ]);
        buf.set_line(area.x, area.y + i as u16, &line, area.width);
    }
}

pub fn rule(app: &App, area: Rect, buf: &mut Buffer) {
    let label = if !app.approvals.is_empty() {
        Some((" waiting for approval ".to_owned(), style::warn()))
    } else if app.running {
        Some((" working · Esc to cancel ".to_owned(), style::warn()))
    } else if !app.synced {
        Some((" attaching… ".to_owned(), style::dim()))
    } else {
        None
    };
    let mut spans = vec![Span::styled("──", style::dim())];
    let mut used = 2;
    if let Some((text, st)) = label {
        used += str_width(&text);
        spans.push(Span::styled(text, st));
    }
    if app.expanded {
        let text = " details ";
        used += text.len();
        spans.push(Span::styled(text, style::dim()));
    }
    let rest = usize::from(area.width).saturating_sub(used);
    spans.push(Span::styled("─".repeat(rest), style::dim()));
    buf.set_line(area.x, area.y, &Line::from(spans), area.width);
}

/// Draws the editor; returns where the terminal cursor goes.
pub fn input(app: &App, area: Rect, buf: &mut Buffer) -> Option<Position> {
    if area.height == 0 {
        return None;
    }
    let inner = usize::from(area.width.saturating_sub(2));
    buf.set_span(
        area.x,
        area.y,
        &Span::styled(PROMPT, style::user_marker()),
        2,
    );
    if app.input.is_empty() {
        buf.set_span(
            area.x + 2,
            area.y,
            &Span::styled(PLACEHOLDER, style::dim()),
            area.width.saturating_sub(2),
        );
        return Some(Position::new(area.x + 2, area.y));
    }
    let (rows, (crow, ccol)) = app.input.layout(inner);
    // Keep the cursor's row on screen when the text is taller than the editor.
    let first = (crow + 1).saturating_sub(usize::from(area.height));
    for (i, row) in rows
        .iter()
        .skip(first)
        .take(usize::from(area.height))
        .enumerate()
    {
        buf.set_stringn(
            area.x + 2,
            area.y + i as u16,
            row,
            inner,
            ratatui::style::Style::default(),
        );
    }
    Some(Position::new(
        area.x + 2 + ccol as u16,
        area.y + (crow - first) as u16,
    ))
}

pub fn status(app: &App, area: Rect, buf: &mut Buffer) {
    let right = "? help";
    let width = usize::from(area.width);
    let room = width.saturating_sub(right.len() + 1);
    let line = match &app.notice {
        Some(notice) => Line::from(Span::styled(truncate(notice, room), style::warn())),
        None => {
            let text = app
                .status
                .iter()
                .map(|s| s.text.as_str())
                .collect::<Vec<_>>()
                .join(" · ");
            Line::from(Span::styled(truncate(&text, room), style::dim()))
        }
    };
    buf.set_line(area.x, area.y, &line, area.width);
    if width > right.len() {
        let x = area.x + (width - right.len()) as u16;
        buf.set_span(
            x,
            area.y,
            &Span::styled(right, style::dim()),
            right.len() as u16,
        );
    }
}
