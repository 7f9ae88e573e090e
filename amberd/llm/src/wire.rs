//! The OpenAI chat-completions request body. Replies are read in `chunk.rs`.

use amber_proto::{Message, Role};
use serde_json::{Map, Value, json};

use super::{ChatRequest, LlmSettings, ResponseFormat, ToolSpec};

/// The streaming request body.
pub(crate) fn request_body(req: &ChatRequest, settings: &LlmSettings) -> Value {
    let mut body = Map::new();
    let model = req.model_for(settings);
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
    if let Some(max) = req.max_tokens_for(settings) {
        let field = settings.quirks.max_tokens_field.as_str();
        body.insert(field.into(), json!(max));
    }
    if let Some(format) = &req.response_format {
        body.insert("response_format".into(), response_format(format));
    }
    Value::Object(body)
}

/// `response_format` of structured output: `{type: "json_schema", json_schema: {name,
/// schema, strict}}`.
pub(crate) fn response_format(format: &ResponseFormat) -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {
            "name": format.name,
            "schema": format.schema,
            "strict": format.strict,
        },
    })
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

#[cfg(test)]
mod tests {
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
            response_format: None,
            cache_key: None,
            max_tokens: None,
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
            response_format: None,
            cache_key: None,
            max_tokens: None,
        };
        let body = request_body(&req, &LlmSettings::default());
        assert!(body.get("tools").is_none());
        assert!(body.get("response_format").is_none());
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["model"], "override");
    }

    #[test]
    fn response_format_is_sent_as_a_json_schema() {
        let schema = json!({"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}});
        let req = ChatRequest {
            model: String::new(),
            messages: vec![Message::user("x")],
            tools: vec![],
            response_format: Some(ResponseFormat {
                name: "output".into(),
                schema: schema.clone(),
                strict: false,
            }),
            cache_key: None,
            max_tokens: None,
        };
        let body = request_body(&req, &LlmSettings::default());
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": false}})
        );
    }
}
