//! amber events as ACP `session/update` payloads, and ACP prompts as amber prompt text.
//! Pure: fed events and arguments (and, for diffs, the file as it is now), no protocol I/O.

use std::path::{Path, PathBuf};

use amber_proto::{StopReason, Todo, TodoStatus, ToolStatus};
use serde_json::{Value, json};

use super::wire::RpcError;

/// ACP's `ToolKind` of an amber tool.
pub(crate) fn tool_kind(name: &str) -> &'static str {
    match name {
        "read" | "skills" => "read",
        "write" | "edit" | "apply_patch" | "multiedit" => "edit",
        "delete" | "rm" => "delete",
        "move" | "mv" | "rename" => "move",
        "search" | "grep" | "glob" | "list" | "ls" => "search",
        "bash" | "process" => "execute",
        "fetch" | "webfetch" | "web_fetch" | "websearch" | "web_search" => "fetch",
        "task" | "todowrite" | "think" => "think",
        _ => "other",
    }
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// A short human title: the tool and what it acts on.
pub(crate) fn tool_title(name: &str, args: &Value) -> String {
    let subject = match name {
        "bash" => str_arg(args, "command"),
        "search" => str_arg(args, "pattern"),
        "task" => str_arg(args, "description").or_else(|| str_arg(args, "prompt")),
        "fetch" | "webfetch" => str_arg(args, "url"),
        _ => str_arg(args, "path"),
    };
    match subject {
        Some(s) => {
            let first: String = s
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(120)
                .collect();
            format!("{name} {first}")
        }
        None => name.to_owned(),
    }
}

/// A tool's path argument made absolute against the session's workspace.
pub(crate) fn absolute(cwd: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

/// The files a call touches: `path` (with `offset` as the line for `read`).
pub(crate) fn locations(name: &str, args: &Value, cwd: &Path) -> Vec<Value> {
    let Some(path) = str_arg(args, "path") else {
        return Vec::new();
    };
    let mut loc = json!({"path": absolute(cwd, path)});
    if name == "read"
        && let Some(line) = args.get("offset").and_then(Value::as_u64)
    {
        loc["line"] = json!(line);
    }
    vec![loc]
}

/// `tool_call`: a call the model made, as it starts (`pending` while it may still wait
/// for an approval).
pub(crate) fn tool_call(call_id: &str, name: &str, args: &Value, cwd: &Path) -> Value {
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": tool_title(name, args),
        "name": name,
        "kind": tool_kind(name),
        "status": "pending",
        "locations": locations(name, args, cwd),
        "rawInput": args,
    })
}

/// `tool_call_update` to `in_progress` (an approved call runs).
pub(crate) fn tool_running(call_id: &str) -> Value {
    json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"})
}

/// A text content block.
pub(crate) fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// `tool_call_update` at the end of a call: `completed` or `failed`, a `diff` block for a
/// file change, the output as text.
pub(crate) fn tool_done(
    call_id: &str,
    name: &str,
    args: &Value,
    cwd: &Path,
    status: ToolStatus,
    output: &str,
    diff: Option<&str>,
) -> Value {
    let mut content = Vec::new();
    if let Some(diff) = diff {
        content.extend(diff_blocks(diff, name, args, cwd));
    }
    if !output.is_empty() {
        content.push(json!({"type": "content", "content": text_block(output)}));
    }
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": if status == ToolStatus::Ok { "completed" } else { "failed" },
        "content": content,
        "rawOutput": {"status": status, "output": output},
    })
}

/// The path a unified diff's `+++ b/PATH` (or `--- a/PATH`) line names.
fn diff_path(diff: &str) -> Option<&str> {
    fn named<'a>(diff: &'a str, marker: &str) -> Option<&'a str> {
        let p = diff.lines().find_map(|l| l.strip_prefix(marker))?;
        let p = p.split('\t').next().unwrap_or(p).trim();
        (!p.is_empty() && p != "/dev/null").then_some(p)
    }
    let path = named(diff, "+++ ").or_else(|| named(diff, "--- "))?;
    Some(
        path.strip_prefix("b/")
            .or_else(|| path.strip_prefix("a/"))
            .unwrap_or(path),
    )
}

/// One hunk of a unified diff: where it starts in the new file (1-based) and its lines.
struct Hunk<'a> {
    new_start: usize,
    lines: Vec<&'a str>,
}

fn hunks(diff: &str) -> Option<Vec<Hunk<'_>>> {
    let mut out: Vec<Hunk<'_>> = Vec::new();
    for line in diff.lines() {
        if let Some(header) = line.strip_prefix("@@ ") {
            // @@ -a,b +c,d @@
            let plus = header.split_whitespace().find(|w| w.starts_with('+'))?;
            let start = plus.trim_start_matches('+').split(',').next()?;
            out.push(Hunk {
                new_start: start.parse().ok()?,
                lines: Vec::new(),
            });
        } else if let Some(h) = out.last_mut()
            && (line.starts_with(' ') || line.starts_with('-') || line.starts_with('+'))
            && !line.starts_with("+++ ")
            && !line.starts_with("--- ")
        {
            h.lines.push(line);
        }
    }
    Some(out)
}

