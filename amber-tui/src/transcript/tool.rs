//! Tool-call cells: a one-line header (status, tool, argument summary, duration) and a body
//! that is the call's output, or — for a call that changes files and did not fail — its diff:
//! the daemon's (`tool_call_completed.diff`, with line numbers) once it completed, else the
//! one its arguments imply (`edit`, `write`, `apply_patch`; no line numbers). Collapsed to a
//! few lines unless details are expanded. The argument views are shared with the approval
//! overlay.

use amber_proto::ToolStatus;
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::diff::{self, DiffView};
use super::{argdiff, hunks, style};
use crate::wrap::{str_width, truncate, wrap_line};

/// Lines of output shown at most while collapsed (head and tail around a marker).
const COLLAPSED_OUTPUT: usize = 5;
/// Lines of diff shown at most while collapsed (the last one then says how many are hidden).
const COLLAPSED_DIFF: usize = 16;

/// One tool call as the transcript shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCell {
    pub call_id: String,
    pub name: String,
    pub arguments: Value,
    /// The sub-agent that made the call, when not the session's own agent.
    pub agent: Option<String>,
    /// `None` while it runs.
    pub status: Option<ToolStatus>,
    /// The final output once completed, else what streamed so far.
    pub output: String,
    pub duration_ms: Option<u64>,
    /// What the call changed, as the daemon's unified diff (`tool_call_completed.diff`):
    /// `None` while it runs, and for calls without one.
    pub diff: Option<String>,
    /// The output is shown by other cells (a `task` call's sub-agent results): not repeated.
    pub output_elsewhere: bool,
}

impl ToolCell {
    pub fn new(call_id: String, name: String, arguments: Value, agent: Option<String>) -> Self {
        ToolCell {
            call_id,
            name,
            arguments,
            agent,
            status: None,
            output: String::new(),
            duration_ms: None,
            diff: None,
            output_elsewhere: false,
        }
    }

    pub fn render(&self, width: u16, expanded: bool) -> Vec<Line<'static>> {
        let width = usize::from(width.max(8));
        let mut lines = vec![self.header(width)];
        let body_width = width.saturating_sub(4).max(4);
        let mut body: Vec<Line<'static>> = Vec::new();
        let diff = self.diff_body(body_width, expanded);
        let show_output = diff.is_none();
        if let Some(diff) = diff {
            body.extend(collapse(diff, COLLAPSED_DIFF, expanded, true));
        }
        if show_output && !self.output_elsewhere && !self.output.trim().is_empty() {
            let out: Vec<Line<'static>> = self
                .output
                .trim_end_matches('\n')
                .split('\n')
                .map(|l| Line::from(Span::styled(l.replace('\t', "    "), style::dim())))
                .collect();
            body.extend(collapse(out, COLLAPSED_OUTPUT, expanded, false));
        }
        push_behind_bar(&mut lines, body, body_width, expanded);
        lines
    }

    /// The diff to show instead of the output, at `width` columns: `None` for a call that
    /// failed or changes no files.
    fn diff_body(&self, width: usize, expanded: bool) -> Option<Vec<Line<'static>>> {
        if self.failed() {
            return None;
        }
        if let Some(d) = &self.diff {
            if d.trim().is_empty() {
                return Some(vec![Line::from(Span::styled("no changes", style::dim()))]);
            }
            return Some(diff::render(
                &hunks::parse(d),
                width,
                expanded,
                DiffView::DAEMON,
            ));
        }
        let d = argdiff::from_arguments(&self.name, &self.arguments)?;
        Some(diff::render(&d, width, expanded, argument_view(&self.name)))
    }

    /// Completed other than `ok` (an error, or denied).
    fn failed(&self) -> bool {
        self.status.is_some_and(|s| s != ToolStatus::Ok)
    }

    fn header(&self, width: usize) -> Line<'static> {
        let (icon, icon_style) = match self.status {
            None => ("•", style::warn()),
            Some(ToolStatus::Ok) => ("✓", style::ok()),
            Some(ToolStatus::Denied) => ("⊘", style::err()),
            Some(ToolStatus::Error) => ("✗", style::err()),
        };
        let mut tail = match (self.status, self.duration_ms) {
            (None, _) => "running".to_owned(),
            (Some(ToolStatus::Ok), Some(ms)) => duration(ms),
            (Some(ToolStatus::Ok), None) => String::new(),
            (Some(failed), Some(ms)) => format!("{} · {}", status_word(failed), duration(ms)),
            (Some(failed), None) => status_word(failed).to_owned(),
        };
        if !tail.is_empty() {
            tail = format!("  {tail}");
        }
        let who = self
            .agent
            .as_ref()
            .map(|a| format!("↳ {a} "))
            .unwrap_or_default();
        let fixed = 2 + str_width(&who) + str_width(&self.name) + 2 + str_width(&tail);
        let summary = truncate(
            &summary(&self.name, &self.arguments),
            width.saturating_sub(fixed),
        );
        let mut spans = vec![Span::styled(format!("{icon} "), icon_style)];
        if !who.is_empty() {
            spans.push(Span::styled(who, style::dim()));
        }
        spans.push(Span::styled(self.name.clone(), style::bold()));
        spans.push(Span::raw("  "));
        spans.push(Span::raw(summary));
        spans.push(Span::styled(
            tail,
            if self.failed() {
                icon_style
            } else {
                style::dim()
            },
        ));
        Line::from(spans)
    }
}

