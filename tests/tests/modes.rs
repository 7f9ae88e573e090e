//! End-to-end: the three modes as the tools enforce them — `read` runs only read-only calls
//! and denies the rest without asking (the model gets a `denied` envelope, nothing touches
//! the disk), `yolo` asks nothing but keeps the file tools confined, writes outside the
//! workspace are rejected in every mode, and `session/setMode` switches mid-session. The
//! first cases run with an approver watching, so a denial without asking is visible; the
//! later ones check what the model and the disk see.

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_proto::{Decision, Mode};
use amber_tests::steps::{
    Events, connect, done, envelope, new_session, of_type, prompt_turn, spawn, stop_reason,
    tool_messages,
};
use amber_tests::tool_calls::{
    bash, call, calls, connect_approver, envelope_for, get_raw, live_processes_with_arg,
    next_approval, put, request_id, respond, result_of, sleep_marker,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn read_mode_runs_read_only_calls_and_denies_the_rest_without_asking() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let marker = sleep_marker(&daemon, 1);
    let ws = &daemon.workspace;
    put(&ws.join("notes.txt"), "alpha\nneedle here\n");
    put(
        &ws.join(".amber/skills/tidy/SKILL.md"),
        "---\nname: tidy\ndescription: Tidies things\n---\nBody.\n",
    );
    std::fs::create_dir_all(ws.join("build")).unwrap();
    mock.push([
        calls(vec![
            call("r_read", "read", &json!({"path": "notes.txt"})),
            call("r_search", "search", &json!({"pattern": "needle"})),
            call(
                "r_todo",
                "todowrite",
                &json!({"todos": [{"id": "1", "text": "look around", "status": "in_progress"}]}),
            ),
            call("r_skills", "skills", &json!({"action": "list"})),
            call("r_ls", "bash", &json!({"command": "ls"})),
            call(
                "d_write",
                "write",
                &json!({"path": "new.txt", "content": "x"}),
            ),
            call(
                "d_edit",
                "edit",
                &json!({"path": "notes.txt", "old_string": "alpha", "new_string": "beta"}),
            ),
            call("d_rm", "bash", &json!({"command": "rm -rf build"})),
            call(
                "d_proc",
                "process",
                &json!({"action": "start", "command": format!("sleep {marker}")}),
            ),
            call("d_touch", "bash", &json!({"command": "touch made.txt"})),
        ]),
        MockTurn::text("Looked around."),
        done(),
    ]);
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Read)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "look around").await;

    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert!(
        of_type(&turn, "approval_requested").is_empty(),
        "read mode asked instead of denying: {turn:#?}"
    );
    for id in ["r_read", "r_search", "r_todo", "r_skills", "r_ls"] {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "ok", "{id}: {output}");
    }
    assert!(result_of(&turn, "r_read").1.contains("needle here"));
    assert!(
        result_of(&turn, "r_search")
            .1
            .contains("notes.txt:2:needle here")
    );
    assert!(result_of(&turn, "r_skills").1.contains("tidy"));
    assert!(result_of(&turn, "r_ls").1.contains("notes.txt"));
    assert_eq!(of_type(&turn, "todo_updated").len(), 1);
    for id in ["d_write", "d_edit", "d_rm", "d_proc", "d_touch"] {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "denied", "{id} in read mode: {output}");
        assert!(
            output.contains("read"),
            "{id}: the denial names the mode: {output}"
        );
        assert_eq!(envelope_for(&mock, id)["status"], "denied");
    }
    assert!(!ws.join("new.txt").exists());
    assert!(!ws.join("made.txt").exists());
    assert!(ws.join("build").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "alpha\nneedle here\n"
    );
    assert!(
        live_processes_with_arg(&marker).is_empty(),
        "read mode started a background process"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn yolo_asks_nothing_but_keeps_file_tools_confined() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    let parent = ws.parent().unwrap().to_owned();
    std::fs::create_dir_all(ws.join("build/deep")).unwrap();
    mock.push([
        calls(vec![
            call("y_rm", "bash", &json!({"command": "rm -rf build"})),
            call(
                "y_up",
                "write",
                &json!({"path": "../outside-yolo.txt", "content": "x"}),
            ),
            call(
                "y_abs",
                "write",
                &json!({"path": parent.join("abs-yolo.txt").display().to_string(), "content": "x"}),
            ),
            call(
                "y_cwd",
                "bash",
                &json!({"command": "touch cwd-yolo.txt", "cwd": ".."}),
            ),
        ]),
        MockTurn::text("Done, mostly."),
        done(),
    ]);
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "go wild").await;

    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert!(
        of_type(&turn, "approval_requested").is_empty(),
        "yolo asked: {turn:#?}"
    );
    assert_eq!(result_of(&turn, "y_rm").0, "ok");
    assert!(!ws.join("build").exists(), "yolo did not run rm -rf");
    for id in ["y_up", "y_abs", "y_cwd"] {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "error", "{id} escaped in yolo: {output}");
        assert!(output.contains("outside the workspace"), "{id}: {output}");
    }
    for name in ["outside-yolo.txt", "abs-yolo.txt", "cwd-yolo.txt"] {
        assert!(!parent.join(name).exists(), "{name} written outside");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn set_mode_switches_between_read_write_and_yolo_mid_session() {
    let mock = MockLlm::start(vec![
        bash("m_read", "rm -rf build"),
        MockTurn::text("Read mode stopped me."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    std::fs::create_dir_all(ws.join("build")).unwrap();
    std::fs::create_dir_all(ws.join("build2")).unwrap();
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Read)).await;
    let mut events = Events::live(&client, &sid).await;

    let turn = prompt_turn(&client, &mut events, &sid, "remove build").await;
    assert!(of_type(&turn, "approval_requested").is_empty());
    assert_eq!(result_of(&turn, "m_read").0, "denied");
    assert!(ws.join("build").exists());

    // write: the same command now asks.
    let info = client.session_set_mode(&sid, Mode::Write).await.unwrap();
    assert_eq!(info.mode, Mode::Write);
    assert_eq!(get_raw(&client, &sid).await["session"]["mode"], "write");
    mock.push([
        bash("m_write", "rm -rf build"),
        MockTurn::text("Removed build."),
        done(),
    ]);
    client.session_prompt(&sid, "remove build").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    assert_eq!(asked["callId"], "m_write");
    assert!(
        respond(&client, &sid, &request_id(&asked), Decision::AllowOnce)
            .await
            .unwrap()
    );
    let rest = events.turn().await;
    assert_eq!(result_of(&rest, "m_write").0, "ok");
    assert!(!ws.join("build").exists());

    // yolo: no asking at all.
    client.session_set_mode(&sid, Mode::Yolo).await.unwrap();
    assert_eq!(get_raw(&client, &sid).await["session"]["mode"], "yolo");
    mock.push([
        bash("m_yolo", "rm -rf build2"),
        MockTurn::text("Removed build2."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "remove build2").await;
    assert!(of_type(&turn, "approval_requested").is_empty(), "{turn:#?}");
    assert_eq!(result_of(&turn, "m_yolo").0, "ok");
    assert!(!ws.join("build2").exists());

    // Back to read: denied again, still without asking.
    client.session_set_mode(&sid, Mode::Read).await.unwrap();
    mock.push([
        calls(vec![call(
            "m_read2",
            "write",
            &json!({"path": "after.txt", "content": "x"}),
        )]),
        MockTurn::text("Read mode again."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "write after.txt").await;
    assert!(of_type(&turn, "approval_requested").is_empty());
    assert_eq!(result_of(&turn, "m_read2").0, "denied");
    assert!(!ws.join("after.txt").exists());
}

// Without an approver: what the model and the disk see.

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
