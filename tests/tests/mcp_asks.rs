//! End-to-end: what an MCP server asks of the person — elicitation and sampling, from the
//! reference server's `trigger-elicitation-request` and `trigger-sampling-request` tools
//! (`@modelcontextprotocol/server-everything`, which offers them only to a client that
//! declares both capabilities) — reaches the session's attached approver as an approval
//! with `mcp: {…}`, is answered there, and with nobody attached is declined.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{ApprovalRespondParams, Decision, methods as m};
use amber_tests::mcp_plugins::{everything, wait_mcp_status};
use amber_tests::steps::{Events, done, new_session, prompt_turn, spawn_config};
use amber_tests::tool_calls::{
    call, calls, connect_approver, next_approval, request_id, result_of,
};
use serde_json::{Value, json};

fn config() -> String {
    format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [mcp]\ntool_search = \"off\"\n\n\
         [mcp.servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
        everything().display().to_string()
    )
}

/// A daemon with the reference server ready, and a model that calls its elicitation tool
/// (call `e1`) and then says `done`.
async fn elicitation_daemon() -> (MockLlm, amber_tests::TestDaemon) {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "e1",
            "mcp__everything__trigger-elicitation-request",
            &json!({}),
        )]),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config());
    wait_mcp_status(&daemon, "everything", "ready");
    (mock, daemon)
}

/// Reads events until the turn ends; the events seen.
async fn until_turn_ends(events: &mut Events) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let event = events.next().await;
        let done = event["type"] == "turn_completed";
        seen.push(event);
        if done {
            return seen;
        }
    }
}

fn output_of(events: &[Value], call_id: &str) -> String {
    events
        .iter()
        .find(|e| e["type"] == "tool_call_completed" && e["callId"] == call_id)
        .unwrap_or_else(|| panic!("no result for {call_id}: {events:#?}"))["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_elicitation_is_answered_by_the_attached_approver_with_its_values() {
    let (_model, daemon) = elicitation_daemon().await;
    let approver = connect_approver(&daemon).await;
    let sid = new_session(&approver, &daemon, None).await;
    let mut events = Events::live(&approver, &sid).await;
    approver.session_prompt(&sid, "ask me").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    assert_eq!(asked["callId"], "e1", "{asked}");
    assert_eq!(asked["personOnly"], true, "{asked}");
    let mcp = &asked["mcp"];
    assert_eq!(mcp["server"], "everything", "{asked}");
    assert_eq!(mcp["kind"], "elicitation", "{asked}");
    assert!(
        mcp["message"].as_str().unwrap().contains("Please provide"),
        "{asked}"
    );
    assert!(
        mcp["requestedSchema"]["properties"]["name"].is_object(),
        "{asked}"
    );
    let params = ApprovalRespondParams {
        session_id: sid.clone(),
        request_id: request_id(&asked),
        decision: Decision::AllowOnce,
        feedback: None,
        content: Some(json!({"name": "Ada Lovelace", "check": true})),
    };
    let answered = approver
        .request::<m::ApprovalRespond>(&params)
        .await
        .unwrap();
    assert!(answered.accepted);
    let seen = until_turn_ends(&mut events).await;
    let output = output_of(&seen, "e1");
    assert!(
        output.contains("User provided the requested information"),
        "{output}"
    );
    assert!(output.contains("Ada Lovelace"), "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_nobody_to_ask_an_elicitation_is_declined_and_the_call_goes_on() {
    let (_model, daemon) = elicitation_daemon().await;
    let client = amber_tests::steps::connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "ask me").await;
    let (status, output) = result_of(&turn, "e1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.to_lowercase().contains("decline"), "{output}");
    let resolved = turn
        .iter()
        .find(|e| e["type"] == "approval_resolved")
        .unwrap_or_else(|| panic!("{turn:#?}"));
    assert_eq!(resolved["by"], "no_approver", "{resolved}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sampling_request_allowed_by_the_approver_runs_the_sessions_model() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "s1",
            "mcp__everything__trigger-sampling-request",
            &json!({"prompt": "name a colour", "maxTokens": 20}),
        )]),
        // The server's request to the model.
        MockTurn::text("Vermilion."),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config());
    wait_mcp_status(&daemon, "everything", "ready");
    let approver = connect_approver(&daemon).await;
    let sid = new_session(&approver, &daemon, None).await;
    let mut events = Events::live(&approver, &sid).await;
    approver.session_prompt(&sid, "sample").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    assert_eq!(asked["mcp"]["kind"], "sampling", "{asked}");
    assert_eq!(asked["mcp"]["maxTokens"], 20, "{asked}");
    assert!(
        asked["mcp"]["message"]
            .as_str()
            .unwrap()
            .contains("name a colour"),
        "{asked}"
    );
    let ok =
        amber_tests::tool_calls::respond(&approver, &sid, &request_id(&asked), Decision::AllowOnce)
            .await
            .unwrap();
    assert!(ok);
    let seen = until_turn_ends(&mut events).await;
    let output = output_of(&seen, "s1");
    assert!(output.contains("Vermilion."), "{output}");
    // The model saw the server's messages, capped at its max tokens.
    let sampled = mock
        .requests()
        .into_iter()
        .find(|r| r.to_string().contains("name a colour") && r["tools"].is_null())
        .unwrap_or_else(|| panic!("no sampling request: {:#?}", mock.requests()));
    assert!(sampled.to_string().contains("name a colour"), "{sampled}");
    // And its usage counts to the session.
    let usage_events = seen.iter().filter(|e| e["type"] == "usage").count();
    assert!(
        usage_events >= 2,
        "the turn's request and the sampling: {seen:#?}"
    );
}

/// The stateless revision asks for input in the call's result (`input_required`) instead of
/// a request of its own: the same approval, then the call retried with the answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_servers_input_request_is_answered_and_the_call_retried() {
    let config = format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [mcp]\ntool_search = \"off\"\n\n\
         [mcp.servers.modern]\ncommand = \"node\"\nargs = [{:?}]\nenv = {{ MODERN_ONLY = \"1\" }}\n",
        amber_tests::mcp_plugins::modern_server()
            .display()
            .to_string()
    );
    let mock = MockLlm::start(vec![
        calls(vec![call("g1", "mcp__modern__greet", &json!({}))]),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config);
    let ready = wait_mcp_status(&daemon, "modern", "ready");
    assert_eq!(ready["protocolVersion"], "2026-07-28", "{ready}");
    let approver = connect_approver(&daemon).await;
    let sid = new_session(&approver, &daemon, None).await;
    let mut events = Events::live(&approver, &sid).await;
    approver.session_prompt(&sid, "greet").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    assert_eq!(asked["mcp"]["kind"], "elicitation", "{asked}");
    assert_eq!(asked["mcp"]["message"], "Who should I greet?", "{asked}");
    let params = ApprovalRespondParams {
        session_id: sid.clone(),
        request_id: request_id(&asked),
        decision: Decision::AllowOnce,
        feedback: None,
        content: Some(json!({"name": "Grace"})),
    };
    assert!(
        approver
            .request::<m::ApprovalRespond>(&params)
            .await
            .unwrap()
            .accepted
    );
    let seen = until_turn_ends(&mut events).await;
    assert_eq!(output_of(&seen, "g1"), "Hello, Grace!");
}
