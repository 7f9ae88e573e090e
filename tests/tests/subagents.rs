//! Sub-agents (`task` tool): serial and parallel runs, each with its own context, tagged
//! events, and the final replies returned to the parent as the tool output.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{Events, connect, messages, new_session, prompt_turn, spawn};
use serde_json::{Value, json};

const SUBAGENT_MARK: &str = "You are a sub-agent of amber";

/// The last message of a request and its text as the conversation has them: without
/// amber's `<system-reminder>` tail (a message of its own after a tool result, else
/// appended to the last user message).
fn last_without_tail(messages: &[Value]) -> (Value, String) {
    let text = |m: &Value| m["content"].as_str().unwrap_or("").to_owned();
    let mut rest = messages;
    if let [before @ .., last] = rest
        && last["role"] == "user"
        && text(last).starts_with("<system-reminder>")
    {
        rest = before;
    }
    let last = rest.last().cloned().unwrap_or_default();
    let content = amber_tests::steps::without_tail(&text(&last)).to_owned();
    (last, content)
}

/// Answers by conversation: the parent delegates, each sub-agent answers its task after a
/// delay, and every confirm question gets DONE.
fn responder(mode: &'static str) -> impl Fn(&Value) -> MockTurn + Send + Sync + 'static {
    move |request: &Value| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let (last, content) = last_without_tail(&messages);
        let is_subagent = messages[0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with(SUBAGENT_MARK));
        if content.contains("Are you finished") {
            return MockTurn::text("DONE");
        }
        if is_subagent && content == "look at alpha" {
            // One sub-agent uses a tool first: its calls are tagged with its agentId.
            return MockTurn::tool_call("bash", &json!({"command": "echo alpha-files"}));
        }
        if is_subagent {
            let task = if last["role"] == "tool" {
                "alpha".to_owned()
            } else {
                content.trim_start_matches("look at ").to_owned()
            };
            return MockTurn::Delay {
                ms: 300,
                then: Box::new(MockTurn::text(format!("report on {task}"))),
            };
        }
        if last["role"] == "tool" {
            return MockTurn::text("all reports are in");
        }
        MockTurn::tool_call(
            "task",
            &json!({
                "mode": mode,
                "tasks": [
                    {"prompt": "look at alpha", "description": "alpha"},
                    {"prompt": "look at beta", "description": "beta"},
                    {"prompt": "look at gamma", "description": "gamma"},
                ]
            }),
        )
    }
}

async fn delegate(mode: &'static str) -> (MockLlm, Vec<Value>) {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(responder(mode));
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "delegate the reviews").await;
    (mock, turn)
}