/// Each hunk's own old and new text: what a diff says without the whole file.
fn hunk_texts(hunks: &[Hunk<'_>]) -> (String, String) {
    let (mut old, mut new) = (String::new(), String::new());
    for h in hunks {
        for l in &h.lines {
            let (mark, text) = l.split_at(1);
            if mark != "+" {
                old.push_str(text);
                old.push('\n');
            }
            if mark != "-" {
                new.push_str(text);
                new.push('\n');
            }
        }
    }
    (old, new)
}

/// The file before the change: the file as it is now with each hunk undone. `None` when
/// the file does not match the diff (changed again since).
pub(crate) fn undo_diff(now: &str, diff: &str) -> Option<String> {
    let hunks = hunks(diff)?;
    let lines: Vec<&str> = now.lines().collect();
    let mut old: Vec<&str> = Vec::new();
    let mut at = 0usize; // index into `lines`
    for h in &hunks {
        let start = h.new_start.saturating_sub(1);
        if start < at || start > lines.len() {
            return None;
        }
        old.extend_from_slice(&lines[at..start]);
        at = start;
        for l in &h.lines {
            let (mark, text) = l.split_at(1);
            match mark {
                "-" => old.push(text),
                _ => {
                    if lines.get(at) != Some(&text) {
                        return None;
                    }
                    if mark == " " {
                        old.push(text);
                    }
                    at += 1;
                }
            }
        }
    }
    old.extend_from_slice(&lines[at..]);
    let mut text = old.join("\n");
    if !old.is_empty() && (now.ends_with('\n') || now.is_empty()) {
        text.push('\n');
    }
    Some(text)
}

/// ACP `diff` content for a file change: the whole file before and after when the file
/// still matches the diff, else the hunks' own text. A created file has no `oldText`.
pub(crate) fn diff_blocks(diff: &str, _name: &str, args: &Value, cwd: &Path) -> Vec<Value> {
    let Some(rel) = diff_path(diff).or_else(|| str_arg(args, "path")) else {
        return Vec::new();
    };
    let path = absolute(cwd, rel);
    let created = diff.lines().any(|l| l.starts_with("--- /dev/null"));
    let Some(hunks) = hunks(diff) else {
        return Vec::new();
    };
    let now = std::fs::read_to_string(&path).ok();
    let (old, new) = match now
        .as_deref()
        .and_then(|now| Some((undo_diff(now, diff)?, now)))
    {
        Some((old, now)) => (old, now.to_owned()),
        None => hunk_texts(&hunks),
    };
    let old = if created { Value::Null } else { json!(old) };
    vec![json!({"type": "diff", "path": path, "oldText": old, "newText": new})]
}

/// How an amber turn's end answers `session/prompt`: ACP's stop reason and, for the ends
/// ACP has no reason for, a last agent message saying why; `Err` for a failed turn.
pub(crate) fn stop_reason(
    stop: StopReason,
    error: Option<&amber_proto::ErrorInfo>,
) -> Result<(&'static str, Option<String>), RpcError> {
    match stop {
        StopReason::EndTurn => Ok(("end_turn", None)),
        StopReason::MaxIterations => Ok(("max_turn_requests", None)),
        // ACP has both: the refusal text was the reply's last message chunk.
        StopReason::Refusal => Ok(("refusal", None)),
        StopReason::MaxTokens => Ok(("max_tokens", None)),
        StopReason::Cancelled => Ok(("cancelled", None)),
        StopReason::LoopDetected => Ok((
            "end_turn",
            Some(
                "\n\n[amber stopped the turn: the model was repeating itself (loop_detected)]"
                    .into(),
            ),
        )),
        StopReason::ToolFailures => Ok((
            "end_turn",
            Some(
                "\n\n[amber stopped the turn: too many failed tool calls in a row (tool_failures)]"
                    .into(),
            ),
        )),
        // ACP has no budget reason; `max_turn_requests` is the nearest: a limit on the
        // requests the agent may make was reached, and the turn ended cleanly, not failed.
        StopReason::BudgetExceeded => Ok((
            "max_turn_requests",
            Some(format!(
                "\n\n[amber stopped the turn: {} (budget_exceeded)]",
                error.map_or("the session's budget is spent", |e| e.message.as_str())
            )),
        )),
        StopReason::Error => Err(RpcError::internal(
            error
                .map(|e| format!("{}: {}", e.code, e.message))
                .unwrap_or_else(|| "the turn failed".into()),
        )),
    }
}

/// `plan` from the session's todo list.
pub(crate) fn plan(todos: &[Todo]) -> Value {
    let entries: Vec<Value> = todos
        .iter()
        .map(|t| {
            let status = match t.status {
                TodoStatus::Pending => "pending",
                TodoStatus::InProgress => "in_progress",
                TodoStatus::Done => "completed",
            };
            json!({"content": t.text, "priority": "medium", "status": status})
        })
        .collect();
    json!({"sessionUpdate": "plan", "entries": entries})
}

/// A message chunk of `kind` (`agent_message_chunk`, `agent_thought_chunk`,
/// `user_message_chunk`).
pub(crate) fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": text_block(text)})
}

