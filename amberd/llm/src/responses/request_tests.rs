//! The request mapping: instructions, input items in order, reasoning items sent back in
//! place, calls and outputs paired by `call_id`, the stateless and caching fields.

use amber_proto::{Message, ReasoningItem, ToolCall};
use serde_json::{Value, json};

use super::request_body;
use crate::{ChatRequest, LlmSettings, ResponseFormat, ToolSpec};

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

fn item(format: &str, data: &Value) -> ReasoningItem {
    ReasoningItem {
        format: format.into(),
        data: data.to_string(),
    }
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        messages,
        tools: vec![],
        response_format: None,
        cache_key: None,
        max_tokens: None,
    }
}

fn settings() -> LlmSettings {
    LlmSettings {
        model: "gpt-4.1".into(),
        ..LlmSettings::default()
    }
}

#[test]
fn a_tool_turn_maps_to_items_in_order() {
    let rs = json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA-secret",
        "summary": [{"type": "summary_text", "text": "look first"}]});
    let req = ChatRequest {
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object"}),
        }],
        cache_key: Some("sess-1".into()),
        max_tokens: None,
        ..request(vec![
            Message::system("You are amber."),
            Message::system("Workspace: /w"),
            Message::user("read a"),
            Message::assistant("Looking.", vec![call("call_1", "read", r#"{"path":"a"}"#)])
                .with_reasoning_items(vec![
                    item("anthropic", &json!({"type": "thinking", "signature": "x"})),
                    item("openai-responses", &rs),
                ]),
            Message::tool("call_1", r#"{"status":"ok","output":"A"}"#),
            Message::assistant("done", vec![]),
        ])
    };
    let body = request_body(&req, &settings());
    assert_eq!(
        body,
        json!({
            "model": "gpt-4.1",
            "instructions": "You are amber.\n\nWorkspace: /w",
            "input": [
                {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "read a"}]},
                // The reasoning item, verbatim, before the turn's output; the other
                // format's item is not sent.
                rs,
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Looking."}]},
                {"type": "function_call", "call_id": "call_1", "name": "read",
                 "arguments": "{\"path\":\"a\"}"},
                {"type": "function_call_output", "call_id": "call_1",
                 "output": "{\"status\":\"ok\",\"output\":\"A\"}"},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "done"}]},
            ],
            "tools": [{"type": "function", "name": "read", "description": "Read a file",
                       "parameters": {"type": "object"}}],
            "tool_choice": "auto",
            "parallel_tool_calls": true,
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "sess-1",
        })
    );
}

#[test]
fn reasoning_items_go_back_with_the_turn_that_made_them() {
    let first = json!({"type": "reasoning", "id": "rs_a", "encrypted_content": "A", "summary": []});
    let second =
        json!({"type": "reasoning", "id": "rs_b", "encrypted_content": "B", "summary": []});
    let req = request(vec![
        Message::user("go"),
        Message::assistant("", vec![call("c1", "ls", "{}")])
            .with_reasoning_items(vec![item("openai-responses", &first)]),
        Message::tool("c1", "x"),
        Message::assistant("", vec![call("c2", "ls", "{}")])
            .with_reasoning_items(vec![item("openai-responses", &second)]),
        Message::tool("c2", "y"),
    ]);
    let input = request_body(&req, &settings())["input"].clone();
    let kinds: Vec<String> = input
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let ty = i["type"].as_str().unwrap();
            let id = i["call_id"].as_str().or(i["id"].as_str()).unwrap_or("");
            format!("{ty}:{id}")
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "message:",
            "reasoning:rs_a",
            "function_call:c1",
            "function_call_output:c1",
            "reasoning:rs_b",
            "function_call:c2",
            "function_call_output:c2",
        ]
    );
    assert_eq!(input[1]["encrypted_content"], "A");
}

#[test]
fn outputs_pair_with_calls_by_call_id_and_orphans_are_dropped() {
    let req = request(vec![
        Message::user("go"),
        // A result whose call was compacted away: the API would refuse it.
        Message::tool("gone", "stale"),
        Message::assistant(
            "",
            vec![call("c1", "a", "{}"), call("c2", "b", r#"{"x":1}"#)],
        ),
        // Results in another order than the calls still name their own call.
        Message::tool("c2", "two"),
        Message::tool("c1", "one"),
    ]);
    let input = request_body(&req, &settings())["input"].clone();
    let outputs: Vec<(&str, &str)> = input
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| {
            (
                i["call_id"].as_str().unwrap(),
                i["output"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(outputs, [("c2", "two"), ("c1", "one")]);
    assert!(!input.to_string().contains("stale"));
}

#[test]
fn a_system_message_after_the_history_stays_in_place() {
    let req = request(vec![
        Message::system("sys"),
        Message::user("hi"),
        Message::system("reminder: mode is read"),
    ]);
    let body = request_body(&req, &settings());
    assert_eq!(body["instructions"], "sys");
    assert_eq!(body["input"][1]["role"], "developer");
    assert_eq!(
        body["input"][1]["content"][0]["text"],
        "reminder: mode is read"
    );
}

#[test]
fn optional_fields_only_when_set() {
    let body = request_body(&request(vec![Message::user("x")]), &LlmSettings::default());
    for absent in [
        "model",
        "instructions",
        "tools",
        "prompt_cache_key",
        "max_output_tokens",
        "text",
        "reasoning",
    ] {
        assert!(body.get(absent).is_none(), "{absent}: {body}");
    }
    let req = ChatRequest {
        model: "gpt-5-mini".into(),
        response_format: Some(ResponseFormat {
            name: "output".into(),
            schema: json!({"type": "object"}),
            strict: false,
        }),
        ..request(vec![Message::user("x")])
    };
    let body = request_body(
        &req,
        &LlmSettings {
            max_tokens: Some(256),
            ..settings()
        },
    );
    assert_eq!(body["model"], "gpt-5-mini");
    assert_eq!(body["max_output_tokens"], 256);
    assert_eq!(body["reasoning"], json!({"summary": "auto"}));
    let chat = ChatRequest {
        model: "gpt-5-chat-latest".into(),
        ..request(vec![Message::user("x")])
    };
    assert!(request_body(&chat, &settings()).get("reasoning").is_none());
    assert_eq!(
        body["text"],
        json!({"format": {"type": "json_schema", "name": "output",
                          "schema": {"type": "object"}, "strict": false}})
    );
}
