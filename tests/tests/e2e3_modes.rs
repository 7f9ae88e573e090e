//! End-to-end: the three modes with an approver watching — `read` runs only read-only
//! calls and denies the rest without asking, `yolo` asks nothing but keeps the file tools
//! confined, `session/setMode` switches mid-session.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Decision, Mode};
use amber_tests::e2e::{Events, done, new_session, of_type, prompt_turn, spawn, stop_reason};
use amber_tests::e2e3::{
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
