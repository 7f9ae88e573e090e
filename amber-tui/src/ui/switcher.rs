//! The session switcher (`Ctrl-S`, `/sessions`), drawn over the transcript: one row per
//! session of the daemon — state, title, workspace, last activity — sessions waiting for an
//! approval first and marked, the attached one named so.

use amber_proto::SessionState;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use crate::app::{App, session_label};
use crate::picker::ago;
use crate::transcript::style;
use crate::wrap::truncate;

/// Widest the box gets.
const MAX_WIDTH: u16 = 110;

pub(super) fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let Some(switcher) = &app.switcher else {
        return;
    };
    if area.width < 8 || area.height < 3 {
        return;
    }
    let sessions = app.sessions.ordered();
    let boxed = super::overlay::centered(area, MAX_WIDTH, sessions.len().max(1) as u16 + 3);
    let (width, height) = (boxed.width, boxed.height);
    let inner_w = usize::from(width.saturating_sub(2));
    let rows = usize::from(height.saturating_sub(3));
    let first = (switcher.selected + 1).saturating_sub(rows);
    let now = app.now_ms / 1000;
    // Columns: mark, state, title, workspace, last activity; title and workspace share the rest.
    let (state_w, when_w) = (10usize, 9usize);
    let flexible = inner_w.saturating_sub(2 + state_w + when_w + 3);
    let title_w = flexible / 2;
    let dir_w = flexible - title_w;
    let mut lines: Vec<Line<'static>> = Vec::new();
    if sessions.is_empty() {
        let text = if app.sessions.listed {
            "no sessions"
        } else {
            "listing sessions…"
        };
        lines.push(Line::from(Span::styled(text, style::dim())));
    }
    for (i, s) in sessions.iter().enumerate().skip(first).take(rows) {
        let (mark, state, st) = match s.state {
            SessionState::WaitingApproval => ("! ", "approval", style::warn()),
            SessionState::Running => ("▶ ", "running", style::ok()),
            SessionState::Idle => ("  ", "idle", style::dim()),
        };
        // The attached one says so, however long its title.
        let here = if s.session_id == app.session_id {
            " (here)"
        } else {
            ""
        };
        let title = format!(
            "{}{here}",
            truncate(&session_label(s), title_w.saturating_sub(here.len()))
        );
        let mut spans = vec![
            Span::styled(mark, st),
            Span::styled(format!("{state:<state_w$} "), st),
            Span::styled(
                format!("{:<title_w$} ", truncate(&title, title_w)),
                style::bold(),
            ),
            Span::styled(
                format!("{:<dir_w$} ", truncate(&home_relative(&s.cwd), dir_w)),
                style::dim(),
            ),
            Span::styled(
                format!("{:>when_w$}", ago(&s.updated_at, now)),
                style::dim(),
            ),
        ];
        if i == switcher.selected {
            for span in &mut spans {
                span.style = span.style.patch(style::selected());
            }
        }
        lines.push(Line::from(spans));
    }
    let waiting = sessions
        .iter()
        .filter(|s| s.state == SessionState::WaitingApproval)
        .count();
    let mut title = format!(" sessions ({})", sessions.len());
    if waiting > 0 {
        title.push_str(&format!(" · {waiting} waiting for approval"));
    }
    if !app.sessions.live {
        title.push_str(" · not live");
    }
    title.push(' ');
    lines.push(Line::from(Span::styled(
        truncate("↑↓ select · Enter switch · Esc close", inner_w),
        style::dim(),
    )));
    Clear.render(boxed, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(style::accent())
        .title(title);
    Paragraph::new(lines).block(block).render(boxed, buf);
}

/// `~/src/x` for a path under `$HOME`.
fn home_relative(path: &str) -> String {
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && home != "/" => match path.strip_prefix(&home) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("~{rest}"),
            _ => path.to_owned(),
        },
        _ => path.to_owned(),
    }
}
