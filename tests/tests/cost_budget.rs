//! End-to-end: cost and budgets through the real daemon and amber-cli.
//!
//! A `[[provider.prices]]` entry prices the mock model; every scripted reply reports the
//! same usage (1000 prompt tokens of which 400 cached, 100 completion tokens), which at
//! $1 / $2 / $0.50 per million (input / output / cached) costs exactly
//! 600 × 1 + 400 × 0.5 + 100 × 2 = 1000 micro-dollars = $0.001 per call.
//!
//! The `usage` events, `turn_completed`, the session's info and amber-cli's result line
//! carry that cost; a session whose spend (or tokens) reached its budget stops before its
//! next model request with `budget_exceeded` (amber-cli exit 3); a budget in dollars on a
//! model without a price is refused (-32602); the spend survives a daemon restart.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{FAST_RETRIES, run_bounded, spawn_config};
use serde_json::{Value, json};

/// The mock model priced; one request per text reply (no silent confirm turn).
fn priced_config() -> String {
    format!(
        "{FAST_RETRIES}\n[[provider.prices]]\nmodel = \"mock-model\"\ninput = 1.0\n\
         output = 2.0\ncached = 0.5\n\n[agent]\nconfirm_finish = false\n"
    )
}

/// No price for the mock model.
fn unpriced_config() -> String {
    format!("{FAST_RETRIES}\n[agent]\nconfirm_finish = false\n")
}

/// The cost of one scripted call at the configured price.
const CALL_USD: f64 = 0.001;

/// One streamed reply, as a chat-completions endpoint sends it, with a fixed usage chunk.
fn reply(delta: Value, finish: &str) -> MockTurn {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let usage = json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
        "choices": [],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100,
                  "prompt_tokens_details": {"cached_tokens": 400}}});
    MockTurn::Raw(format!(
        "data: {}\n\ndata: {}\n\ndata: {usage}\n\ndata: [DONE]\n\n",
        chunk(delta, Value::Null),
        chunk(json!({}), json!(finish)),
    ))
}

fn text(words: &str) -> MockTurn {
    reply(json!({"role": "assistant", "content": words}), "stop")
}

/// A reply calling `read` on a file that is there (so the round itself succeeds).
fn read_call() -> MockTurn {
    let call = json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_read",
        "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}}]});
    reply(call, "tool_calls")
}

/// `amber-cli run --json --no-autostart ARGS`: exit code, JSON lines, stderr.
fn run_json(daemon: &TestDaemon, args: &[&str]) -> (Option<i32>, Vec<Value>, String) {
    let mut cmd = daemon.cli();
    cmd.args(["run", "--json", "--no-autostart"]).args(args);
    let (code, stdout, stderr) = run_bounded(cmd);
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (code, lines, stderr)
}

fn of_type<'l>(lines: &'l [Value], kind: &str) -> Vec<&'l Value> {
    lines.iter().filter(|e| e["type"] == kind).collect()
}

fn usd(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not an amount: {value}"))
}

fn assert_usd(value: &Value, expected: f64) {
    assert!(
        (usd(value) - expected).abs() < 1e-9,
        "{value} is not {expected}"
    );
}

fn new_session(daemon: &TestDaemon, extra: Value) -> String {
    let mut params = json!({"cwd": daemon.workspace.display().to_string()});
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let info = daemon.rpc_ok("session/new", params);
    info["sessionId"].as_str().unwrap().to_owned()
}

#[test]
fn usage_turn_completed_session_info_and_the_result_line_carry_the_cost() {
    let mock = MockLlm::start_blocking(vec![text("hello")]);
    let daemon = spawn_config(&mock, &priced_config());
    let (code, lines, stderr) = run_json(&daemon, &["say hello"]);
    assert_eq!(code, Some(0), "{stderr}");

    let usage = of_type(&lines, "usage");
    assert_eq!(usage.len(), 1, "{lines:?}");
    // The call's cost at the top level and in `usage`; the session's in `total` and
    // `sessionCostUsd`.
    assert_usd(&usage[0]["costUsd"], CALL_USD);
    assert_usd(&usage[0]["usage"]["costUsd"], CALL_USD);
    assert_usd(&usage[0]["total"]["costUsd"], CALL_USD);
    assert_usd(&usage[0]["sessionCostUsd"], CALL_USD);

    let completed = of_type(&lines, "turn_completed");
    assert_eq!(completed[0]["stopReason"], "end_turn");
    assert_usd(&completed[0]["costUsd"], CALL_USD);
    assert_usd(&completed[0]["usage"]["costUsd"], CALL_USD);
    assert_usd(&completed[0]["sessionCostUsd"], CALL_USD);

    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result", "{result}");
    assert_usd(&result["costUsd"], CALL_USD);

    let session = result["sessionId"].as_str().unwrap();
    let got = daemon.rpc_ok("session/get", json!({"sessionId": session}));
    assert_usd(&got["session"]["usage"]["costUsd"], CALL_USD);
    assert_eq!(got["session"]["usage"]["totalTokens"], 1100);
}

