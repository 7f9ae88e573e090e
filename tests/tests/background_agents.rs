//! Background sub-agents (`task {background: true}`): each task a child session of its
//! own, its result delivered into the parent's conversation exactly once — across a kill
//! -9 of amberd too — under its own caps, within the daemon's concurrency caps.

use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::daemon::TestDaemon;
use amber_tests::steps::{Events, connect, eventually, new_session, prompt_turn, spawn_config};
use serde_json::{Value, json};

const SUBAGENT_MARK: &str = "You are a sub-agent of amber";
const DELIVERY: &str = "amber_delivery_";

fn text_of(message: &Value) -> String {
    let text = message["content"].as_str().unwrap_or("");
    amber_tests::steps::without_tail(text).to_owned()
}

/// The conversation's messages, the `<system-reminder>` tail left out.
fn conversation(request: &Value) -> Vec<Value> {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    messages
        .into_iter()
        .filter(|m| !(m["role"] == "user" && text_of(m).starts_with("<system-reminder>")))
        .collect()
}

fn is_subagent(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with(SUBAGENT_MARK))
}

/// Delivered results in a conversation (a request's, or `session/get`'s): the tool
/// messages that carry them.
fn delivered(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["tool_call_id"].as_str().or(m["toolCallId"].as_str()))
        .filter(|id| id.starts_with(DELIVERY))
        .map(str::to_owned)
        .collect()
}

/// A child answers its task after `delay_ms`; one whose task is "dig forever" calls a tool
/// forever. The parent fans out with `fanout`, then either waits (`task_wait`) or ends its
/// turn and is woken by each result; it says so once `expected` results are in its
/// conversation.
fn responder(
    fanout: Value,
    delay_ms: fn(&str) -> u64,
    expected: usize,
    wait: bool,
) -> impl Fn(&Value) -> MockTurn + Send + Sync + 'static {
    move |request: &Value| {
        let messages = conversation(request);
        let last = messages.last().cloned().unwrap_or_default();
        let content = text_of(&last);
        if content.contains("Are you finished") {
            return MockTurn::text("DONE");
        }
        if is_subagent(request) {
            let task = messages
                .iter()
                .find(|m| m["role"] == "user")
                .map(text_of)
                .unwrap_or_default();
            if task.contains("dig forever") {
                let n = messages.len();
                return MockTurn::tool_call("bash", &json!({"command": format!("echo dig {n}")}));
            }
            let name = task.trim_start_matches("look at ").to_owned();
            let name = name
                .lines()
                .last()
                .unwrap_or_default()
                .trim_start_matches("look at ");
            return MockTurn::Delay {
                ms: delay_ms(name),
                then: Box::new(MockTurn::text(format!("report on {name}"))),
            };
        }
        let results = delivered(&messages).len();
        if results >= expected {
            return MockTurn::text(format!("all {results} reports are in"));
        }
        let fanned_out = messages.iter().any(|m| {
            m["tool_calls"]
                .as_array()
                .is_some_and(|calls| calls.iter().any(|c| c["function"]["name"] == "task"))
        });
        if !fanned_out {
            return MockTurn::tool_call("task", &fanout);
        }
        if wait {
            MockTurn::tool_call("task_wait", &json!({"timeout_secs": 60}))
        } else {
            MockTurn::text(format!("{results} of {expected} reports so far"))
        }
    }
}

