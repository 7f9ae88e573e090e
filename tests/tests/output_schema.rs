//! End-to-end: `amber-cli run --output-schema FILE` and `session/prompt {outputSchema}`
//! against the real `amberd` and a scripted model — a valid final answer becomes the result
//! line's `output` and the request carried `response_format`; an invalid answer gets one
//! repair round (the errors as a user message) and a repaired answer is valid; invalid twice
//! ends with stopReason `error`, code `invalid_output`; an invalid schema is refused before
//! anything runs; a provider without structured output gets the schema as an instruction.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{FAST_RETRIES, done, messages, run_bounded, spawn, spawn_config};
use serde_json::{Value, json};

fn schema() -> Value {
    json!({
        "type": "object",
        "required": ["verdict", "count"],
        "properties": {
            "verdict": {"enum": ["pass", "fail"]},
            "count": {"type": "integer", "minimum": 0}
        }
    })
}

/// Writes `text` as a schema file in the daemon's temp dir (outside the workspace).
fn schema_file(daemon: &TestDaemon, text: &str) -> String {
    let path = daemon.dir.path().join("schema.json");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `amber-cli run --json --no-autostart ARGS`: exit code, result line, stderr.
fn run_json(daemon: &TestDaemon, args: &[&str]) -> (Option<i32>, Value, String) {
    let mut cmd = daemon.cli();
    cmd.args(["run", "--json", "--no-autostart"]).args(args);
    let (code, stdout, stderr) = run_bounded(cmd);
    let last = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no output (exit {code:?}): {stderr}"));
    let result: Value = serde_json::from_str(last).unwrap();
    assert_eq!(result["type"], "result", "{result}\n{stderr}");
    (code, result, stderr)
}

/// The user messages of a recorded request, their text.
fn user_texts(body: &Value) -> Vec<String> {
    messages(body)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_valid_answer_is_the_result_lines_output_and_the_request_carried_response_format() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::text(r#"{"verdict": "pass", "count": 3}"#),
        done(),
    ]);
    let daemon = spawn(&mock);
    let file = schema_file(&daemon, &schema().to_string());
    let (code, result, stderr) = run_json(&daemon, &["--output-schema", &file, "judge it"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    assert_eq!(result["output"], json!({"verdict": "pass", "count": 3}));
    let requests = mock.requests();
    assert_eq!(
        requests[0]["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema(), "strict": false}})
    );
    // The silent confirm exchange asks for DONE, not for the schema.
    assert!(
        requests[1].get("response_format").is_none(),
        "{}",
        requests[1]
    );
    // Nothing of it in the prompt itself when the provider takes `response_format`.
    assert!(
        !user_texts(&requests[0])
            .iter()
            .any(|t| t.contains("JSON Schema")),
        "{}",
        requests[0]
    );
}

#[test]
fn an_answer_that_violates_the_schema_once_is_repaired() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::text("It passes, with 3 findings."),
        done(),
        MockTurn::text("```json\n{\"verdict\": \"pass\", \"count\": 3}\n```"),
        done(),
    ]);
    let daemon = spawn(&mock);
    let file = schema_file(&daemon, &schema().to_string());
    let (code, result, stderr) = run_json(&daemon, &["--output-schema", &file, "judge it"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    assert_eq!(result["output"], json!({"verdict": "pass", "count": 3}));
    // The repair round: the errors reached the model as a user message of the same turn.
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let repair = user_texts(&requests[2]);
    let note = repair.last().unwrap();
    assert!(
        note.contains("not valid against the required output schema"),
        "{note}"
    );
    assert!(note.contains("not valid JSON"), "{note}");
    assert_eq!(
        requests[2]["response_format"]["type"], "json_schema",
        "the repair request is structured too"
    );
}

#[test]
fn an_answer_invalid_twice_ends_the_turn_with_invalid_output() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::text(r#"{"verdict": "maybe", "count": 3}"#),
        done(),
        MockTurn::text(r#"{"verdict": "pass", "count": -2}"#),
        done(),
    ]);
    let daemon = spawn(&mock);
    let file = schema_file(&daemon, &schema().to_string());
    let (code, result, stderr) = run_json(&daemon, &["--output-schema", &file, "judge it"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(result["stopReason"], "error", "{result}");
    assert_eq!(result["error"]["code"], "invalid_output", "{result}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("at /count"), "{message}");
    assert!(result.get("output").is_none(), "{result}");
    // The first answer's errors went to the model in the repair round.
    let repair = user_texts(&mock.requests()[2]);
    assert!(repair.last().unwrap().contains("at /verdict"), "{repair:?}");
    assert_eq!(mock.request_count(), 4, "one repair round only");
}

#[test]
fn an_invalid_schema_file_is_refused_before_anything_runs() {
    let mock = MockLlm::start_blocking(Vec::new());
    let daemon = spawn(&mock);
    // Not JSON at all: a usage error, the daemon is not asked.
    let file = schema_file(&daemon, "{ not json");
    let mut cmd = daemon.cli();
    cmd.args(["run", "--no-autostart", "--output-schema", &file, "hi"]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not a JSON file"), "{stderr}");

    // JSON, but not a schema: the daemon's -32602 with the reason, and no session is left.
    let file = schema_file(&daemon, r#"{"type": "bogus"}"#);
    let (code, result, stderr) = run_json(&daemon, &["--output-schema", &file, "hi"]);
    assert_eq!(code, Some(5), "never started: {stderr}");
    assert_eq!(result["error"]["code"], "-32602", "{result}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("outputSchema"), "{message}");
    assert!(message.contains("invalid JSON Schema"), "{message}");
    let sessions = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(sessions["sessions"], json!([]), "{sessions}");
    assert_eq!(mock.request_count(), 0);
}

#[test]
fn session_prompt_refuses_an_invalid_schema_and_queues_nothing() {
    let mock = MockLlm::start_blocking(Vec::new());
    let daemon = spawn(&mock);
    let info = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string()}),
    );
    let session = info["sessionId"].as_str().unwrap();
    let before = daemon.rpc_ok("session/get", json!({"sessionId": session}))["lastSeq"].clone();
    let got = daemon.rpc(
        "session/prompt",
        json!({"sessionId": session, "text": "x", "outputSchema": {"minimum": "zero"}}),
    );
    assert_eq!(got["error"]["code"], -32602, "{got}");
    let got = daemon.rpc(
        "session/prompt",
        json!({"sessionId": session, "text": "x", "maxIterations": 0}),
    );
    assert_eq!(got["error"]["code"], -32602, "{got}");
    let snapshot = daemon.rpc_ok("session/get", json!({"sessionId": session}));
    assert_eq!(
        snapshot["lastSeq"], before,
        "nothing was queued: {snapshot}"
    );
    assert_eq!(snapshot["session"]["state"], "idle");
}

#[test]
fn a_provider_without_structured_output_gets_the_schema_as_an_instruction() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::text(r#"{"verdict": "fail", "count": 0}"#),
        done(),
    ]);
    let config = format!("{FAST_RETRIES}structured_output = false\n");
    let daemon = spawn_config(&mock, &config);
    let file = schema_file(&daemon, &schema().to_string());
    let (code, result, stderr) = run_json(&daemon, &["--output-schema", &file, "judge it"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(result["output"], json!({"verdict": "fail", "count": 0}));
    let first = &mock.requests()[0];
    assert!(first.get("response_format").is_none(), "{first}");
    let last_user = user_texts(first).pop().unwrap();
    assert!(
        last_user.contains(
            "Your final answer must be a single JSON value valid against this JSON Schema"
        ),
        "{last_user}"
    );
    assert!(
        last_user.contains(r#""required":["verdict","count"]"#),
        "{last_user}"
    );
}