#[test]
fn the_confirm_exchange_is_its_own_line_of_the_cost() {
    let mock = MockLlm::start_blocking(vec![text("hello"), text("DONE")]);
    let config = priced_config().replace("confirm_finish = false", "confirm_finish = true");
    let daemon = spawn_config(&mock, &config);
    let (code, lines, stderr) = run_json(&daemon, &["say hello"]);
    assert_eq!(code, Some(0), "{stderr}");
    let result = lines.last().unwrap();
    assert_usd(&result["costUsd"], 2.0 * CALL_USD);
    assert_usd(&result["confirmUsage"]["costUsd"], CALL_USD);
    assert_eq!(result["confirmUsage"]["promptTokens"], 1000, "{result}");
    assert_eq!(result["confirmUsage"]["cachedTokens"], 400, "{result}");

    // A human run prints it under the cost line.
    mock.push([text("hello again"), text("DONE")]);
    let mut cmd = daemon.cli();
    cmd.args(["run", "--no-autostart", "say it again"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "hello again");
    let lines: Vec<&str> = stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("cost $0.0020"))
        .unwrap_or_else(|| panic!("no cost line: {stderr}"));
    assert!(
        lines[at + 1]
            .contains("of which the confirm exchange: $0.0010 (1000 prompt tokens, 400 cached)"),
        "{stderr}"
    );
}

#[test]
fn an_unpriced_model_has_no_cost_and_amber_cli_says_cost_unknown() {
    let mock = MockLlm::start_blocking(vec![text("hello")]);
    let daemon = spawn_config(&mock, &unpriced_config());
    let (code, lines, stderr) = run_json(&daemon, &["say hello"]);
    assert_eq!(code, Some(0), "{stderr}");
    let usage = of_type(&lines, "usage");
    assert!(usage[0].get("costUsd").is_none(), "{}", usage[0]);
    assert!(usage[0].get("sessionCostUsd").is_none(), "{}", usage[0]);
    assert!(
        of_type(&lines, "turn_completed")[0]
            .get("costUsd")
            .is_none()
    );
    assert!(lines.last().unwrap().get("costUsd").is_none());

    // The human run prints no cost line for it (noise after every run of a local model).
    mock.push([text("again")]);
    let mut cmd = daemon.cli();
    cmd.args(["run", "--no-autostart", "say it again"]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("cost"), "{stderr}");
}

