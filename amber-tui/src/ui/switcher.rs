//! The session switcher (`Ctrl-S`, `/sessions`), drawn over the transcript: one row per
//! session of the daemon — state, title, spend, workspace, last activity — sessions waiting
//! for an approval first and marked, the attached one named so. Background sub-agents are
//! indented under the session that started them (`▸` folded, `▾` unfolded; Tab toggles), and
//! a parent's spend counts theirs; a folded parent is marked `!` when one of them waits for
//! an approval.

use amber_proto::{ChildState, CostUsd, SessionInfo, SessionState};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use crate::app::{App, session_label};
use crate::picker::ago;
use crate::transcript::cell::tokens;
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
    let sessions = app.sessions.rows(&switcher.unfolded);
    let boxed = super::overlay::centered(area, MAX_WIDTH, sessions.len().max(1) as u16 + 3);
    let (width, height) = (boxed.width, boxed.height);
    let inner_w = usize::from(width.saturating_sub(2));
    let rows = usize::from(height.saturating_sub(3));
    let first = (switcher.selected + 1).saturating_sub(rows);
    let now = app.now_ms / 1000;
    // Columns: mark, state, title, spend, workspace, last activity; title and workspace share
    // the rest, the title the larger part. Spend is right-aligned, so two spaces keep it off
    // the workspace.
    let (state_w, spend_w, when_w) = (10usize, 12usize, 9usize);
    let flexible = inner_w.saturating_sub(2 + state_w + spend_w + when_w + 5);
    let title_w = flexible * 3 / 5;
    let dir_w = flexible - title_w;
    // With any sub-agent listed, every top-level title keeps room for a fold mark, so that
    // titles line up.
    let tree = sessions.iter().any(|r| r.children > 0);
    let mut lines: Vec<Line<'static>> = Vec::new();
    if sessions.is_empty() {
        let text = if app.sessions.listed {
            "no sessions"
        } else {
            "listing sessions…"
        };
        lines.push(Line::from(Span::styled(text, style::dim())));
    }
    for (i, row) in sessions.iter().enumerate().skip(first).take(rows) {
        let s = row.info;
        let (mut mark, state, st) = match s.state {
            SessionState::WaitingApproval => ("! ", "approval", style::warn()),
            SessionState::Running => ("▶ ", "running", style::ok()),
            SessionState::Idle => ("  ", idle_state(s), style::dim()),
        };
        let mut mark_style = st;
        // A folded sub-agent's approval would go unseen: its parent's row carries the mark.
        if row.waiting_below {
            (mark, mark_style) = ("! ", style::warn());
        }
        // The attached one says so, however long its title.
        let here = if s.session_id == app.session_id {
            " (here)"
        } else {
            ""
        };
        let fold = match (row.children, row.unfolded) {
            (0, _) => "",
            (_, true) => "▾ ",
            (_, false) => "▸ ",
        };
        let lead = match (tree, row.lead.is_empty(), fold.is_empty()) {
            (false, _, _) => String::new(),
            (true, true, true) => "  ".to_owned(),
            (true, true, false) => fold.to_owned(),
            (true, false, _) => format!("  {}{fold}", row.lead),
        };
        let room = title_w.saturating_sub(here.len() + lead.chars().count());
        let title = format!("{lead}{}{here}", truncate(&session_label(s), room));
        let mut spans = vec![
            Span::styled(mark, mark_style),
            Span::styled(format!("{state:<state_w$} "), st),
            Span::styled(
                format!("{:<title_w$} ", truncate(&title, title_w)),
                style::bold(),
            ),
            Span::styled(
                format!(
                    "{:>spend_w$}  ",
                    truncate(&spend(row.tokens, row.cost), spend_w)
                ),
                style::dim(),
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
    let waiting = app.sessions.waiting();
    let mut title = format!(" sessions ({})", app.sessions.len());
    if waiting > 0 {
        title.push_str(&format!(" · {waiting} waiting for approval"));
    }
    if !app.sessions.live {
        title.push_str(" · not live");
    }
    title.push(' ');
    lines.push(Line::from(Span::styled(
        truncate(
            "↑↓ select · Tab fold/unfold sub-agents · Enter switch · Esc close",
            inner_w,
        ),
        style::dim(),
    )));
    Clear.render(boxed, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(style::accent())
        .title(title);
    Paragraph::new(lines).block(block).render(boxed, buf);
}

/// An idle session's state: a background sub-agent's tells where its task stands
/// (`queued`, `done`, `delivered`).
fn idle_state(info: &SessionInfo) -> &'static str {
    match info.parent.as_ref().map(|p| p.state) {
        Some(state @ (ChildState::Queued | ChildState::Done | ChildState::Delivered)) => {
            state.as_str()
        }
        Some(ChildState::Running) | None => "idle",
    }
}

/// `1.2k $0.0031`; `1.2k tok` without a price; `-` before any request.
fn spend(total: u64, cost: Option<CostUsd>) -> String {
    match cost {
        Some(cost) => format!("{} {cost}", tokens(total)),
        None if total == 0 => "-".to_owned(),
        None => format!("{} tok", tokens(total)),
    }
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
