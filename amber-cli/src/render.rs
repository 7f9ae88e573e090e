//! Human rendering of session events: assistant text to stdout as it streams (or to stderr,
//! when stdout is kept for the final answer alone), everything else (tool activity,
//! approvals, steers, errors) as short lines on stderr. Pure: events in, output pieces out.

use std::collections::HashMap;

use amber_client::turn::decision_name;
use amber_proto::{Event, EventKind, ResolvedBy, StopReason, ToolStatus};
use serde_json::Value;

/// A piece of output and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Out {
    Stdout(String),
    Stderr(String),
}

/// Longest argument summary shown after a tool name.
const SUMMARY_CHARS: usize = 100;

/// Renders a stream of events for a person.
#[derive(Debug, Default)]
pub(crate) struct HumanRenderer {
    /// Also announce turn starts (for `attach`, which sees every turn).
    announce_turns: bool,
    /// Stdout has an unfinished line.
    mid_line: bool,
    /// Assistant text streams to stderr: stdout gets only the final answer, from the caller.
    text_on_stderr: bool,
    /// Text already printed per assistant message item (from deltas).
    printed: HashMap<String, String>,
    /// Tool name per call id.
    tools: HashMap<String, String>,
    /// Message of the last `error` event of this turn: the turn's end repeats it otherwise.
    last_error: Option<String>,
    /// Messages held back after a reconnection (`gap.rs`).
    gap: crate::gap::DeltaGap,
}

impl HumanRenderer {
    pub(crate) fn new(announce_turns: bool) -> Self {
        Self {
            announce_turns,
            ..Self::default()
        }
    }

    /// Streams assistant text to stderr, so that stdout can carry the final answer alone.
    pub(crate) fn text_on_stderr(mut self) -> Self {
        self.text_on_stderr = true;
        self
    }

    /// The connection was lost and is back: messages that spanned the gap print from
    /// their durable end (`gap.rs`).
    pub(crate) fn resumed(&mut self) {
        self.gap.resume(self.printed.keys());
    }

    /// The new subscription's replay is over (`synced`).
    pub(crate) fn synced(&mut self) {
        self.gap.synced();
    }

