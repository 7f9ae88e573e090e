//! End-to-end: the `openai-responses` dialect through the real daemon against the scripted
//! Responses endpoint — a tool-calling task whose follow-up request carries the call, its
//! output (paired by `call_id`) and the first reply's encrypted reasoning, stateless and
//! keyed to the session's prompt cache; cached tokens in `usage`; retries on 429, 500 and
//! an in-stream server error; a context overflow reported in the stream that compacts and
//! then succeeds.

use amber_mock_llm::{Conversation, MockLlm, MockToolCall, MockTurn, encrypted_reasoning};
use amber_proto::Mode;
use amber_tests::TestDaemon;
use amber_tests::steps::{
    Events, connect, done, new_session, of_type, prompt_turn, spawn_config, stop_reason,
};
use serde_json::{Value, json};

/// The dialect, and retries fast enough for a test.
const CONFIG: &str = "[provider]\nflavor = \"openai-responses\"\nmax_retries = 2\n\
                      retry_base_ms = 10\nretry_max_ms = 50\n";

fn daemon(mock: &MockLlm) -> TestDaemon {
    spawn_config(mock, CONFIG)
}

/// The input items of a recorded request.
fn input(request: &Value) -> &Vec<Value> {
    request["input"].as_array().expect("input items")
}

/// Where in `items` the first item matching `pred` is.
fn position(items: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    items
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no such item in {items:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_task_sends_back_calls_outputs_and_encrypted_reasoning() {
    let mock = MockLlm::start(vec![
        MockTurn::Thinking {
            reasoning: "The user wants the notes; read them first.".into(),
            then: Box::new(MockTurn::ToolCalls(vec![MockToolCall::new(
                "read",
                &json!({"path": "notes.txt"}),
            )])),
        },
        MockTurn::Cached {
            tokens: 64,
            then: Box::new(MockTurn::text("The notes say: buy tea.")),
        },
        done(),
    ])
    .await;
    let daemon = daemon(&mock);
    std::fs::write(daemon.workspace.join("notes.txt"), "buy tea\n").unwrap();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "what do my notes say?").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert_eq!(
        of_type(&turn, "message_completed")[0]["text"],
        "The notes say: buy tea."
    );
    let reasoning: String = of_type(&turn, "reasoning_delta")
        .iter()
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(reasoning, "The user wants the notes; read them first.");

    let recorded = mock.recorded();
    assert_eq!(recorded.len(), 3, "task, answer, confirm");
    for r in &recorded {
        assert_eq!(r.path, "/v1/responses");
        let auth = r.headers.iter().find(|(k, _)| k == "authorization");
        assert_eq!(auth.map(|(_, v)| v.as_str()), Some("Bearer test-key"));
        let body = &r.body;
        assert_eq!(body["stream"], true);
        assert_eq!(body["store"], false, "stateless: {body}");
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["parallel_tool_calls"], true);
        assert_eq!(body["prompt_cache_key"], sid.as_str());
        assert!(body["instructions"].as_str().is_some_and(|i| !i.is_empty()));
        assert!(
            body.get("messages").is_none(),
            "not chat completions: {body}"
        );
        assert!(
            body["tools"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["type"] == "function" && t["name"].is_string()),
            "tools in the Responses shape"
        );
    }

    let second = input(&recorded[1].body);
    let reasoning = position(second, |i| i["type"] == "reasoning");
    let call = position(second, |i| i["type"] == "function_call");
    let output = position(second, |i| i["type"] == "function_call_output");
    assert!(
        reasoning < call && call < output,
        "reasoning, call, output in order: {second:#?}"
    );
    // The item as the first reply ended it, encrypted content included.
    assert_eq!(
        second[reasoning]["encrypted_content"],
        encrypted_reasoning(1)
    );
    assert_eq!(second[reasoning]["id"], "rs_1");
    assert_eq!(second[call]["name"], "read");
    assert_eq!(second[call]["call_id"], "call_1_0");
    assert_eq!(second[output]["call_id"], second[call]["call_id"]);
    let envelope: Value = serde_json::from_str(second[output]["output"].as_str().unwrap()).unwrap();
    assert_eq!(envelope["status"], "ok", "{envelope}");
    assert!(envelope["output"].as_str().unwrap().contains("buy tea"));
    assert!(
        second.iter().all(|i| i["role"] != "system"),
        "system messages go to instructions"
    );

    // The answer's usage reports its cached prompt tokens.
    let usage = of_type(&turn, "usage");
    assert_eq!(usage.len(), 3, "{usage:#?}");
    assert_eq!(usage[0]["cachedTokens"], 0);
    assert_eq!(usage[1]["cachedTokens"], 64);
    assert!(usage[1]["promptTokens"].as_u64().unwrap() >= 64);
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limits_server_errors_and_a_failed_stream_are_retried() {
    let status = |code: u16| MockTurn::Status {
        code,
        retry_after: Some(0),
        body: format!(r#"{{"error":{{"message":"scripted {code}","type":"server_error"}}}}"#),
    };
    let mock = MockLlm::start(vec![
        status(429),
        status(500),
        MockTurn::text("Made it."),
        MockTurn::StreamError {
            chunks: vec![],
            code: "server_error".into(),
            message: "The server had an error while processing your request.".into(),
        },
        done(),
    ])
    .await;
    let daemon = daemon(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert!(of_type(&turn, "error").is_empty(), "{turn:#?}");
    assert_eq!(of_type(&turn, "message_completed")[0]["text"], "Made it.");
    let reasons: Vec<&str> = of_type(&turn, "retrying")
        .iter()
        .filter_map(|e| e["reason"].as_str())
        .collect();
    assert_eq!(reasons.len(), 3, "{turn:#?}");
    assert_eq!(reasons[0], "429 rate limited");
    assert_eq!(reasons[1], "HTTP 500");
    assert!(reasons[2].contains("server had an error"), "{reasons:?}");
    assert_eq!(mock.request_count(), 5);
    assert_eq!(mock.remaining(), 0);
    assert!(mock.recorded().iter().all(|r| r.path == "/v1/responses"));
}

const CLASSIFY: &str =
    r#"{"classification": [{"id": 1, "class": "prune"}, {"id": 2, "class": "prune"}]}"#;
const EXTRACT: &str = r#"{"memories": ["the user prefers tea"], "skills": []}"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_context_overflow_in_the_stream_compacts_then_succeeds() {
    let mock = MockLlm::start(vec![
        MockTurn::text("first answer"),
        done(),
        MockTurn::text("second answer"),
        done(),
        MockTurn::StreamError {
            chunks: vec![],
            code: "context_length_exceeded".into(),
            message: "Your input exceeds the context window of this model.".into(),
        },
        MockTurn::text(CLASSIFY),
        MockTurn::text(EXTRACT),
        MockTurn::text("answer after compaction"),
        done(),
    ])
    .await;
    let daemon = daemon(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    for prompt in ["I like tea, remember that", "tell me more"] {
        let turn = prompt_turn(&client, &mut events, &sid, prompt).await;
        assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    }
    let turn = prompt_turn(&client, &mut events, &sid, "one more thing").await;
    let types: Vec<&str> = turn.iter().filter_map(|e| e["type"].as_str()).collect();
    let at = |ty: &str| {
        types
            .iter()
            .position(|t| *t == ty)
            .unwrap_or_else(|| panic!("no {ty}: {types:?}"))
    };
    assert!(
        at("compaction_started") < at("compaction_completed")
            && at("compaction_completed") < at("message_completed"),
        "{types:?}"
    );
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert_eq!(
        of_type(&turn, "message_completed")[0]["text"],
        "answer after compaction"
    );
    // The overflowing request is not retried as it was: the retried one is smaller.
    let requests = mock.requests();
    assert_eq!(requests.len(), 9);
    let rejected = requests[4].to_string().len();
    let retried = requests[7].to_string().len();
    assert!(retried < rejected, "{retried} >= {rejected}");
    assert!(requests.iter().all(|r| r["store"] == false));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_conversation_is_answered_over_the_responses_api() {
    // The bench's way of scripting (answers chosen from the request alone), through this
    // dialect: the follow-up is recognised by its model items, the confirm turn by its prompt.
    let mock = MockLlm::builder()
        .conversations([Conversation {
            name: "list".into(),
            prompt: "list the workspace".into(),
            turns: vec![
                MockTurn::tool_call("bash", &json!({"command": "ls"})),
                MockTurn::text("Listed."),
            ],
        }])
        .start()
        .await
        .unwrap();
    let daemon = daemon(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "please list the workspace").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert_eq!(of_type(&turn, "message_completed")[0]["text"], "Listed.");
    let recorded = mock.recorded();
    let names: Vec<Option<&str>> = recorded.iter().map(|r| r.conversation.as_deref()).collect();
    // The confirm request is answered as the confirm turn (no conversation), not as the
    // conversation's end.
    assert_eq!(
        names,
        [Some("list"), Some("list"), None],
        "call, answer, confirm"
    );
    assert!(recorded.iter().all(|r| r.path == "/v1/responses"));
}
