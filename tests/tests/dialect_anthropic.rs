//! End-to-end through the real daemon with `[provider] flavor = "anthropic"` against the
//! mock's `/v1/messages`: a tool-calling task whose next requests carry the `tool_use` /
//! `tool_result` pairing (`is_error` for a failed call) and the signed thinking blocks first
//! in their assistant message; a 529 and an `overloaded_error` event retried; a
//! prompt-too-long 400 compacting the context before the turn succeeds; the cache counts in
//! the `usage` events.

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_tests::steps::{
    Events, connect, done, new_session, of_type, prompt_turn, spawn_config, stop_reason,
};
use serde_json::{Value, json};

/// The provider as these tests configure it: the Anthropic dialect, fast retries.
const ANTHROPIC: &str =
    "[provider]\nflavor = \"anthropic\"\nmax_retries = 1\nretry_base_ms = 10\nretry_max_ms = 50\n";

/// One SSE event of a hand-written Messages stream.
fn event(data: &Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

/// A Messages stream, as Anthropic sends one: `message_start` with this input usage, the
/// given content blocks (each: its start, its deltas), `message_delta` with the stop reason
/// and output tokens, `message_stop`.
fn stream(usage: &Value, blocks: &[(Value, Vec<Value>)], stop: &str, output: u64) -> MockTurn {
    let mut body = event(
        &json!({"type": "message_start", "message": {"id": "msg_e2e",
        "type": "message", "role": "assistant", "model": "mock-model", "content": [],
        "stop_reason": null, "usage": usage}}),
    );
    for (index, (start, deltas)) in blocks.iter().enumerate() {
        body +=
            &event(&json!({"type": "content_block_start", "index": index, "content_block": start}));
        for delta in deltas {
            body += &event(&json!({"type": "content_block_delta", "index": index, "delta": delta}));
        }
        body += &event(&json!({"type": "content_block_stop", "index": index}));
    }
    body += &event(
        &json!({"type": "message_delta", "delta": {"stop_reason": stop},
        "usage": {"output_tokens": output}}),
    );
    body += &event(&json!({"type": "message_stop"}));
    MockTurn::Raw(body)
}

const SIGNATURE: &str = "EqQBCgIYAhIMe2eSignatureOfTheThinking";

/// Thinking, a sentence, and a call of `read` on `notes.txt`.
fn thinking_then_read() -> MockTurn {
    stream(
        &json!({"input_tokens": 900, "output_tokens": 1}),
        &[
            (
                json!({"type": "thinking", "thinking": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": "The notes will say. "}),
                    json!({"type": "thinking_delta", "thinking": "Read them."}),
                    json!({"type": "signature_delta", "signature": SIGNATURE}),
                ],
            ),
            (
                json!({"type": "text", "text": ""}),
                vec![json!({"type": "text_delta", "text": "Reading the notes."})],
            ),
            (
                json!({"type": "tool_use", "id": "toolu_e2e_1", "name": "read", "input": {}}),
                vec![
                    json!({"type": "input_json_delta", "partial_json": "{\"pa"}),
                    json!({"type": "input_json_delta", "partial_json": "th\": \"notes.txt\"}"}),
                ],
            ),
        ],
        "tool_use",
        30,
    )
}

fn messages(request: &Value) -> &Vec<Value> {
    request["messages"].as_array().expect("a messages array")
}

/// The request's messages alternate strictly, starting with the user.
fn assert_alternating(request: &Value) {
    for (i, m) in messages(request).iter().enumerate() {
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        assert_eq!(m["role"], want, "message {i} of {request:#}");
    }
}

/// The last assistant message of a request.
fn last_assistant(request: &Value) -> &Value {
    messages(request)
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .expect("an assistant message")
}

/// The user message right after the last assistant message.
fn after_last_assistant(request: &Value) -> &Value {
    let all = messages(request);
    let at = all.iter().rposition(|m| m["role"] == "assistant").unwrap();
    &all[at + 1]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_task_sends_back_the_pairing_and_the_signed_thinking() {
    let mock = MockLlm::start(vec![
        thinking_then_read(),
        // Rendered by the mock: a call that fails, then signed thinking and the answer.
        MockTurn::ToolCalls(vec![MockToolCall::new(
            "read",
            &json!({"path": "missing.txt"}),
        )]),
        MockTurn::Reasoning {
            reasoning: "One file was there.".into(),
            text: "The notes say hello.".into(),
        },
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, ANTHROPIC);
    std::fs::write(daemon.workspace.join("notes.txt"), "hello from the notes\n").unwrap();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "What do my notes say?").await;

    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert_eq!(
        of_type(&turn, "message_completed").last().unwrap()["text"],
        "The notes say hello."
    );
    let statuses: Vec<&Value> = of_type(&turn, "tool_call_completed")
        .iter()
        .map(|e| &e["status"])
        .collect();
    assert_eq!(statuses, [&json!("ok"), &json!("error")]);
    assert!(
        !of_type(&turn, "reasoning_delta").is_empty(),
        "thinking streams as reasoning: {turn:#?}"
    );

    let recorded = mock.recorded();
    assert_eq!(recorded.len(), 4);
    for (i, r) in recorded.iter().enumerate() {
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.header("x-api-key"), Some("test-key"));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        assert!(r.header("authorization").is_none());
        assert_eq!(r.body["stream"], true);
        // The last request is the silent confirm question, whose answer is DONE.
        let cap = if i == 3 { 32 } else { 8192 };
        assert_eq!(
            r.body["max_tokens"], cap,
            "the default for an unknown model, the confirm question's cap"
        );
        assert_eq!(r.body["system"][0]["type"], "text");
        assert_alternating(&r.body);
    }
    let requests = mock.requests();

    // Request 2: the first reply sent back, thinking first and signed, then the call; its
    // result in the next user message, not an error.
    let assistant = last_assistant(&requests[1]);
    assert_eq!(
        assistant["content"],
        json!([
            {"type": "thinking", "thinking": "The notes will say. Read them.", "signature": SIGNATURE},
            {"type": "text", "text": "Reading the notes."},
            {"type": "tool_use", "id": "toolu_e2e_1", "name": "read", "input": {"path": "notes.txt"}},
        ])
    );
    let results = &after_last_assistant(&requests[1])["content"];
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "toolu_e2e_1");
    assert!(results[0].get("is_error").is_none(), "{results}");
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("hello from the notes")
    );

    // Request 3: the failed read comes back as an error result.
    let results = &after_last_assistant(&requests[2])["content"];
    assert_eq!(results[0]["tool_use_id"], "call_2_0");
    assert_eq!(results[0]["is_error"], true, "{results}");
    // The earlier thinking is still sent with its turn.
    let first_reply = &messages(&requests[2])[1];
    assert_eq!(first_reply["content"][0]["signature"], SIGNATURE);

    // Request 4 (the confirm turn): the answer's thinking, signed by the mock, first.
    let answer = last_assistant(&requests[3]);
    assert_eq!(
        answer["content"][0],
        json!({"type": "thinking", "thinking": "One file was there.", "signature": "mock-signature-3"})
    );
    assert_eq!(answer["content"][1]["text"], "The notes say hello.");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_529_and_an_overloaded_event_are_retried() {
    let mock = MockLlm::start(vec![
        MockTurn::anthropic_overloaded(),
        MockTurn::anthropic_error_event("overloaded_error", "Overloaded"),
        MockTurn::text("Made it."),
        done(),
    ])
    .await;
    let config = ANTHROPIC.replace("max_retries = 1", "max_retries = 2");
    let daemon = spawn_config(&mock, &config);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello").await;

    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert!(of_type(&turn, "error").is_empty(), "{turn:#?}");
    assert_eq!(of_type(&turn, "message_completed")[0]["text"], "Made it.");
    let retries = of_type(&turn, "retrying");
    assert_eq!(retries.len(), 2, "{turn:#?}");
    for r in retries {
        assert_eq!(r["reason"], "provider overloaded", "{r}");
    }
    // The 529, the error event, the answer, the confirm.
    assert_eq!(mock.request_count(), 4);
    let requests = mock.requests();
    assert_eq!(requests[0], requests[2], "a retry resends the same request");
}

const CLASSIFY: &str =
    r#"{"classification": [{"id": 1, "class": "prune"}, {"id": 2, "class": "prune"}]}"#;
const EXTRACT: &str = r#"{"memories": ["the user prefers tea"], "skills": []}"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_too_long_rejection_compacts_and_the_turn_succeeds() {
    let too_long = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "prompt is too long: 210000 tokens > 200000 maximum"}});
    let mock = MockLlm::start(vec![
        MockTurn::text("first answer"),
        done(),
        MockTurn::text("second answer"),
        done(),
        MockTurn::Status {
            code: 400,
            retry_after: None,
            body: too_long.to_string(),
        },
        MockTurn::text(CLASSIFY),
        MockTurn::text(EXTRACT),
        MockTurn::text("answer after compaction"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, ANTHROPIC);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    for prompt in ["I like tea, remember that", "tell me more"] {
        let turn = prompt_turn(&client, &mut events, &sid, prompt).await;
        assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    }
    let turn = prompt_turn(&client, &mut events, &sid, "one more thing").await;

    let types: Vec<&str> = turn.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let started = types.iter().position(|t| *t == "compaction_started");
    let completed = types.iter().position(|t| *t == "compaction_completed");
    let message = types.iter().position(|t| *t == "message_completed");
    assert!(
        started.is_some() && started < completed && completed < message,
        "{types:?}"
    );
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert!(of_type(&turn, "error").is_empty(), "{turn:#?}");
    assert_eq!(
        of_type(&turn, "message_completed")[0]["text"],
        "answer after compaction"
    );
    // The retried request is smaller than the rejected one, and still alternates.
    let requests = mock.requests();
    assert_eq!(requests.len(), 9);
    assert!(requests[7].to_string().len() < requests[4].to_string().len());
    assert!(requests[7].to_string().contains("the user prefers tea"));
    assert_alternating(&requests[7]);
}

#[tokio::test(flavor = "multi_thread")]
async fn cache_reads_and_writes_reach_the_usage_event() {
    let mock = MockLlm::start(vec![
        stream(
            &json!({"input_tokens": 200, "cache_read_input_tokens": 4800,
                    "cache_creation_input_tokens": 1024, "output_tokens": 1}),
            &[(
                json!({"type": "text", "text": ""}),
                vec![json!({"type": "text_delta", "text": "Cached."})],
            )],
            "end_turn",
            7,
        ),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, ANTHROPIC);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let usage = of_type(&turn, "usage");
    assert_eq!(usage.len(), 2, "the answer and the confirm: {turn:#?}");
    let first = usage[0];
    // The whole prompt: uncached input, the cache read and the cache write.
    assert_eq!(first["promptTokens"], 6024, "{first}");
    assert_eq!(first["cachedTokens"], 4800, "{first}");
    assert_eq!(first["cacheWriteTokens"], 1024, "{first}");
    assert_eq!(first["completionTokens"], 7, "{first}");
    assert_eq!(first["totalTokens"], 6031, "{first}");
    // The mock's confirm answer reports no cache: the field is left out.
    assert!(usage[1].get("cacheWriteTokens").is_none(), "{}", usage[1]);
    let total = &turn.last().unwrap()["usage"];
    assert_eq!(total["cacheWriteTokens"], 1024, "{total}");
    assert_eq!(total["cachedTokens"], 4800, "{total}");
}
