//! End-to-end: a session's budgets hold against every request it and its sub-agents make,
//! counted at the mock endpoint (never from the daemon's own numbers).
//!
//! Every reply the mock sends reports the same usage (1000 prompt tokens of which 400
//! cached, 100 completion tokens: 1100 tokens), which at the configured price
//! ($1 / $2 / $0.50 per million input / output / cached) costs exactly $0.001. A budget of
//! "n requests" is then `maxTokensTotal = n × 1100` or `maxBudgetUsd = n × 0.001`, and most
//! cases run in both units. What is checked: parallel sub-agents spend at most one request
//! past the budget (none when it is a whole number of requests), serial ones stop starting;
//! the confirm exchange and compaction's requests are metered like the turn's, and a turn
//! the budget stops ends `budget_exceeded`; a cancel ends requests waiting on the budget; a
//! fork inherits what its source has left, so a fork of a spent session makes no request;
//! a dollar budget sends nothing to a model without a price; absurd usage reports saturate.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{
    EVENT_TIMEOUT, Events, FAST_RETRIES, connect, eventually, of_type, prompt_turn, spawn_config,
    within,
};
use serde_json::{Value, json};

/// Tokens each mock reply reports.
const CALL_TOKENS: u64 = 1100;
/// Dollars each mock reply costs at the configured price.
const CALL_USD: f64 = 0.001;
const SUBAGENT_MARK: &str = "You are a sub-agent of amber";
const CLASSIFY: &str = r#"{"classification": [{"id": 1, "class": "prune"}, {"id": 2, "class": "prune"}, {"id": 3, "class": "prune"}, {"id": 4, "class": "prune"}]}"#;
const EXTRACT: &str = r#"{"memories": ["the file says alpha"], "skills": []}"#;

/// The unit a budget is given in.
#[derive(Debug, Clone, Copy)]
enum Unit {
    Tokens,
    Usd,
}

impl Unit {
    /// `session/new`'s budget param for `requests` requests' worth.
    fn budget(self, requests: f64) -> Value {
        match self {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Unit::Tokens => json!({"maxTokensTotal": (requests * CALL_TOKENS as f64) as u64}),
            Unit::Usd => json!({"maxBudgetUsd": requests * CALL_USD}),
        }
    }
}

/// The mock model priced, no confirm turn, room for 16 sub-agents at once, and `extra`
/// lines in `[provider]`.
fn config(provider_extra: &str) -> String {
    format!(
        "{FAST_RETRIES}{provider_extra}\n[[provider.prices]]\nmodel = \"mock-model\"\n\
         input = 1.0\noutput = 2.0\ncached = 0.5\n\n[agent]\nconfirm_finish = false\n\
         subagent_parallel = 16\n"
    )
}

/// One streamed chat-completions reply with the fixed usage.
fn reply(delta: Value, finish: &str) -> MockTurn {
    let usage = json!({"prompt_tokens": 1000, "completion_tokens": 100,
        "total_tokens": CALL_TOKENS, "prompt_tokens_details": {"cached_tokens": 400}});
    reply_with_usage(delta, finish, &usage)
}

/// One streamed chat-completions reply reporting `usage`.
fn reply_with_usage(delta: Value, finish: &str, usage: &Value) -> MockTurn {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let usage = json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
        "choices": [], "usage": usage});
    MockTurn::Raw(format!(
        "data: {}\n\ndata: {}\n\ndata: {usage}\n\ndata: [DONE]\n\n",
        chunk(delta, Value::Null),
        chunk(json!({}), json!(finish)),
    ))
}

fn text(words: &str) -> MockTurn {
    reply(json!({"role": "assistant", "content": words}), "stop")
}

fn tool_call(name: &str, arguments: &Value) -> MockTurn {
    let call = json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1",
        "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]});
    reply(call, "tool_calls")
}

