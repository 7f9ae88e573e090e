//! The request mapping: system blocks, strict alternation with merged tool results,
//! `is_error` from the envelope, thinking sent back first with its signature, other
//! dialects' reasoning dropped, the cache breakpoints (never more than four), `max_tokens`.

use amber_proto::{Message, ReasoningItem, ToolCall};
use serde_json::{Value, json};

use super::request::{MAX_BREAKPOINTS, default_max_tokens, request_body};
use crate::{ChatRequest, LlmSettings, ToolSpec};

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

fn request(messages: Vec<Message>, tools: Vec<ToolSpec>) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        messages,
        tools,
        response_format: None,
        cache_key: Some("session-1".into()),
        max_tokens: None,
    }
}

fn read_tool() -> ToolSpec {
    ToolSpec {
        name: "read".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }
}

fn settings() -> LlmSettings {
    LlmSettings {
        flavor: "anthropic".into(),
        model: "claude-sonnet-4-5".into(),
        ..LlmSettings::default()
    }
}

const THINKING: &str = r#"{"type":"thinking","thinking":"Check the file first.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}"#;

fn thinking_item() -> ReasoningItem {
    ReasoningItem {
        format: "anthropic".into(),
        data: THINKING.into(),
    }
}

/// Every `cache_control` in the body, as (where, block type).
fn breakpoints(body: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut look = |place: &str, blocks: &Value| {
        for (i, b) in blocks.as_array().into_iter().flatten().enumerate() {
            if b.get("cache_control").is_some() {
                assert_eq!(b["cache_control"], json!({"type": "ephemeral"}));
                found.push(format!("{place}[{i}]"));
            }
        }
    };
    look("tools", &body["tools"]);
    look("system", &body["system"]);
    for (m, message) in body["messages"].as_array().unwrap().iter().enumerate() {
        look(&format!("messages[{m}]"), &message["content"]);
    }
    found
}

#[test]
fn a_tool_turn_maps_to_alternating_blocks() {
    let messages = vec![
        Message::system("You are amber."),
        Message::user("read a.rs and b.rs"),
        Message::assistant(
            "Reading both.",
            vec![
                call("toolu_1", "read", r#"{"path":"a.rs"}"#),
                call("toolu_2", "read", r#"{"path":"b.rs"}"#),
            ],
        )
        .with_reasoning_items(vec![
            ReasoningItem {
                format: "openai-responses".into(),
                data: r#"{"type":"reasoning","encrypted_content":"gAAA"}"#.into(),
            },
            thinking_item(),
        ]),
        Message::tool("toolu_1", r#"{"status":"ok","output":"fn a() {}"}"#),
        Message::tool("toolu_2", r#"{"status":"error","output":"no such file"}"#),
        Message::user("<system-reminder>\nwrite mode\n</system-reminder>"),
    ];
    let body = request_body(&request(messages, vec![read_tool()]), &settings());
    assert_eq!(
        body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 32000,
            "system": [{"type": "text", "text": "You are amber.",
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "read a.rs and b.rs"}]},
                {"role": "assistant", "content": [
                    // The thinking block first, byte for byte with its signature; the
                    // Responses item is not Anthropic's and is left out.
                    {"type": "thinking", "thinking": "Check the file first.",
                     "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"},
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.rs"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b.rs"}},
                ]},
                // Both results and the reminder: one user message, results first.
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1",
                     "content": r#"{"status":"ok","output":"fn a() {}"}"#},
                    {"type": "tool_result", "tool_use_id": "toolu_2",
                     "content": r#"{"status":"error","output":"no such file"}"#,
                     "is_error": true, "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "<system-reminder>\nwrite mode\n</system-reminder>",
                     "cache_control": {"type": "ephemeral"}},
                ]},
            ],
            "tools": [{"name": "read", "description": "Read a file",
                       "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
                       "cache_control": {"type": "ephemeral"}}],
            "stream": true,
        })
    );
}