/// The status as the header spells it (its wire name).
fn status_word(status: ToolStatus) -> &'static str {
    match status {
        ToolStatus::Ok => "ok",
        ToolStatus::Error => "error",
        ToolStatus::Denied => "denied",
    }
}

/// `1.5s`, `320ms`, `2m04s`.
pub fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
    }
}

fn arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

fn first_line(s: &str) -> String {
    let mut lines = s.lines();
    let first = lines.next().unwrap_or("").to_owned();
    if lines.next().is_some() {
        format!("{first} …")
    } else {
        first
    }
}

/// A one-line summary of a call's arguments, per built-in tool; JSON for the rest.
pub fn summary(tool: &str, args: &Value) -> String {
    let s = |k| arg(args, k).unwrap_or("").to_owned();
    match tool {
        "bash" => first_line(&s("command")),
        // A sandboxed command's connection through the egress proxy (an approval).
        "network" => match args.get("port").and_then(Value::as_u64) {
            Some(port) if s("host").contains(':') => format!("[{}]:{port}", s("host")),
            Some(port) => format!("{}:{port}", s("host")),
            None => s("host"),
        },
        "read" => {
            let mut out = s("path");
            if let Some(off) = args.get("offset").and_then(Value::as_u64) {
                out.push_str(&format!(" @{off}"));
            }
            if let Some(lim) = args.get("limit").and_then(Value::as_u64) {
                out.push_str(&format!(" +{lim}"));
            }
            out
        }
        "write" => {
            let n = arg(args, "content").map_or(0, |c| c.lines().count());
            format!("{} ({n} lines)", s("path"))
        }
        "edit" => s("path"),
        "apply_patch" => {
            let patch = s("patch");
            let paths: Vec<&str> = patch
                .lines()
                .filter_map(|l| {
                    ["*** Add File: ", "*** Delete File: ", "*** Update File: "]
                        .iter()
                        .find_map(|p| l.strip_prefix(p))
                })
                .map(str::trim)
                .collect();
            match paths.as_slice() {
                [] => String::new(),
                [one] => (*one).to_owned(),
                many => format!("{} files: {}", many.len(), many.join(", ")),
            }
        }
        "search" => {
            let mut out = format!("\"{}\"", s("pattern"));
            for k in ["path", "glob", "mode"] {
                if let Some(v) = arg(args, k) {
                    out.push_str(&format!(" {k}={v}"));
                }
            }
            out
        }
        "process" => [s("action"), s("command"), s("id")]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        "task" => arg(args, "description")
            .map(first_line)
            .unwrap_or_else(|| first_line(&s("prompt"))),
        "todowrite" => {
            let n = args
                .get("todos")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            format!("{n} todos")
        }
        "skills" => format!("{} {}", s("action"), s("name")).trim().to_owned(),
        _ => match args {
            Value::Object(m) if m.is_empty() => String::new(),
            Value::Null => String::new(),
            other => other.to_string(),
        },
    }
}

