//! The same scenario turns over OpenAI's Responses API (`POST /v1/responses`, streamed), for
//! `--compare` against agent CLIs that speak only it (codex 0.17x refuses `wire_api = "chat"`).
//! Only what such a client needs to run a task: `response.created`, text deltas, every output
//! item in `response.output_item.done`, and `response.completed` with usage. Pure.

use axum::body::Bytes;
use serde_json::{Value, json};

use super::render::{Choice, Frame, Rendered};
use crate::scenario::Turn;

const RESPONSE_ID: &str = "resp_amber_bench";

/// The text of an input item's `content`: a string, or its text parts.
fn text_of(item: &Value) -> String {
    match &item["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Whether an input item was produced by the model (a reply, a call, reasoning).
fn from_model(item: &Value) -> bool {
    matches!(
        item["type"].as_str(),
        Some("function_call" | "reasoning" | "custom_tool_call" | "local_shell_call")
    ) || item["role"] == "assistant"
}

/// Like the chat-completions choice: the last user item holding a scenario's prompt names the
/// scenario; the model's answers since then (runs of consecutive model items) count the turns.
pub fn choose(body: &Value, turns_of: &[(&str, usize)]) -> Choice {
    let Some(items) = body["input"].as_array() else {
        return Choice::Unknown;
    };
    for (at, item) in items.iter().enumerate().rev() {
        if item["role"] != "user" {
            continue;
        }
        let text = text_of(item);
        let Some(scenario) = turns_of.iter().position(|(p, _)| text.contains(p)) else {
            continue;
        };
        let mut step = 0;
        let mut in_answer = false;
        for later in &items[at + 1..] {
            let model = from_model(later);
            if model && !in_answer {
                step += 1;
            }
            in_answer = model;
        }
        return if step < turns_of[scenario].1 {
            Choice::Turn { scenario, step }
        } else {
            Choice::Finished { scenario }
        };
    }
    Choice::Unknown
}

fn frame(value: &Value, content: bool) -> Frame {
    let kind = value["type"].as_str().unwrap_or("message");
    Frame {
        bytes: Bytes::from(format!("event: {kind}\ndata: {value}\n\n")),
        content,
    }
}

/// Scenario turn `step` as a streamed response.
pub fn render(turn: &Turn, step: usize) -> Rendered {
    let mut frames = vec![frame(
        &json!({"type": "response.created", "response": {"id": RESPONSE_ID, "status": "in_progress"}}),
        false,
    )];
    let mut index = 0;
    let mut chars = 0;
    if !turn.content.is_empty() {
        let id = format!("msg_{step}");
        frames.push(frame(
            &json!({"type": "response.output_item.added", "output_index": index,
                "item": {"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []}}),
            false,
        ));
        for piece in &turn.content {
            chars += piece.chars().count();
            frames.push(frame(
                &json!({"type": "response.output_text.delta", "item_id": id, "output_index": index,
                    "content_index": 0, "delta": piece}),
                true,
            ));
        }
        frames.push(frame(
            &json!({"type": "response.output_item.done", "output_index": index,
                "item": {"type": "message", "id": id, "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": turn.content.concat(), "annotations": []}]}}),
            false,
        ));
        index += 1;
    }
    for (i, call) in turn.tool_calls.iter().enumerate() {
        chars += call.name.len() + call.arguments.len();
        let item = json!({"type": "function_call", "id": format!("fc_{step}_{i}"),
            "call_id": format!("call_{step}_{i}"), "name": call.name,
            "arguments": call.arguments, "status": "completed"});
        frames.push(frame(
            &json!({"type": "response.output_item.added", "output_index": index, "item": item}),
            false,
        ));
        frames.push(frame(
            &json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            false,
        ));
        index += 1;
    }
    let output = chars.div_ceil(4).max(1);
    frames.push(frame(
        &json!({"type": "response.completed", "response": {"id": RESPONSE_ID, "status": "completed",
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 100 + output}}}),
        false,
    ));
    Rendered {
        delay_ms: turn.delay_ms,
        interval_ms: turn.chunk_interval_ms,
        frames: frames.into(),
        json: Bytes::from_static(b"{\"error\":{\"message\":\"amber-bench: only stream: true\"}}"),
    }
}

/// A plain text answer.
pub fn render_text(text: &str) -> Rendered {
    let turn = Turn {
        delay_ms: None,
        chunk_interval_ms: None,
        content: crate::scenario::pieces(text, 8),
        tool_calls: Vec::new(),
    };
    render(&turn, 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::scenario::ToolCall;

    #[test]
    fn turns_are_counted_from_input_items() {
        let scenarios = [("the task", 2)];
        let start = json!({"input": [
            {"type": "message", "role": "developer", "content": "rules"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<env/> the task"}]},
        ]});
        assert_eq!(
            choose(&start, &scenarios),
            Choice::Turn {
                scenario: 0,
                step: 0
            }
        );
        let after_calls = json!({"input": [
            {"role": "user", "content": "the task"},
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "a", "name": "bash", "arguments": "{}"},
            {"type": "function_call", "call_id": "b", "name": "bash", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "x"},
            {"type": "function_call_output", "call_id": "b", "output": "y"},
        ]});
        assert_eq!(
            choose(&after_calls, &scenarios),
            Choice::Turn {
                scenario: 0,
                step: 1
            }
        );
        assert_eq!(choose(&json!({"input": "hi"}), &scenarios), Choice::Unknown);
    }

    #[test]
    fn a_turn_streams_text_and_items() {
        let turn = Turn {
            delay_ms: None,
            chunk_interval_ms: None,
            content: vec!["he".into(), "llo".into()],
            tool_calls: vec![ToolCall {
                name: "bash".into(),
                arguments: r#"{"command":"ls"}"#.into(),
            }],
        };
        let r = render(&turn, 1);
        assert_eq!(r.frames.iter().filter(|f| f.content).count(), 2);
        let body: String = r
            .frames
            .iter()
            .map(|f| String::from_utf8_lossy(&f.bytes).into_owned())
            .collect();
        assert!(body.starts_with("event: response.created\n"), "{body}");
        assert!(body.contains(r#""text":"hello""#), "{body}");
        assert!(body.contains(r#""call_id":"call_1_0""#), "{body}");
        assert!(body.trim_end().ends_with("}") && body.contains("event: response.completed"));
    }
}