/// The text of a request's last message.
fn last_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Whether the request's newest exchange is the user's `prompt` with no tool result yet
/// (amber's `<system-reminder>` tail skipped).
fn answers_a_prompt(request: &Value, prompt: &str) -> bool {
    let messages = request["messages"].as_array().unwrap();
    let newest = messages.iter().rev().find(|m| {
        m["role"] == "tool"
            || (m["role"] == "user"
                && !m["content"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("<system-reminder>"))
    });
    newest.is_some_and(|m| {
        m["role"] == "user" && m["content"].as_str().unwrap_or_default().contains(prompt)
    })
}

fn is_subagent(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with(SUBAGENT_MARK))
}

async fn session_with(client: &amber_client::Client, daemon: &TestDaemon, budget: Value) -> String {
    let mut params = json!({"cwd": daemon.workspace.display().to_string()});
    params
        .as_object_mut()
        .unwrap()
        .extend(budget.as_object().unwrap().clone());
    let info: Value = within("session/new", client.call("session/new", params))
        .await
        .expect("session/new");
    info["sessionId"].as_str().unwrap().to_owned()
}

/// Mock requests recorded (the daemon's own count is not trusted).
fn sent(mock: &MockLlm) -> usize {
    mock.request_count()
}

fn assert_budget_stop(turn: &[Value]) {
    let completed = turn.last().unwrap();
    assert_eq!(completed["type"], "turn_completed", "{turn:#?}");
    assert_eq!(completed["stopReason"], "budget_exceeded", "{completed}");
    assert_eq!(completed["error"]["code"], "budget_exceeded", "{completed}");
}

/// The parent hands `count` tasks to sub-agents (`mode`); each sub-agent answers `answer`
/// after `delay_ms`, so in parallel all of them would be in flight at once if nothing held
/// them back.
fn delegating(
    mode: &'static str,
    count: usize,
    delay_ms: u64,
    answer: fn() -> MockTurn,
) -> impl Fn(&Value) -> MockTurn + Send + Sync + 'static {
    move |request: &Value| {
        if is_subagent(request) {
            return MockTurn::Delay {
                ms: delay_ms,
                then: Box::new(answer()),
            };
        }
        if request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool")
        {
            return text("all reports are in");
        }
        let tasks: Vec<Value> = (0..count)
            .map(|i| json!({"prompt": format!("look at part {i}"), "description": format!("part {i}")}))
            .collect();
        tool_call("task", &json!({"mode": mode, "tasks": tasks}))
    }
}

fn a_report() -> MockTurn {
    text("a report")
}

/// A daemon against `mock`, a session with `budget` requests' worth in `unit`, its events.
async fn started(
    mock: &MockLlm,
    unit: Unit,
    budget: f64,
) -> (TestDaemon, amber_client::Client, String, Events) {
    let daemon = spawn_config(mock, &config(""));
    let client = connect(&daemon).await;
    let session = session_with(&client, &daemon, unit.budget(budget)).await;
    let events = Events::live(&client, &session).await;
    (daemon, client, session, events)
}

