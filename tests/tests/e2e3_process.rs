//! End-to-end: the `process` tool — start, list, output, kill across turns, the same
//! confinement and classification as bash — and cleanup: a session's background processes
//! die with `session/delete` and with the daemon's shutdown (checked in /proc; zombies
//! count as dead).

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::e2e::{
    Events, connect, done, eventually, new_session, of_type, prompt_turn, spawn, stop_reason,
    within,
};
use amber_tests::e2e3::{call, calls, live_processes_with_arg, result_of, sleep_marker};
use serde_json::{Value, json};

const GONE_WITHIN: Duration = Duration::from_secs(10);

fn start(id: &str, command: &str) -> amber_mock_llm::MockToolCall {
    call(
        id,
        "process",
        &json!({"action": "start", "command": command}),
    )
}

fn action(id: &str, action: &str, process: Option<&str>) -> amber_mock_llm::MockToolCall {
    let mut args = json!({ "action": action });
    if let Some(p) = process {
        args["id"] = Value::from(p);
    }
    call(id, "process", &args)
}

#[tokio::test(flavor = "multi_thread")]
async fn start_list_output_kill_across_turns() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let marker = sleep_marker(&daemon, 1);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let command = format!("echo bg-started-marker; sleep {marker}");
    mock.push([
        calls(vec![
            start("p_start", &command),
            call(
                "p_outside",
                "process",
                &json!({"action": "start", "command": "sleep 1", "cwd": ".."}),
            ),
            start("p_rm", "rm -rf build"),
        ]),
        MockTurn::text("Started it."),
        done(),
    ]);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "start a server").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, started) = result_of(&turn, "p_start");
    assert_eq!(status, "ok", "{started}");
    assert!(started.contains("started p1"), "{started}");
    // Confined like bash's cwd, and classified like bash (no approver: denied).
    let (status, outside) = result_of(&turn, "p_outside");
    assert_eq!(status, "error", "{outside}");
    assert!(outside.contains("outside the workspace"), "{outside}");
    assert_eq!(result_of(&turn, "p_rm").0, "denied");
    assert_eq!(of_type(&turn, "approval_requested").len(), 1);
    assert!(daemon.workspace.join("build").exists());

    // It outlives the turn.
    eventually("the background sleep to run", GONE_WITHIN, || {
        live_processes_with_arg(&marker).len() == 1
    })
    .await;

    mock.push([
        calls(vec![
            action("p_list", "list", None),
            action("p_out", "output", Some("p1")),
        ]),
        calls(vec![action("p_kill", "kill", Some("p1"))]),
        calls(vec![
            action("p_list2", "list", None),
            action("p_out2", "output", Some("p1")),
            action("p_unknown", "output", Some("p9")),
        ]),
        MockTurn::text("Stopped it."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "check and stop it").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, list) = result_of(&turn, "p_list");
    assert_eq!(status, "ok", "{list}");
    let row = list
        .lines()
        .find(|l| l.starts_with("p1"))
        .unwrap_or_default();
    assert!(row.contains("running"), "{list}");
    assert!(row.contains(&format!("sleep {marker}")), "{list}");
    let (status, output) = result_of(&turn, "p_out");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("bg-started-marker"), "{output}");
    let (status, killed) = result_of(&turn, "p_kill");
    assert_eq!(status, "ok", "{killed}");
    assert!(killed.starts_with("p1 killed"), "{killed}");
    let (_, list) = result_of(&turn, "p_list2");
    let row = list
        .lines()
        .find(|l| l.starts_with("p1"))
        .unwrap_or_default();
    assert!(!row.contains("running"), "still running after kill: {list}");
    let (_, output) = result_of(&turn, "p_out2");
    assert!(
        !output.contains("bg-started-marker"),
        "output is read once: {output}"
    );
    let (status, unknown) = result_of(&turn, "p_unknown");
    assert_eq!(status, "error", "{unknown}");
    assert!(unknown.contains("p9"), "{unknown}");
    eventually("the killed sleep to be gone", GONE_WITHIN, || {
        live_processes_with_arg(&marker).is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn session_delete_kills_the_sessions_processes_only() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let (doomed_a, doomed_b, survivor) = (
        sleep_marker(&daemon, 2),
        sleep_marker(&daemon, 3),
        sleep_marker(&daemon, 4),
    );
    let client = connect(&daemon).await;
    let doomed = new_session(&client, &daemon, None).await;
    let kept = new_session(&client, &daemon, None).await;
    for (sid, markers) in [
        (&doomed, vec![doomed_a.clone(), doomed_b.clone()]),
        (&kept, vec![survivor.clone()]),
    ] {
        let starts = markers
            .iter()
            .enumerate()
            .map(|(i, m)| start(&format!("s{i}"), &format!("sleep {m}")))
            .collect();
        mock.push([calls(starts), MockTurn::text("Started."), done()]);
        let mut events = Events::live(&client, sid).await;
        let turn = prompt_turn(&client, &mut events, sid, "start").await;
        for i in 0..markers.len() {
            assert_eq!(result_of(&turn, &format!("s{i}")).0, "ok", "{turn:#?}");
        }
    }
    eventually("all three sleeps to run", GONE_WITHIN, || {
        [&doomed_a, &doomed_b, &survivor]
            .iter()
            .all(|m| live_processes_with_arg(m).len() == 1)
    })
    .await;

    within("session/delete", client.session_delete(&doomed))
        .await
        .unwrap();
    eventually(
        "the deleted session's processes to die",
        GONE_WITHIN,
        || {
            live_processes_with_arg(&doomed_a).is_empty()
                && live_processes_with_arg(&doomed_b).is_empty()
        },
    )
    .await;
    assert_eq!(
        live_processes_with_arg(&survivor).len(),
        1,
        "another session's process was killed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn daemon_shutdown_kills_every_background_process() {
    let mock = MockLlm::start(Vec::new()).await;
    let mut daemon = spawn(&mock);
    let (first, second) = (sleep_marker(&daemon, 5), sleep_marker(&daemon, 6));
    let client = connect(&daemon).await;
    for marker in [&first, &second] {
        let sid = new_session(&client, &daemon, None).await;
        mock.push([
            calls(vec![start("s", &format!("sleep {marker}"))]),
            MockTurn::text("Started."),
            done(),
        ]);
        let mut events = Events::live(&client, &sid).await;
        let turn = prompt_turn(&client, &mut events, &sid, "start").await;
        assert_eq!(result_of(&turn, "s").0, "ok", "{turn:#?}");
    }
    eventually("both sleeps to run", GONE_WITHIN, || {
        live_processes_with_arg(&first).len() == 1 && live_processes_with_arg(&second).len() == 1
    })
    .await;

    within("daemon/shutdown", client.daemon_shutdown())
        .await
        .unwrap();
    let code = tokio::task::block_in_place(|| daemon.wait_exit(GONE_WITHIN));
    assert_eq!(code, Some(0), "amberd did not exit cleanly");
    eventually(
        "the background processes to die with the daemon",
        GONE_WITHIN,
        || {
            live_processes_with_arg(&first).is_empty()
                && live_processes_with_arg(&second).is_empty()
        },
    )
    .await;
}
