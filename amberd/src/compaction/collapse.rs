//! Step 1 of the pipeline: repair tool-call pairs, then collapse consecutive tool-call
//! loops.
//!
//! **Invariant of the output:** every assistant message with tool calls is followed by
//! exactly one tool message per call, in call order, and every tool message belongs to
//! the assistant message right before its group. Repair drops orphan tool results and
//! gives a call without a result a short synthetic one. Collapse then looks at runs of
//! adjacent tool steps (an assistant message with calls plus its results) that call the
//! same tools on similar arguments (same primary argument: path, command, pattern, …):
//! every step of a run but the last keeps its call and gets its outputs replaced by a
//! short note, so pairs stay whole and the newest output stays verbatim.

use std::ops::Range;

use amber_proto::{Message, Role, ToolStatus};
use serde_json::Value;

use amber_tools::dispatch::envelope;

/// Arguments that identify what a call works on, in order of preference.
const PRIMARY_ARGS: &[&str] = &[
    "path",
    "file_path",
    "file",
    "command",
    "cmd",
    "pattern",
    "query",
    "url",
];
/// Outputs at most this long are left alone (the note would not be shorter).
const KEEP_SHORT_OUTPUT: usize = 240;

/// Repairs and collapses `messages`; `messages[0]` (the system prompt) is copied as is.
pub(crate) fn collapse(messages: &[Message]) -> Vec<Message> {
    let mut out = repair(messages);
    let groups: Vec<Range<usize>> = units(&out).into_iter().filter(|u| u.len() > 1).collect();
    for pair in groups.windows(2) {
        let (older, newer) = (&pair[0], &pair[1]);
        if older.end != newer.start || signature(&out[older.start]) != signature(&out[newer.start])
        {
            continue;
        }
        let names: Vec<String> = out[older.start]
            .tool_calls
            .iter()
            .map(|c| format!("`{}`", c.name))
            .collect();
        for message in &mut out[older.start + 1..older.end] {
            if message.content.len() <= KEEP_SHORT_OUTPUT {
                continue;
            }
            let note = format!(
                "[output omitted by compaction: the next step repeated {} with similar \
                 arguments; {} bytes]",
                names.join(", "),
                message.content.len()
            );
            message.content = envelope(status_of(&message.content), &note);
        }
    }
    out
}

/// Makes every tool-call pair whole (see the module invariant).
fn repair(messages: &[Message]) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut iter = messages.iter().enumerate().peekable();
    while let Some((index, message)) = iter.next() {
        if index == 0 {
            out.push(message.clone());
            continue;
        }
        if message.role == Role::Tool {
            tracing::debug!(index, "compaction: dropping a tool result without its call");
            continue;
        }
        out.push(message.clone());
        if message.role != Role::Assistant || message.tool_calls.is_empty() {
            continue;
        }
        let mut results: Vec<Option<Message>> = vec![None; message.tool_calls.len()];
        while let Some((_, next)) = iter.next_if(|(_, m)| m.role == Role::Tool) {
            let slot = message
                .tool_calls
                .iter()
                .position(|c| Some(c.id.as_str()) == next.tool_call_id.as_deref())
                .and_then(|p| results.get_mut(p))
                .filter(|slot| slot.is_none());
            match slot {
                Some(slot) => *slot = Some(next.clone()),
                None => tracing::debug!("compaction: dropping a stray tool result"),
            }
        }
        for (call, result) in message.tool_calls.iter().zip(results) {
            out.push(result.unwrap_or_else(|| {
                Message::tool(
                    call.id.clone(),
                    envelope(
                        ToolStatus::Error,
                        "no result was recorded for this call (interrupted)",
                    ),
                )
            }));
        }
    }
    out
}

/// The units of a repaired list after the system prompt: a tool step (an assistant
/// message with calls plus its results) or a single message. Units are kept or dropped
/// whole.
pub(crate) fn units(messages: &[Message]) -> Vec<Range<usize>> {
    let mut units = Vec::new();
    let mut i = 1;
    while i < messages.len() {
        let mut end = i + 1;
        if messages[i].role == Role::Assistant && !messages[i].tool_calls.is_empty() {
            while end < messages.len() && messages[end].role == Role::Tool {
                end += 1;
            }
        }
        units.push(i..end);
        i = end;
    }
    units
}

