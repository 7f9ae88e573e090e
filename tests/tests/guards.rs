//! End-to-end: the agent loop's guards (identical call sets, repeated text, consecutive tool
//! failures, the iteration cap) as a client and the model see them.

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, envelope, last_message, messages, new_session, of_type,
    prompt_turn, spawn, spawn_config, stop_reason, tool_messages,
};
use serde_json::{Value, json};

/// Ten numbered lines, so `read` with offsets 1..=5 always succeeds.
fn seed_lines(workspace: &std::path::Path) {
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(workspace.join("lines.txt"), text).unwrap();
}

fn read_at(offset: u64) -> MockToolCall {
    MockToolCall::new(
        "read",
        &json!({"path": "lines.txt", "offset": offset, "limit": 1}),
    )
}

/// Steer events of a turn as (reason, text).
fn steers(turn: &[Value]) -> Vec<(String, String)> {
    of_type(turn, "steer")
        .iter()
        .map(|s| {
            (
                s["reason"].as_str().unwrap().to_owned(),
                s["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Whether the request carries a user message containing the steer text.
fn carries_steer(request: &Value, text: &str) -> bool {
    messages(request)
        .iter()
        .any(|m| m["role"] == "user" && m["content"].as_str().is_some_and(|c| c.contains(text)))
}

#[tokio::test(flavor = "multi_thread")]
async fn three_identical_tool_call_sets_stop_with_loop_detected() {
    let same = || MockTurn::tool_call("read", &json!({"path": "lines.txt"}));
    // A fourth turn that a broken guard would consume.
    let mock = MockLlm::start(vec![same(), same(), same(), MockTurn::text("x"), done()]).await;
    let daemon = spawn(&mock);
    seed_lines(&daemon.workspace);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "read it").await;

    assert_eq!(stop_reason(&turn), "loop_detected", "{turn:#?}");
    assert_eq!(mock.request_count(), 3);
    assert_eq!(mock.remaining(), 2);
    // Every call of the loop still got its result event (the repeats are denied duplicates).
    let statuses: Vec<_> = of_type(&turn, "tool_call_completed")
        .iter()
        .map(|e| e["status"].clone())
        .collect();
    assert_eq!(statuses, [json!("ok"), json!("denied"), json!("denied")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn repeated_reply_text_steers_at_the_second_and_stops_at_the_fifth() {
    let same = "Let me look at the file once more.";
    let script = (1..=5)
        .map(|i| MockTurn::TextAndToolCalls {
            text: same.to_owned(),
            calls: vec![read_at(i)],
        })
        .chain([MockTurn::text("unused"), done()])
        .collect();
    let mock = MockLlm::start(script).await;
    let daemon = spawn(&mock);
    seed_lines(&daemon.workspace);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "look").await;

    assert_eq!(stop_reason(&turn), "loop_detected", "{turn:#?}");
    assert_eq!(mock.request_count(), 5);
    let steer = steers(&turn);
    assert_eq!(steer.len(), 1, "exactly one steer: {steer:?}");
    assert_eq!(steer[0].0, "repeated_text");
    // The steer comes after the second reply's tool result, before the third request.
    let pos = |pred: &dyn Fn(&Value) -> bool| turn.iter().position(pred).unwrap();
    let steer_at = pos(&|e| e["type"] == "steer");
    let completed: Vec<usize> = turn
        .iter()
        .enumerate()
        .filter(|(_, e)| e["type"] == "tool_call_completed")
        .map(|(i, _)| i)
        .collect();
    assert!(completed[1] < steer_at && steer_at < completed[2]);

    let requests = mock.requests();
    assert!(!carries_steer(&requests[1], &steer[0].1));
    for request in &requests[2..] {
        assert!(
            carries_steer(request, &steer[0].1),
            "model never saw the steer"
        );
    }
    // The steer is the newest message the third request carries.
    assert!(
        last_message(&requests[2])["content"]
            .as_str()
            .unwrap()
            .contains(&steer[0].1)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn repeated_text_only_reply_is_steered_and_the_model_sees_it() {
    let same = "I will check the file.";
    let mock = MockLlm::start(vec![
        MockTurn::text(same),
        // The confirm answer calls a tool, so the loop continues.
        MockTurn::ToolCalls(vec![read_at(1)]),
        MockTurn::text(same),
        MockTurn::text("Checked: line 1."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    seed_lines(&daemon.workspace);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "check").await;

    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let steer = steers(&turn);
    assert_eq!(steer.len(), 1);
    assert_eq!(steer[0].0, "repeated_text");
    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    // Right after the repeat, the model is steered instead of asked to confirm.
    let next = last_message(&requests[3]);
    assert_eq!(next["role"], "user");
    assert!(next["content"].as_str().unwrap().contains(&steer[0].1));
}

#[tokio::test(flavor = "multi_thread")]
async fn consecutive_tool_failures_steer_at_three_and_stop_at_six() {
    let script = (1..=6)
        .map(|i| MockTurn::tool_call("read", &json!({"path": format!("missing-{i}.txt")})))
        .chain([MockTurn::text("unused"), done()])
        .collect();
    let mock = MockLlm::start(script).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "read files").await;

    assert_eq!(stop_reason(&turn), "tool_failures", "{turn:#?}");
    assert_eq!(mock.request_count(), 6);
    let completed = of_type(&turn, "tool_call_completed");
    assert_eq!(completed.len(), 6);
    assert!(
        completed.iter().all(|c| c["status"] == "error"),
        "{completed:#?}"
    );
    let steer = steers(&turn);
    assert_eq!(steer.len(), 1, "{steer:?}");
    assert_eq!(steer[0].0, "tool_failures");
    // Steered after the third failure: the fourth request carries it, the third does not.
    let requests = mock.requests();
    assert!(!carries_steer(&requests[2], &steer[0].1));
    assert!(carries_steer(&requests[3], &steer[0].1));
    let last_tool = tool_messages(&requests[3]).last().copied().unwrap().clone();
    assert_eq!(envelope(&last_tool)["status"], "error");
    assert!(
        envelope(&last_tool)["output"]
            .as_str()
            .unwrap()
            .contains("missing-3.txt")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn max_tool_iterations_stops_the_turn() {
    let script = (1..=4)
        .map(|i| MockTurn::ToolCalls(vec![read_at(i)]))
        .chain([done()])
        .collect();
    let mock = MockLlm::start(script).await;
    let config = format!("{FAST_RETRIES}\n[agent]\nmax_tool_iterations = 3\n");
    let daemon = spawn_config(&mock, &config);
    seed_lines(&daemon.workspace);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "read a lot").await;

    assert_eq!(stop_reason(&turn), "max_iterations", "{turn:#?}");
    assert_eq!(mock.request_count(), 3);
    assert_eq!(mock.remaining(), 2);
    assert_eq!(of_type(&turn, "tool_call_completed").len(), 3);
    assert!(of_type(&turn, "steer").is_empty());
}
