//! Draws the `/rewind` picker over the transcript: the session's turns (newest first:
//! number, age, files changed — or why it has no checkpoint —, prompt), then the selected
//! turn's diff — or, once a turn is chosen, what a rewind to it does and the keys that choose
//! files / conversation / both.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Widget};

use amber_proto::NoCheckpoint;

use crate::app::{
    App, Preview, RewindStage, RewindView, change_counts, no_checkpoint_text, one_line,
};
use crate::picker::ago;
use crate::transcript::diff::{DiffView, render as render_diff};
use crate::transcript::hunks;
use crate::transcript::style;
use crate::transcript::tool::truncate_line;
use crate::wrap::{str_width, truncate};

/// Paths listed at most in the confirm step before "+N more".
const LISTED_PATHS: usize = 6;

pub(super) fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let Some(view) = &app.rewind else { return };
    if area.is_empty() {
        return;
    }
    Clear.render(area, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(style::accent())
        .title(" Rewind to before a turn ");
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.is_empty() {
        return;
    }
    let width = usize::from(inner.width);
    let mut rows = Rows {
        area: inner,
        next: 0,
        buf,
    };
    let bottom = inner.height.saturating_sub(1);
    if view.stage == RewindStage::Loading {
        rows.put(Line::from(Span::styled(
            "loading the session's turns…",
            style::dim(),
        )));
        rows.put_at(bottom, hint("Esc close"));
        return;
    }
    // The list gets a third of the rows (at least 3), the rest is the preview or the choice.
    let list_rows = usize::from(inner.height / 3)
        .max(3)
        .min(view.rows.len())
        .min(usize::from(bottom));
    let first = (view.selected + 1).saturating_sub(list_rows);
    let counts_w = view.rows.iter().map(|r| counts(r).1).max().unwrap_or(0);
    for (i, row) in view.rows.iter().enumerate().skip(first).take(list_rows) {
        rows.put(list_line(view, i, row, counts_w, width));
    }
    let Some(row) = view.selected_row() else {
        return;
    };
    let mut title = format!("── turn {} · {}", row.turn, ago(&row.time, view.now));
    if !row.skipped.is_empty() {
        title.push_str(&format!(
            " · not recorded, left as they are: {}",
            row.skipped.join(", ")
        ));
    }
    title.push(' ');
    let fill = width.saturating_sub(str_width(&title));
    rows.put(Line::from(Span::styled(
        truncate(&format!("{title}{}", "─".repeat(fill)), width),
        style::dim(),
    )));
    let room = usize::from(bottom).saturating_sub(rows.next);
    let body = match (view.stage, row.checkpoint) {
        (RewindStage::Pick, Some(why)) => {
            vec![hint(&format!("no checkpoint: {}", no_checkpoint_text(why)))]
        }
        (RewindStage::Pick, None) => preview_lines(view, &row.turn_id, room, width),
        _ => confirm_lines(view, width),
    };
    for line in body.into_iter().take(room) {
        rows.put(truncate_line(line, width));
    }
    rows.put_at(
        bottom,
        hint(match view.stage {
            RewindStage::Pick => "↑↓ turn · Enter choose · PgUp/PgDn scroll the diff · Esc close",
            RewindStage::Confirm => "b both · f files · c conversation · ! overwrite · Esc back",
            _ => "rewinding… · Esc hides this (the result still shows)",
        }),
    );
}

/// Rows of an area filled top to bottom.
struct Rows<'a> {
    area: Rect,
    next: usize,
    buf: &'a mut Buffer,
}

impl Rows<'_> {
    fn put(&mut self, line: Line<'_>) {
        if self.next < usize::from(self.area.height) {
            let y = self.area.y + self.next as u16;
            self.buf.set_line(self.area.x, y, &line, self.area.width);
            self.next += 1;
        }
    }

    fn put_at(&mut self, row: u16, line: Line<'_>) {
        if row < self.area.height {
            self.buf
                .set_line(self.area.x, self.area.y + row, &line, self.area.width);
        }
    }
}

fn hint(text: &str) -> Line<'static> {
    Line::from(Span::styled(text.to_owned(), style::dim()))
}

/// "+2 ~1 -0" (and skipped paths) of a row — or why it has no checkpoint — and its width.
fn counts(row: &amber_proto::CheckpointInfo) -> (String, usize) {
    let (added, modified, deleted) = change_counts(row);
    let mut text = match row.checkpoint {
        None => format!("+{added} ~{modified} -{deleted}"),
        Some(NoCheckpoint::None) => "no files".to_owned(),
        Some(NoCheckpoint::Expired) => "expired".to_owned(),
        Some(NoCheckpoint::Disabled) => "not recorded".to_owned(),
    };
    if !row.skipped.is_empty() {
        text.push_str(&format!(" ({} skipped)", row.skipped.len()));
    }
    let w = str_width(&text);
    (text, w)
}

