//! Things drawn over or beside the transcript: the approval overlay, the help overlay, the
//! completion popup and the panel.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use crate::app::{App, PopupKind};
use crate::transcript::{style, tool};
use crate::wrap::{truncate, wrap_line};

/// Help text: (keys, what they do). Also the README's key table.
pub(super) const KEYS: &[(&str, &str)] = &[
    ("Enter", "send (queued while a turn runs)"),
    (
        "Shift-Enter, Alt-Enter, Ctrl-J",
        "new line (under tmux: Ctrl-J or Alt-Enter)",
    ),
    ("Up / Down", "history; lines of a multi-line prompt"),
    ("/", "commands (Tab or Enter completes)"),
    ("@", "complete a workspace path"),
    ("Esc, Ctrl-C", "cancel the running turn"),
    ("Ctrl-C twice", "quit at idle (the session stays)"),
    ("Ctrl-D, /detach", "detach; the session keeps running"),
    (
        "PgUp / PgDn, wheel",
        "scroll (Ctrl-Home top, Ctrl-End follow)",
    ),
    ("Ctrl-O", "expand / collapse outputs, diffs, thoughts"),
    ("Ctrl-T", "cycle panels: todos, MCP, processes, off"),
    (
        "Ctrl-S, /sessions",
        "switch to another session of the daemon",
    ),
    ("y / a / A / n", "approve once / session / always; deny"),
    ("Ctrl-A/E/U/K/W", "start / end; delete to start / end, word"),
    ("? or F1", "this help (Esc closes)"),
];

/// A `width` × `height` box in the middle of `area` (clipped to it).
pub(super) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn boxed(title: Line<'static>, lines: Vec<Line<'static>>, area: Rect, buf: &mut Buffer) {
    Clear.render(area, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(style::warn())
        .title(title);
    Paragraph::new(lines).block(block).render(area, buf);
}

pub(super) fn approval(app: &App, area: Rect, buf: &mut Buffer) {
    let Some(a) = app.approvals.front() else {
        return;
    };
    let width = area.width.saturating_sub(4).clamp(20, 100);
    let inner = usize::from(width.saturating_sub(2));
    let mut lines: Vec<Line<'static>> = vec![Line::from(vec![
        Span::styled(a.tool.clone(), style::bold()),
        Span::raw(if a.tool == "bash" {
            " wants to run:"
        } else {
            " wants to:"
        }),
    ])];
    let details: Vec<Line<'static>> = tool::detail_lines(&a.tool, &a.arguments)
        .iter()
        .flat_map(|l| wrap_line(l, inner))
        .collect();
    let mut footer: Vec<Line<'static>> = vec![Line::from("")];
    if a.unsandboxed {
        footer.push(Line::from(Span::styled(
            "! runs WITHOUT the OS sandbox: it can write anywhere you can and reach the network",
            style::err(),
        )));
    }
    if a.person_only {
        footer.push(Line::from(Span::styled(
            format!("! {}", amber_client::turn::person_only_note(&a.tool)),
            style::err(),
        )));
    }
    footer.extend([
        Line::from(vec![
            Span::styled("reason  ", style::dim()),
            Span::raw(a.reason.clone()),
        ]),
        Line::from(vec![
            Span::styled("scope   ", style::dim()),
            Span::raw(a.scope.clone()),
        ]),
        Line::from(""),
        Line::from(vec![
            Span::styled("y", style::bold()),
            Span::raw(" allow once  "),
            Span::styled("a", style::bold()),
            Span::raw(" allow for session  "),
            Span::styled("A", style::bold()),
            Span::raw(" always  "),
            Span::styled("n", style::bold()),
            Span::raw(" deny  "),
            Span::styled("e", style::bold()),
            Span::raw(" deny and say why"),
        ]),
    ]);
    if crate::app::form_of(a).is_some() {
        footer.push(Line::from(vec![
            Span::styled("f", style::bold()),
            Span::raw(" fill in the form (y sends its defaults)"),
        ]));
    }
    if let Some(form) = app.form.as_ref().filter(|f| f.request_id == a.request_id) {
        footer.push(Line::from(""));
        for (index, field) in form.fields.iter().enumerate() {
            let current = index == form.at;
            let marker = if current { "› " } else { "  " };
            let required = if field.required { "*" } else { "" };
            let mut spans = vec![
                Span::raw(marker),
                Span::styled(format!("{}{required}: ", field.name), style::bold()),
                Span::raw(field.value.clone()),
            ];
            if current {
                spans.push(Span::raw("▏"));
            }
            if !field.hint.is_empty() {
                spans.push(Span::styled(format!("  ({})", field.hint), style::dim()));
            }
            footer.push(Line::from(spans));
        }
        if let Some(error) = &form.error {
            footer.push(Line::from(Span::styled(error.clone(), style::err())));
        }
        footer.push(Line::from(Span::styled(
            "Tab next · Enter on the last field sends · Esc back",
            style::dim(),
        )));
    }
    if let Some((request_id, words)) = &app.denying
        && *request_id == a.request_id
    {
        footer.push(Line::from(vec![
            Span::styled("why: ", style::bold()),
            Span::raw(format!("{words}▏")),
        ]));
        footer.push(Line::from(Span::styled(
            "Enter denies with these words (the model reads them) · Esc back",
            style::dim(),
        )));
    }
    let room =
        usize::from(area.height.saturating_sub(2)).saturating_sub(lines.len() + footer.len());
    let shown = details.len().min(room);
    let hidden = details.len() - shown;
    let keep = if hidden > 0 {
        shown.saturating_sub(1)
    } else {
        shown
    };
    lines.extend(details.into_iter().take(keep));
    if hidden > 0 {
        lines.push(Line::from(Span::styled(
            format!("… {} more lines", hidden + shown - keep),
            style::dim(),
        )));
    }
    lines.extend(footer);
    let count = app.approvals.len();
    let title = if count > 1 {
        format!(" Approval needed (1 of {count}) ")
    } else {
        " Approval needed ".to_owned()
    };
    let rect = centered(area, width, lines.len() as u16 + 2);
    boxed(
        Line::from(Span::styled(title, style::warn())),
        lines,
        rect,
        buf,
    );
}

