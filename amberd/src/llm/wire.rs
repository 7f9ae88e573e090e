//! The OpenAI chat-completions wire format: request body out, chunk / response JSON in.
//! Parsing goes through `serde_json::Value` so unknown fields, nulls and provider variants
//! (`reasoning` vs `reasoning_content`, `message` vs `delta`, object arguments) pass.

use amber_proto::{Message, Role, Usage};
use serde_json::{Map, Value, json};

use super::accumulate::ToolCallDelta;
use super::decode::{ChunkDelta, Decoded};
use super::error::{ApiError, error_message_from_value};
use super::presets::KNOWN_REASONING_FIELDS;
use super::{ChatRequest, LlmSettings, ToolSpec};

/// The streaming request body.
pub(crate) fn request_body(req: &ChatRequest, settings: &LlmSettings) -> Value {
    let mut body = Map::new();
    let model = if req.model.is_empty() {
        &settings.model
    } else {
        &req.model
    };
    if !model.is_empty() {
        body.insert("model".into(), json!(model));
    }
    body.insert(
        "messages".into(),
        Value::Array(req.messages.iter().map(message).collect()),
    );
    body.insert("stream".into(), json!(true));
    // Some providers reject fields they do not know; those report usage unasked anyway.
    if settings.quirks.include_usage {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    if !req.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(req.tools.iter().map(tool).collect()),
        );
    }
    if let Some(max) = settings.max_tokens {
        let field = settings.quirks.max_tokens_field.as_str();
        body.insert(field.into(), json!(max));
    }
    Value::Object(body)
}

fn role(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

fn message(m: &Message) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), json!(role(m.role)));
    if m.role == Role::Assistant && !m.tool_calls.is_empty() {
        let content = if m.content.is_empty() {
            Value::Null
        } else {
            json!(m.content)
        };
        out.insert("content".into(), content);
        let calls = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": { "name": c.name, "arguments": c.arguments },
                })
            })
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    } else {
        out.insert("content".into(), json!(m.content));
    }
    if m.role == Role::Tool {
        out.insert(
            "tool_call_id".into(),
            json!(m.tool_call_id.as_deref().unwrap_or_default()),
        );
    }
    Value::Object(out)
}

fn tool(t: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
        },
    })
}

/// One SSE event's `data` → internal shape.
pub(crate) fn parse_chunk(event: &str, data: &str) -> Result<Decoded, ApiError> {
    let data = data.trim();
    if data == "[DONE]" {
        return Ok(Decoded::Done);
    }
    if event == "error" {
        let message = serde_json::from_str::<Value>(data)
            .ok()
            .and_then(|v| error_message_from_value(&v))
            .unwrap_or_else(|| data.to_owned());
        return Err(ApiError::from_stream_error(message, data));
    }
    if !data.starts_with('{') {
        // `data: : keepalive`, `data: ping` and friends.
        tracing::trace!(data, "ignoring non-JSON SSE data");
        return Ok(Decoded::Skip);
    }
    let value: Value = serde_json::from_str(data)
        .map_err(|e| ApiError::Decode(format!("{e} in chunk {}", clip(data))))?;
    if value.get("error").is_some_and(|e| !e.is_null()) {
        let message = error_message_from_value(&value).unwrap_or_else(|| data.to_owned());
        return Err(ApiError::from_stream_error(message, data));
    }
    Ok(Decoded::Chunk(chunk_delta(&value)))
}

/// A whole non-streamed completion (`stream: false`, or a server that ignored `stream`).
pub(crate) fn parse_response(body: &str) -> Result<ChunkDelta, ApiError> {
    let value: Value = serde_json::from_str(body.trim())
        .map_err(|e| ApiError::Decode(format!("{e} in response {}", clip(body))))?;
    if value.get("error").is_some_and(|e| !e.is_null()) {
        let message = error_message_from_value(&value).unwrap_or_else(|| clip(body));
        return Err(ApiError::from_stream_error(message, body));
    }
    Ok(chunk_delta(&value))
}