#[test]
fn denied_results_are_errors_and_plain_text_is_not() {
    let messages = vec![
        Message::user("go"),
        Message::assistant(
            "",
            vec![
                call("a", "bash", "{}"),
                call("b", "bash", "{}"),
                call("c", "bash", "{}"),
                call("d", "bash", "{}"),
            ],
        ),
        Message::tool("a", r#"{"status":"denied","output":"policy"}"#),
        // Text after the envelope does not hide its status.
        Message::tool("b", r#"{"status":"error","output":"x"} (truncated)"#),
        Message::tool("c", "status: error, but not an envelope"),
        Message::tool("d", r#"{"output":"no status","status":"ok"}"#),
    ];
    let body = request_body(&request(messages, vec![]), &settings());
    let results = body["messages"][2]["content"].as_array().unwrap();
    let errors: Vec<bool> = results
        .iter()
        .map(|r| r.get("is_error") == Some(&json!(true)))
        .collect();
    assert_eq!(errors, [true, true, false, false]);
}

#[test]
fn roles_alternate_and_the_first_is_the_user() {
    let messages = vec![
        Message::system("sys one"),
        Message::assistant("I spoke first.", vec![]),
        Message::assistant("And again.", vec![]),
        // Blank messages carry nothing and are left out (the API rejects empty text).
        Message::user("   "),
        Message::user("first"),
        Message::user("second"),
        Message::system("sys two"),
    ];
    let body = request_body(&request(messages, vec![]), &settings());
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(body["messages"][0]["content"][0]["text"], "(continued)");
    assert_eq!(body["messages"][1]["content"].as_array().unwrap().len(), 2);
    let user: Vec<&str> = body["messages"][2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect();
    assert_eq!(user, ["first", "second"]);
    let system: Vec<&str> = body["system"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect();
    assert_eq!(system, ["sys one", "sys two"]);
    // An empty conversation still has its user message.
    let body = request_body(&request(vec![], vec![]), &settings());
    assert_eq!(body["messages"][0]["role"], "user");
    assert!(body.get("system").is_none() && body.get("tools").is_none());
}

#[test]
fn arguments_that_are_not_an_object_are_sent_as_an_empty_input() {
    let messages = vec![
        Message::user("go"),
        Message::assistant(
            "",
            vec![
                call("a", "bash", r#"{"command": "ls"#),
                call("b", "bash", "[1, 2]"),
                call("c", "bash", ""),
            ],
        ),
        Message::tool(
            "a",
            r#"{"status":"denied","output":"invalid JSON arguments"}"#,
        ),
        Message::tool(
            "b",
            r#"{"status":"denied","output":"invalid JSON arguments"}"#,
        ),
        Message::tool("c", r#"{"status":"ok","output":""}"#),
    ];
    let body = request_body(&request(messages, vec![]), &settings());
    for block in body["messages"][1]["content"].as_array().unwrap() {
        assert_eq!(block["input"], json!({}), "{block}");
    }
}

#[test]
fn breakpoints_are_at_most_four_and_never_on_thinking() {
    // Tools, system, and the newest message's last two blocks: four.
    let messages = vec![
        Message::system("sys"),
        Message::user("go"),
        Message::assistant("", vec![call("a", "read", "{}")]),
        Message::tool("a", r#"{"status":"ok","output":"x"}"#),
        Message::user("reminder"),
    ];
    let body = request_body(
        &request(messages, vec![read_tool(), read_tool()]),
        &settings(),
    );
    let found = breakpoints(&body);
    assert_eq!(
        found,
        ["tools[1]", "system[0]", "messages[2][0]", "messages[2][1]"]
    );
    assert!(found.len() <= MAX_BREAKPOINTS);

    // A newest message of thinking then text: the thinking block is never marked.
    let messages = vec![
        Message::user("go"),
        Message::assistant("answer", vec![]).with_reasoning_items(vec![thinking_item()]),
    ];
    let body = request_body(&request(messages, vec![]), &settings());
    assert_eq!(breakpoints(&body), ["messages[1][1]"]);

    // Many system messages and tools still mark one each.
    let mut messages: Vec<Message> = (0..6).map(|i| Message::system(format!("s{i}"))).collect();
    messages.extend((0..6).map(|i| Message::user(format!("u{i}"))));
    let body = request_body(&request(messages, vec![read_tool(); 5]), &settings());
    assert_eq!(breakpoints(&body).len(), MAX_BREAKPOINTS);
}

#[test]
fn max_tokens_from_settings_else_by_model_family() {
    let mut s = settings();
    s.max_tokens = Some(1234);
    let body = request_body(&request(vec![Message::user("x")], vec![]), &s);
    assert_eq!(body["max_tokens"], 1234);
    let mut req = request(vec![Message::user("x")], vec![]);
    req.model = "claude-3-5-haiku-latest".into();
    assert_eq!(request_body(&req, &settings())["max_tokens"], 8192);
    assert_eq!(
        request_body(&req, &settings())["model"],
        "claude-3-5-haiku-latest"
    );
    for (model, want) in [
        ("claude-opus-4-1-20250805", 32_000),
        ("claude-sonnet-4-20250514", 32_000),
        ("claude-3-7-sonnet-latest", 32_000),
        ("claude-3-5-sonnet-20241022", 8_192),
        ("claude-3-haiku-20240307", 4_096),
        ("mock-model", 8_192),
        ("", 8_192),
    ] {
        assert_eq!(default_max_tokens(model), want, "{model}");
    }
}