fn children_of(daemon: &TestDaemon, parent: &str) -> Vec<Value> {
    daemon.rpc_ok("session/list", json!({"parent": parent}))["sessions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn parent_messages(daemon: &TestDaemon, session: &str) -> Vec<Value> {
    daemon.rpc_ok("session/get", json!({ "sessionId": session }))["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn tasks(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|name| json!({"prompt": format!("look at {name}"), "description": name}))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn five_capped_children_report_once_and_one_over_its_token_cap_stops_typed() {
    let mut all = tasks(&["alpha", "beta", "gamma", "delta"]);
    all.push(json!({"prompt": "dig forever", "description": "digger", "max_tokens": 300}));
    let fanout = json!({"background": true, "max_tokens": 20000, "tasks": all});
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(responder(fanout, |_| 200, 5, true));
    let daemon = spawn_config(&mock, "[agents]\nsubagent_max_tokens = 50000\n");
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "fan out").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");

    // The call answered at once with five handles; five child sessions exist.
    let children = children_of(&daemon, &session);
    assert_eq!(children.len(), 5, "{children:#?}");
    for child in &children {
        assert_eq!(child["parent"]["sessionId"], session.as_str(), "{child}");
        assert!(
            child["parent"]["agentId"]
                .as_str()
                .is_some_and(|a| a.starts_with("agent_")),
            "{child}"
        );
    }
    // Every result is in the parent's conversation exactly once.
    let messages = parent_messages(&daemon, &session);
    let mut ids = delivered(&messages);
    ids.sort();
    let mut expected: Vec<String> = children
        .iter()
        .map(|c| format!("{DELIVERY}{}", c["parent"]["agentId"].as_str().unwrap()))
        .collect();
    expected.sort();
    assert_eq!(ids, expected, "{messages:#?}");
    // The digger stopped at its own cap, with the typed reason the parent reads.
    let digger = children
        .iter()
        .find(|c| c["parent"]["task"] == "digger")
        .unwrap();
    assert_eq!(digger["parent"]["result"]["stopReason"], "budget_exceeded");
    let text = digger["parent"]["result"]["text"].as_str().unwrap();
    assert!(
        text.starts_with("[sub-agent stopped: budget_exceeded (subagent tokens "),
        "{text}"
    );
    assert!(
        messages.iter().any(|m| m["role"] == "tool"
            && text_of(m).contains("(subagent tokens ")
            && text_of(m).contains("digger")),
        "the parent read the typed reason"
    );
    for child in children.iter().filter(|c| c["parent"]["task"] != "digger") {
        let result = &child["parent"]["result"];
        assert_eq!(result["stopReason"], "end_turn", "{child}");
        let task = child["parent"]["task"].as_str().unwrap();
        assert_eq!(result["text"], format!("report on {task}"), "{child}");
    }
    // Each is marked delivered once the parent has it.
    eventually(
        "every child marked delivered",
        Duration::from_secs(10),
        || {
            children_of(&daemon, &session)
                .iter()
                .all(|c| c["parent"]["state"] == "delivered")
        },
    )
    .await;
    // A child has none of the parent-only tools: no child starts another.
    for request in mock.requests().iter().filter(|r| is_subagent(r)) {
        let tools = amber_tests::steps::offered_tools(request);
        for parent_only in ["task", "task_status", "task_wait", "task_cancel"] {
            assert!(!tools.iter().any(|t| t == parent_only), "{tools:?}");
        }
    }
}

/// Where a kill -9 lands.
#[derive(Debug, Clone, Copy)]
enum KillWhen {
    /// All three children are running.
    ChildrenRun,
    /// The first result is in the parent's conversation; two children still run.
    FirstResultIn,
    /// Two results are in; the last child runs.
    TwoResultsIn,
}

/// Children answer after 0.3, 2.5 and 5 s, while their parent is idle: each result wakes
/// it. The daemon is killed at each moment of the table and started again. Every result
/// reaches the parent exactly once, and the parent answers once all are in.
#[tokio::test(flavor = "multi_thread")]
async fn a_kill_while_children_run_delivers_every_result_exactly_once() {
    for when in [
        KillWhen::ChildrenRun,
        KillWhen::FirstResultIn,
        KillWhen::TwoResultsIn,
    ] {
        kill_and_count(when).await;
    }
}

async fn kill_and_count(when: KillWhen) {
    let fanout = json!({"background": true, "tasks": tasks(&["one", "two", "three"])});
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(responder(
        fanout,
        |name| match name {
            "one" => 300,
            "two" => 2500,
            _ => 5000,
        },
        3,
        false,
    ));
    let mut daemon = spawn_config(&mock, "");
    let session = {
        let client = connect(&daemon).await;
        let session = new_session(&client, &daemon, None).await;
        client.session_prompt(&session, "fan out").await.unwrap();
        session
    };
    let in_parent = |daemon: &TestDaemon| delivered(&parent_messages(daemon, &session)).len();
    match when {
        KillWhen::ChildrenRun => {
            eventually("three children running", Duration::from_secs(20), || {
                mock.requests().iter().filter(|r| is_subagent(r)).count() >= 3
            })
            .await;
        }
        KillWhen::FirstResultIn => {
            eventually("one result in", Duration::from_secs(20), || {
                in_parent(&daemon) >= 1
            })
            .await;
        }
        KillWhen::TwoResultsIn => {
            eventually("two results in", Duration::from_secs(20), || {
                in_parent(&daemon) >= 2
            })
            .await;
        }
    }
    daemon.kill(libc::SIGKILL);
    daemon.wait_exit(Duration::from_secs(5)).expect("killed");
    daemon.restart();

    // The children go on, their results reach the parent, and the parent takes them in a
    // turn of its own.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let messages = parent_messages(&daemon, &session);
        let done = delivered(&messages).len() >= 3
            && messages
                .last()
                .is_some_and(|m| text_of(m).starts_with("all 3 reports"));
        if done {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{when:?}: the results never all arrived\nparent: {messages:#?}\nchildren: {:#?}\n{}",
            children_of(&daemon, &session),
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // And no result comes twice, now or later.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let messages = parent_messages(&daemon, &session);
    let mut ids = delivered(&messages);
    let count = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(count, 3, "{when:?}: {messages:#?}");
    assert_eq!(ids.len(), 3, "{when:?}: {messages:#?}");
    let log = std::fs::read_to_string(daemon.session_log(&session)).unwrap();
    for id in &ids {
        let completed = log
            .lines()
            .filter(|l| l.contains("tool_call_completed") && l.contains(id.as_str()))
            .count();
        assert_eq!(
            completed, 1,
            "{when:?}: {id} completed {completed} times in the log"
        );
    }
    for child in children_of(&daemon, &session) {
        let result = &child["parent"]["result"];
        assert_eq!(result["stopReason"], "end_turn", "{when:?}: {child}");
    }
}

/// A parent whose budget its three endless children spend: each child stops before its
/// next request once the family's spend reaches the parent's budget, with the parent's
/// cap named in types; the spend passes the budget by at most one request per session.
#[tokio::test(flavor = "multi_thread")]
async fn the_parents_budget_halts_its_running_children() {
    let digger = |n: usize| json!({"prompt": "dig forever", "description": format!("digger {n}")});
    let fanout = json!({"background": true, "tasks": [digger(1), digger(2), digger(3)]});
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(responder(fanout, |_| 0, 3, false));
    let daemon = spawn_config(&mock, "");
    let client = connect(&daemon).await;
    let budget = 30_000u64;
    let session: String = {
        let info = daemon.rpc_ok(
            "session/new",
            json!({"cwd": daemon.workspace.to_string_lossy(), "maxTokensTotal": budget}),
        );
        info["sessionId"].as_str().unwrap().to_owned()
    };
    let mut events = Events::live(&client, &session).await;
    prompt_turn(&client, &mut events, &session, "fan out").await;
    eventually("every child stopped", Duration::from_secs(60), || {
        let children = children_of(&daemon, &session);
        children.len() == 3 && children.iter().all(|c| !c["parent"]["result"].is_null())
    })
    .await;
    let children = children_of(&daemon, &session);
    for child in &children {
        let result = &child["parent"]["result"];
        assert_eq!(result["stopReason"], "budget_exceeded", "{child}");
        let text = result["text"].as_str().unwrap();
        assert!(text.contains("(parent tokens "), "{text}");
    }
    // Overshoot: what the parent and its children used past the budget is at most one
    // request per session (the costliest a child made stands for each).
    let parent = daemon.rpc_ok("session/get", json!({ "sessionId": session }));
    let spent: u64 = parent["session"]["usage"]["totalTokens"].as_u64().unwrap()
        + children
            .iter()
            .map(|c| c["usage"]["totalTokens"].as_u64().unwrap())
            .sum::<u64>();
    let costliest = mock
        .requests()
        .iter()
        .filter(|r| is_subagent(r))
        // The mock counts a request's body bytes / 4 as its prompt, plus a short reply.
        .map(|r| (serde_json::to_string(r).unwrap().len() as u64).div_ceil(4) + 100)
        .max()
        .unwrap();
    assert!(
        spent >= budget,
        "the children stopped early: {spent} of {budget}"
    );
    let sessions = 4;
    assert!(
        spent - budget <= sessions * costliest,
        "overshoot {} tokens, more than {sessions} requests of at most {costliest}",
        spent - budget
    );
    // The spent parent's next turn stops at once, its budget named in types.
    let turn = prompt_turn(&client, &mut events, &session, "fan out again").await;
    let completed = turn.last().unwrap();
    assert_eq!(completed["stopReason"], "budget_exceeded", "{completed}");
    assert_eq!(
        completed["error"]["limit"]["scope"], "session",
        "{completed}"
    );
    assert_eq!(children_of(&daemon, &session).len(), 3);
}

/// Past `[agents] max_running` children wait, queued and visible; a cancelled queued
/// child never starts, and its result (cancelled) still reaches the parent once.
#[tokio::test(flavor = "multi_thread")]
async fn children_past_the_cap_queue_visibly_and_a_cancelled_one_never_starts() {
    let fanout = json!({"background": true, "tasks": tasks(&["one", "two", "three"])});
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(move |request: &Value| {
        let messages = conversation(request);
        let last = messages.last().cloned().unwrap_or_default();
        if text_of(&last).contains("Are you finished") {
            return MockTurn::text("DONE");
        }
        if is_subagent(request) {
            return MockTurn::Delay {
                ms: 1500,
                then: Box::new(MockTurn::text("report")),
            };
        }
        let called = |name: &str| {
            messages.iter().any(|m| {
                m["tool_calls"]
                    .as_array()
                    .is_some_and(|calls| calls.iter().any(|c| c["function"]["name"] == name))
            })
        };
        if !called("task") {
            return MockTurn::tool_call("task", &fanout);
        }
        if !called("task_status") {
            return MockTurn::tool_call("task_status", &json!({}));
        }
        if !called("task_cancel") {
            // The third task's handle, from the status table.
            let output: Value = serde_json::from_str(&text_of(&last)).unwrap_or_default();
            let table: Value = output["output"]
                .as_str()
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or_default();
            let third = table
                .as_array()
                .and_then(|rows| rows.iter().find(|r| r["task"] == "three"))
                .map(|r| r["agentId"].clone())
                .unwrap_or_default();
            return MockTurn::tool_call("task_cancel", &json!({ "agentId": third }));
        }
        if delivered(&messages).len() < 3 {
            return MockTurn::tool_call("task_wait", &json!({"timeout_secs": 30}));
        }
        MockTurn::text("all in")
    });
    let daemon = spawn_config(&mock, "[agents]\nmax_running = 1\n");
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "fan out").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");
    let outputs: Vec<String> = turn
        .iter()
        .filter(|e| e["type"] == "tool_call_completed")
        .map(|e| e["output"].as_str().unwrap_or_default().to_owned())
        .collect();
    // One ran at a time: right after the fan-out two of three were queued.
    let status = outputs.iter().find(|o| o.contains("\"state\"")).unwrap();
    assert_eq!(status.matches("\"queued\"").count(), 2, "{status}");
    assert_eq!(status.matches("\"running\"").count(), 1, "{status}");
    let children = children_of(&daemon, &session);
    let third = children
        .iter()
        .find(|c| c["parent"]["task"] == "three")
        .unwrap();
    assert_eq!(
        third["parent"]["result"]["stopReason"], "cancelled",
        "{third}"
    );
    assert_eq!(
        third["usage"]["totalTokens"], 0,
        "it never started: {third}"
    );
    let messages = parent_messages(&daemon, &session);
    let mut ids = delivered(&messages);
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "{messages:#?}");
}

/// Cost before fan-out: a `task` call says what its sub-agents may spend at most; above
/// `[agents] approve_fanout_usd` it asks a person, and with nobody to ask it is denied.
#[tokio::test(flavor = "multi_thread")]
async fn a_fanout_shows_its_estimate_and_over_the_threshold_asks_first() {
    // $1 per million input tokens, $2 per million output: 100,000 tokens cost at most $0.20.
    let config = "[[provider.prices]]\nmodel = \"mock-model\"\ninput = 1.0\noutput = 2.0\n\n\
                  [agents]\napprove_fanout_usd = 0.50\n";
    // (caps of each of 3 tasks, what the output says, whether it ran)
    let cases = [
        (
            json!({"max_tokens": 100_000}),
            "estimated at most $0.60 for 3 sub-agent(s)",
            false,
        ),
        (
            json!({"max_usd": 0.10}),
            "estimated at most $0.30 for 3 sub-agent(s)",
            true,
        ),
        (json!({}), "their spend cannot be estimated", false),
    ];
    for (caps, said, ran) in cases {
        let mut all = tasks(&["one", "two", "three"]);
        for task in &mut all {
            if let (Some(task), Some(caps)) = (task.as_object_mut(), caps.as_object()) {
                task.extend(caps.clone());
            }
        }
        let fanout = json!({"mode": "parallel", "tasks": all});
        let mock = MockLlm::start(Vec::new()).await;
        mock.set_responder(responder(fanout, |_| 0, 1, false));
        let daemon = spawn_config(&mock, config);
        let client = connect(&daemon).await;
        let session = new_session(&client, &daemon, None).await;
        let mut events = Events::live(&client, &session).await;
        let turn = prompt_turn(&client, &mut events, &session, "fan out").await;
        let task = turn
            .iter()
            .find(|e| e["type"] == "tool_call_completed" && e["agentId"].is_null())
            .unwrap_or_else(|| panic!("{caps}: no task result: {turn:#?}"));
        let output = task["output"].as_str().unwrap_or_default();
        let started = turn.iter().any(|e| e["type"] == "subagent_started");
        assert_eq!(started, ran, "{caps}: {output}");
        if ran {
            assert!(output.starts_with(&format!("[{said}]")), "{caps}: {output}");
        } else {
            // Nobody to ask in this headless run: denied, the reason naming the estimate.
            assert_eq!(task["status"], "denied", "{caps}: {task}");
            assert!(output.contains(said), "{caps}: {output}");
            assert!(output.contains("approve_fanout_usd"), "{caps}: {output}");
        }
    }
}
