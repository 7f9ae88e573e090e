//! The Responses API request body. Leading system messages become `instructions`; the rest
//! of the conversation becomes `input` items in order: user and assistant messages, each
//! assistant turn's reasoning items (sent back verbatim, encrypted content included) before
//! its text and `function_call`s, and `function_call_output`s paired to calls by `call_id`.

use std::collections::HashSet;

use amber_proto::{Message, Role};
use serde_json::{Map, Value, json};

use super::REASONING_FORMAT;
use crate::{ChatRequest, LlmSettings, ToolSpec};

/// The streaming request body.
pub(super) fn request_body(req: &ChatRequest, settings: &LlmSettings) -> Value {
    let mut body = Map::new();
    let model = req.model_for(settings);
    if !model.is_empty() {
        body.insert("model".into(), json!(model));
    }
    let (instructions, rest) = split_instructions(&req.messages);
    if !instructions.is_empty() {
        body.insert("instructions".into(), json!(instructions));
    }
    body.insert("input".into(), Value::Array(input_items(rest)));
    if !req.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(req.tools.iter().map(tool).collect()),
        );
        body.insert("tool_choice".into(), json!("auto"));
    }
    body.insert("parallel_tool_calls".into(), json!(true));
    body.insert("stream".into(), json!(true));
    // Stateless: nothing is kept on the provider's side, so every request carries the
    // whole conversation, and reasoning comes back encrypted for the next request.
    body.insert("store".into(), json!(false));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    if reasons(model) {
        // Summaries are opt-in; without them a reasoning model streams no reasoning text.
        body.insert("reasoning".into(), json!({"summary": "auto"}));
    }
    if let Some(key) = req.cache_key.as_deref().filter(|k| !k.is_empty()) {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    if let Some(max) = req.max_tokens_for(settings) {
        body.insert("max_output_tokens".into(), json!(max));
    }
    if let Some(format) = &req.response_format {
        body.insert(
            "text".into(),
            json!({"format": {
                "type": "json_schema",
                "name": format.name,
                "schema": format.schema,
                "strict": format.strict,
            }}),
        );
    }
    Value::Object(body)
}

/// Whether `model` is one of OpenAI's reasoning families, which accept `reasoning`
/// options (other models, `gpt-5-chat` included, refuse the field).
fn reasons(model: &str) -> bool {
    let m = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    ["o1", "o3", "o4", "gpt-5", "codex"]
        .iter()
        .any(|family| m.starts_with(family))
        && !m.contains("-chat")
}

/// The leading system messages, joined, and the messages after them.
fn split_instructions(messages: &[Message]) -> (String, &[Message]) {
    let head = messages
        .iter()
        .position(|m| m.role != Role::System)
        .unwrap_or(messages.len());
    let instructions = messages[..head]
        .iter()
        .map(|m| m.content.as_str())
        .filter(|c| !c.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    (instructions, &messages[head..])
}

/// The conversation as input items.
fn input_items(messages: &[Message]) -> Vec<Value> {
    let mut items = Vec::with_capacity(messages.len());
    // A `function_call_output` whose call is not in the input is refused by the API; such
    // an orphan (history cut between a call and its result) is dropped.
    let mut calls: HashSet<&str> = HashSet::new();
    for m in messages {
        match m.role {
            Role::User => items.push(text_message("user", "input_text", &m.content)),
            // A system message inside the conversation (a reminder after the history)
            // stays where it is, with the authority of a developer message.
            Role::System => items.push(text_message("developer", "input_text", &m.content)),
            Role::Assistant => {
                for r in &m.reasoning_items {
                    if r.format != REASONING_FORMAT {
                        continue;
                    }
                    match serde_json::from_str::<Value>(&r.data) {
                        Ok(item) if item.is_object() => items.push(item),
                        _ => tracing::warn!("dropping an unreadable reasoning item"),
                    }
                }
                if !m.content.is_empty() {
                    items.push(text_message("assistant", "output_text", &m.content));
                }
                for c in &m.tool_calls {
                    calls.insert(c.id.as_str());
                    items.push(json!({
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": c.arguments,
                    }));
                }
            }
            Role::Tool => {
                let call_id = m.tool_call_id.as_deref().unwrap_or_default();
                if !calls.contains(call_id) {
                    tracing::warn!(call_id, "dropping a tool result without its call");
                    continue;
                }
                items.push(json!({
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": m.content,
                }));
            }
        }
    }
    items
}

fn text_message(role: &str, part: &str, text: &str) -> Value {
    json!({
        "type": "message",
        "role": role,
        "content": [{"type": part, "text": text}],
    })
}

fn tool(t: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "name": t.name,
        "description": t.description,
        "parameters": t.parameters,
    })
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