/// Budgets of 6 requests (whole) and 6.5 (the crossing request may finish: one past it).
#[tokio::test(flavor = "multi_thread")]
async fn parallel_subagents_spend_at_most_one_request_past_the_budget() {
    for (unit, budget, expected) in [
        (Unit::Tokens, 6.0, 6),
        (Unit::Usd, 6.0, 6),
        (Unit::Tokens, 6.5, 7),
        (Unit::Usd, 6.5, 7),
    ] {
        let mock = MockLlm::start(Vec::new()).await;
        mock.set_responder(delegating("parallel", 16, 200, a_report));
        let (_daemon, client, session, mut events) = started(&mock, unit, budget).await;
        let turn = prompt_turn(&client, &mut events, &session, "review all parts").await;
        let case = format!("{unit:?} budget of {budget} requests");

        assert_eq!(sent(&mock), expected, "{case}: requests at the mock");
        assert_budget_stop(&turn);
        // The sub-agents the budget stopped say why, typed and tagged with their agentId.
        let refused: Vec<&Value> = of_type(&turn, "error")
            .into_iter()
            .filter(|e| e["code"] == "budget_exceeded" && e["agentId"].is_string())
            .collect();
        assert!(!refused.is_empty(), "{case}: {turn:#?}");
        let completed = of_type(&turn, "subagent_completed");
        let stopped = completed
            .iter()
            .filter(|e| {
                e["result"]
                    .as_str()
                    .is_some_and(|r| r.contains("budget_exceeded"))
            })
            .count();
        // Every sub-agent that did not get its one request stopped for the budget.
        assert_eq!(stopped, 16 - (expected - 1), "{case}: {completed:#?}");
        // The parent's own next request was never made.
        let requests = mock.requests();
        assert!(
            !requests
                .iter()
                .any(|r| !is_subagent(r) && r["messages"].to_string().contains("a report")),
            "{case}: the parent asked again past its budget"
        );
        // The spend the daemon reports is within the documented bound too.
        let info: Value = within(
            "session/get",
            client.call("session/get", json!({"sessionId": session})),
        )
        .await
        .unwrap();
        let tokens = info["session"]["usage"]["totalTokens"].as_u64().unwrap();
        assert_eq!(tokens, expected as u64 * CALL_TOKENS, "{case}");
    }
}

/// Serial sub-agents: the tasks after the budget ran out are not started at all.
#[tokio::test(flavor = "multi_thread")]
async fn serial_subagents_stop_starting_once_the_budget_is_spent() {
    for unit in [Unit::Tokens, Unit::Usd] {
        let mock = MockLlm::start(Vec::new()).await;
        mock.set_responder(delegating("serial", 16, 0, a_report));
        let (_daemon, client, session, mut events) = started(&mock, unit, 6.0).await;
        let turn = prompt_turn(&client, &mut events, &session, "review all parts").await;
        assert_eq!(sent(&mock), 6, "{unit:?}");
        assert_budget_stop(&turn);
        assert_eq!(of_type(&turn, "subagent_started").len(), 5, "{unit:?}");
        let task = of_type(&turn, "tool_call_completed")
            .into_iter()
            .find(|e| e["agentId"].is_null())
            .unwrap();
        let output = task["output"].as_str().unwrap();
        assert_eq!(
            output
                .matches("[sub-agent not started: budget_exceeded")
                .count(),
            11,
            "{unit:?}: {output}"
        );
    }
}

/// Sub-agents waiting for the requests in flight to settle end at once when the turn is
/// cancelled, and none of them asks afterwards; a fork taken meanwhile does not get what
/// the requests in flight hold.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_ends_the_requests_waiting_on_the_budget() {
    let mock = MockLlm::start(Vec::new()).await;
    // Longer than any wait below: the admitted sub-agents stay in flight until the cancel,
    // and the others wait for them.
    mock.set_responder(delegating("parallel", 16, 120_000, a_report));
    let (_daemon, client, session, mut events) = started(&mock, Unit::Tokens, 6.0).await;
    within(
        "session/prompt",
        client.session_prompt(&session, "review all parts"),
    )
    .await
    .unwrap();
    // All sixteen started; the admitted ones are in flight (held by the mock), the rest
    // wait for them: nothing settles before the cancel, so the count cannot move.
    let mut seen = Vec::new();
    while of_type(&seen, "subagent_started").len() < 16 {
        seen.push(events.next().await);
    }
    eventually("a sub-agent's request in flight", EVENT_TIMEOUT, || {
        sent(&mock) >= 2
    })
    .await;
    let in_flight = sent(&mock);
    assert!(in_flight <= 6, "{in_flight} requests for a budget of 6");
    // A fork taken now gets the remainder less what the requests in flight hold (each at
    // least the parent's 1100 tokens).
    let fork: Value = within(
        "session/fork",
        client.call("session/fork", json!({"sessionId": session})),
    )
    .await
    .unwrap();
    let left = fork["maxTokensTotal"].as_u64().unwrap();
    let subagents_in_flight = in_flight as u64 - 1;
    assert!(
        left <= 6 * CALL_TOKENS - CALL_TOKENS - subagents_in_flight * CALL_TOKENS,
        "the fork got {left} tokens with {subagents_in_flight} sub-agent requests in flight"
    );
    let _: Value = within(
        "session/cancel",
        client.call("session/cancel", json!({"sessionId": session})),
    )
    .await
    .unwrap();
    let turn = events.turn().await;
    assert_eq!(turn.last().unwrap()["stopReason"], "cancelled", "{turn:#?}");
    assert_eq!(
        sent(&mock),
        in_flight,
        "a request went out after the cancel"
    );
}