/// The arguments in full, for the approval overlay: the whole command for bash, a diff for
/// edits and writes, pretty JSON for anything else.
pub fn detail_lines(tool: &str, args: &Value) -> Vec<Line<'static>> {
    match tool {
        "bash" => {
            let mut out: Vec<Line<'static>> = arg(args, "command")
                .unwrap_or("")
                .split('\n')
                .map(|l| {
                    Line::from(vec![
                        Span::styled("$ ", style::dim()),
                        Span::styled(l.to_owned(), style::bold()),
                    ])
                })
                .collect();
            if let Some(cwd) = arg(args, "cwd") {
                out.push(Line::from(Span::styled(format!("in {cwd}"), style::dim())));
            }
            out
        }
        "edit" | "write" => {
            let mut out = vec![Line::from(Span::styled(
                arg(args, "path").unwrap_or("").to_owned(),
                style::bold(),
            ))];
            out.extend(diff_lines(tool, args));
            out
        }
        "apply_patch" => diff_lines(tool, args),
        // A question to trust one version of a workspace configuration file.
        "trust" | "hooks" if args.get("trust").is_some() => trust_lines(args),
        _ => serde_json::to_string_pretty(args)
            .unwrap_or_default()
            .split('\n')
            .map(|l| Line::from(l.to_owned()))
            .collect(),
    }
}

/// A trust question: the file and the version, then what it would allow or run once trusted
/// (a rules file's allow rules, a hooks file's commands, an agent's mode and tools).
fn trust_lines(args: &Value) -> Vec<Line<'static>> {
    let mut out = vec![Line::from(Span::styled(
        arg(args, "trust").unwrap_or("").to_owned(),
        style::bold(),
    ))];
    let hash = arg(args, "hash").unwrap_or("");
    out.push(Line::from(Span::styled(
        format!(
            "{} · version {}",
            arg(args, "kind").unwrap_or("configuration"),
            &hash[..12.min(hash.len())]
        ),
        style::dim(),
    )));
    let list = |key: &str| {
        args.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for rule in list("allows") {
        out.push(Line::from(format!(
            "allows: {}",
            rule.as_str().unwrap_or_default()
        )));
    }
    for hook in list("hooks") {
        let command: Vec<&str> = hook["command"]
            .as_array()
            .map(|c| c.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        out.push(Line::from(format!(
            "runs on {}: {}",
            hook["event"].as_str().unwrap_or("?"),
            command.join(" ")
        )));
    }
    if let Some(agent) = arg(args, "agent") {
        let mode = arg(args, "mode").unwrap_or("the session's");
        out.push(Line::from(format!("agent {agent}, mode {mode}")));
    }
    out
}

/// The diff a call's arguments imply (see [`argdiff`]), unwrapped: no line numbers (they would
/// count from the start of the strings, not the file); per-file headers only for a patch (an
/// `edit`'s or `write`'s header names its one file already). Empty for other tools.
pub fn diff_lines(tool: &str, args: &Value) -> Vec<Line<'static>> {
    argdiff::from_arguments(tool, args).map_or_else(Vec::new, |d| {
        diff::render(&d, usize::MAX / 4, true, argument_view(tool))
    })
}

fn argument_view(tool: &str) -> DiffView {
    DiffView {
        numbers: false,
        headers: tool == "apply_patch",
    }
}