pub(super) fn help(area: Rect, buf: &mut Buffer) {
    let key_w = KEYS.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 2;
    let lines: Vec<Line<'static>> = KEYS
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!("{k:<key_w$}"), style::bold()),
                Span::raw((*what).to_owned()),
            ])
        })
        .collect();
    let width = (key_w + 64).min(usize::from(area.width)) as u16;
    let rect = centered(area, width, lines.len() as u16 + 2);
    Clear.render(rect, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(style::accent())
        .title(" Keys ");
    Paragraph::new(lines).block(block).render(rect, buf);
}

/// The completion popup, drawn at the bottom-left of `area` (just above the editor).
pub(super) fn popup(app: &App, area: Rect, buf: &mut Buffer) {
    let Some(p) = &app.popup else { return };
    let visible = p.items.len().min(8);
    let first = (p.selected + 1).saturating_sub(visible);
    let name_w = p
        .items
        .iter()
        .map(|(n, _)| n.len())
        .max()
        .unwrap_or(0)
        .min(40)
        + 1;
    let width = (area.width).min(if p.kind == PopupKind::Command { 72 } else { 60 });
    let inner = usize::from(width.saturating_sub(2));
    let lines: Vec<Line<'static>> = p
        .items
        .iter()
        .enumerate()
        .skip(first)
        .take(visible)
        .map(|(i, (name, desc))| {
            let prefix = if p.kind == PopupKind::Command {
                "/"
            } else {
                ""
            };
            let name = truncate(&format!("{prefix}{name}"), name_w + 1);
            let desc = truncate(desc, inner.saturating_sub(name_w + 3));
            let (mark, st) = if i == p.selected {
                ("›", style::selected())
            } else {
                (" ", ratatui::style::Style::default())
            };
            Line::from(vec![
                Span::styled(mark, style::accent()),
                Span::styled(format!("{name:<w$} ", w = name_w + 1), st),
                Span::styled(desc, style::dim()),
            ])
        })
        .collect();
    let height = (visible as u16 + 2).min(area.height);
    let rect = Rect::new(area.x, area.y + area.height - height, width, height);
    Clear.render(rect, buf);
    let title = if p.kind == PopupKind::Command {
        " commands "
    } else {
        " files "
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(style::dim())
        .title(title);
    Paragraph::new(lines).block(block).render(rect, buf);
}

pub(super) fn panel(app: &App, area: Rect, buf: &mut Buffer) {
    let Some(panel) = &app.panel else { return };
    let inner = usize::from(area.width.saturating_sub(2));
    let lines: Vec<Line<'static>> = if panel.lines.is_empty() {
        vec![Line::from(Span::styled("(empty)", style::dim()))]
    } else {
        panel
            .lines
            .iter()
            .map(|l| Line::from(truncate(l, inner)))
            .collect()
    };
    Clear.render(area, buf);
    let title = format!(" {} · Ctrl-T ", panel.title);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(style::accent())
        .title(title);
    Paragraph::new(lines).block(block).render(area, buf);
}