/// A budget in dollars cannot be kept for a model without a price: a session switched to
/// one makes no request (its turn ends `budget_exceeded`, saying why).
#[tokio::test(flavor = "multi_thread")]
async fn a_dollar_budget_sends_nothing_to_a_model_without_a_price() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|_: &Value| text("hello"));
    let (_daemon, client, session, mut events) = started(&mock, Unit::Usd, 6.0).await;
    let _: Value = within(
        "session/setModel",
        client.call(
            "session/setModel",
            json!({"sessionId": session, "model": "unpriced-model"}),
        ),
    )
    .await
    .unwrap();
    let turn = prompt_turn(&client, &mut events, &session, "hello").await;
    assert_budget_stop(&turn);
    let message = turn.last().unwrap()["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`unpriced-model` has no known price"),
        "{message}"
    );
    assert_eq!(sent(&mock), 0);
}

/// Absurd usage reports from the provider saturate the spend: no panic, no wrap back under
/// the budget.
#[tokio::test(flavor = "multi_thread")]
async fn absurd_usage_saturates_the_spend_and_the_budget_still_holds() {
    fn absurd() -> MockTurn {
        let huge = u64::MAX - 5;
        let usage = json!({"prompt_tokens": huge, "completion_tokens": 5, "total_tokens": huge});
        reply_with_usage(
            json!({"role": "assistant", "content": "a costly report"}),
            "stop",
            &usage,
        )
    }
    for unit in [Unit::Tokens, Unit::Usd] {
        let mock = MockLlm::start(Vec::new()).await;
        mock.set_responder(delegating("parallel", 2, 200, absurd));
        let (_daemon, client, session, mut events) = started(&mock, unit, 6.0).await;
        let turn = prompt_turn(&client, &mut events, &session, "review two parts").await;
        assert_budget_stop(&turn);
        // Both sub-agents' requests are normally in flight together; on a loaded machine
        // the first may settle (spending everything) before the second is admitted.
        let requests = sent(&mock);
        assert!((2..=3).contains(&requests), "{unit:?}: {requests} requests");
        let info: Value = within(
            "session/get",
            client.call("session/get", json!({"sessionId": session})),
        )
        .await
        .unwrap();
        assert_eq!(
            info["session"]["usage"]["totalTokens"],
            u64::MAX,
            "{unit:?}"
        );
        // Still spent on the next prompt.
        let turn = prompt_turn(&client, &mut events, &session, "again").await;
        assert_budget_stop(&turn);
        assert_eq!(sent(&mock), requests, "{unit:?}");
    }
}

/// The silent confirm exchange is a request like any other: with the budget spent by the
/// answer, it is not sent, the turn ends `budget_exceeded`, and the unanswered question
/// does not stay in the context.
#[tokio::test(flavor = "multi_thread")]
async fn the_confirm_exchange_is_metered_too() {
    for unit in [Unit::Tokens, Unit::Usd] {
        let mock = MockLlm::start(Vec::new()).await;
        // Not DONE: that would be the finish signal, which needs no confirm exchange.
        mock.set_responder(|_: &Value| text("Hello."));
        let config = config("").replace("confirm_finish = false", "confirm_finish = true");
        let daemon = spawn_config(&mock, &config);
        let client = connect(&daemon).await;
        let session = session_with(&client, &daemon, unit.budget(1.0)).await;
        let mut events = Events::live(&client, &session).await;
        let turn = prompt_turn(&client, &mut events, &session, "hello").await;
        assert_eq!(sent(&mock), 1, "{unit:?}: the confirm question was asked");
        assert_budget_stop(&turn);
        let got: Value = within(
            "session/get",
            client.call("session/get", json!({"sessionId": session})),
        )
        .await
        .unwrap();
        let last = got["messages"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["role"], "assistant", "{unit:?}: {last}");
    }
}

