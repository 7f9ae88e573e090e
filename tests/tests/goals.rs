//! Goals (`session/setGoal`): a turn checks its session's goal before it ends, goes on
//! while the goal is not met, and ends with a summary once it is; every step a durable
//! event.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{Events, connect, new_session, prompt_turn, spawn};
use serde_json::{Value, json};

fn text_of(message: &Value) -> String {
    let text = message["content"].as_str().unwrap_or("");
    amber_tests::steps::without_tail(text).to_owned()
}

/// The model stops early twice; the goal question sends it back to work until the file
/// the goal names exists.
fn responder(request: &Value) -> MockTurn {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages
        .iter()
        .rev()
        .find(|m| !(m["role"] == "user" && text_of(m).starts_with("<system-reminder>")))
        .cloned()
        .unwrap_or_default();
    let content = text_of(&last);
    let wrote = messages.iter().any(|m| {
        m["tool_calls"]
            .as_array()
            .is_some_and(|calls| calls.iter().any(|c| c["function"]["name"] == "write"))
    });
    if content.starts_with("[amber] Before you stop: the session's goal is") {
        return if wrote {
            MockTurn::text("GOAL MET: wrote done.txt with the answer")
        } else {
            MockTurn::text("NOT MET: done.txt does not exist yet")
        };
    }
    if content.contains("Are you finished") {
        return MockTurn::text("DONE");
    }
    if content.contains("goal is not met yet") && !wrote {
        return MockTurn::tool_call("write", &json!({"path": "done.txt", "content": "42\n"}));
    }
    if last["role"] == "tool" {
        return MockTurn::text("written");
    }
    MockTurn::text("I think I am done")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_goal_keeps_a_turn_going_until_its_condition_is_met() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(responder);
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let info = daemon.rpc_ok(
        "session/setGoal",
        json!({"sessionId": session, "goal": "done.txt exists and holds the answer"}),
    );
    assert_eq!(info["goal"]["state"], "active", "{info}");
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "answer the question").await;

    let completed = turn.last().unwrap();
    assert_eq!(completed["stopReason"], "end_turn", "{turn:#?}");
    assert!(
        daemon.workspace.join("done.txt").exists(),
        "the turn ended before the goal's work was done"
    );
    let checks: Vec<&Value> = turn.iter().filter(|e| e["type"] == "goal_check").collect();
    assert_eq!(checks.len(), 2, "{checks:#?}");
    assert_eq!(checks[0]["met"], false);
    assert_eq!(checks[0]["note"], "done.txt does not exist yet");
    assert_eq!(checks[1]["met"], true);
    let met: Vec<&Value> = turn.iter().filter(|e| e["type"] == "goal_met").collect();
    assert_eq!(met.len(), 1, "{turn:#?}");
    assert_eq!(met[0]["summary"], "wrote done.txt with the answer");
    for event in checks.iter().chain(&met) {
        assert!(event["seq"].is_u64(), "durable: {event}");
    }
    // The goal's questions and answers leave no trace in the conversation; the note that
    // sent the model back to work does.
    let got = daemon.rpc_ok("session/get", json!({"sessionId": session}));
    let history = got["messages"].to_string();
    assert!(!history.contains("Before you stop"), "{history}");
    assert!(history.contains("goal is not met yet"), "{history}");
    assert_eq!(got["session"]["goal"]["state"], "met");
    assert_eq!(got["session"]["goal"]["checks"], 2);

    // A met goal asks nothing more; a cleared one neither.
    let before = mock.requests().len();
    prompt_turn(&client, &mut events, &session, "anything else?").await;
    let asked = mock.requests()[before..]
        .iter()
        .any(|r| r.to_string().contains("Before you stop"));
    assert!(!asked, "a met goal was checked again");
    let cleared = daemon.rpc_ok(
        "session/setGoal",
        json!({"sessionId": session, "goal": null}),
    );
    assert!(cleared["goal"].is_null(), "{cleared}");
}

