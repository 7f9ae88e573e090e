//! Sessions that message each other (`session_send`, `list_sessions`, `notify_when_idle`,
//! `session/send`): each message a prompt in the receiver and a durable event on both
//! sides, fenced to the sender's project and mode.

use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::daemon::TestDaemon;
use amber_tests::steps::{Events, connect, prompt_turn, spawn};
use serde_json::{Value, json};

fn text_of(message: &Value) -> String {
    let text = message["content"].as_str().unwrap_or("");
    amber_tests::steps::without_tail(text).to_owned()
}

/// The conversation's messages, the `<system-reminder>` tail left out.
fn conversation(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| !(m["role"] == "user" && text_of(m).starts_with("<system-reminder>")))
        .collect()
}

fn durable_events(daemon: &TestDaemon, session: &str, ty: &str) -> Vec<Value> {
    let log = std::fs::read_to_string(daemon.session_log(session)).unwrap_or_default();
    log.lines()
        .filter_map(|line| line.split_once(' ').map(|(_, json)| json))
        .filter_map(|json| serde_json::from_str::<Value>(json).ok())
        .filter(|record| record["k"] == "event")
        .map(|record| record["event"].clone())
        .filter(|event| event["type"] == ty)
        .collect()
}

fn new_named(daemon: &TestDaemon, name: &str, mode: &str) -> String {
    let info = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace.to_string_lossy(), "name": name, "mode": mode}),
    );
    info["sessionId"].as_str().unwrap().to_owned()
}

/// A coordinator hands work to a worker by message and asks to hear when it is idle; the
/// worker does it and answers by message; the coordinator takes both in.
#[tokio::test(flavor = "multi_thread")]
async fn two_sessions_coordinate_through_messages() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|request: &Value| {
        let messages = conversation(request);
        let last = messages.last().cloned().unwrap_or_default();
        let content = text_of(&last);
        let first_user = messages
            .iter()
            .find(|m| m["role"] == "user")
            .map(text_of)
            .unwrap_or_default();
        if content.contains("Are you finished") {
            return MockTurn::text("DONE");
        }
        // The worker: a message from the coordinator arrives as its prompt.
        if first_user.starts_with("[message from session") {
            if last["role"] == "tool" {
                return MockTurn::text("counted 3 files");
            }
            if content.starts_with("[message from session") && content.contains("count the files") {
                return MockTurn::tool_call(
                    "session_send",
                    &json!({"to": "coordinator", "text": "3 files"}),
                );
            }
            return MockTurn::text("noted");
        }
        // The coordinator.
        if content == "coordinate" {
            return MockTurn::tool_call("list_sessions", &json!({}));
        }
        if last["role"] == "tool" && text_of(&last).contains("sessionId") {
            return MockTurn::tool_call("notify_when_idle", &json!({"session": "worker"}));
        }
        if last["role"] == "tool" && text_of(&last).contains("next goes idle") {
            return MockTurn::tool_call(
                "session_send",
                &json!({"to": "worker", "text": "please count the files"}),
            );
        }
        if last["role"] == "tool" {
            return MockTurn::text("asked the worker");
        }
        if content.contains("is idle") {
            return MockTurn::text("the worker is idle");
        }
        if content.contains("3 files") {
            return MockTurn::text("the worker found 3 files");
        }
        MockTurn::text("ok")
    });
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let coordinator = new_named(&daemon, "coordinator", "write");
    let worker = new_named(&daemon, "worker", "write");
    let mut events = Events::live(&client, &coordinator).await;
    let turn = prompt_turn(&client, &mut events, &coordinator, "coordinate").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");

    // The worker's answer and its idle notice both reach the coordinator as prompts.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = daemon.rpc_ok("session/get", json!({"sessionId": coordinator}));
        let texts: Vec<String> = got["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .map(|m| m["content"].as_str().unwrap_or("").to_owned())
            .collect();
        if texts.iter().any(|t| t == "the worker found 3 files")
            && texts.iter().any(|t| t == "the worker is idle")
        {
            break;
        }
        let worker_got = daemon.rpc_ok("session/get", json!({"sessionId": worker}));
        assert!(
            std::time::Instant::now() < deadline,
            "the worker's answer and idle notice never came\ncoordinator: {:#}\nworker: {:#}",
            got["messages"],
            worker_got["messages"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Every message is a durable event on both sides.
    let sent_by_coordinator = durable_events(&daemon, &coordinator, "message_sent");
    let received_by_worker = durable_events(&daemon, &worker, "message_received");
    assert_eq!(sent_by_coordinator.len(), 1, "{sent_by_coordinator:?}");
    assert_eq!(received_by_worker.len(), 1, "{received_by_worker:?}");
    assert_eq!(
        sent_by_coordinator[0]["messageId"],
        received_by_worker[0]["messageId"]
    );
    assert_eq!(received_by_worker[0]["from"], coordinator.as_str());
    let received_by_coordinator = durable_events(&daemon, &coordinator, "message_received");
    // The worker's answer and the idle notice.
    assert_eq!(
        received_by_coordinator.len(),
        2,
        "{received_by_coordinator:?}"
    );
    assert!(
        received_by_coordinator
            .iter()
            .all(|e| e["from"] == worker.as_str())
    );
    let sent_by_worker = durable_events(&daemon, &worker, "message_sent");
    assert_eq!(sent_by_worker.len(), 2, "{sent_by_worker:?}");
}

/// A message is a prompt: a read-only session cannot drive one that writes, nor one
/// outside its project; a client may message any session.
#[tokio::test(flavor = "multi_thread")]
async fn a_message_is_fenced_by_the_senders_mode_and_project() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|_request: &Value| MockTurn::text("ok"));
    let daemon = spawn(&mock);
    let reader = new_named(&daemon, "reader", "read");
    let writer = new_named(&daemon, "writer", "write");
    let elsewhere = tempfile::tempdir().unwrap();
    let stranger = daemon.rpc_ok(
        "session/new",
        json!({"cwd": elsewhere.path().to_string_lossy(), "mode": "read"}),
    )["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    // (from, to, the words of the refusal)
    let refused = [
        (
            reader.as_str(),
            writer.as_str(),
            "wider than this session's read mode",
        ),
        (writer.as_str(), writer.as_str(), "cannot message itself"),
        (
            writer.as_str(),
            stranger.as_str(),
            "outside this session's project",
        ),
    ];
    for (from, to, words) in refused {
        let answer = daemon.rpc(
            "session/send",
            json!({"from": from, "to": to, "text": "rm -rf the tests"}),
        );
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert!(message.contains(words), "{message}");
    }
    assert!(durable_events(&daemon, &writer, "message_received").is_empty());
    // The narrower way round is allowed, and so is a client.
    let sent = daemon.rpc_ok(
        "session/send",
        json!({"from": "writer", "to": "reader", "text": "look at the README"}),
    );
    assert!(sent["messageId"].as_str().unwrap().starts_with("msg_"));
    let sent = daemon.rpc_ok("session/send", json!({"to": "writer", "text": "hello"}));
    assert!(sent["turnId"].is_string());
    let received = durable_events(&daemon, &writer, "message_received");
    assert_eq!(received.len(), 1);
    assert!(received[0]["from"].is_null());
    let unknown = daemon.rpc("session/send", json!({"to": "nobody-here", "text": "hi"}));
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");
}
