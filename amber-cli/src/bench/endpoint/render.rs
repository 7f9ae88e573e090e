//! What the scripted endpoint answers, decided and rendered ahead of time: which scenario
//! turn a chat-completions request asks for ([`choose`], stateless, so any number of
//! concurrent sessions can share one endpoint) and that turn's answer as SSE frames and as a
//! `chat.completion` object ([`Rendered`]). Pure: JSON in, bytes out.

use std::sync::Arc;

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::scenario::Turn;

/// The confirm prompt of amberd's silent confirm turn starts with this
/// (amberd/src/agent/prompt.rs); it is answered `DONE`.
pub const CONFIRM_PREFIX: &str = "Are you finished with the task?";
/// Tool-call arguments are streamed in pieces of this many chars, as providers do.
const ARGUMENT_PIECE: usize = 16;
const ID: &str = "chatcmpl-amber-bench";
const MODEL: &str = "amber-bench";
const CREATED: u64 = 1_700_000_000;

/// One SSE frame; `content` marks the frames carrying reply text.
#[derive(Debug, Clone)]
pub struct Frame {
    pub bytes: Bytes,
    pub content: bool,
}

/// One answer, pre-rendered in both shapes.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub delay_ms: Option<u64>,
    /// Pause before each content frame but the first.
    pub interval_ms: Option<u64>,
    pub frames: Arc<[Frame]>,
    pub json: Bytes,
}

/// Which answer a request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Turn `step` of scenario `scenario` (index into the prompts given to [`choose`]).
    Turn { scenario: usize, step: usize },
    /// The scenario's turns are used up: a closing text.
    Finished { scenario: usize },
    /// amberd's confirm prompt: `DONE`.
    Confirm,
    /// No scenario's prompt is in the conversation.
    Unknown,
}

/// The text of a message's `content`: a string, or the text parts of an array.
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Picks the answer from the conversation alone: the last user message that contains a
/// scenario's prompt names the scenario, and the assistant messages after it count the turns
/// already answered.
pub fn choose(body: &Value, turns_of: &[(&str, usize)]) -> Choice {
    let Some(messages) = body["messages"].as_array() else {
        return Choice::Unknown;
    };
    if let Some(last) = messages.last()
        && last["role"] == "user"
        && text_of(last).starts_with(CONFIRM_PREFIX)
    {
        return Choice::Confirm;
    }
    for (at, message) in messages.iter().enumerate().rev() {
        if message["role"] != "user" {
            continue;
        }
        let text = text_of(message);
        let Some(scenario) = turns_of.iter().position(|(p, _)| text.contains(p)) else {
            continue;
        };
        let step = messages[at + 1..]
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        return if step < turns_of[scenario].1 {
            Choice::Turn { scenario, step }
        } else {
            Choice::Finished { scenario }
        };
    }
    Choice::Unknown
}

fn frame(value: &Value, content: bool) -> Frame {
    Frame {
        bytes: Bytes::from(format!("data: {value}\n\n")),
        content,
    }
}

fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": ID, "object": "chat.completion.chunk", "created": CREATED, "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
}