/// Appends `body` to `out` behind the dimmed `  │ ` bar of a cell: wrapped at `width` when
/// `expanded`, else each line cut to it.
pub(crate) fn push_behind_bar(
    out: &mut Vec<Line<'static>>,
    body: Vec<Line<'static>>,
    width: usize,
    expanded: bool,
) {
    for line in body {
        let pieces = if expanded {
            wrap_line(&line, width)
        } else {
            vec![truncate_line(line, width)]
        };
        for piece in pieces {
            let mut spans = vec![Span::styled("  │ ", style::dim())];
            spans.extend(piece.spans);
            out.push(Line::from(spans));
        }
    }
}

/// Keeps at most `max` lines unless `expanded`: the head (diffs) or head and tail (output)
/// around a "… N more lines" marker.
pub(crate) fn collapse(
    lines: Vec<Line<'static>>,
    max: usize,
    expanded: bool,
    head_only: bool,
) -> Vec<Line<'static>> {
    if expanded || lines.len() <= max {
        return lines;
    }
    let hidden_marker =
        |n: usize| Line::from(Span::styled(crate::transcript::more_lines(n), style::dim()));
    if head_only {
        let keep = max - 1;
        let hidden = lines.len() - keep;
        let mut out: Vec<Line<'static>> = lines.into_iter().take(keep).collect();
        out.push(hidden_marker(hidden));
        return out;
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    let hidden = lines.len() - head - tail;
    let mut out: Vec<Line<'static>> = lines[..head].to_vec();
    out.push(hidden_marker(hidden));
    out.extend_from_slice(&lines[lines.len() - tail..]);
    out
}