/// `/goal` shows, sets and clears the goal `session/setGoal` keeps.
#[tokio::test(flavor = "multi_thread")]
async fn the_goal_command_shows_sets_and_clears_the_goal() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let run = |args: &str| {
        daemon.rpc_ok(
            "command/run",
            json!({"sessionId": session, "name": "/goal", "args": args}),
        )["output"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // (arguments, what the output says, the goal after)
    let steps = [
        ("", "no goal", Value::Null),
        (
            "the docs build",
            "goal set: the docs build",
            json!("the docs build"),
        ),
        (
            "",
            "goal (active, checked 0 times): the docs build",
            json!("the docs build"),
        ),
        ("clear", "goal cleared", Value::Null),
    ];
    for (args, said, after) in steps {
        let output = run(args);
        assert!(output.contains(said), "/goal {args}: {output}");
        let info = daemon.rpc_ok("session/get", json!({"sessionId": session}))["session"].clone();
        assert_eq!(info["goal"]["text"], after, "/goal {args}: {info}");
    }
}

/// A turn cut by its iteration cap with the goal unmet goes on in a turn of its own, and
/// that one meets it.
#[tokio::test(flavor = "multi_thread")]
async fn a_goal_unmet_at_the_iteration_cap_goes_on_in_a_new_turn() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|request: &Value| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let last = messages
            .iter()
            .rev()
            .find(|m| !(m["role"] == "user" && text_of(m).starts_with("<system-reminder>")))
            .cloned()
            .unwrap_or_default();
        if text_of(&last).starts_with("[amber] Before you stop: the session's goal is") {
            return MockTurn::text("GOAL MET: five steps taken");
        }
        if text_of(&last).contains("Are you finished") {
            return MockTurn::text("DONE");
        }
        // Five steps in all, over as many turns as it takes.
        let steps = messages.iter().filter(|m| m["role"] == "tool").count();
        if steps < 5 {
            return MockTurn::tool_call("bash", &json!({"command": format!("echo step {steps}")}));
        }
        MockTurn::text("five steps taken")
    });
    let daemon = amber_tests::steps::spawn_config(&mock, "[agent]\nmax_tool_iterations = 3\n");
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    daemon.rpc_ok(
        "session/setGoal",
        json!({"sessionId": session, "goal": "five steps are taken"}),
    );
    let mut events = Events::live(&client, &session).await;
    let first = prompt_turn(&client, &mut events, &session, "take the steps").await;
    assert_eq!(
        first.last().unwrap()["stopReason"],
        "max_iterations",
        "{first:#?}"
    );
    // Continuation turns follow on their own until the goal is met (the check is one of a
    // turn's requests, so it may take more than one).
    let mut continued = 0;
    loop {
        let turn = events.turn().await;
        continued += 1;
        let started = turn.iter().find(|e| e["type"] == "turn_started").unwrap();
        assert!(
            started["prompt"]
                .as_str()
                .unwrap()
                .contains("goal is not met yet"),
            "{started}"
        );
        if turn.iter().any(|e| e["type"] == "goal_met") {
            assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");
            break;
        }
        assert!(continued < 3, "the goal was never met: {turn:#?}");
    }
}

/// A goal never met ends after `[agents] goal_max_turns` continuation turns: the work is
/// bounded even with no budget.
#[tokio::test(flavor = "multi_thread")]
async fn a_goal_never_met_stops_after_goal_max_turns() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|request: &Value| {
        let n = request["messages"].as_array().map_or(0, Vec::len);
        MockTurn::tool_call("bash", &json!({"command": format!("echo again {n}")}))
    });
    let daemon = amber_tests::steps::spawn_config(
        &mock,
        "[agent]\nmax_tool_iterations = 2\n\n[agents]\ngoal_max_turns = 2\n",
    );
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    daemon.rpc_ok(
        "session/setGoal",
        json!({"sessionId": session, "goal": "never"}),
    );
    let mut events = Events::live(&client, &session).await;
    let first = prompt_turn(&client, &mut events, &session, "go").await;
    assert_eq!(first.last().unwrap()["stopReason"], "max_iterations");
    for _ in 0..2 {
        let turn = events.turn().await;
        assert_eq!(turn.last().unwrap()["stopReason"], "max_iterations");
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let got = daemon.rpc_ok("session/get", json!({"sessionId": session}));
    assert_eq!(got["session"]["state"], "idle", "{}", got["session"]);
    let requests = mock.requests().len();
    assert_eq!(
        requests, 6,
        "three turns of two requests each, then nothing"
    );
}