fn chunk_delta(value: &Value) -> ChunkDelta {
    let mut out = ChunkDelta {
        usage: chunk_usage(value),
        ..ChunkDelta::default()
    };
    let Some(choice) = first_choice(value) else {
        return out;
    };
    out.finish_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) else {
        return out;
    };
    let (text, thinking) = delta.get("content").map(content_text).unwrap_or_default();
    out.text = text;
    // First non-empty field only: OpenRouter sends the same text as `reasoning` and in
    // `reasoning_details`.
    out.reasoning = KNOWN_REASONING_FIELDS
        .iter()
        .find_map(|k| delta.get(*k).and_then(reasoning_text))
        .or(thinking);
    if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
        out.tool_calls = calls.iter().map(tool_call_delta).collect();
    } else if let Some(f) = delta.get("function_call").filter(|f| f.is_object()) {
        out.tool_calls = vec![function_delta(None, None, f)];
    }
    out
}

/// Choice 0 (or the only / first one); other choices are ignored (we never ask for n > 1).
fn first_choice(value: &Value) -> Option<&Value> {
    let choices = value.get("choices")?.as_array()?;
    choices
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        .or_else(|| choices.first())
}

/// `content` as a string, or an array of parts → (text, reasoning). Parts of type
/// `thinking` (Mistral's Magistral) are reasoning; every other part's `text` is text.
fn content_text(v: &Value) -> (Option<String>, Option<String>) {
    let non_empty = |s: String| (!s.is_empty()).then_some(s);
    match v {
        Value::String(s) => (non_empty(s.clone()), None),
        Value::Array(parts) => {
            let (mut text, mut thinking) = (String::new(), String::new());
            for p in parts {
                if p.get("type").and_then(Value::as_str) == Some("thinking") {
                    if let Some(t) = p.get("thinking").and_then(reasoning_text) {
                        thinking.push_str(&t);
                    }
                } else if let Some(t) = p.get("text").and_then(Value::as_str).or_else(|| p.as_str())
                {
                    text.push_str(t);
                }
            }
            (non_empty(text), non_empty(thinking))
        }
        _ => (None, None),
    }
}

/// Reasoning as a string, an object (`{text}`, `{content}`, `{summary}`) or an array of
/// those (OpenRouter's `reasoning_details`; encrypted entries carry no text).
fn reasoning_text(v: &Value) -> Option<String> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => ["text", "content", "summary"]
            .iter()
            .find_map(|k| o.get(*k).and_then(reasoning_text))
            .unwrap_or_default(),
        Value::Array(items) => items.iter().filter_map(reasoning_text).collect(),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

fn tool_call_delta(v: &Value) -> ToolCallDelta {
    let index = v
        .get("index")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok());
    let id = v.get("id").and_then(Value::as_str).map(str::to_owned);
    match v.get("function") {
        Some(f) => function_delta(index, id, f),
        None => ToolCallDelta {
            index,
            id,
            ..ToolCallDelta::default()
        },
    }
}

fn function_delta(index: Option<usize>, id: Option<String>, f: &Value) -> ToolCallDelta {
    let arguments = match f.get("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    ToolCallDelta {
        index,
        id,
        name: f.get("name").and_then(Value::as_str).map(str::to_owned),
        arguments,
    }
}

fn count(v: &Value, keys: &[&str]) -> Option<u64> {
    keys.iter().find_map(|k| {
        let n = v.get(*k)?;
        // Rounding a token count reported as a float is intended.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        n.as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
    })
}

/// Usage where providers put it: top-level `usage` (a `null` there is skipped), Groq's
/// `x_groq.usage`; llama.cpp's `timings.cache_n` supplies cached tokens it reports nowhere
/// else.
fn chunk_usage(value: &Value) -> Option<Usage> {
    let mut u = value
        .get("usage")
        .and_then(usage)
        .or_else(|| value.get("x_groq")?.get("usage").and_then(usage))?;
    if u.cached_tokens == 0
        && let Some(cached) = value.get("timings").and_then(|t| count(t, &["cache_n"]))
    {
        u.cached_tokens = cached;
    }
    Some(u)
}

