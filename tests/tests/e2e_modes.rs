//! End-to-end: session modes as the tools enforce them — `read` denies writers (the model
//! gets a `denied` envelope, nothing touches the disk), `session/setMode` changes that
//! mid-session.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_proto::Mode;
use amber_tests::e2e::{
    Events, connect, done, envelope, new_session, of_type, prompt_turn, spawn, stop_reason,
    tool_messages,
};
use serde_json::json;

fn write_call(id: &str) -> MockTurn {
    MockTurn::ToolCalls(vec![MockToolCall {
        id: Some(id.to_owned()),
        name: "write".into(),
        arguments: json!({"path": "out.txt", "content": "written"}).to_string(),
    }])
}

#[tokio::test(flavor = "multi_thread")]
async fn read_mode_denies_writers_and_set_mode_lifts_it() {
    let mock = MockLlm::start(vec![
        write_call("call_denied"),
        MockTurn::ToolCalls(vec![
            MockToolCall::new("bash", &json!({"command": "touch by-bash.txt"})),
            MockToolCall::new(
                "edit",
                &json!({"path": "keep.txt", "old_string": "a", "new_string": "b"}),
            ),
            MockToolCall::new("read", &json!({"path": "keep.txt"})),
        ]),
        MockTurn::text("I cannot write in read mode."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    std::fs::write(daemon.workspace.join("keep.txt"), "a\n").unwrap();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Read)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "write out.txt").await;

    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert!(
        !daemon.workspace.join("out.txt").exists(),
        "read mode wrote a file"
    );
    assert!(
        !daemon.workspace.join("by-bash.txt").exists(),
        "read mode ran bash"
    );
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("keep.txt")).unwrap(),
        "a\n"
    );
    let statuses: Vec<_> = of_type(&turn, "tool_call_completed")
        .iter()
        .map(|e| (e["callId"].clone(), e["status"].clone()))
        .collect();
    assert_eq!(statuses[0], (json!("call_denied"), json!("denied")));
    let rest: Vec<_> = statuses[1..].iter().map(|(_, s)| s.clone()).collect();
    assert_eq!(rest, [json!("denied"), json!("denied"), json!("ok")]);

    // The model got `denied` envelopes saying why.
    let requests = mock.requests();
    let denied = envelope(tool_messages(&requests[1])[0]);
    assert_eq!(denied["status"], "denied");
    assert!(
        denied["output"].as_str().unwrap().contains("read"),
        "the denial names the mode: {denied}"
    );
    let seen: Vec<_> = tool_messages(&requests[2])
        .iter()
        .map(|m| envelope(m)["status"].clone())
        .collect();
    assert_eq!(
        seen,
        [
            json!("denied"),
            json!("denied"),
            json!("denied"),
            json!("ok")
        ]
    );

    // Switch to write mode mid-session: the same call now runs.
    let info = client.session_set_mode(&sid, Mode::Write).await.unwrap();
    assert_eq!(info.mode, Mode::Write);
    assert_eq!(
        client.session_get(&sid).await.unwrap().session.mode,
        Mode::Write
    );
    mock.push([
        write_call("call_allowed"),
        MockTurn::text("Written now."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "try again").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let completed = of_type(&turn, "tool_call_completed");
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["callId"], "call_allowed");
    assert_eq!(completed[0]["status"], "ok", "{}", completed[0]);
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("out.txt")).unwrap(),
        "written"
    );
    let requests = mock.requests();
    let last_tool = *tool_messages(&requests[requests.len() - 2]).last().unwrap();
    assert_eq!(last_tool["tool_call_id"], "call_allowed");
    assert_eq!(envelope(last_tool)["status"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_outside_the_workspace_are_rejected_in_every_mode() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escape.txt");
    let mock = MockLlm::start(vec![
        MockTurn::ToolCalls(vec![
            MockToolCall::new(
                "write",
                &json!({"path": target.display().to_string(), "content": "x"}),
            ),
            MockToolCall::new("write", &json!({"path": "../escape.txt", "content": "x"})),
        ]),
        MockTurn::text("Could not escape."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "escape").await;

    assert_eq!(stop_reason(&turn), "end_turn");
    assert!(!target.exists());
    assert!(
        !daemon
            .workspace
            .parent()
            .unwrap()
            .join("escape.txt")
            .exists()
    );
    for done_call in of_type(&turn, "tool_call_completed") {
        assert_ne!(done_call["status"], "ok", "{done_call}");
    }
}
