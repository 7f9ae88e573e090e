//! Transcript cells: one per thing that happened in the session, each rendered to styled
//! lines for a width and cached until the width, the details toggle, or the cell changes.
//! The streaming reply is the exception: its markdown renderer commits line by line and
//! keeps its own lines, so a delta never re-lays-out what is already on screen.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::style;
use super::tool::ToolCell;
use crate::markdown::{self, StreamingMarkdown};
use crate::wrap::{truncate, wrap_line, wrap_text};

/// Reasoning lines shown while details are collapsed.
const COLLAPSED_REASONING: usize = 3;
/// Sub-agent result lines (rendered markdown, blank lines included) shown while collapsed.
const COLLAPSED_RESULT: usize = 6;

/// What kind of note an info cell is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoKind {
    /// Output of a `/command`.
    Command,
    /// A turn that ended other than normally.
    Warn,
    /// Anything else the client wants to say.
    Note,
}

/// The reply of the assistant: streaming (deltas arriving) or complete.
#[derive(Debug)]
pub enum Assistant {
    Streaming(Box<StreamingMarkdown>),
    Done(String),
}

/// One cell of the transcript.
#[derive(Debug)]
pub enum Cell {
    User {
        text: String,
    },
    Assistant(Assistant),
    Reasoning {
        text: String,
        done: bool,
    },
    Tool(ToolCell),
    Steer {
        reason: String,
        text: String,
    },
    Compaction {
        before: u64,
        after: Option<u64>,
        error: Option<String>,
    },
    Subagent {
        agent_id: String,
        task: String,
        result: Option<String>,
        done: bool,
    },
    Error {
        code: String,
        message: String,
    },
    Approval {
        tool: String,
        summary: String,
        reason: String,
        scope: String,
        outcome: Option<String>,
    },
    Info {
        text: String,
        kind: InfoKind,
    },
    /// A turn's unified diff, asked for with `/diff` (client-side: replay does not bring it
    /// back).
    Diff {
        title: String,
        diff: String,
    },
    /// Events this build cannot decode (from a newer daemon), `count` of the same type in a
    /// row: shown, never silently dropped.
    Unknown {
        type_name: String,
        count: u32,
    },
}

/// A cell with its render cache.
#[derive(Debug)]
pub struct Slot {
    pub cell: Cell,
    cache: Option<Cache>,
}

#[derive(Debug)]
struct Cache {
    width: u16,
    expanded: bool,
    lines: Vec<Line<'static>>,
}

impl Slot {
    pub fn new(cell: Cell) -> Self {
        Slot { cell, cache: None }
    }

    /// Columns left blank before the cell's lines (the assistant's reply sits under a marker).
    pub fn indent(&self) -> u16 {
        match self.cell {
            Cell::Assistant(_) => 2,
            _ => 0,
        }
    }

    /// Drawn in the indent of the first line, if any.
    pub fn marker(&self) -> Option<Span<'static>> {
        match self.cell {
            Cell::Assistant(_) => Some(Span::styled("•", style::bold())),
            _ => None,
        }
    }

    /// The cell changed: render it again next time.
    pub fn touch(&mut self) {
        self.cache = None;
    }

    /// The cell's lines at `width` (the full transcript width; the indent is taken off).
    pub fn lines(&mut self, width: u16, expanded: bool) -> &[Line<'static>] {
        let inner = width.saturating_sub(self.indent()).max(1);
        if matches!(self.cell, Cell::Assistant(Assistant::Streaming(_))) {
            return match &mut self.cell {
                Cell::Assistant(Assistant::Streaming(md)) => md.lines(inner),
                _ => &[],
            };
        }
        let fresh = self
            .cache
            .as_ref()
            .is_some_and(|c| c.width == width && c.expanded == expanded);
        if !fresh {
            let lines = render(&self.cell, inner, expanded);
            self.cache = Some(Cache {
                width,
                expanded,
                lines,
            });
        }
        match &self.cache {
            Some(c) => &c.lines,
            None => &[],
        }
    }
}

