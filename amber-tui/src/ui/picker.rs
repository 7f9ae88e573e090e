//! Draws the session picker: one row per session (title, directory, state, last activity).

use amber_proto::SessionState;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use crate::picker::{Picker, ago};
use crate::transcript::style;
use crate::wrap::truncate;

pub fn draw(picker: &Picker, frame: &mut Frame) {
    let area = frame.area();
    let [list, help] = Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(area);
    let inner_w = usize::from(list.width.saturating_sub(2));
    let rows = usize::from(list.height.saturating_sub(2));
    let first = (picker.selected + 1).saturating_sub(rows);
    // Columns: title, directory, state, last activity; the title and directory share the rest.
    let (state_w, when_w) = (17usize, 10usize);
    let flexible = inner_w.saturating_sub(state_w + when_w + 6);
    let title_w = flexible * 2 / 5;
    let dir_w = flexible - title_w;
    let mut lines: Vec<Line<'static>> = Vec::new();
    if picker.sessions.is_empty() {
        lines.push(Line::from(Span::styled(
            "no sessions yet — n starts one here",
            style::dim(),
        )));
    }
    for (i, s) in picker.sessions.iter().enumerate().skip(first).take(rows) {
        let (state, st) = match s.state {
            SessionState::Idle => ("idle", style::dim()),
            SessionState::Running => ("running", style::ok()),
            SessionState::WaitingApproval => ("waiting approval", style::warn()),
        };
        let title = if s.title.is_empty() {
            "(untitled)".to_owned()
        } else {
            s.title.replace('\n', " ")
        };
        let mark = if i == picker.selected { "› " } else { "  " };
        let mut spans = vec![
            Span::styled(mark, style::accent()),
            Span::styled(
                format!("{:<title_w$} ", truncate(&title, title_w)),
                style::bold(),
            ),
            Span::styled(
                format!("{:<dir_w$} ", truncate(&s.cwd, dir_w)),
                style::dim(),
            ),
            Span::styled(format!("{state:<state_w$} "), st),
            Span::styled(
                format!("{:>when_w$}", ago(&s.updated_at, picker.now)),
                style::dim(),
            ),
        ];
        if i == picker.selected {
            for span in &mut spans {
                span.style = span.style.patch(style::selected());
            }
        }
        lines.push(Line::from(spans));
    }
    let title = format!(" amber sessions ({}) ", picker.sessions.len());
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(style::accent())
        .title(title);
    frame.render_widget(Paragraph::new(lines).block(block), list);
    let hint = match &picker.notice {
        Some(n) => Line::from(Span::styled(n.clone(), style::warn())),
        None => Line::from(Span::styled(
            "Enter attach · n new session here · d delete · q quit",
            style::dim(),
        )),
    };
    frame.render_widget(Paragraph::new(hint), help);
}