/// What makes two steps "the same call on similar arguments".
fn signature(message: &Message) -> Vec<(&str, String)> {
    message
        .tool_calls
        .iter()
        .map(|c| (c.name.as_str(), primary_argument(&c.arguments)))
        .collect()
}

fn primary_argument(arguments: &str) -> String {
    let Ok(value) = serde_json::from_str::<Value>(arguments) else {
        return arguments.trim().to_owned();
    };
    let primary = value
        .as_object()
        .and_then(|o| PRIMARY_ARGS.iter().find_map(|k| o.get(*k)));
    match primary {
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(other) => other.to_string(),
        // Object keys are sorted, so this is canonical.
        None => value.to_string(),
    }
}

/// The status of a tool envelope (`ok` when it is not one).
fn status_of(content: &str) -> ToolStatus {
    serde_json::from_str::<Value>(content)
        .ok()
        .and_then(|v| v.get("status").cloned())
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or(ToolStatus::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::ToolCall;

    fn call(id: &str, name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    fn step(id: &str, name: &str, args: &str, output: &str) -> Vec<Message> {
        vec![
            Message::assistant("", vec![call(id, name, args)]),
            Message::tool(id, envelope(ToolStatus::Ok, output)),
        ]
    }

    /// Every call answered right after it, every result answering a call.
    fn assert_pairs_consistent(messages: &[Message]) {
        let mut i = 0;
        while i < messages.len() {
            let m = &messages[i];
            assert_ne!(m.role, Role::Tool, "orphan tool message at {i}");
            i += 1;
            for c in &m.tool_calls {
                let r = &messages[i];
                assert_eq!(r.role, Role::Tool);
                assert_eq!(r.tool_call_id.as_deref(), Some(c.id.as_str()));
                i += 1;
            }
        }
    }

    #[test]
    fn repeated_calls_keep_the_last_output_and_all_pairs() {
        let big = "x".repeat(1000);
        let mut messages = vec![Message::system("sys"), Message::user("go")];
        messages.extend(step("c1", "read", r#"{"path":"a.rs"}"#, &big));
        messages.extend(step("c2", "read", r#"{"path":"a.rs","offset":9}"#, &big));
        messages.extend(step("c3", "read", r#"{"path":"a.rs"}"#, "short"));
        messages.extend(step("c4", "bash", r#"{"command":"ls"}"#, &big));
        messages.extend(step("c5", "read", r#"{"path":"b.rs"}"#, &big));
        let out = collapse(&messages);
        assert_eq!(out.len(), messages.len());
        assert_pairs_consistent(&out);
        // c1 and c2 are superseded by the similar next step; the rest stay verbatim.
        assert!(out[3].content.contains("output omitted by compaction"));
        assert!(out[3].content.contains("\"status\":\"ok\""));
        assert!(out[5].content.contains("output omitted"));
        for i in [7, 9, 11] {
            assert_eq!(out[i], messages[i], "message {i}");
        }
    }

    #[test]
    fn steps_separated_by_other_messages_are_not_a_run() {
        let big = "y".repeat(1000);
        let mut messages = vec![Message::system("sys")];
        messages.extend(step("c1", "bash", r#"{"command":"cargo test"}"#, &big));
        messages.push(Message::user("again"));
        messages.extend(step("c2", "bash", r#"{"command":"cargo test"}"#, &big));
        assert_eq!(collapse(&messages), messages);
    }

    #[test]
    fn repair_drops_orphans_and_answers_missing_calls() {
        let messages = vec![
            Message::system("sys"),
            Message::tool("zz", "orphan"),
            Message::user("go"),
            Message::assistant("", vec![call("a", "read", "{}"), call("b", "read", "{}")]),
            Message::tool("b", "result b"),
            Message::tool("q", "stray"),
            Message::tool("b", "duplicate b"),
            Message::user("next"),
            Message::assistant("", vec![call("c", "bash", "{}")]),
        ];
        let out = collapse(&messages);
        assert_pairs_consistent(&out);
        assert_eq!(out.len(), 8);
        assert_eq!(out[3].tool_call_id.as_deref(), Some("a"));
        assert!(out[3].content.contains("interrupted"));
        assert_eq!(out[4].content, "result b");
        assert_eq!(out[7].tool_call_id.as_deref(), Some("c"));
        assert_eq!(units(&out), vec![1..2, 2..5, 5..6, 6..8]);
    }
}