fn usage(v: &Value) -> Option<Usage> {
    if !v.is_object() {
        return None;
    }
    let prompt_tokens = count(v, &["prompt_tokens", "input_tokens"]).unwrap_or(0);
    let completion_tokens = count(v, &["completion_tokens", "output_tokens"]).unwrap_or(0);
    let cached_tokens = ["prompt_tokens_details", "input_tokens_details"]
        .iter()
        .find_map(|k| v.get(*k).and_then(|d| count(d, &["cached_tokens"])))
        .or_else(|| count(v, &["prompt_cache_hit_tokens", "cached_tokens"]))
        .unwrap_or(0);
    let total_tokens = count(v, &["total_tokens"]).unwrap_or(prompt_tokens + completion_tokens);
    Some(Usage {
        prompt_tokens,
        completion_tokens,
        cached_tokens,
        total_tokens,
    })
}

fn clip(s: &str) -> String {
    const MAX: usize = 200;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use amber_proto::ToolCall;

    #[test]
    fn body_shape() {
        let req = ChatRequest {
            model: String::new(),
            messages: vec![
                Message::system("sys"),
                Message::user("hi"),
                Message::assistant(
                    "",
                    vec![ToolCall {
                        id: "call_1".into(),
                        name: "read".into(),
                        arguments: r#"{"path":"a"}"#.into(),
                    }],
                ),
                Message::tool("call_1", "ok"),
                Message::assistant("done", vec![]),
            ],
            tools: vec![ToolSpec {
                name: "read".into(),
                description: "Read a file".into(),
                parameters: json!({"type": "object"}),
            }],
        };
        let settings = LlmSettings {
            model: "m1".into(),
            max_tokens: Some(100),
            ..LlmSettings::default()
        };
        let body = request_body(&req, &settings);
        assert_eq!(
            body,
            json!({
                "model": "m1",
                "messages": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}
                    ]},
                    {"role": "tool", "content": "ok", "tool_call_id": "call_1"},
                    {"role": "assistant", "content": "done"},
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
                "tools": [{"type": "function", "function": {
                    "name": "read", "description": "Read a file", "parameters": {"type": "object"}}}],
                "max_tokens": 100,
            })
        );
    }

    #[test]
    fn body_omits_empty_tools_and_prefers_request_model() {
        let req = ChatRequest {
            model: "override".into(),
            messages: vec![Message::user("x")],
            tools: vec![],
        };
        let body = request_body(&req, &LlmSettings::default());
        assert!(body.get("tools").is_none());
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["model"], "override");
    }

    #[test]
    fn usage_variants() {
        let u = usage(&json!({"prompt_tokens": 10, "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 4}}))
        .unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.completion_tokens,
                u.cached_tokens,
                u.total_tokens
            ),
            (10, 5, 4, 15)
        );
        let u = usage(
            &json!({"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 9,
            "prompt_cache_hit_tokens": 2}),
        )
        .unwrap();
        assert_eq!((u.cached_tokens, u.total_tokens), (2, 9));
        assert!(usage(&Value::Null).is_none());
    }

    #[test]
    fn content_parts_and_object_arguments() {
        let d = match parse_chunk("message", r#"{"choices":[{"delta":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],
            "tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":{"k":1}}}]}}]}"#)
        .unwrap()
        {
            Decoded::Chunk(d) => d,
            other => panic!("{other:?}"),
        };
        assert_eq!(d.text.as_deref(), Some("ab"));
        assert_eq!(d.tool_calls[0].arguments.as_deref(), Some(r#"{"k":1}"#));
    }

    #[test]
    fn event_error_and_non_json_data() {
        assert!(matches!(
            parse_chunk("message", ": keepalive"),
            Ok(Decoded::Skip)
        ));
        assert!(matches!(
            parse_chunk("message", " [DONE] "),
            Ok(Decoded::Done)
        ));
        let e = parse_chunk("error", r#"{"message":"overloaded"}"#).unwrap_err();
        assert_eq!(e.code(), "stream_error");
        assert!(e.to_string().contains("overloaded"));
        let e = parse_chunk("message", r#"{"choices": [ {"#).unwrap_err();
        assert_eq!(e.code(), "decode");
    }
}
