//! Draws the visible part of the transcript straight into the buffer: only the rows on
//! screen are looked up (each cell's lines are cached per width), so a frame costs the same
//! with ten messages or ten thousand.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::app::{App, Scroll};
use crate::transcript::style;
use crate::wrap::str_width;

pub(super) fn draw(app: &mut App, area: Rect, buf: &mut Buffer) {
    if area.width == 0 || area.height == 0 {
        return;
    }
    app.view_size = (area.width, area.height);
    let (width, height, expanded) = (area.width, usize::from(area.height), app.expanded);
    if app.transcript.is_empty() {
        welcome(app, area, buf);
        return;
    }
    // Scrolled up, the bottom row is the "more below" hint's own, so it hides no output.
    let hint = height >= 2 && matches!(app.scroll, Scroll::Anchor { .. });
    let runs = match app.scroll {
        Scroll::Follow => app.transcript.tail_runs(height, width, expanded),
        Scroll::Anchor { cell, row } => {
            let shown = if hint { height - 1 } else { height };
            let (runs, at_end) = app.transcript.runs_from(cell, row, shown, width, expanded);
            let rows: usize = runs.iter().map(|r| r.rows).sum();
            if at_end && (rows < shown || runs.is_empty()) {
                // Scrolled back down to the bottom: follow new output again.
                app.scroll = Scroll::Follow;
                app.transcript.tail_runs(height, width, expanded)
            } else {
                runs
            }
        }
    };
    if let Some(first) = runs.first() {
        app.view_top = (first.cell, first.first_row);
    }
    let mut y = area.y;
    for run in &runs {
        for row in run.first_row..run.first_row + run.rows {
            if y >= area.bottom() {
                break;
            }
            if let Some((line, indent, marker)) = app.transcript.row(run.cell, row, width, expanded)
            {
                buf.set_line(area.x + indent, y, line, width.saturating_sub(indent));
                if let Some(marker) = marker {
                    buf.set_span(area.x, y, &marker, indent.min(width));
                }
            }
            y += 1;
        }
    }
    if hint && matches!(app.scroll, Scroll::Anchor { .. }) {
        let text = if area.width > 34 {
            " ↓ more below · PgDn / Ctrl-End "
        } else {
            " ↓ more "
        };
        let w = (str_width(text) as u16).min(area.width);
        let x = area.x + area.width - w;
        let y = area.y + area.height - 1;
        buf.set_line(area.x, y, &Line::from(""), area.width);
        buf.set_span(x, y, &Span::styled(text, style::selected()), w);
    }
}

fn welcome(app: &App, area: Rect, buf: &mut Buffer) {
    let mut lines = vec![Line::from(vec![
        Span::styled("amber", style::bold()),
        Span::styled(format!("  session {}", app.session_id), style::dim()),
    ])];
    if let Some(info) = &app.session {
        lines.push(Line::from(Span::styled(
            format!("{} · {} · {}", info.cwd, info.model, info.mode.as_str()),
            style::dim(),
        )));
    }
    if app.synced {
        lines.push(Line::from(""));
        lines.push(Line::from(Span::styled(
            "Type a prompt and press Enter · / commands · @ files · ? help",
            style::dim(),
        )));
    } else {
        lines.push(Line::from(Span::styled(
            "loading the session…",
            style::dim(),
        )));
    }
    for (i, line) in lines.iter().enumerate() {
        let y = area.y + i as u16;
        if y >= area.y + area.height {
            break;
        }
        buf.set_line(area.x + 1, y, line, area.width.saturating_sub(1));
    }
}
