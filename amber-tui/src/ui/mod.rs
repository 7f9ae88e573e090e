//! `draw(&mut App, &mut Frame)`: the attached-session screen. Pure — it reads the app (and
//! updates only its view bookkeeping: transcript size and top row), so every view is
//! snapshot-tested on ratatui's `TestBackend`.

mod bottom;
mod models;
mod overlay;
pub mod picker;
mod rewind;
mod switcher;
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
    if area.is_empty() {
        return;
    }
    let input_rows = bottom::input_rows(app, area.width).min(MAX_INPUT_ROWS);
    let queued_rows = (app.queued.len() as u16).min(MAX_QUEUED_ROWS);
    let [main, queued, rule, input, status] = split_rows(area, input_rows, queued_rows);
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
    if app.rewind.is_some() {
        rewind::draw(app, main, frame.buffer_mut());
    }
    if app.switcher.is_some() {
        // Over everything, approvals included: it was opened on purpose, and has the keys.
        switcher::draw(app, main, frame.buffer_mut());
    } else if app.model_picker.is_some() {
        models::draw(app, main, frame.buffer_mut());
    } else if !app.approvals.is_empty() && !main.is_empty() {
        overlay::approval(app, main, frame.buffer_mut());
    } else if app.rewind.is_some() {
        // The picker has the keys: no cursor in the editor.
    } else if app.help && !main.is_empty() {
        overlay::help(main, frame.buffer_mut());
    } else if let Some(pos) = cursor {
        frame.set_cursor_position(pos);
    }
}

/// The screen's rows, top to bottom: transcript, queued prompts, rule, editor, status line.
/// When rows are short they go first to the editor (where the user types), then one to the
/// transcript, the status line, the rule, the editor's other lines and the queued prompts;
/// the transcript gets what is left.
fn split_rows(area: Rect, input_rows: u16, queued_rows: u16) -> [Rect; 5] {
    let mut left = area.height;
    let mut take = |want: u16| {
        let n = want.min(left);
        left -= n;
        n
    };
    let input_first = take(1);
    let main_first = take(1);
    let status = take(1);
    let rule = take(1);
    let input = input_first + take(input_rows.saturating_sub(1));
    let queued = take(queued_rows);
    let main = main_first + left;
    let mut y = area.y;
    let mut next = |h: u16| {
        let r = Rect::new(area.x, y, area.width, h);
        y += h;
        r
    };
    [
        next(main),
        next(queued),
        next(rule),
        next(input),
        next(status),
    ]
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
    let rows = (panel.lines.len() as u16 + 2).max(3).min(main.height / 2);
    if rows == 0 {
        return (main, None);
    }
    let [top, bottom] =
        Layout::vertical([Constraint::Min(1), Constraint::Length(rows)]).areas(main);
    (top, Some(bottom))
}