/// Answers the two turns of the compaction case: a tool call then a text reply in the first
/// turn; compaction's classify and extract requests; a text reply to anything else.
fn compaction_in_the_way(request: &Value) -> MockTurn {
    if request["tools"].as_array().is_none_or(Vec::is_empty) {
        if last_text(request).contains("Classify every message") {
            return text(CLASSIFY);
        }
        return text(EXTRACT);
    }
    if answers_a_prompt(request, "read a.txt") {
        return tool_call("read", &json!({"path": "a.txt"}));
    }
    text("done")
}

/// A small window makes the compaction gate fire before the second turn's request; the
/// budget runs out at or inside compaction, and no request is made past it.
#[tokio::test(flavor = "multi_thread")]
async fn compaction_requests_are_metered_and_the_turn_ends_budget_exceeded() {
    // (unit, budget in requests, requests the mock gets): with 3, the budget is spent by
    // compaction's classify request, so its extract request is never made; with 4, by
    // the extract request, so the turn's own request is never made.
    for (unit, budget, expected) in [
        (Unit::Tokens, 3.0, 3),
        (Unit::Usd, 3.0, 3),
        (Unit::Tokens, 4.0, 4),
        (Unit::Usd, 4.0, 4),
    ] {
        let mock = MockLlm::start(Vec::new()).await;
        mock.set_responder(compaction_in_the_way);
        let daemon = spawn_config(&mock, &config("context_window = 2000\n"));
        std::fs::write(daemon.workspace.join("a.txt"), "alpha\n").unwrap();
        let client = connect(&daemon).await;
        let session = session_with(&client, &daemon, unit.budget(budget)).await;
        let mut events = Events::live(&client, &session).await;
        let case = format!("{unit:?} budget of {budget} requests");

        let first = prompt_turn(&client, &mut events, &session, "read a.txt").await;
        assert_eq!(
            first.last().unwrap()["stopReason"],
            "end_turn",
            "{case}: {first:#?}"
        );
        assert_eq!(sent(&mock), 2, "{case}");

        let second = prompt_turn(&client, &mut events, &session, "and now?").await;
        assert!(
            !of_type(&second, "compaction_started").is_empty(),
            "{case}: the gate did not fire: {second:#?}"
        );
        assert_eq!(sent(&mock), expected, "{case}: requests at the mock");
        assert_budget_stop(&second);
        let asked_after_compaction = mock
            .requests()
            .iter()
            .skip(2)
            .any(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()));
        assert!(
            !asked_after_compaction,
            "{case}: the turn's request went out"
        );
    }
}

/// A manual `session/compact` of a spent session makes no request and says why.
#[tokio::test(flavor = "multi_thread")]
async fn a_manual_compaction_of_a_spent_session_makes_no_request() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(compaction_in_the_way);
    let daemon = spawn_config(&mock, &config(""));
    std::fs::write(daemon.workspace.join("a.txt"), "alpha\n").unwrap();
    let client = connect(&daemon).await;
    let session = session_with(&client, &daemon, Unit::Tokens.budget(2.0)).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "read a.txt").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");
    assert_eq!(sent(&mock), 2);
    let err = within(
        "session/compact",
        client.call::<_, Value>("session/compact", json!({"sessionId": session})),
    )
    .await
    .expect_err("a spent session cannot compact");
    assert!(err.to_string().contains("budget exceeded"), "{err}");
    assert_eq!(sent(&mock), 2, "compaction asked past the budget");
}