fn render(cell: &Cell, width: u16, expanded: bool) -> Vec<Line<'static>> {
    let text_width = usize::from(width).saturating_sub(2);
    match cell {
        Cell::User { text } => user(text, text_width),
        Cell::Assistant(Assistant::Done(text)) => markdown::render(text, width),
        // Drawn by its own renderer ([`Slot::lines`]).
        Cell::Assistant(Assistant::Streaming(_)) => Vec::new(),
        Cell::Reasoning { text, done } => reasoning(text, *done, text_width, expanded),
        Cell::Tool(tool) => tool.render(width, expanded),
        Cell::Steer { reason, text } => steer(reason, text, text_width),
        Cell::Compaction {
            before,
            after,
            error,
        } => compaction(*before, *after, error.as_deref(), text_width),
        Cell::Subagent {
            agent_id,
            task,
            result,
            done,
        } => subagent(agent_id, task, result.as_deref(), *done, width, expanded),
        Cell::Error { code, message } => error(code, message, text_width),
        Cell::Approval {
            tool,
            summary,
            reason,
            scope,
            outcome,
        } => approval(tool, summary, reason, scope, outcome.as_deref(), text_width),
        Cell::Info { text, kind } => info(text, *kind, text_width),
        Cell::Diff { title, diff } => super::diff::cell_lines(title, diff, width, expanded),
        Cell::Unknown { type_name, count } => unknown(type_name, *count, text_width),
    }
}

fn user(text: &str, width: usize) -> Vec<Line<'static>> {
    prefixed(
        wrap_text(text, Style::default(), width),
        Span::styled("› ", style::user_marker()),
    )
}

fn reasoning(text: &str, done: bool, width: usize, expanded: bool) -> Vec<Line<'static>> {
    let mut lines = wrap_text(
        text.trim(),
        style::faint().add_modifier(ratatui::style::Modifier::ITALIC),
        width,
    );
    let hidden = lines.len().saturating_sub(COLLAPSED_REASONING);
    if !expanded && hidden > 0 {
        // While it streams the newest thoughts matter; once done, how it began.
        if done {
            lines.truncate(COLLAPSED_REASONING);
        } else {
            lines.drain(..hidden);
        }
        lines.push(Line::from(Span::styled(
            crate::transcript::more_lines(hidden),
            style::dim(),
        )));
    }
    let title = if done { "thought" } else { "thinking…" };
    let mut out = vec![Line::from(Span::styled(
        format!("✻ {title}"),
        style::faint(),
    ))];
    out.extend(prefixed(lines, Span::raw("  ")));
    out
}

fn steer(reason: &str, text: &str, width: usize) -> Vec<Line<'static>> {
    prefixed(
        wrap_text(&format!("steer ({reason}): {text}"), style::warn(), width),
        Span::styled("↻ ", style::warn()),
    )
}

fn compaction(
    before: u64,
    after: Option<u64>,
    error: Option<&str>,
    width: usize,
) -> Vec<Line<'static>> {
    let (text, st) = match (after, error) {
        (_, Some(e)) => (
            format!("compaction failed ({} tokens kept): {e}", tokens(before)),
            style::err(),
        ),
        (Some(a), None) => (
            format!(
                "context compacted: {} → {} tokens",
                tokens(before),
                tokens(a)
            ),
            style::fg(ratatui::style::Color::Magenta),
        ),
        (None, None) => (
            format!("compacting context ({} tokens)…", tokens(before)),
            style::fg(ratatui::style::Color::Magenta),
        ),
    };
    prefixed(wrap_text(&text, st, width), Span::styled("⇣ ", st))
}

fn subagent(
    agent_id: &str,
    task: &str,
    result: Option<&str>,
    done: bool,
    width: u16,
    expanded: bool,
) -> Vec<Line<'static>> {
    let blue = style::fg(ratatui::style::Color::Blue);
    let state = if done { "done" } else { "started" };
    let mut out = prefixed(
        wrap_text(
            &format!("sub-agent {agent_id} {state}: {task}"),
            blue,
            usize::from(width).saturating_sub(2),
        ),
        Span::styled("◆ ", blue),
    );
    if let Some(result) = result {
        out.extend(subagent_result(result, width, expanded));
    }
    out
}

