//! `draw(&mut App, &mut Frame)`: the attached-session screen. Pure — it reads the app (and
//! updates only its view bookkeeping: transcript size and top row), so every view is
//! snapshot-tested on ratatui's `TestBackend`.

mod bottom;
mod overlay;
pub mod picker;
mod transcript;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};

use crate::app::App;

/// Width from which a panel sits beside the transcript instead of under it.
const SIDE_PANEL_MIN_WIDTH: u16 = 100;
const SIDE_PANEL_WIDTH: u16 = 40;
/// Most rows the editor grows to.
const MAX_INPUT_ROWS: u16 = 8;
/// Most queued prompts listed above the editor.
const MAX_QUEUED_ROWS: u16 = 3;

pub fn draw(app: &mut App, frame: &mut Frame) {
    let area = frame.area();
    let input_rows = bottom::input_rows(app, area.width).min(MAX_INPUT_ROWS);
    let queued_rows = (app.queued.len() as u16).min(MAX_QUEUED_ROWS);
    let [main, queued, rule, input, status] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(queued_rows),
        Constraint::Length(1),
        Constraint::Length(input_rows),
        Constraint::Length(1),
    ])
    .areas(area);
    let (transcript_area, panel_area) = split_panel(app, main);
    transcript::draw(app, transcript_area, frame.buffer_mut());
    if let Some(panel_area) = panel_area {
        overlay::panel(app, panel_area, frame.buffer_mut());
    }
    bottom::queued(app, queued, frame.buffer_mut());
    bottom::rule(app, rule, frame.buffer_mut());
    let cursor = bottom::input(app, input, frame.buffer_mut());
    bottom::status(app, status, frame.buffer_mut());
    if app.popup.is_some() {
        overlay::popup(app, main, frame.buffer_mut());
    }
    if !app.approvals.is_empty() {
        overlay::approval(app, main, frame.buffer_mut());
    } else if app.help {
        overlay::help(main, frame.buffer_mut());
    } else if let Some(pos) = cursor {
        frame.set_cursor_position(pos);
    }
}

fn split_panel(app: &App, main: Rect) -> (Rect, Option<Rect>) {
    let Some(panel) = &app.panel else {
        return (main, None);
    };
    if main.width >= SIDE_PANEL_MIN_WIDTH {
        let [left, right] =
            Layout::horizontal([Constraint::Min(1), Constraint::Length(SIDE_PANEL_WIDTH)])
                .areas(main);
        return (left, Some(right));
    }
    let rows = (panel.lines.len() as u16 + 2).clamp(3, main.height / 2);
    let [top, bottom] =
        Layout::vertical([Constraint::Min(1), Constraint::Length(rows)]).areas(main);
    (top, Some(bottom))
}