#[test]
fn a_spent_budget_stops_the_turn_before_its_next_request_and_amber_cli_exits_3() {
    // The first request (a tool call) spends $0.001 and the budget is $0.0005: the
    // reply to the tool result is never asked for.
    let mock = MockLlm::start_blocking(vec![read_call(), text("never sent")]);
    let daemon = spawn_config(&mock, &priced_config());
    std::fs::write(daemon.workspace.join("a.txt"), "alpha\n").unwrap();
    let (code, lines, stderr) = run_json(&daemon, &["--max-budget-usd", "0.0005", "read a.txt"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(
        mock.request_count(),
        1,
        "a request was made past the budget"
    );

    let errors = of_type(&lines, "error");
    assert_eq!(errors.len(), 1, "{lines:?}");
    assert_eq!(errors[0]["code"], "budget_exceeded");
    let message = errors[0]["message"].as_str().unwrap();
    assert!(
        message.contains("$0.001000") && message.contains("$0.000500"),
        "the message names the spend and the budget: {message}"
    );
    let completed = of_type(&lines, "turn_completed");
    assert_eq!(completed[0]["stopReason"], "budget_exceeded");
    assert_eq!(completed[0]["error"]["code"], "budget_exceeded");
    let result = lines.last().unwrap();
    assert_eq!(result["stopReason"], "budget_exceeded", "{result}");
    assert_usd(&result["costUsd"], CALL_USD);

    // The budget is the session's: its info shows it, and the next prompt stops at once.
    let session = result["sessionId"].as_str().unwrap();
    let got = daemon.rpc_ok("session/get", json!({"sessionId": session}));
    assert_usd(&got["session"]["maxBudgetUsd"], 0.0005);
    let (code, lines, stderr) = run_json(&daemon, &["--session", session, "go on"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(mock.request_count(), 1);
    let completed = of_type(&lines, "turn_completed");
    assert_eq!(completed[0]["stopReason"], "budget_exceeded");
    // A priced turn that made no request cost nothing.
    assert_usd(&completed[0]["costUsd"], 0.0);
    assert_usd(&completed[0]["sessionCostUsd"], CALL_USD);
}

#[test]
fn max_tokens_total_stops_the_turn_whatever_the_price() {
    let mock = MockLlm::start_blocking(vec![read_call(), text("never sent")]);
    let daemon = spawn_config(&mock, &unpriced_config());
    std::fs::write(daemon.workspace.join("a.txt"), "alpha\n").unwrap();
    let (code, lines, stderr) = run_json(&daemon, &["--max-tokens-total", "1000", "read a.txt"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(mock.request_count(), 1);
    let errors = of_type(&lines, "error");
    assert_eq!(errors[0]["code"], "budget_exceeded");
    let message = errors[0]["message"].as_str().unwrap();
    assert!(
        message.contains("1100 tokens") && message.contains("1000-token"),
        "{message}"
    );
    assert_eq!(lines.last().unwrap()["stopReason"], "budget_exceeded");
}

#[test]
fn a_dollar_budget_on_a_model_without_a_price_is_refused() {
    let mock = MockLlm::start_blocking(vec![text("never sent")]);
    let daemon = spawn_config(&mock, &unpriced_config());
    let response = daemon.rpc(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string(), "maxBudgetUsd": 1.0}),
    );
    assert_eq!(response["error"]["code"], -32602, "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("maxBudgetUsd"), "{message}");
    assert!(
        message.contains("`mock-model` has no known price"),
        "{message}"
    );

    // amber-cli run says the same and runs nothing.
    let mut cmd = daemon.cli();
    cmd.args(["run", "--no-autostart", "--max-budget-usd", "1", "hello"]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("has no known price"), "{stderr}");
    assert_eq!(mock.request_count(), 0);
    // A token cap needs no price.
    new_session(&daemon, json!({"maxTokensTotal": 10}));
}

#[test]
fn a_configured_default_budget_is_refused_for_an_unpriced_model_too() {
    let mock = MockLlm::start_blocking(Vec::new());
    let config = format!("{}max_budget_usd = 2.5\n", unpriced_config());
    let daemon = spawn_config(&mock, &config);
    let response = daemon.rpc(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string()}),
    );
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[agent] max_budget_usd"),
        "{response}"
    );
}

#[test]
fn the_spend_and_the_budget_survive_a_daemon_restart() {
    let mock = MockLlm::start_blocking(vec![text("one"), text("two")]);
    let mut daemon = spawn_config(&mock, &priced_config());
    let session = new_session(&daemon, json!({"maxBudgetUsd": 0.0015}));
    let (code, _, stderr) = run_json(&daemon, &["--session", &session, "first"]);
    assert_eq!(code, Some(0), "{stderr}");

    daemon.restart();
    let got = daemon.rpc_ok("session/get", json!({"sessionId": &session}));
    assert_usd(&got["session"]["usage"]["costUsd"], CALL_USD);
    assert_usd(&got["session"]["maxBudgetUsd"], 0.0015);

    // Under budget still ($0.001 < $0.0015): one more request, which the restored total
    // adds to; then the budget is spent and the third prompt stops at once.
    let (code, lines, stderr) = run_json(&daemon, &["--session", &session, "second"]);
    assert_eq!(code, Some(0), "{stderr}");
    let completed = of_type(&lines, "turn_completed");
    assert_usd(&completed.last().unwrap()["sessionCostUsd"], 2.0 * CALL_USD);
    let (code, lines, stderr) = run_json(&daemon, &["--session", &session, "third"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(lines.last().unwrap()["stopReason"], "budget_exceeded");
    assert_eq!(mock.request_count(), 2);
}