/// A fork inherits what its source has left: nothing, for a spent session.
#[tokio::test(flavor = "multi_thread")]
async fn a_fork_inherits_the_remainder_of_its_source_budget() {
    for unit in [Unit::Tokens, Unit::Usd] {
        let mock = MockLlm::start(Vec::new()).await;
        mock.set_responder(compaction_in_the_way);
        let daemon = spawn_config(&mock, &config(""));
        std::fs::write(daemon.workspace.join("a.txt"), "alpha\n").unwrap();
        let client = connect(&daemon).await;
        // Three requests' worth: the first turn spends two.
        let source = session_with(&client, &daemon, unit.budget(3.0)).await;
        let mut events = Events::live(&client, &source).await;
        let turn = prompt_turn(&client, &mut events, &source, "read a.txt").await;
        assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
        assert_eq!(sent(&mock), 2);

        // A fork of it has one request left, whatever the source does next.
        let fork: Value = within(
            "session/fork",
            client.call("session/fork", json!({"sessionId": source})),
        )
        .await
        .unwrap();
        let fork = fork["sessionId"].as_str().unwrap().to_owned();
        let mut fork_events = Events::live(&client, &fork).await;
        // Two tool rounds asked for; the budget allows one request.
        let turn = prompt_turn(&client, &mut fork_events, &fork, "read a.txt").await;
        assert_eq!(
            sent(&mock),
            3,
            "{unit:?}: the fork spent past its source's budget"
        );
        assert_budget_stop(&turn);

        // The source spends its last request; a fork of it then makes none.
        let turn = prompt_turn(&client, &mut events, &source, "read a.txt").await;
        assert_budget_stop(&turn);
        assert_eq!(sent(&mock), 4);
        let spent_fork: Value = within(
            "session/fork",
            client.call("session/fork", json!({"sessionId": source})),
        )
        .await
        .unwrap();
        let spent_fork = spent_fork["sessionId"].as_str().unwrap().to_owned();
        let mut spent_events = Events::live(&client, &spent_fork).await;
        let turn = prompt_turn(&client, &mut spent_events, &spent_fork, "hello").await;
        assert_budget_stop(&turn);
        assert_eq!(
            sent(&mock),
            4,
            "{unit:?}: a fork of a spent session made a request"
        );
        // A fork of the fork: no way around the budget either.
        let again: Value = within(
            "session/fork",
            client.call("session/fork", json!({"sessionId": spent_fork})),
        )
        .await
        .unwrap();
        let again = again["sessionId"].as_str().unwrap().to_owned();
        let mut again_events = Events::live(&client, &again).await;
        let turn = prompt_turn(&client, &mut again_events, &again, "hello").await;
        assert_budget_stop(&turn);
        assert_eq!(sent(&mock), 4, "{unit:?}");
    }
}

