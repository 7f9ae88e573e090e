//! Recovery of what a crash or a damaged file leaves behind, through the real daemon: a
//! kill during the silent confirm turn, a session listed after a crash mid-turn, and a log
//! record edited without fixing its CRC.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a panic is the failure report.

use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::e2e::{
    Events, connect, done, eventually, messages, new_session, prompt_turn, spawn,
};
use serde_json::json;

const CONFIRM: &str = "Are you finished with the task?";

fn kill_and_restart(daemon: &mut TestDaemon) {
    daemon.kill(libc::SIGKILL);
    daemon.wait_exit(Duration::from_secs(5)).expect("killed");
    daemon.restart();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kill_during_the_confirm_turn_leaves_no_confirm_question_behind() {
    // The reply, then a confirm answer that never comes: the daemon dies waiting for it.
    let stalled = MockTurn::Delay {
        ms: 60_000,
        then: Box::new(done()),
    };
    let mock = MockLlm::start(vec![MockTurn::text("all fixed"), stalled]).await;
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    client.session_prompt(&session, "fix it").await.unwrap();
    eventually("the confirm request", Duration::from_secs(20), || {
        mock.request_count() == 2
    })
    .await;
    let confirm_request = mock.requests()[1].to_string();
    assert!(confirm_request.contains(CONFIRM), "{confirm_request}");
    drop(client);
    kill_and_restart(&mut daemon);

    let got = daemon.rpc_ok("session/get", json!({ "sessionId": session }));
    let history = got["messages"].as_array().unwrap();
    assert!(!got["messages"].to_string().contains(CONFIRM), "{got}");
    let last = history.last().unwrap();
    assert_eq!(
        (last["role"].as_str(), last["content"].as_str()),
        (Some("assistant"), Some("all fixed"))
    );
    assert_eq!(got["session"]["state"], "idle");

    // The next request carries the history without the question.
    mock.push([MockTurn::text("next answer"), done()]);
    let client = connect(&daemon).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "and now?").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
    let requests = mock.requests();
    let next = &requests[2];
    let sent = messages(next);
    assert!(!next.to_string().contains(CONFIRM), "{next}");
    assert_eq!(sent.last().unwrap()["content"], "and now?");
    assert!(next.to_string().contains("all fixed"), "{next}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_whose_mode_changed_mid_turn_is_listed_idle_after_a_crash() {
    let slow = MockTurn::Slow {
        chunks: (0..200).map(|i| format!("w{i} ")).collect(),
        interval_ms: 50,
    };
    let mock = MockLlm::start(vec![slow]).await;
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    client.session_prompt(&session, "talk").await.unwrap();
    while events.next().await["type"] != "message_delta" {}
    // Saved while the turn runs: the metadata must not say `running`.
    let info = daemon.rpc_ok(
        "session/setMode",
        json!({ "sessionId": session, "mode": "read" }),
    );
    assert_eq!(info["state"], "running");
    drop(events);
    drop(client);
    kill_and_restart(&mut daemon);

    let listed = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(listed["sessions"][0]["sessionId"], session.as_str());
    assert_eq!(listed["sessions"][0]["state"], "idle", "{listed}");
    assert_eq!(listed["sessions"][0]["mode"], "read", "{listed}");
    // The daemon itself loads the session at start, in the background, to settle the turn the
    // crash interrupted (its busy marker); listing loads nothing beyond that.
    let loaded = || daemon.rpc_ok("daemon/status", json!({}))["sessionsLoaded"].clone();
    amber_tests::e2e::eventually(
        "the interrupted session to be resumed at start",
        Duration::from_secs(10),
        || loaded() == 1,
    )
    .await;
    let listed = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(listed["sessions"][0]["state"], "idle", "{listed}");
    assert_eq!(loaded(), 1, "listing loads nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_record_edited_without_its_crc_is_reported_and_the_session_keeps_working() {
    let mock = MockLlm::start(vec![
        MockTurn::text("first reply"),
        done(),
        MockTurn::text("second reply"),
        done(),
    ])
    .await;
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    prompt_turn(&client, &mut events, &session, "greet me").await;
    drop(events);
    drop(client);
    daemon.kill(libc::SIGTERM);
    daemon.wait_exit(Duration::from_secs(5)).expect("stopped");

    // Edit the pushed user message in place, as `sed -i` would: the CRC no longer matches.
    let log = daemon.session_log(&session);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let target = lines
        .iter()
        .position(|l| l.contains("\"k\":\"push\"") && l.contains("\"greet me\""))
        .expect("the user message is in the log");
    assert!(target + 1 < lines.len(), "not the last record");
    let tampered = text.replacen(
        lines[target],
        &lines[target].replace("greet me", "greet ME"),
        1,
    );
    std::fs::write(&log, &tampered).unwrap();
    daemon.restart();

    // Verify before anything loads the session: the live log is damaged.
    let report = daemon.rpc_ok("session/verify", json!({ "sessionId": session }));
    assert_eq!(report["ok"], false, "{report}");
    let record = target as u64 + 1;
    assert_eq!(report["firstBroken"]["record"], record, "{report}");
    let reason = report["firstBroken"]["reason"].as_str().unwrap();
    assert!(reason.contains("CRC mismatch"), "{reason}");
    let cli = daemon
        .cli()
        .args(["--no-autostart", "sessions", "verify", &session])
        .output()
        .expect("amber-cli runs");
    let stdout = String::from_utf8_lossy(&cli.stdout);
    assert_eq!(cli.status.code(), Some(1), "{cli:?}");
    assert!(
        stdout.contains(&format!("corrupt record {record}")) && stdout.contains("CRC mismatch"),
        "{stdout}"
    );

    // Loading keeps what came before the damage; the session takes prompts again.
    let got = daemon.rpc_ok("session/get", json!({ "sessionId": session }));
    assert_eq!(got["session"]["state"], "idle");
    assert!(!got["messages"].to_string().contains("greet"), "{got}");
    let client = connect(&daemon).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "hello again").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
    let got = daemon.rpc_ok("session/get", json!({ "sessionId": session }));
    assert!(
        got["messages"].to_string().contains("second reply"),
        "{got}"
    );
    // The damage stays on record (the damaged log is kept beside the salvaged one).
    let report = daemon.rpc_ok("session/verify", json!({ "sessionId": session }));
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(report["firstBroken"]["record"], record, "{report}");
    assert!(log.with_file_name("log.corrupt").exists());

    // Replay after a restart is whole: seqs from 1 without a gap.
    drop(events);
    drop(client);
    daemon.restart();
    let client = connect(&daemon).await;
    let mut events = Events::subscribe(&client, &session, Some(0)).await;
    let replay = events.until("synced").await;
    let seqs: Vec<u64> = replay.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}