pub(crate) fn truncate_line(line: Line<'static>, width: usize) -> Line<'static> {
    let total: usize = line.spans.iter().map(|s| str_width(&s.content)).sum();
    if total <= width {
        return line;
    }
    let mut left = width;
    let mut spans = Vec::new();
    for span in line.spans {
        if left == 0 {
            break;
        }
        let w = str_width(&span.content);
        if w <= left {
            left -= w;
            spans.push(span);
        } else {
            spans.push(Span::styled(truncate(&span.content, left), span.style));
            left = 0;
        }
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    fn completed(name: &str, args: Value, status: ToolStatus, diff: Option<&str>) -> ToolCell {
        let mut cell = ToolCell::new("c_1".into(), name.into(), args, None);
        cell.status = Some(status);
        cell.output = "the output".into();
        cell.duration_ms = Some(3);
        cell.diff = diff.map(str::to_owned);
        cell
    }

    #[test]
    fn a_network_approval_reads_as_the_host_and_port() {
        assert_eq!(
            summary(
                "network",
                &json!({"host": "registry.npmjs.org", "port": 443})
            ),
            "registry.npmjs.org:443"
        );
        assert_eq!(
            summary("network", &json!({"host": "::1", "port": 80})),
            "[::1]:80"
        );
    }

    #[test]
    fn a_trust_question_shows_the_file_its_version_and_what_it_would_allow() {
        let rules = json!({
            "trust": "/w/.amber/rules.toml", "kind": "rules", "hash": "0123456789abcdef",
            "allows": ["bash make test (sandbox = false)", "fetch *"],
        });
        assert_eq!(
            texts(&detail_lines("trust", &rules)),
            [
                "/w/.amber/rules.toml",
                "rules · version 0123456789ab",
                "allows: bash make test (sandbox = false)",
                "allows: fetch *",
            ]
        );
        let hooks = json!({
            "trust": "/w/.amber/hooks.toml", "kind": "hooks", "hash": "ff",
            "hooks": [{"event": "user_prompt", "command": ["sh", "-c", "x"]}],
        });
        assert_eq!(
            texts(&detail_lines("hooks", &hooks))[2],
            "runs on user_prompt: sh -c x"
        );
    }

    #[test]
    fn a_long_diff_folds_to_its_head_with_a_count_of_the_rest() {
        let body: String = (1..=40).map(|i| format!("+line {i}\n")).collect();
        let diff = format!("--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,40 @@\n{body}");
        let cell = completed(
            "write",
            json!({"path": "n.txt"}),
            ToolStatus::Ok,
            Some(&diff),
        );
        let collapsed = texts(&cell.render(80, false));
        // The tool's header, then the head of the 41 rows (file header + 40 lines) and the
        // marker.
        assert_eq!(collapsed.len(), 1 + COLLAPSED_DIFF);
        assert_eq!(collapsed[1], "  │ n.txt (new)  +40 −0");
        assert_eq!(collapsed[2], "  │  1 + line 1");
        assert_eq!(
            collapsed[COLLAPSED_DIFF],
            format!(
                "  │ {}",
                crate::transcript::more_lines(41 - (COLLAPSED_DIFF - 1))
            )
        );
        let expanded = texts(&cell.render(80, true));
        assert_eq!(expanded.len(), 1 + 41);
        assert_eq!(expanded[41], "  │ 40 + line 40");
    }

    #[test]
    fn a_completed_diff_replaces_the_one_from_the_arguments() {
        let args = json!({"path": "a.rs", "old_string": "x", "new_string": "y"});
        let mut cell = ToolCell::new("c_1".into(), "edit".into(), args.clone(), None);
        // Running: from the arguments, without line numbers.
        assert_eq!(texts(&cell.render(80, false))[1..], ["  │ - x", "  │ + y"]);
        cell = completed(
            "edit",
            args.clone(),
            ToolStatus::Ok,
            Some("--- a/a.rs\n+++ b/a.rs\n@@ -12 +12 @@\n-x\n+y\n"),
        );
        assert_eq!(
            texts(&cell.render(80, false))[1..],
            ["  │ a.rs  +1 −1", "  │ 12 - x", "  │ 12 + y"]
        );
        // Completed by a daemon that sends no diff: still the arguments' diff.
        cell = completed("edit", args.clone(), ToolStatus::Ok, None);
        assert_eq!(texts(&cell.render(80, false))[1..], ["  │ - x", "  │ + y"]);
        // A change to nothing.
        cell = completed("write", args, ToolStatus::Ok, Some(""));
        assert_eq!(texts(&cell.render(80, false))[1..], ["  │ no changes"]);
    }

    #[test]
    fn failed_and_denied_calls_show_their_output_not_a_diff() {
        let args = json!({"path": "a.rs", "old_string": "x", "new_string": "y"});
        for status in [ToolStatus::Error, ToolStatus::Denied] {
            let cell = completed("edit", args.clone(), status, None);
            assert_eq!(texts(&cell.render(80, false))[1..], ["  │ the output"]);
        }
        let ok = completed("bash", json!({"command": "ls"}), ToolStatus::Ok, None);
        assert_eq!(texts(&ok.render(80, false))[1..], ["  │ the output"]);
    }

    #[test]
    fn a_patch_is_summed_up_by_its_files() {
        let one =
            json!({"patch": "*** Begin Patch\n*** Update File: a.rs\n@@\n-x\n+y\n*** End Patch"});
        assert_eq!(summary("apply_patch", &one), "a.rs");
        let two = json!({"patch": "*** Add File: n.md\n+hi\n*** Delete File: old.md\n"});
        assert_eq!(summary("apply_patch", &two), "2 files: n.md, old.md");
        assert_eq!(summary("apply_patch", &json!({"patch": "oops"})), "");
    }

    #[test]
    fn a_running_patch_shows_its_files() {
        let patch =
            "*** Begin Patch\n*** Add File: n.md\n+hi\n*** Delete File: old.md\n*** End Patch";
        let cell = ToolCell::new(
            "c_1".into(),
            "apply_patch".into(),
            json!({ "patch": patch }),
            None,
        );
        assert_eq!(
            texts(&cell.render(80, false))[1..],
            [
                "  │ n.md (new)  +1 −0",
                "  │ + hi",
                "  │ ",
                "  │ old.md (deleted)  +0 −0"
            ]
        );
    }
}
