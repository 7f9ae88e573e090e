//! The Messages API request body, mapped from amber's chat-shaped messages:
//!
//! - system messages → the top-level `system` array of text blocks;
//! - an assistant message → its `anthropic` reasoning items (thinking blocks, verbatim with
//!   their signatures) first, then its text, then a `tool_use` block per call (`input` =
//!   the parsed arguments; arguments that are not a JSON object are sent as `{}`: the API
//!   accepts nothing else, and the tool result already told the model what was wrong);
//! - tool results → `tool_result` blocks of a user message (`is_error` for an `error` or
//!   `denied` envelope);
//! - roles alternate strictly: adjacent messages of one role are merged into one message
//!   (consecutive tool results, and the tail reminder after them, become one user message),
//!   and a conversation that does not start with the user gets a minimal user message first.
//!
//! Prompt caching: `cache_control: {type: "ephemeral"}` on the last tool, the last system
//! block and the newest message's last block — plus its block before that, which is what the
//! next request still has unchanged (the daemon's per-request reminder is that message's
//! last block and is gone next time), so the next request reads the cache from there. At
//! most four breakpoints, the API's limit.

use amber_proto::{Message, Role};
use serde_json::{Map, Value, json};

use super::REASONING_FORMAT;
use crate::{ChatRequest, LlmSettings, ToolSpec};

/// `max_tokens` when the settings give none, by model family (the API requires the field).
/// Each is at most that family's output limit; first match wins, so "3-5-" is tried before
/// the older "claude-3-".
const MAX_TOKENS_BY_MODEL: &[(&str, u32)] = &[
    ("opus-4", 32_000),
    ("sonnet-4", 32_000),
    ("haiku-4", 32_000),
    ("3-7-sonnet", 32_000),
    ("3-5-", 8_192),
    ("claude-3-", 4_096),
];

/// `max_tokens` for a model no entry names: every current model takes at least this.
const DEFAULT_MAX_TOKENS: u32 = 8_192;

/// The user message put first when the conversation does not start with one.
const OPENING_TEXT: &str = "(continued)";

/// The API's limit on `cache_control` breakpoints per request.
pub(super) const MAX_BREAKPOINTS: usize = 4;

/// The preset's per-model default for `max_tokens`.
pub(crate) fn default_max_tokens(model: &str) -> u32 {
    let model = model.to_ascii_lowercase();
    MAX_TOKENS_BY_MODEL
        .iter()
        .find(|(family, _)| model.contains(family))
        .map_or(DEFAULT_MAX_TOKENS, |(_, max)| *max)
}

/// The streaming request body.
pub(super) fn request_body(req: &ChatRequest, settings: &LlmSettings) -> Value {
    let model = req.model_for(settings);
    let mut system: Vec<Value> = req
        .messages
        .iter()
        .filter(|m| m.role == Role::System && !m.content.trim().is_empty())
        .map(|m| text_block(&m.content))
        .collect();
    let mut messages = conversation(&req.messages);
    let mut tools: Vec<Value> = req.tools.iter().map(tool).collect();
    place_breakpoints(&mut tools, &mut system, &mut messages);

    let mut body = Map::new();
    if !model.is_empty() {
        body.insert("model".into(), json!(model));
    }
    let max_tokens = req
        .max_tokens_for(settings)
        .unwrap_or_else(|| default_max_tokens(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    let messages = messages
        .into_iter()
        .map(|t| json!({"role": t.role, "content": t.content}))
        .collect();
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    Value::Object(body)
}

/// One message of the request: a role and its content blocks.
#[derive(Debug)]
pub(super) struct Turn {
    role: &'static str,
    content: Vec<Value>,
}

/// The non-system messages as strictly alternating turns, the first a user turn.
fn conversation(messages: &[Message]) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    for m in messages {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User => ("user", text_blocks(&m.content)),
            Role::Assistant => ("assistant", assistant_blocks(m)),
            Role::Tool => ("user", vec![tool_result(m)]),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => turns.push(Turn {
                role,
                content: blocks,
            }),
        }
    }
    if turns.first().is_none_or(|t| t.role != "user") {
        turns.insert(
            0,
            Turn {
                role: "user",
                content: vec![text_block(OPENING_TEXT)],
            },
        );
    }
    turns
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// A text block, or none for blank text (the API rejects empty text blocks).
fn text_blocks(text: &str) -> Vec<Value> {
    if text.trim().is_empty() {
        Vec::new()
    } else {
        vec![text_block(text)]
    }
}

/// Thinking blocks first (the API wants them before the text and tool use they led to),
/// then the text, then the calls. Reasoning items of other dialects are left out.
fn assistant_blocks(m: &Message) -> Vec<Value> {
    let thinking = m
        .reasoning_items
        .iter()
        .filter(|item| item.format == REASONING_FORMAT)
        .filter_map(|item| serde_json::from_str::<Value>(&item.data).ok())
        .filter(Value::is_object);
    let calls = m.tool_calls.iter().map(|call| {
        let input = serde_json::from_str::<Value>(&call.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
    });
    thinking
        .chain(text_blocks(&m.content))
        .chain(calls)
        .collect()
}

fn tool_result(m: &Message) -> Value {
    let mut block = Map::new();
    block.insert("type".into(), json!("tool_result"));
    block.insert(
        "tool_use_id".into(),
        json!(m.tool_call_id.as_deref().unwrap_or_default()),
    );
    if !m.content.is_empty() {
        block.insert("content".into(), json!(m.content));
    }
    if is_failure_envelope(&m.content) {
        block.insert("is_error".into(), json!(true));
    }
    Value::Object(block)
}

/// Whether a tool message is amberd's `{"status": "error" | "denied", "output": …}` envelope.
/// Only the first JSON value is read, so text after the envelope does not hide it.
fn is_failure_envelope(content: &str) -> bool {
    let Some(Ok(Value::Object(envelope))) = serde_json::Deserializer::from_str(content)
        .into_iter::<Value>()
        .next()
    else {
        return false;
    };
    matches!(
        envelope.get("status").and_then(Value::as_str),
        Some("error" | "denied")
    )
}

fn tool(t: &ToolSpec) -> Value {
    json!({"name": t.name, "description": t.description, "input_schema": t.parameters})
}

/// Marks the cache breakpoints (see the module comment); at most [`MAX_BREAKPOINTS`].
fn place_breakpoints(tools: &mut [Value], system: &mut [Value], messages: &mut [Turn]) {
    let mut budget = MAX_BREAKPOINTS;
    let mut mark = |block: Option<&mut Value>| {
        // Thinking blocks cannot carry `cache_control`.
        let Some(Value::Object(block)) = block else {
            return;
        };
        let kind = block.get("type").and_then(Value::as_str);
        if budget == 0 || matches!(kind, Some("thinking" | "redacted_thinking")) {
            return;
        }
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
        budget -= 1;
    };
    mark(tools.last_mut());
    mark(system.last_mut());
    if let Some(newest) = messages.last_mut() {
        let n = newest.content.len();
        if n >= 2 {
            mark(newest.content.get_mut(n - 2));
        }
        mark(newest.content.last_mut());
    }
}