/// The result is the sub-agent's markdown reply: rendered, never raw `**`, behind a bar.
fn subagent_result(result: &str, width: u16, expanded: bool) -> Vec<Line<'static>> {
    let mut body = markdown::render(result.trim(), width.saturating_sub(4).max(1));
    let hidden = body.len().saturating_sub(COLLAPSED_RESULT);
    if !expanded && hidden > 0 {
        body.truncate(COLLAPSED_RESULT);
        body.push(Line::from(Span::styled(
            crate::transcript::more_lines(hidden),
            style::dim(),
        )));
    }
    body.into_iter()
        .map(|line| {
            let mut spans = vec![Span::styled("  │ ", style::dim())];
            spans.extend(line.spans);
            Line::from(spans).style(line.style)
        })
        .collect()
}

fn error(code: &str, message: &str, width: usize) -> Vec<Line<'static>> {
    prefixed(
        wrap_text(&format!("error {code}: {message}"), style::err(), width),
        Span::styled("✗ ", style::err()),
    )
}

fn approval(
    tool: &str,
    summary: &str,
    reason: &str,
    scope: &str,
    outcome: Option<&str>,
    width: usize,
) -> Vec<Line<'static>> {
    let head = format!("approval requested: {tool} {summary}");
    let mut out = prefixed(
        wrap_text(&head, style::warn(), width),
        Span::styled("? ", style::warn()),
    );
    let why = format!("{reason} · scope: {scope}");
    out.extend(prefixed(
        wrap_text(&why, style::dim(), width),
        Span::raw("  "),
    ));
    if let Some(outcome) = outcome {
        let st = if outcome.starts_with("deny") {
            style::err()
        } else {
            style::ok()
        };
        out.push(Line::from(vec![
            Span::raw("  "),
            Span::styled(format!("→ {outcome}"), st),
        ]));
    }
    out
}

fn info(text: &str, kind: InfoKind, width: usize) -> Vec<Line<'static>> {
    let (marker, st) = match kind {
        InfoKind::Command => ("  ", style::dim()),
        InfoKind::Warn => ("! ", style::warn()),
        InfoKind::Note => ("· ", style::dim()),
    };
    prefixed(
        wrap_text(text.trim_end(), st, width),
        Span::styled(marker, st),
    )
}

/// One dimmed line, however long the type name: it says something was not shown.
fn unknown(type_name: &str, count: u32, width: usize) -> Vec<Line<'static>> {
    let times = if count > 1 {
        format!(" (×{count})")
    } else {
        String::new()
    };
    let text = truncate(&format!("unknown event: {type_name}{times}"), width);
    vec![Line::from(vec![
        Span::styled("· ", style::dim()),
        Span::styled(text, style::dim()),
    ])]
}

/// Puts `first` before the first line and as many spaces before the others.
fn prefixed(lines: Vec<Line<'static>>, first: Span<'static>) -> Vec<Line<'static>> {
    let pad = " ".repeat(crate::wrap::str_width(&first.content));
    lines
        .into_iter()
        .enumerate()
        .map(|(i, line)| {
            let lead = if i == 0 {
                first.clone()
            } else {
                Span::styled(pad.clone(), first.style)
            };
            let mut spans = vec![lead];
            spans.extend(line.spans);
            Line::from(spans).style(line.style)
        })
        .collect()
}

/// `1.2k`, `104k`, `950`.
pub fn tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=9_999 => format!("{:.1}k", n as f64 / 1000.0),
        _ => format!("{}k", n / 1000),
    }
}

/// Wraps already-styled lines (used for the queued prompts under the transcript).
pub fn wrap_styled(lines: &[Line<'static>], width: usize) -> Vec<Line<'static>> {
    lines.iter().flat_map(|l| wrap_line(l, width)).collect()
}