/// Renders scenario turn `step` (call ids `call_<step>_<i>`, unique within a conversation).
pub fn render(turn: &Turn, step: usize) -> Rendered {
    let calls: Vec<(String, &str, &str)> = turn
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            (
                format!("call_{step}_{i}"),
                c.name.as_str(),
                c.arguments.as_str(),
            )
        })
        .collect();
    let has_calls = !calls.is_empty();
    let mut frames = Vec::with_capacity(turn.content.len() + 4 * calls.len() + 4);
    let role_content = if turn.content.is_empty() {
        Value::Null
    } else {
        json!("")
    };
    frames.push(frame(
        &chunk(json!({"role": "assistant", "content": role_content}), None),
        false,
    ));
    let mut chars = 0;
    for piece in &turn.content {
        chars += piece.chars().count();
        frames.push(frame(&chunk(json!({"content": piece}), None), true));
    }
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        chars += name.len() + arguments.len();
        let head = json!({"tool_calls": [{"index": index, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""}}]});
        frames.push(frame(&chunk(head, None), false));
        for piece in crate::scenario::pieces(arguments, ARGUMENT_PIECE) {
            let delta = json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]});
            frames.push(frame(&chunk(delta, None), false));
        }
    }
    let finish = if has_calls { "tool_calls" } else { "stop" };
    frames.push(frame(&chunk(json!({}), Some(finish)), false));
    let usage = usage(chars);
    frames.push(frame(
        &json!({"id": ID, "object": "chat.completion.chunk", "created": CREATED, "model": MODEL,
            "choices": [], "usage": usage}),
        false,
    ));
    frames.push(Frame {
        bytes: Bytes::from_static(b"data: [DONE]\n\n"),
        content: false,
    });

    let text = turn.content.concat();
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && has_calls { Value::Null } else { json!(text) },
    });
    if has_calls {
        message["tool_calls"] = calls
            .iter()
            .map(|(id, name, arguments)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
            })
            .collect();
    }
    let object = json!({
        "id": ID, "object": "chat.completion", "created": CREATED, "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    });
    Rendered {
        delay_ms: turn.delay_ms,
        interval_ms: turn.chunk_interval_ms,
        frames: frames.into(),
        json: Bytes::from(object.to_string()),
    }
}

/// A plain text answer (the confirm `DONE`, closing and unknown-conversation replies).
pub fn render_text(text: &str) -> Rendered {
    let turn = Turn {
        delay_ms: None,
        chunk_interval_ms: None,
        content: crate::scenario::pieces(text, 8),
        tool_calls: Vec::new(),
    };
    render(&turn, 0)
}

/// Small, fixed token counts: large ones would make amberd's compaction gate think the
/// context is full.
fn usage(completion_chars: usize) -> Value {
    let completion = completion_chars.div_ceil(4).max(1);
    json!({"prompt_tokens": 100, "completion_tokens": completion,
        "total_tokens": 100 + completion, "prompt_tokens_details": {"cached_tokens": 0}})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::scenario::ToolCall;

    fn conversation(messages: Value) -> Value {
        json!({"model": "m", "stream": true, "messages": messages})
    }

    #[test]
    fn choose_counts_assistant_turns_after_the_prompt() {
        let scenarios = [("first task", 2), ("second task", 1)];
        let start = conversation(json!([
            {"role": "system", "content": "you are amber"},
            {"role": "user", "content": "first task"},
        ]));
        assert_eq!(
            choose(&start, &scenarios),
            Choice::Turn {
                scenario: 0,
                step: 0
            }
        );
        let after_tool = conversation(json!([
            {"role": "user", "content": [{"type": "text", "text": "please: second task"}]},
            {"role": "assistant", "content": null, "tool_calls": []},
            {"role": "tool", "content": "hello"},
        ]));
        assert_eq!(
            choose(&after_tool, &scenarios),
            Choice::Finished { scenario: 1 }
        );
        let confirm = conversation(json!([
            {"role": "user", "content": "first task"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": format!("{CONFIRM_PREFIX} If it is complete…")},
        ]));
        assert_eq!(choose(&confirm, &scenarios), Choice::Confirm);
        assert_eq!(
            choose(
                &conversation(json!([{"role": "user", "content": "hi"}])),
                &scenarios
            ),
            Choice::Unknown
        );
        assert_eq!(choose(&json!({}), &scenarios), Choice::Unknown);
    }

    #[test]
    fn frames_carry_text_and_calls() {
        let turn = Turn {
            delay_ms: Some(3),
            chunk_interval_ms: None,
            content: vec!["ab".into(), "c".into()],
            tool_calls: vec![ToolCall {
                name: "bash".into(),
                arguments: r#"{"command":"echo hello there"}"#.into(),
            }],
        };
        let r = render(&turn, 1);
        assert_eq!(r.delay_ms, Some(3));
        assert_eq!(r.frames.iter().filter(|f| f.content).count(), 2);
        let body: String = r
            .frames
            .iter()
            .map(|f| String::from_utf8_lossy(&f.bytes).into_owned())
            .collect();
        assert!(body.contains(r#""id":"call_1_0""#), "{body}");
        assert!(body.contains(r#""finish_reason":"tool_calls""#));
        assert!(body.ends_with("data: [DONE]\n\n"));
        let object: Value = serde_json::from_slice(&r.json).unwrap();
        assert_eq!(object["choices"][0]["message"]["content"], "abc");
        assert_eq!(
            object["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            r#"{"command":"echo hello there"}"#
        );
        let done = render_text("DONE");
        assert_eq!(done.frames.iter().filter(|f| f.content).count(), 1);
    }
}