fn list_line(
    view: &RewindView,
    i: usize,
    row: &amber_proto::CheckpointInfo,
    counts_w: usize,
    width: usize,
) -> Line<'static> {
    let selected = i == view.selected;
    let mark = if selected { "› " } else { "  " };
    let number = format!("{:>3}  ", row.turn);
    let when = format!("{:<9} ", ago(&row.time, view.now));
    let (counts, w) = counts(row);
    let counts = format!("{counts}{}  ", " ".repeat(counts_w.saturating_sub(w)));
    let flag = if row.incomplete.is_some() {
        "incomplete · "
    } else {
        ""
    };
    let used = 2 + str_width(&number) + str_width(&when) + str_width(&counts) + str_width(flag);
    let prompt = truncate(&one_line(&row.prompt), width.saturating_sub(used));
    let mut spans = vec![
        Span::styled(mark, style::accent()),
        Span::styled(number, style::bold()),
        Span::styled(when, style::dim()),
        Span::raw(counts),
        Span::styled(flag, style::warn()),
        Span::raw(prompt),
    ];
    if selected {
        for span in &mut spans {
            span.style = span.style.patch(style::selected());
        }
    }
    Line::from(spans)
}

fn preview_lines(
    view: &RewindView,
    turn_id: &str,
    room: usize,
    width: usize,
) -> Vec<Line<'static>> {
    match view.previews.get(turn_id) {
        None | Some(Preview::Loading) => vec![hint("loading the diff…")],
        Some(Preview::Failed(e)) => vec![Line::from(Span::styled(
            format!("no diff: {e}"),
            style::err(),
        ))],
        Some(Preview::Ready(diff)) if diff.trim().is_empty() => {
            vec![hint("no changes recorded for this turn")]
        }
        Some(Preview::Ready(diff)) => {
            // Drawn as the transcript draws diffs: numbered, one header per file.
            let lines = render_diff(&hunks::parse(diff), width, true, DiffView::DAEMON);
            // Scrolled no further than a last page.
            let first = view
                .preview_scroll
                .min(lines.len().saturating_sub(room.max(1)));
            lines.into_iter().skip(first).collect()
        }
    }
}

fn confirm_lines(view: &RewindView, width: usize) -> Vec<Line<'static>> {
    let Some(row) = view.selected_row() else {
        return Vec::new();
    };
    let text_w = width.saturating_sub(2);
    let mut out = vec![Line::from(vec![
        Span::raw("Rewind to before turn "),
        Span::styled(row.turn.to_string(), style::bold()),
        Span::raw(format!(" · {}", one_line(&row.prompt))),
    ])];
    let paths = view.paths_to_restore();
    let listed: Vec<&str> = paths
        .iter()
        .take(LISTED_PATHS)
        .map(String::as_str)
        .collect();
    let more = paths.len().saturating_sub(LISTED_PATHS);
    let mut files = if paths.is_empty() {
        "files: no changes recorded since".to_owned()
    } else {
        format!("files go back to before it: {}", listed.join(", "))
    };
    if more > 0 {
        files.push_str(&format!(" (+{more} more)"));
    }
    out.push(Line::from(Span::styled(
        format!("  {}", truncate(&files, text_w)),
        style::dim(),
    )));
    out.push(Line::from(Span::styled(
        format!(
            "  conversation: turn {} and every later turn are dropped",
            row.turn
        ),
        style::dim(),
    )));
    if let Some(why) = view.files_refusal() {
        out.push(Line::from(Span::styled(
            truncate(
                &format!("  ! files cannot be restored ({why}): only c is possible"),
                width,
            ),
            style::warn(),
        )));
    }
    out.push(Line::from(""));
    if view.stage == RewindStage::Running {
        out.push(Line::from(Span::styled("rewinding…", style::warn())));
        return out;
    }
    let key = |k: &str, what: String| {
        Line::from(vec![
            Span::styled(format!("  {k:<10}"), style::bold()),
            Span::raw(what),
        ])
    };
    out.push(key("Enter, b", "files and conversation".into()));
    out.push(key(
        "f",
        "files only (the conversation keeps the turns)".into(),
    ));
    out.push(key(
        "c",
        "conversation only (the files stay as they are)".into(),
    ));
    let mark = if view.force { "[x]" } else { "[ ]" };
    out.push(key(
        "!",
        format!("{mark} overwrite files changed outside amber since"),
    ));
    out.push(key("Esc", "back to the turns".into()));
    out
}