/// The prompt text of an ACP prompt: text blocks as they are, resource links as their
/// URI, embedded text resources inlined under their URI. Images and blobs are refused
/// (the agent advertises `image: false`).
pub(crate) fn prompt_text(blocks: &[Value]) -> Result<String, RpcError> {
    let mut parts: Vec<String> = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => parts.push(str_arg(block, "text").unwrap_or_default().to_owned()),
            Some("resource_link") => {
                let uri = str_arg(block, "uri").unwrap_or_default();
                let name = str_arg(block, "name").unwrap_or(uri);
                parts.push(format!("[{name}]({uri})"));
            }
            Some("resource") => {
                let res = block.get("resource").cloned().unwrap_or(Value::Null);
                let uri = str_arg(&res, "uri").unwrap_or_default();
                match str_arg(&res, "text") {
                    Some(text) => {
                        parts.push(format!("<resource uri=\"{uri}\">\n{text}\n</resource>"))
                    }
                    None => parts.push(format!("[binary resource {uri} not included]")),
                }
            }
            other => {
                return Err(RpcError::invalid_params(format!(
                    "unsupported content block type {}",
                    other.unwrap_or("(none)")
                )));
            }
        }
    }
    Ok(parts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str =
        "--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";

    #[test]
    fn undoing_a_diff_gives_back_the_file_before_it() {
        let now = "one\nTWO\nthree\nfour\n";
        assert_eq!(
            undo_diff(now, DIFF).as_deref(),
            Some("one\ntwo\nthree\nfour\n")
        );
        assert_eq!(
            undo_diff("other\n", DIFF),
            None,
            "a file that moved on does not match"
        );
    }

    #[test]
    fn a_diff_block_is_the_whole_file_before_and_after_or_the_hunks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.txt"), "one\nTWO\nthree\n").unwrap();
        let blocks = diff_blocks(DIFF, "edit", &json!({}), dir.path());
        assert_eq!(blocks[0]["path"], json!(dir.path().join("src/a.txt")));
        assert_eq!(blocks[0]["oldText"], "one\ntwo\nthree\n");
        assert_eq!(blocks[0]["newText"], "one\nTWO\nthree\n");
        std::fs::write(dir.path().join("src/a.txt"), "changed since\n").unwrap();
        let blocks = diff_blocks(DIFF, "edit", &json!({}), dir.path());
        assert_eq!(blocks[0]["oldText"], "one\ntwo\nthree\n");
        assert_eq!(blocks[0]["newText"], "one\nTWO\nthree\n");
    }

    #[test]
    fn a_created_file_has_no_old_text() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("n.txt"), "hi\n").unwrap();
        let diff = "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+hi\n";
        let blocks = diff_blocks(diff, "write", &json!({"path": "n.txt"}), dir.path());
        assert_eq!(blocks[0]["oldText"], Value::Null);
        assert_eq!(blocks[0]["newText"], "hi\n");
    }

    #[test]
    fn tools_map_to_acp_kinds() {
        assert_eq!(tool_kind("read"), "read");
        assert_eq!(tool_kind("edit"), "edit");
        assert_eq!(tool_kind("bash"), "execute");
        assert_eq!(tool_kind("search"), "search");
        assert_eq!(tool_kind("todowrite"), "think");
        assert_eq!(tool_kind("mcp__x__y"), "other");
    }

    #[test]
    fn stop_reasons_map_and_errors_fail_the_prompt() {
        assert_eq!(
            stop_reason(StopReason::MaxIterations, None).unwrap().0,
            "max_turn_requests"
        );
        let (reason, note) = stop_reason(StopReason::LoopDetected, None).unwrap();
        assert_eq!(reason, "end_turn");
        assert!(note.unwrap().contains("loop_detected"));
        assert!(stop_reason(StopReason::Error, None).is_err());
        // A spent budget is a clean stop with the reason said, not a failed prompt.
        let spent = amber_proto::ErrorInfo::new(
            "budget_exceeded",
            "budget exceeded: the session has spent $0.5 of its $0.5 budget",
        );
        let (reason, note) = stop_reason(StopReason::BudgetExceeded, Some(&spent)).unwrap();
        assert_eq!(reason, "max_turn_requests");
        assert!(note.unwrap().contains("of its $0.5 budget"));
    }

    #[test]
    fn prompt_blocks_become_text_with_resources_inlined() {
        let text = prompt_text(&[
            json!({"type": "text", "text": "look at"}),
            json!({"type": "resource_link", "uri": "file:///w/a.rs", "name": "a.rs"}),
            json!({"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "fn b() {}"}}),
        ])
        .unwrap();
        assert_eq!(
            text,
            "look at\n[a.rs](file:///w/a.rs)\n<resource uri=\"file:///w/b.rs\">\nfn b() {}\n</resource>"
        );
        assert!(
            prompt_text(&[json!({"type": "image", "data": "", "mimeType": "image/png"})]).is_err()
        );
    }
}
