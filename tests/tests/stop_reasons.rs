//! End-to-end: a model that refuses, or whose reply its output limit cut, ends the turn with
//! a typed stop reason (`refusal`, `max_tokens`) carrying what it said, in each provider
//! dialect — never as an `end_turn` with empty text. Driven through `amber-cli run --json`
//! (its result line and exit code) and the session's durable `turn_completed`.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{run_bounded, spawn_config};
use serde_json::{Value, json};

const CHAT: &str = "[provider]\nmax_retries = 1\nretry_base_ms = 10\nretry_max_ms = 50\n";
const ANTHROPIC: &str =
    "[provider]\nflavor = \"anthropic\"\nmax_retries = 1\nretry_base_ms = 10\nretry_max_ms = 50\n";
const RESPONSES: &str = "[provider]\nflavor = \"openai-responses\"\nmax_retries = 1\n\
                         retry_base_ms = 10\nretry_max_ms = 50\n";

/// Server-sent events, one `data:` payload each (an `event:` line when named).
fn sse(events: &[(Option<&str>, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| match name {
            Some(name) => format!("event: {name}\ndata: {data}\n\n"),
            None => format!("data: {data}\n\n"),
        })
        .collect()
}

fn chat_refusal() -> String {
    let chunk = |delta: Value, finish: Value| {
        (
            None,
            json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut body = sse(&[
        chunk(
            json!({"role": "assistant", "content": null, "refusal": ""}),
            Value::Null,
        ),
        chunk(json!({"refusal": "I can't help with "}), Value::Null),
        chunk(json!({"refusal": "that."}), Value::Null),
        chunk(json!({}), json!("stop")),
    ]);
    body.push_str("data: [DONE]\n\n");
    body
}

fn chat_cut() -> String {
    let chunk = |delta: Value, finish: Value| {
        (
            None,
            json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut body = sse(&[
        chunk(json!({"content": "The first half of a long"}), Value::Null),
        chunk(json!({}), json!("length")),
    ]);
    body.push_str("data: [DONE]\n\n");
    body
}

fn anthropic_refusal() -> String {
    sse(&[
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                   "role": "assistant", "content": [], "model": "m", "stop_reason": null,
                   "usage": {"input_tokens": 5, "output_tokens": 0}}}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": "I won't write that."}}),
        ),
        (
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": "refusal"},
                   "usage": {"output_tokens": 5}}),
        ),
        (Some("message_stop"), json!({"type": "message_stop"})),
    ])
}

fn responses_refusal() -> String {
    let item = json!({"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                      "content": [{"type": "refusal", "refusal": "Not that, sorry."}]});
    sse(&[
        (
            None,
            json!({"type": "response.created", "response": {"id": "r1", "status": "in_progress"}}),
        ),
        (
            None,
            json!({"type": "response.output_item.added", "output_index": 0,
                   "item": {"type": "message", "id": "m1", "role": "assistant", "content": []}}),
        ),
        (
            None,
            json!({"type": "response.refusal.delta", "output_index": 0, "content_index": 0,
                   "item_id": "m1", "delta": "Not that, sorry."}),
        ),
        (
            None,
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        ),
        (
            None,
            json!({"type": "response.completed", "response": {"id": "r1", "status": "completed",
                   "output": [item],
                   "usage": {"input_tokens": 5, "output_tokens": 4, "total_tokens": 9}}}),
        ),
    ])
}

/// `amber-cli run --json` of one prompt: its exit code, result line and `turn_completed`.
fn run(daemon: &TestDaemon) -> (Option<i32>, Value, Value, String) {
    let mut cmd = daemon.cli();
    cmd.args(["run", "--json", "--no-autostart", "write something"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    let lines: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let find = |ty: &str| {
        lines
            .iter()
            .find(|l| l["type"] == ty)
            .cloned()
            .unwrap_or_else(|| panic!("no {ty} line: {stdout}\n{stderr}"))
    };
    (code, find("result"), find("turn_completed"), stderr)
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_and_cut_replies_end_the_turn_typed_with_what_the_model_said() {
    // (case, config, body, stop reason, error code, text the run shows)
    let cases = [
        (
            "chat refusal",
            CHAT,
            chat_refusal(),
            "refusal",
            "refusal",
            "I can't help with that.",
        ),
        (
            "chat cut at max tokens",
            CHAT,
            chat_cut(),
            "max_tokens",
            "max_tokens",
            "The first half of a long",
        ),
        (
            "anthropic refusal",
            ANTHROPIC,
            anthropic_refusal(),
            "refusal",
            "refusal",
            "I won't write that.",
        ),
        (
            "responses refusal",
            RESPONSES,
            responses_refusal(),
            "refusal",
            "refusal",
            "Not that, sorry.",
        ),
    ];
    for (case, config, body, stop, code, text) in cases {
        let mock = MockLlm::start(vec![MockTurn::Raw(body)]).await;
        let daemon = spawn_config(&mock, config);
        let (exit, result, completed, stderr) = run(&daemon);
        assert_eq!(result["stopReason"], stop, "{case}: {result}\n{stderr}");
        assert_eq!(result["text"], text, "{case}: {result}");
        assert_eq!(exit, Some(3), "{case}: a stopped turn exits 3\n{stderr}");
        // The event says the same, with the refusal text or the cut's reason.
        assert_eq!(completed["stopReason"], stop, "{case}: {completed}");
        assert_eq!(completed["error"]["code"], code, "{case}: {completed}");
        if stop == "refusal" {
            assert_eq!(completed["error"]["message"], text, "{case}: {completed}");
        }
        // Only one request: neither ends in the silent "are you finished?" exchange.
        assert_eq!(mock.request_count(), 1, "{case}");
        // What the model said stays in the conversation for the next prompt.
        let got = daemon.rpc_ok("session/get", json!({"sessionId": result["sessionId"]}));
        let messages = got["messages"].as_array().unwrap();
        assert!(
            messages
                .iter()
                .any(|m| m["role"] == "assistant" && m["content"] == text),
            "{case}: {got}"
        );
    }
}
