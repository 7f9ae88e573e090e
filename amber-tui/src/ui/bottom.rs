//! The bottom of the screen: queued prompts, the rule with the turn state, the editor and
//! the status line (the daemon's status segments).

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};

use crate::app::{App, NoticeKind};
use crate::transcript::style;
use crate::wrap::{str_width, truncate};

const PROMPT: &str = "› ";
const PLACEHOLDER: &str = "Ask amber · / commands · @ files · ? help";
/// Fewest columns worth showing status segments in beside a notice.
const MIN_SEGMENTS_WIDTH: usize = 12;

/// Rows the editor needs at `width`.
pub(super) fn input_rows(app: &App, width: u16) -> u16 {
    let (rows, _) = app.input.layout(usize::from(width.saturating_sub(2)));
    rows.len().max(1) as u16
}

pub(super) fn queued(app: &App, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
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

pub(super) fn rule(app: &App, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
    let label = if app.reconnecting {
        Some((" reconnecting to amberd… ".to_owned(), style::err()))
    } else if !app.approvals.is_empty() {
        Some((" waiting for approval ".to_owned(), style::warn()))
    } else if app.running {
        let mut text = " working".to_owned();
        if let Some(ms) = app.live.elapsed_ms(app.now_ms) {
            text.push_str(&format!(" {}", crate::app::elapsed(ms)));
        }
        let queued = app.live.queued().max(app.queued.len());
        if queued > 0 {
            text.push_str(&format!(" · {queued} queued"));
        }
        text.push_str(" · Esc to cancel ");
        Some((text, style::warn()))
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
    let waiting = app.sessions.waiting_elsewhere(&app.session_id);
    if waiting > 0 {
        let text = format!(" {waiting} other waiting for approval · Ctrl-S ");
        used += str_width(&text);
        spans.push(Span::styled(text, style::warn()));
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
pub(super) fn input(app: &App, area: Rect, buf: &mut Buffer) -> Option<Position> {
    if area.is_empty() {
        return None;
    }
    let inner = usize::from(area.width.saturating_sub(2));
    buf.set_span(
        area.x,
        area.y,
        &Span::styled(PROMPT, style::user_marker()),
        area.width.min(2),
    );
    if app.input.is_empty() {
        buf.set_span(
            area.x + 2,
            area.y,
            &Span::styled(PLACEHOLDER, style::dim()),
            area.width.saturating_sub(2),
        );
        return Some(inside(area, area.x + 2, area.y));
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
    Some(inside(
        area,
        area.x + 2 + ccol as u16,
        area.y + (crow - first) as u16,
    ))
}

/// (x, y) moved inside `area` (a terminal too small for the editor still gets a cursor).
fn inside(area: Rect, x: u16, y: u16) -> Position {
    Position::new(
        x.min(area.right().saturating_sub(1)),
        y.min(area.bottom().saturating_sub(1)),
    )
}

/// The status segments, with the notice (if any) before them: segments are truncated to make
/// room, never hidden for good (the notice expires).
pub(super) fn status(app: &App, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
    let right = "? help";
    let width = usize::from(area.width);
    let room = if width > right.len() + 1 {
        width - right.len() - 1
    } else {
        width
    };
    let segments = app.status_texts().join(" · ");
    let mut spans = Vec::new();
    let mut used = 0;
    if let Some(notice) = &app.notice {
        let st = match notice.kind {
            NoticeKind::Error => style::err(),
            NoticeKind::Info => style::ok(),
            NoticeKind::QuitArmed | NoticeKind::Cancelling | NoticeKind::Retrying => style::warn(),
        };
        let text = truncate(&notice.text, room);
        used = str_width(&text);
        spans.push(Span::styled(text, st));
    }
    let sep = if used > 0 { " · " } else { "" };
    let rest = room.saturating_sub(used + sep.len());
    // A segment list cut to a few columns says nothing: leave it out then.
    if !segments.is_empty() && (used == 0 || rest >= MIN_SEGMENTS_WIDTH) {
        spans.push(Span::styled(sep, style::dim()));
        spans.push(Span::styled(truncate(&segments, rest), style::dim()));
    }
    buf.set_line(area.x, area.y, &Line::from(spans), room as u16);
    if width > right.len() + 1 {
        let x = area.x + (width - right.len()) as u16;
        buf.set_span(
            x,
            area.y,
            &Span::styled(right, style::dim()),
            right.len() as u16,
        );
    }
}