    /// Output for one event.
    #[deny(clippy::wildcard_enum_match_arm)] // a new event kind is a decision here
    pub(crate) fn render(&mut self, event: &Event) -> Vec<Out> {
        if event.seq.is_some() {
            self.gap.durable();
        }
        let mut out = Vec::new();
        match &event.kind {
            EventKind::TurnStarted { prompt } => {
                if self.announce_turns {
                    self.end_line(&mut out);
                    out.push(err(format!("── turn: {}", one_line(prompt, SUMMARY_CHARS))));
                }
            }
            EventKind::MessageDelta { item_id, delta } => {
                if self.gap.holds(item_id, self.printed.contains_key(item_id)) {
                    return out;
                }
                self.printed
                    .entry(item_id.clone())
                    .or_default()
                    .push_str(delta);
                self.stdout(&mut out, delta.clone());
            }
            EventKind::MessageCompleted { item_id, text, .. } => {
                self.gap.completed(item_id);
                let shown = self.printed.remove(item_id).unwrap_or_default();
                if let Some(rest) = text.strip_prefix(shown.as_str()) {
                    self.stdout(&mut out, rest.to_owned());
                }
                self.end_line(&mut out);
            }
            EventKind::ToolCallStarted {
                call_id,
                name,
                arguments,
                ..
            } => {
                self.tools.insert(call_id.clone(), name.clone());
                self.end_line(&mut out);
                let summary = summarize(name, arguments);
                if summary.is_empty() {
                    out.push(err(format!("▸ {name}")));
                } else {
                    out.push(err(format!("▸ {name}  {summary}")));
                }
            }
            EventKind::ToolCallCompleted {
                call_id,
                status,
                output,
                duration_ms,
                ..
            } => {
                let name = self
                    .tools
                    .remove(call_id)
                    .unwrap_or_else(|| call_id.clone());
                self.end_line(&mut out);
                let took = duration(*duration_ms);
                out.push(err(match status {
                    ToolStatus::Ok => format!("✓ {name} ({took})"),
                    ToolStatus::Error => {
                        format!("✗ {name} ({took}): {}", first_line(output, SUMMARY_CHARS))
                    }
                    ToolStatus::Denied => {
                        format!("⊘ denied {name}: {}", first_line(output, SUMMARY_CHARS))
                    }
                }));
            }
            EventKind::ApprovalRequested(amber_proto::Approval {
                tool,
                arguments,
                reason,
                ..
            }) => {
                self.end_line(&mut out);
                out.push(err(format!(
                    "? approval needed: {tool}  {} ({reason})",
                    summarize(tool, arguments)
                )));
            }
            EventKind::ApprovalResolved { decision, by, .. } => {
                out.push(err(match by {
                    ResolvedBy::NoApprover => {
                        "  → denied: no approver connected (run with --yes to allow)".to_owned()
                    }
                    ResolvedBy::Client | ResolvedBy::Rule | ResolvedBy::Policy => {
                        format!("  → {} (by {})", decision_name(*decision), by_name(*by))
                    }
                }));
            }
            EventKind::Steer { reason, text } => {
                self.end_line(&mut out);
                let reason = serde_json::to_value(reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                out.push(err(format!(
                    "↻ steer ({reason}): {}",
                    first_line(text, SUMMARY_CHARS)
                )));
            }
            EventKind::Error {
                code,
                message,
                retryable,
            } => {
                self.end_line(&mut out);
                // The turn ends with this error: retries, if any, are behind it.
                let retry = if *retryable {
                    " (a later try may work)"
                } else {
                    ""
                };
                out.push(err(format!("! error {code}: {message}{retry}")));
                self.last_error = Some(message.clone());
            }
            EventKind::Retrying {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            } => {
                self.end_line(&mut out);
                out.push(err(format!(
                    "… retrying in {}: {reason} (retry {attempt} of {max_attempts})",
                    duration(*delay_ms)
                )));
            }
            EventKind::EnvironmentLost { environment } => {
                self.end_line(&mut out);
                let reason = environment.reason.as_deref().unwrap_or("no reason given");
                let next = match environment.state {
                    amber_proto::EnvironmentState::Gone => {
                        "the next tool call starts a new executor"
                    }
                    amber_proto::EnvironmentState::Queued => "it waits for a runner",
                    amber_proto::EnvironmentState::Connecting
                    | amber_proto::EnvironmentState::Connected
                    | amber_proto::EnvironmentState::Lost => "attaching again",
                };
                out.push(err(format!(
                    "! lost the link to {} ({reason}); {next}",
                    environment.spec
                )));
            }
            EventKind::EnvironmentConnected {
                environment,
                restored_files: Some(files),
            } => {
                self.end_line(&mut out);
                out.push(err(format!(
                    "… a new executor for {}: its workspace was empty, {files} file(s) restored from the newest checkpoint",
                    environment.spec
                )));
            }
            EventKind::EnvironmentResumed {
                environment,
                replayed_chunks,
            } => {
                self.end_line(&mut out);
                out.push(err(format!(
                    "… attached again to {} ({replayed_chunks} chunks of output read back)",
                    environment.spec
                )));
            }
            EventKind::FleetChanged {
                environment,
                reason,
            } => {
                if let Some(fleet) = &environment.fleet {
                    self.end_line(&mut out);
                    out.push(err(format!(
                        "… fleet: {}",
                        fleet.describe(reason.as_deref())
                    )));
                }
            }
            EventKind::FleetSetup {
                command,
                exit_code,
                output,
            } => {
                self.end_line(&mut out);
                let line = match exit_code {
                    Some(0) => format!("… setup `{command}` done"),
                    Some(code) => format!(
                        "! setup `{command}` failed (exit {code}): {}",
                        output.trim()
                    ),
                    None => format!("! setup `{command}` did not finish: {}", output.trim()),
                };
                out.push(err(line));
            }
            EventKind::MessageSent { to, text, .. } => {
                self.end_line(&mut out);
                out.push(err(format!("→ message to {to}: {text}")));
            }
            EventKind::MessageReceived { from, text, .. } => {
                self.end_line(&mut out);
                let from = from.as_deref().unwrap_or("a client");
                out.push(err(format!("← message from {from}: {text}")));
            }
            EventKind::GoalSet { goal } => {
                self.end_line(&mut out);
                out.push(err(match goal {
                    Some(goal) => format!("… goal: {goal}"),
                    None => "… goal cleared".to_owned(),
                }));
            }
            EventKind::GoalCheck { met, note } => {
                self.end_line(&mut out);
                let state = if *met { "met" } else { "not met yet" };
                out.push(err(format!("… goal {state}: {note}")));
            }
            EventKind::SubagentQueued { task, .. } => {
                self.end_line(&mut out);
                out.push(err(format!("… sub-agent waits for a slot: {task}")));
            }
            EventKind::GoalMet { summary } => {
                self.end_line(&mut out);
                out.push(err(format!("✓ goal met: {summary}")));
            }
            EventKind::NetworkConnection(connection) => {
                self.end_line(&mut out);
                let mark = match connection.verdict {
                    amber_proto::ConnectionVerdict::Allowed => "·",
                    amber_proto::ConnectionVerdict::Denied
                    | amber_proto::ConnectionVerdict::Failed => "!",
                };
                out.push(err(format!(
                    "{mark} {}",
                    amber_proto::describe_connection(connection)
                )));
            }
            EventKind::BudgetWarning {
                scope,
                key,
                period,
                spent_usd,
                cap_usd,
            } => {
                self.end_line(&mut out);
                out.push(err(format!(
                    "! {}",
                    amber_proto::describe_budget(
                        *scope,
                        key.as_deref(),
                        period,
                        *spent_usd,
                        *cap_usd
                    )
                )));
            }
            EventKind::RoutineFinished {
                name,
                fire_time,
                stop_reason,
            } => {
                self.end_line(&mut out);
                out.push(err(format!(
                    "… routine {name} ({fire_time}) finished: {}",
                    stop_reason.as_str()
                )));
            }
            EventKind::FleetPushed {
                branch,
                commit,
                changed,
                error,
            } => {
                self.end_line(&mut out);
                let mark = if error.is_some() { "!" } else { "…" };
                out.push(err(format!(
                    "{mark} {}",
                    amber_proto::describe_push(
                        branch,
                        commit.as_deref(),
                        *changed,
                        error.as_deref()
                    )
                )));
            }
            EventKind::CompactionStarted { tokens_before } => {
                out.push(err(format!(
                    "… compacting context ({tokens_before} tokens)"
                )));
            }
            EventKind::CompactionCompleted {
                tokens_before,
                tokens_after,
            } => out.push(err(format!(
                "… compacted context: {tokens_before} → {tokens_after} tokens"
            ))),
            EventKind::CompactionFailed { error, .. } => {
                out.push(err(format!("! compaction failed: {error}")));
            }
            EventKind::TodoUpdated { todos } => {
                let done = todos
                    .iter()
                    .filter(|t| t.status == amber_proto::TodoStatus::Done)
                    .count();
                out.push(err(format!("☐ todos: {done}/{} done", todos.len())));
            }
            EventKind::SubagentStarted { task, .. } => {
                self.end_line(&mut out);
                out.push(err(format!(
                    "▸ subagent  {}",
                    one_line(task, SUMMARY_CHARS)
                )));
            }
            EventKind::SubagentCompleted { task, .. } => {
                out.push(err(format!(
                    "✓ subagent  {}",
                    one_line(task, SUMMARY_CHARS)
                )));
            }
            EventKind::McpStatus(info) => {
                let status = serde_json::to_value(info.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                out.push(err(format!("mcp {}: {status}", info.name)));
            }
            EventKind::TurnCompleted {
                stop_reason, error, ..
            } => {
                self.end_line(&mut out);
                self.printed.clear();
                self.tools.clear();
                let shown = self.last_error.take();
                if *stop_reason != StopReason::EndTurn {
                    let detail = error
                        .as_ref()
                        .filter(|e| shown.as_deref() != Some(e.message.as_str()))
                        .map(|e| format!(": {}", e.message))
                        .unwrap_or_default();
                    out.push(err(format!("■ {}{detail}", stop_reason.as_str())));
                }
            }
            EventKind::Rewound {
                restored,
                conflicts,
                removed_turns,
                ..
            } => {
                self.end_line(&mut out);
                let mut line = format!(
                    "↶ rewound: {removed_turns} turn(s) removed, {} file(s) restored",
                    restored.len()
                );
                if !conflicts.is_empty() {
                    line.push_str(&format!(", conflicts left alone: {}", conflicts.join(", ")));
                }
                out.push(err(line));
            }
            EventKind::HookFailed {
                hook_event,
                command,
                reason,
                ..
            } => {
                self.end_line(&mut out);
                out.push(err(format!(
                    "! {hook_event} hook `{}` failed: {reason}",
                    command.join(" ")
                )));
            }
            // A prompt is announced when its turn starts; queueing it shows nothing.
            EventKind::PromptQueued { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::ToolOutputDelta { .. }
            | EventKind::Usage { .. }
            | EventKind::EnvironmentConnected {
                restored_files: None,
                ..
            }
            | EventKind::Synced { .. } => {}
        }
        out
    }

    /// Ends an unfinished stdout line (before the process exits, for example).
    pub(crate) fn finish(&mut self) -> Vec<Out> {
        let mut out = Vec::new();
        self.end_line(&mut out);
        out
    }

    fn stdout(&mut self, out: &mut Vec<Out>, text: String) {
        if text.is_empty() {
            return;
        }
        self.mid_line = !text.ends_with('\n');
        out.push(self.text(text));
    }

    fn end_line(&mut self, out: &mut Vec<Out>) {
        if self.mid_line {
            out.push(self.text("\n".into()));
            self.mid_line = false;
        }
    }

    fn text(&self, text: String) -> Out {
        match self.text_on_stderr {
            true => Out::Stderr(text),
            false => Out::Stdout(text),
        }
    }
}

fn err(line: String) -> Out {
    Out::Stderr(line + "\n")
}

/// The argument that says most about a call, on one line.
pub(crate) fn summarize(tool: &str, arguments: &Value) -> String {
    let field = |key: &str| arguments.get(key).and_then(Value::as_str);
    let text = match tool {
        "bash" => field("command").map(str::to_owned),
        "read" | "write" | "edit" => field("path").map(str::to_owned),
        "search" => field("pattern").map(|p| match field("path") {
            Some(path) => format!("{p}  in {path}"),
            None => p.to_owned(),
        }),
        "task" => field("description")
            .or_else(|| field("prompt"))
            .map(str::to_owned),
        "process" => field("action").map(|a| {
            let what = field("command").or_else(|| field("id")).unwrap_or_default();
            format!("{a} {what}").trim_end().to_owned()
        }),
        "skills" => field("action").map(|a| {
            format!("{a} {}", field("name").unwrap_or_default())
                .trim_end()
                .to_owned()
        }),
        // A connection of a sandboxed command through the egress proxy.
        "network" => {
            field("host").map(|host| match arguments.get("port").and_then(Value::as_u64) {
                Some(port) if host.contains(':') => format!("[{host}]:{port}"),
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            })
        }
        "todowrite" => arguments
            .get("todos")
            .and_then(Value::as_array)
            .map(|t| format!("{} items", t.len())),
        _ => None,
    };
    let text = text.unwrap_or_else(|| match arguments {
        Value::Null => String::new(),
        Value::Object(map) if map.is_empty() => String::new(),
        other => other.to_string(),
    });
    one_line(&text, SUMMARY_CHARS)
}

/// `text` on one line (newlines shown as `⏎`), cut to `max` characters.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.trim().replace('\n', " ⏎ ");
    cut(&flat, max)
}

/// The first non-empty line of `text`, cut to `max` characters.
pub(crate) fn first_line(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    cut(line, max)
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// `850ms`, `1.2s`, `2m05s`.
pub(crate) fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

fn by_name(by: ResolvedBy) -> &'static str {
    match by {
        ResolvedBy::Client => "client",
        ResolvedBy::Rule => "rule",
        ResolvedBy::Policy => "policy",
        ResolvedBy::NoApprover => "no approver",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(body: Value) -> Event {
        let mut v = json!({"sessionId": "s1", "turnId": "t1", "time": "2026-01-01T00:00:00Z"});
        v.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    fn render_all(r: &mut HumanRenderer, events: &[Value]) -> (String, String) {
        let (mut out, mut errs) = (String::new(), String::new());
        for e in events {
            for piece in r.render(&ev(e.clone())) {
                match piece {
                    Out::Stdout(s) => out.push_str(&s),
                    Out::Stderr(s) => errs.push_str(&s),
                }
            }
        }
        (out, errs)
    }

    #[test]
    fn streams_text_and_reports_tools() {
        let mut r = HumanRenderer::new(false);
        let (out, errs) = render_all(
            &mut r,
            &[
                json!({"seq": 1, "type": "turn_started", "prompt": "go"}),
                json!({"type": "message_delta", "itemId": "m1", "delta": "Let me "}),
                json!({"type": "message_delta", "itemId": "m1", "delta": "look."}),
                json!({"seq": 2, "type": "message_completed", "itemId": "m1", "role": "assistant", "text": "Let me look."}),
                json!({"seq": 3, "type": "tool_call_started", "itemId": "m1", "callId": "c1", "name": "bash", "arguments": {"command": "ls -la"}}),
                json!({"type": "tool_output_delta", "callId": "c1", "chunk": "total 0"}),
                json!({"seq": 4, "type": "tool_call_completed", "callId": "c1", "status": "ok", "output": "total 0", "durationMs": 1500}),
                json!({"seq": 5, "type": "tool_call_started", "itemId": "m1", "callId": "c2", "name": "edit", "arguments": {"path": "src/a.rs", "old_string": "x", "new_string": "y"}}),
                json!({"seq": 6, "type": "tool_call_completed", "callId": "c2", "status": "error", "output": "\nold_string not found\nmore", "durationMs": 4}),
                json!({"seq": 7, "type": "tool_call_started", "itemId": "m1", "callId": "c3", "name": "write", "arguments": {"path": "b"}}),
                json!({"seq": 8, "type": "tool_call_completed", "callId": "c3", "status": "denied", "output": "read mode", "durationMs": 0}),
                json!({"seq": 9, "type": "steer", "reason": "tool_failures", "text": "Try another way."}),
                json!({"type": "message_delta", "itemId": "m2", "delta": "Done"}),
                json!({"seq": 10, "type": "turn_completed", "stopReason": "end_turn", "usage": {}}),
            ],
        );
        assert_eq!(out, "Let me look.\nDone\n");
        assert_eq!(
            errs,
            "▸ bash  ls -la\n✓ bash (1.5s)\n▸ edit  src/a.rs\n✗ edit (4ms): old_string not found\n\
             ▸ write  b\n⊘ denied write: read mode\n↻ steer (tool_failures): Try another way.\n"
        );
    }

    #[test]
    fn completed_messages_fill_in_what_deltas_missed() {
        let mut r = HumanRenderer::new(true);
        let (out, errs) = render_all(
            &mut r,
            &[
                json!({"seq": 1, "type": "turn_started", "prompt": "two\nlines"}),
                json!({"type": "message_delta", "itemId": "m1", "delta": "Hel"}),
                json!({"seq": 2, "type": "message_completed", "itemId": "m1", "role": "assistant", "text": "Hello!"}),
                json!({"seq": 3, "type": "message_completed", "itemId": "m2", "role": "assistant", "text": "Replayed.\n"}),
                json!({"seq": 4, "type": "turn_completed", "stopReason": "loop_detected", "usage": {}}),
            ],
        );
        assert_eq!(out, "Hello!\nReplayed.\n");
        assert_eq!(errs, "── turn: two ⏎ lines\n■ loop_detected\n");
    }

    #[test]
    fn approvals_and_errors() {
        let mut r = HumanRenderer::new(false);
        let (_, errs) = render_all(
            &mut r,
            &[
                json!({"seq": 1, "type": "approval_requested", "requestId": "r1", "callId": "c1", "tool": "bash", "arguments": {"command": "rm -rf build"}, "reason": "destructive", "scope": "command"}),
                json!({"seq": 2, "type": "approval_resolved", "requestId": "r1", "decision": "deny", "by": "no_approver"}),
                json!({"seq": 3, "type": "approval_resolved", "requestId": "r2", "decision": "allow_once", "by": "client"}),
                json!({"seq": 4, "type": "error", "code": "rate_limited", "message": "429", "retryable": true}),
                json!({"seq": 5, "type": "turn_completed", "stopReason": "error", "error": {"code": "api", "message": "boom"}, "usage": {}}),
            ],
        );
        assert_eq!(
            errs,
            "? approval needed: bash  rm -rf build (destructive)\n\
             \x20 → denied: no approver connected (run with --yes to allow)\n\
             \x20 → allowed once (by client)\n\
             ! error rate_limited: 429 (a later try may work)\n■ error: boom\n"
        );
        // The turn's end does not repeat the error event it ended on.
        let (_, errs) = render_all(
            &mut r,
            &[
                json!({"seq": 6, "type": "error", "code": "api", "message": "401 Unauthorized", "retryable": false}),
                json!({"seq": 7, "type": "turn_completed", "stopReason": "error", "error": {"code": "api", "message": "401 Unauthorized"}, "usage": {}}),
            ],
        );
        assert_eq!(errs, "! error api: 401 Unauthorized\n■ error\n");
    }

    #[test]
    fn a_retry_wait_is_announced_on_stderr() {
        let mut r = HumanRenderer::new(false);
        let (out, errs) = render_all(
            &mut r,
            &[
                json!({"type": "message_delta", "itemId": "m1", "delta": "partial"}),
                json!({"type": "retrying", "attempt": 1, "maxAttempts": 4, "delayMs": 8000, "reason": "429 rate limited"}),
                json!({"type": "retrying", "attempt": 2, "maxAttempts": 4, "delayMs": 250, "reason": "stream idle for 30 s"}),
            ],
        );
        assert_eq!(out, "partial\n", "an unfinished line is ended first");
        assert_eq!(
            errs,
            "… retrying in 8.0s: 429 rate limited (retry 1 of 4)\n\
             … retrying in 250ms: stream idle for 30 s (retry 2 of 4)\n"
        );
    }

    #[test]
    fn summaries_and_durations() {
        assert_eq!(
            summarize("search", &json!({"pattern": "fn main", "path": "src"})),
            "fn main  in src"
        );
        assert_eq!(summarize("mcp__x__y", &json!({"a": 1})), r#"{"a":1}"#);
        assert_eq!(summarize("todowrite", &json!({"todos": [1, 2]})), "2 items");
        assert_eq!(
            summarize("network", &json!({"host": "pypi.org", "port": 443})),
            "pypi.org:443"
        );
        assert_eq!(
            summarize("network", &json!({"host": "2001:db8::1", "port": 80})),
            "[2001:db8::1]:80"
        );
        assert_eq!(summarize("other", &json!({})), "");
        assert_eq!(one_line(&"x".repeat(200), 10).chars().count(), 10);
        assert_eq!(duration(12), "12ms");
        assert_eq!(duration(61_500), "1m01s");
    }
}