/// `[budget] daily_usd` holds across sessions: 4 sessions digging at once (every request a
/// tool call, $0.001 each) stop once the daemon's day has spent $0.010, with the daily cap
/// named in types, having passed it by at most one request per session; the spend is in
/// `daemon/status`, a warning was announced, and a kill -9 forgets none of it.
#[tokio::test(flavor = "multi_thread")]
async fn daemon_budget_overshoot_is_at_most_one_request_per_session_and_survives_a_kill() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|request: &Value| {
        let n = request["messages"].as_array().map_or(0, Vec::len);
        tool_call("bash", &json!({"command": format!("echo dig {n}")}))
    });
    let config = format!(
        "{}\n[budget]\ndaily_usd = 0.010\nwarn_at = 0.5\n",
        config("")
    );
    let mut daemon = spawn_config(&mock, &config);
    let client = connect(&daemon).await;
    let sessions = 4;
    let mut ids = Vec::new();
    for _ in 0..sessions {
        ids.push(session_with(&client, &daemon, json!({})).await);
    }
    let mut streams = Vec::new();
    for id in &ids {
        streams.push(Events::live(&client, id).await);
    }
    for id in &ids {
        within("session/prompt", client.session_prompt(id, "dig"))
            .await
            .unwrap();
    }
    let mut warnings = 0;
    for stream in &mut streams {
        let turn = stream.turn().await;
        assert_budget_stop(&turn);
        let completed = turn.last().unwrap();
        assert_eq!(completed["error"]["limit"]["scope"], "daily", "{completed}");
        warnings += of_type(&turn, "budget_warning").len();
    }
    assert_eq!(warnings, 1, "the daily cap's warning is announced once");
    let requests = sent(&mock);
    assert!(
        requests >= 10,
        "stopped before the cap: {requests} requests"
    );
    assert!(
        requests <= 10 + sessions,
        "{requests} requests: more than one past the cap per session"
    );
    let spent = |daemon: &TestDaemon| {
        let status = daemon.rpc_ok("daemon/status", json!({}));
        let daily = status["budget"]
            .as_array()
            .and_then(|b| b.iter().find(|c| c["scope"] == "daily").cloned())
            .unwrap_or_else(|| panic!("no daily budget in {status}"));
        (
            daily["spentUsd"].as_f64().unwrap(),
            daily["capUsd"].as_f64().unwrap(),
        )
    };
    let (before, cap) = spent(&daemon);
    assert!(
        (before - requests as f64 * CALL_USD).abs() < 1e-9,
        "{before} for {requests}"
    );
    assert!((cap - 0.010).abs() < 1e-9);

    daemon.kill(libc::SIGKILL);
    daemon
        .wait_exit(std::time::Duration::from_secs(5))
        .expect("killed");
    daemon.restart();
    let (after, _) = spent(&daemon);
    assert!(
        (after - before).abs() < 1e-9,
        "the day's spend was {before}, is {after}"
    );
    // A new session of the spent day sends nothing.
    let client = connect(&daemon).await;
    let fresh = session_with(&client, &daemon, json!({})).await;
    let mut events = Events::live(&client, &fresh).await;
    let turn = prompt_turn(&client, &mut events, &fresh, "dig").await;
    assert_budget_stop(&turn);
    assert_eq!(sent(&mock), requests, "a request went out on a spent day");
}

/// `[budget.models."NAME"]` caps the requests to that model only: a session on it stops at
/// the cap (`limit.scope: "model"`), a session on another model goes on.
#[tokio::test(flavor = "multi_thread")]
async fn a_model_cap_refuses_only_that_model() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|request: &Value| {
        let n = request["messages"].as_array().map_or(0, Vec::len);
        if n > 12 {
            return text("enough");
        }
        tool_call("bash", &json!({"command": format!("echo dig {n}")}))
    });
    let config = format!(
        "{}\n[[provider.prices]]\nmodel = \"other-model\"\ninput = 1.0\noutput = 2.0\n\
         cached = 0.5\n\n[budget.models.\"mock-model\"]\ndaily_usd = 0.003\n",
        config("")
    );
    let daemon = spawn_config(&mock, &config);
    let client = connect(&daemon).await;
    let capped = session_with(&client, &daemon, json!({})).await;
    let other = session_with(&client, &daemon, json!({"model": "other-model"})).await;
    let mut events = Events::live(&client, &capped).await;
    let turn = prompt_turn(&client, &mut events, &capped, "dig").await;
    assert_budget_stop(&turn);
    let completed = turn.last().unwrap();
    assert_eq!(completed["error"]["limit"]["scope"], "model", "{completed}");
    assert!(
        completed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[budget.models.\"mock-model\"] daily_usd"),
        "{completed}"
    );
    let mut events = Events::live(&client, &other).await;
    let turn = prompt_turn(&client, &mut events, &other, "dig").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");
    let status = daemon.rpc_ok("daemon/status", json!({}));
    let model = &status["budget"][0];
    assert_eq!(model["scope"], "model", "{status}");
    assert_eq!(model["key"], "mock-model", "{status}");
    assert!(
        (model["spentUsd"].as_f64().unwrap() - 0.003).abs() < 1e-9,
        "{status}"
    );
}