fn check_turn(turn: &[Value]) {
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:?}");
    let started: Vec<&Value> = turn
        .iter()
        .filter(|e| e["type"] == "subagent_started")
        .collect();
    let completed: Vec<&Value> = turn
        .iter()
        .filter(|e| e["type"] == "subagent_completed")
        .collect();
    assert_eq!(started.len(), 3, "{turn:?}");
    assert_eq!(completed.len(), 3, "{turn:?}");
    for event in started.iter().chain(&completed) {
        assert!(event["agentId"].is_string(), "{event}");
    }
    // The sub-agent's tool call reached subscribers, tagged with that sub-agent's id.
    let alpha = started.iter().find(|e| e["task"] == "alpha").unwrap();
    let bash = turn
        .iter()
        .find(|e| e["type"] == "tool_call_started" && e["name"] == "bash")
        .expect("the sub-agent's bash call");
    // PROTOCOL.md's name is `agentId`; `agent` stays for existing clients.
    assert_eq!(bash["agentId"], alpha["agentId"], "{bash}");
    assert_eq!(bash["agent"], alpha["agentId"], "{bash}");
    for event in turn.iter().filter(|e| e["agent"].is_string()) {
        assert_eq!(event["agentId"], event["agent"], "{event}");
    }
    let results: Vec<&str> = completed
        .iter()
        .map(|e| e["result"].as_str().unwrap())
        .collect();
    for name in ["alpha", "beta", "gamma"] {
        assert!(
            results.contains(&format!("report on {name}").as_str()),
            "{results:?}"
        );
    }
    // Sub-agents' own text never streams as the session's reply.
    let streamed: String = turn
        .iter()
        .filter(|e| e["type"] == "message_delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "all reports are in");
    // The parent's task call completed with every report, in task order.
    let done = turn
        .iter()
        .find(|e| e["type"] == "tool_call_completed" && e["agent"].is_null())
        .unwrap();
    let output = done["output"].as_str().unwrap();
    let positions: Vec<usize> = ["report on alpha", "report on beta", "report on gamma"]
        .iter()
        .map(|r| {
            output
                .find(r)
                .unwrap_or_else(|| panic!("{r} missing: {output}"))
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{output}");
    check_task_started_first(turn);
    check_turn_usage_counts_the_subagents(turn);
}

/// `turn_completed.usage` is every call of the turn, the sub-agents' included.
fn check_turn_usage_counts_the_subagents(turn: &[Value]) {
    let calls: Vec<&Value> = turn.iter().filter(|e| e["type"] == "usage").collect();
    assert!(
        calls.iter().any(|e| e["agentId"].is_string()),
        "sub-agents' calls report usage: {calls:?}"
    );
    let spent: u64 = calls
        .iter()
        .map(|e| e["usage"]["totalTokens"].as_u64().unwrap())
        .sum();
    assert!(spent > 0);
    assert_eq!(
        turn.last().unwrap()["usage"]["totalTokens"].as_u64(),
        Some(spent),
        "{:?}",
        turn.last()
    );
}

/// The parent's `task` call is announced (durably, with a lower seq) before any of its
/// sub-agents start.
fn check_task_started_first(turn: &[Value]) {
    let seq = |e: &Value| e["seq"].as_u64().expect("durable events carry seq");
    let task = turn
        .iter()
        .find(|e| e["type"] == "tool_call_started" && e["name"] == "task")
        .expect("the parent's task call");
    let first_subagent = turn
        .iter()
        .filter(|e| e["type"] == "subagent_started")
        .map(seq)
        .min()
        .unwrap();
    assert!(
        seq(task) < first_subagent,
        "task's tool_call_started (seq {}) after subagent_started (seq {first_subagent})",
        seq(task)
    );
    let position = |pred: &dyn Fn(&Value) -> bool| turn.iter().position(pred).unwrap();
    assert!(
        position(&|e| e["type"] == "tool_call_started" && e["name"] == "task")
            < position(&|e| e["type"] == "subagent_started"),
        "delivered out of order: {turn:?}"
    );
}

fn subagent_requests(mock: &MockLlm) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .filter(|r| {
            messages(r)[0]["content"]
                .as_str()
                .is_some_and(|s| s.starts_with(SUBAGENT_MARK))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_subagents_run_concurrently_and_report_in_order() {
    let (mock, turn) = delegate("parallel").await;
    check_turn(&turn);
    assert!(
        mock.max_concurrent_delays() >= 2,
        "parallel sub-agents never overlapped ({} at most)",
        mock.max_concurrent_delays()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn serial_subagents_run_one_at_a_time_with_their_own_context_and_no_task_tool() {
    let (mock, turn) = delegate("serial").await;
    check_turn(&turn);
    assert_eq!(mock.max_concurrent_delays(), 1);
    let requests = subagent_requests(&mock);
    assert!(!requests.is_empty());
    for request in &requests {
        let msgs = messages(request);
        // Own context: the sub-agent prompt and its task, never the parent's conversation.
        assert!(
            msgs.iter().all(|m| !m["content"]
                .as_str()
                .is_some_and(|c| c.contains("delegate the reviews"))),
            "{request}"
        );
        // The same tools minus `task`.
        let tools = amber_tests::steps::offered_tools(request);
        assert!(
            !tools.iter().any(|t| t == "task") && tools.iter().any(|t| t == "bash"),
            "{tools:?}"
        );
    }
    // Serial sub-agents share the system-prompt prefix (warm provider caches).
    let first_system = &messages(&requests[0])[0];
    assert!(requests.iter().all(|r| &messages(r)[0] == first_system));
    // After the sub-agent prompt, the session's head blocks, as in the parent's requests.
    let head = first_system["content"].as_str().unwrap();
    assert!(
        head.contains("\n\n# Environment (at session start)\n"),
        "{head}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_the_turn_reaches_running_subagents() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|request: &Value| {
        let msgs = request["messages"].as_array().cloned().unwrap_or_default();
        let sub = msgs[0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with(SUBAGENT_MARK));
        if sub {
            // A sub-agent stuck on a slow model.
            return MockTurn::Slow {
                chunks: (0..200).map(|i| format!("w{i} ")).collect(),
                interval_ms: 50,
            };
        }
        MockTurn::tool_call(
            "task",
            &json!({"prompt": "take your time", "description": "slow"}),
        )
    });
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    amber_tests::steps::within("prompt", client.session_prompt(&session, "delegate"))
        .await
        .unwrap();
    events.until("subagent_started").await;
    // Cancel while the sub-agent's request is streaming (the parent's was the first).
    amber_tests::steps::eventually(
        "the sub-agent's request",
        std::time::Duration::from_secs(10),
        || mock.request_count() >= 2,
    )
    .await;
    let cancelled = amber_tests::steps::within("cancel", client.session_cancel(&session))
        .await
        .unwrap();
    assert!(cancelled.cancelled);
    let rest = events.turn().await;
    assert_eq!(rest.last().unwrap()["stopReason"], "cancelled");
    let done = rest
        .iter()
        .find(|e| e["type"] == "subagent_completed")
        .expect("the sub-agent reported how it ended");
    assert!(
        done["result"].as_str().unwrap().contains("cancelled"),
        "{done}"
    );
    amber_tests::steps::eventually(
        "the sub-agent's stream to be dropped",
        std::time::Duration::from_secs(5),
        || mock.interrupted_streams() >= 1,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_subagents_use_the_configured_subagent_model_and_the_parent_keeps_its_own() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(responder("parallel"));
    let daemon =
        amber_tests::steps::spawn_config(&mock, "[agents]\nsubagent_model = \"cheap-model-1\"\n");
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "delegate the reviews").await;
    assert!(
        turn.iter().any(|e| e["type"] == "turn_completed"),
        "{turn:#?}"
    );
    let requests = mock.requests();
    let is_subagent = |r: &Value| {
        r["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with(SUBAGENT_MARK))
    };
    let (children, parent): (Vec<&Value>, Vec<&Value>) =
        requests.iter().partition(|r| is_subagent(r));
    // Three tasks, one with a tool call (and their confirm exchanges).
    assert!(children.len() >= 4, "{}", children.len());
    for child in children {
        assert_eq!(child["model"], "cheap-model-1");
    }
    for request in parent {
        assert_eq!(
            request["model"], "mock-model",
            "the parent keeps the session's model"
        );
    }
}

/// A sub-agent that never finishes: each of its requests calls a tool again (a new command
/// each time, so no loop guard stops it first); the parent delegates once with `task_args`.
fn endless_subagent(
    task_args: Value,
    command: &'static str,
) -> impl Fn(&Value) -> MockTurn + Send + Sync + 'static {
    move |request: &Value| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let (last, content) = last_without_tail(&messages);
        let is_subagent = messages[0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with(SUBAGENT_MARK));
        if content.contains("Are you finished") {
            return MockTurn::text("DONE");
        }
        if is_subagent {
            let command = command.replace("{n}", &messages.len().to_string());
            return MockTurn::tool_call("bash", &json!({ "command": command }));
        }
        if last["role"] == "tool" {
            return MockTurn::text("noted");
        }
        let mut args = task_args.clone();
        args["prompt"] = json!("dig forever");
        MockTurn::tool_call("task", &args)
    }
}

/// Each cap stops a sub-agent with a typed reason its parent sees: in the tool output, in
/// `subagent_completed {stopReason, limit}`; a cap above the configured ceiling runs
/// nothing.
#[tokio::test(flavor = "multi_thread")]
async fn subagents_stop_at_their_own_caps_with_a_typed_reason() {
    struct Case {
        name: &'static str,
        task_args: Value,
        command: &'static str,
        /// The limit's kind, or the text of the refused call.
        expect: Result<&'static str, &'static str>,
        /// Sub-agent requests the mock may see at most.
        most_requests: usize,
    }
    let cases = [
        Case {
            name: "tokens",
            task_args: json!({"max_tokens": 400}),
            command: "echo step {n}",
            expect: Ok("tokens"),
            most_requests: 20,
        },
        Case {
            name: "requests",
            task_args: json!({"max_requests": 2}),
            command: "echo step {n}",
            expect: Ok("requests"),
            most_requests: 2,
        },
        Case {
            name: "seconds",
            task_args: json!({"max_seconds": 1}),
            command: "sleep 30 # {n}",
            expect: Ok("seconds"),
            most_requests: 1,
        },
        Case {
            name: "above the ceiling",
            task_args: json!({"max_tokens": 1_000_000}),
            command: "echo step {n}",
            expect: Err("[agents] subagent_max_tokens = 50000"),
            most_requests: 0,
        },
    ];
    for case in cases {
        let mock = MockLlm::start(Vec::new()).await;
        mock.set_responder(endless_subagent(case.task_args, case.command));
        let daemon =
            amber_tests::steps::spawn_config(&mock, "[agents]\nsubagent_max_tokens = 50000\n");
        let client = connect(&daemon).await;
        let session = new_session(&client, &daemon, None).await;
        let mut events = Events::live(&client, &session).await;
        let turn = prompt_turn(&client, &mut events, &session, "delegate").await;
        let name = case.name;
        assert_eq!(
            turn.last().unwrap()["stopReason"],
            "end_turn",
            "{name}: {turn:#?}"
        );
        let task_output = turn
            .iter()
            .find(|e| e["type"] == "tool_call_completed" && e["agentId"].is_null())
            .map(|e| e["output"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        let subagent_requests = mock
            .requests()
            .iter()
            .filter(|r| {
                r["messages"][0]["content"]
                    .as_str()
                    .is_some_and(|s| s.starts_with(SUBAGENT_MARK))
            })
            .count();
        assert!(
            subagent_requests <= case.most_requests,
            "{name}: {subagent_requests} sub-agent requests"
        );
        match case.expect {
            Ok(kind) => {
                let completed = turn
                    .iter()
                    .find(|e| e["type"] == "subagent_completed")
                    .unwrap_or_else(|| panic!("{name}: no subagent_completed: {turn:#?}"));
                assert_eq!(completed["stopReason"], "budget_exceeded", "{name}");
                assert_eq!(completed["limit"]["scope"], "subagent", "{name}");
                assert_eq!(completed["limit"]["kind"], kind, "{name}");
                assert!(
                    completed["limit"]["used"].as_f64() >= completed["limit"]["cap"].as_f64(),
                    "{name}: {completed}"
                );
                let typed = format!("[sub-agent stopped: budget_exceeded (subagent {kind} ");
                assert!(task_output.contains(&typed), "{name}: {task_output}");
                if kind == "requests" {
                    assert_eq!(subagent_requests, 2, "{name}");
                }
            }
            Err(refused) => {
                assert!(task_output.contains(refused), "{name}: {task_output}");
                assert!(
                    !turn.iter().any(|e| e["type"] == "subagent_started"),
                    "{name}"
                );
            }
        }
    }
}

/// Past `[agents] max_running`, a foreground sub-agent waits for a slot, and says so: one
/// runs at a time, the others start only as one ends.
#[tokio::test(flavor = "multi_thread")]
async fn foreground_subagents_past_the_daemon_cap_wait_visibly_for_a_slot() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(responder("parallel"));
    let daemon = amber_tests::steps::spawn_config(&mock, "[agents]\nmax_running = 1\n");
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "delegate the reviews").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");
    let queued: Vec<&Value> = turn
        .iter()
        .filter(|e| e["type"] == "subagent_queued")
        .collect();
    assert_eq!(queued.len(), 2, "{turn:#?}");
    // In event order, a sub-agent starts only when none runs.
    let mut running = 0;
    for event in &turn {
        match event["type"].as_str() {
            Some("subagent_started") => {
                running += 1;
                assert_eq!(running, 1, "two sub-agents ran at once: {turn:#?}");
            }
            Some("subagent_completed") => running -= 1,
            _ => {}
        }
    }
    for waiting in queued {
        let id = &waiting["agentId"];
        let at = |ty: &str| {
            turn.iter()
                .position(|e| e["type"] == ty && &e["agentId"] == id)
                .unwrap()
        };
        assert!(at("subagent_queued") < at("subagent_started"));
    }
}

/// A sub-agent's wall clock counts from when it runs, not while it waits for a slot: the
/// second of two tasks, capped at 1 s, waits 1.5 s behind the first and still finishes.
#[tokio::test(flavor = "multi_thread")]
async fn a_subagents_wall_clock_starts_when_it_gets_a_slot() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|request: &Value| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let (last, content) = last_without_tail(&messages);
        if content.contains("Are you finished") {
            return MockTurn::text("DONE");
        }
        let is_subagent = messages[0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with(SUBAGENT_MARK));
        if is_subagent {
            let ms = if content == "slow" { 1500 } else { 0 };
            return MockTurn::Delay {
                ms,
                then: Box::new(MockTurn::text(format!("report on {content}"))),
            };
        }
        if last["role"] == "tool" {
            return MockTurn::text("both in");
        }
        MockTurn::tool_call(
            "task",
            &json!({"mode": "parallel", "tasks": [
                {"prompt": "slow", "description": "slow"},
                {"prompt": "quick", "description": "quick", "max_seconds": 1}
            ]}),
        )
    });
    let daemon = amber_tests::steps::spawn_config(&mock, "[agents]\nmax_running = 1\n");
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "delegate").await;
    let completed: Vec<&Value> = turn
        .iter()
        .filter(|e| e["type"] == "subagent_completed")
        .collect();
    assert_eq!(completed.len(), 2, "{turn:#?}");
    for event in completed {
        assert_eq!(event["stopReason"], "end_turn", "{event}");
    }
}
