//! Recovery after a crash, through the real daemon.
//!
//! - No acknowledged prompt is lost: prompts `session/prompt` answered with a `turnId` while
//!   a turn streamed survive a kill -9. After the restart the interrupted turn ends
//!   `interrupted` and the queued prompts run in order with their own turn ids (or, with
//!   `[sessions] resume_queued = false`, each ends `cancelled`), so every acknowledged turn id
//!   gets exactly one `turn_completed` — and a second restart runs nothing again.
//! - What a crash or a damaged file leaves behind: a kill during the silent confirm turn, a
//!   session listed after a crash mid-turn, and a log record edited without fixing its CRC.

use std::collections::HashSet;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, eventually, messages, new_session, prompt_turn, spawn,
    spawn_config, within, without_tail,
};
use serde_json::{Value, json};

/// The prompts of the test: the first streams while the other four are acknowledged.
const PROMPTS: [&str; 5] = ["first", "second", "third", "fourth", "fifth"];

fn kill_and_restart(daemon: &mut TestDaemon) {
    daemon.kill(libc::SIGKILL);
    daemon.wait_exit(Duration::from_secs(5)).expect("killed");
    daemon.restart();
}

/// A reply that keeps streaming far longer than the test needs.
fn endless_stream() -> MockTurn {
    MockTurn::Slow {
        chunks: (0..2000).map(|i| format!("w{i} ")).collect(),
        interval_ms: 20,
    }
}

/// Sends the five prompts — the first one streaming before the other four go — and
/// returns their turn ids as `session/prompt` acknowledged them.
async fn five_prompts_while_the_first_streams(daemon: &TestDaemon) -> (String, Vec<String>) {
    let client = connect(daemon).await;
    let session = new_session(&client, daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let mut turn_ids = Vec::new();
    let first = within("prompt", client.session_prompt(&session, PROMPTS[0]))
        .await
        .unwrap();
    turn_ids.push(first.turn_id);
    while events.next().await["type"] != "message_delta" {}
    for text in &PROMPTS[1..] {
        let ack = within("prompt", client.session_prompt(&session, text))
            .await
            .unwrap();
        turn_ids.push(ack.turn_id);
    }
    (session, turn_ids)
}

/// The session's events from seq 1, until every turn in `turn_ids` has a `turn_completed`.
async fn history_until_completed(
    daemon: &TestDaemon,
    session: &str,
    turn_ids: &[String],
) -> Vec<Value> {
    let client = connect(daemon).await;
    let mut events = Events::subscribe(&client, session, Some(0)).await;
    let mut open: HashSet<&str> = turn_ids.iter().map(String::as_str).collect();
    let mut seen = Vec::new();
    while !open.is_empty() {
        let event = events.next().await;
        if event["type"] == "turn_completed" {
            open.remove(event["turnId"].as_str().unwrap_or(""));
        }
        seen.push(event);
    }
    seen
}

/// The whole durable history as a fresh subscriber replays it (through `synced`).
async fn replay(daemon: &TestDaemon, session: &str) -> Vec<Value> {
    let client = connect(daemon).await;
    let mut events = Events::subscribe(&client, session, Some(0)).await;
    events.until("synced").await
}

/// The durable events of type `ty`, as (turnId, event).
fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<(&'a str, &'a Value)> {
    events
        .iter()
        .filter(|e| e["type"] == ty && e["seq"].is_u64())
        .map(|e| (e["turnId"].as_str().unwrap_or(""), e))
        .collect()
}

/// Every acknowledged prompt has its durable `prompt_queued` with its text, in order, and
/// before its `turn_started` (when it has one).
fn assert_queued_in_order(history: &[Value], turn_ids: &[String]) {
    let queued = of_type(history, "prompt_queued");
    let ids: Vec<&str> = queued.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        ids, turn_ids,
        "prompt_queued per acknowledged prompt, in order"
    );
    for ((_, event), text) in queued.iter().zip(PROMPTS) {
        assert_eq!(event["prompt"], text);
    }
    for (id, started) in of_type(history, "turn_started") {
        let queued_seq = queued.iter().find(|(q, _)| *q == id).unwrap().1["seq"]
            .as_u64()
            .unwrap();
        assert!(
            queued_seq < started["seq"].as_u64().unwrap(),
            "turn {id} started before it was queued"
        );
    }
}

/// Exactly one `turn_completed` per turn id, in the order given; their stop reasons.
/// The prompt each turn after the first asked the model: the last message of every second
/// request (each turn is its answer and the confirm exchange), without amberd's tail.
fn prompts_after_the_first(mock: &MockLlm) -> Vec<String> {
    mock.requests()[1..]
        .iter()
        .step_by(2)
        .map(|r| {
            let content = messages(r).last().unwrap()["content"].as_str().unwrap();
            without_tail(content).to_owned()
        })
        .collect()
}

fn completions<'a>(history: &'a [Value], turn_ids: &[String]) -> Vec<&'a Value> {
    let completed = of_type(history, "turn_completed");
    let ids: Vec<&str> = completed.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, turn_ids, "one turn_completed per turn id, in order");
    completed.into_iter().map(|(_, e)| e).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn prompts_acknowledged_during_a_turn_survive_a_kill_and_run_in_order() {
    let mock = MockLlm::start(vec![endless_stream()]).await;
    let mut daemon = spawn(&mock);
    let (session, turn_ids) = five_prompts_while_the_first_streams(&daemon).await;
    // Each of the four queued turns: a reply, then the confirm answer.
    for text in &PROMPTS[1..] {
        mock.push([MockTurn::text(format!("answer to {text}")), done()]);
    }
    kill_and_restart(&mut daemon);

    let history = history_until_completed(&daemon, &session, &turn_ids).await;
    assert_queued_in_order(&history, &turn_ids);
    let completed = completions(&history, &turn_ids);
    assert_eq!(completed[0]["stopReason"], "error");
    assert_eq!(completed[0]["error"]["code"], "interrupted");
    for done in &completed[1..] {
        assert_eq!(done["stopReason"], "end_turn", "{done}");
    }
    // They ran in queue order: each turn's first request ends with its own prompt, and
    // each turn's reply is the answer to that prompt.
    assert_eq!(prompts_after_the_first(&mock), PROMPTS[1..]);
    for (id, text) in turn_ids[1..].iter().zip(&PROMPTS[1..]) {
        let reply = history
            .iter()
            .find(|e| e["type"] == "message_completed" && e["turnId"] == id.as_str())
            .unwrap_or_else(|| panic!("no reply in turn {id}"));
        assert_eq!(reply["text"], format!("answer to {text}"));
    }
    let requests_before = mock.request_count();

    // A second crash finds nothing waiting: nothing runs again, nothing new is recorded.
    kill_and_restart(&mut daemon);
    let again = replay(&daemon, &session).await;
    let got = daemon.rpc_ok("session/get", json!({ "sessionId": session }));
    assert_eq!(got["session"]["state"], "idle", "nothing was queued again");
    assert_eq!(of_type(&again, "turn_started").len(), turn_ids.len());
    completions(&again, &turn_ids);
    assert_eq!(mock.request_count(), requests_before);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_resume_queued_off_each_waiting_prompt_ends_cancelled() {
    let mock = MockLlm::start(vec![endless_stream()]).await;
    let config = format!("{FAST_RETRIES}[sessions]\nresume_queued = false\n");
    let mut daemon = spawn_config(&mock, &config);
    let (session, turn_ids) = five_prompts_while_the_first_streams(&daemon).await;
    kill_and_restart(&mut daemon);

    let history = history_until_completed(&daemon, &session, &turn_ids).await;
    assert_queued_in_order(&history, &turn_ids);
    let completed = completions(&history, &turn_ids);
    assert_eq!(completed[0]["error"]["code"], "interrupted");
    for cancelled in &completed[1..] {
        assert_eq!(cancelled["stopReason"], "cancelled", "{cancelled}");
        assert_eq!(cancelled["error"]["code"], "not_resumed", "{cancelled}");
    }
    // None of them started; the model was asked nothing after the crash.
    assert_eq!(of_type(&history, "turn_started").len(), 1);
    assert_eq!(mock.request_count(), 1);

    kill_and_restart(&mut daemon);
    let again = replay(&daemon, &session).await;
    completions(&again, &turn_ids);
    let got = daemon.rpc_ok("session/get", json!({ "sessionId": session }));
    assert_eq!(got["session"]["state"], "idle");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_to_an_idle_session_is_queued_durably_before_its_turn_starts() {
    // The turn stalls in the model request, so the kill lands right after the answer.
    let stalled = MockTurn::Delay {
        ms: 60_000,
        then: Box::new(done()),
    };
    let mock = MockLlm::start(vec![stalled]).await;
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let ack = within("prompt", client.session_prompt(&session, PROMPTS[0]))
        .await
        .unwrap();
    let queued = events.next().await;
    assert_eq!(
        (&queued["type"], &queued["turnId"], &queued["prompt"]),
        (
            &json!("prompt_queued"),
            &json!(ack.turn_id),
            &json!(PROMPTS[0])
        )
    );
    let started = events.next().await;
    assert_eq!(started["type"], "turn_started");
    assert_eq!(started["turnId"], ack.turn_id.as_str());
    assert_eq!(started["seq"], queued["seq"].as_u64().unwrap() + 1);
    drop(events);
    drop(client);

    kill_and_restart(&mut daemon);
    let turn_ids = vec![ack.turn_id];
    let history = history_until_completed(&daemon, &session, &turn_ids).await;
    let completed = completions(&history, &turn_ids);
    assert_eq!(completed[0]["error"]["code"], "interrupted");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_ends_the_running_turn_and_the_queued_prompt_still_runs() {
    let mock = MockLlm::start(vec![
        endless_stream(),
        MockTurn::text("answer to second"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let first = within("prompt", client.session_prompt(&session, PROMPTS[0]))
        .await
        .unwrap();
    while events.next().await["type"] != "message_delta" {}
    let second = within("prompt", client.session_prompt(&session, PROMPTS[1]))
        .await
        .unwrap();
    let cancel = within("session/cancel", client.session_cancel(&session))
        .await
        .unwrap();
    assert!(cancel.cancelled);

    let turn_ids = vec![first.turn_id, second.turn_id];
    let mut seen = Vec::new();
    while of_type(&seen, "turn_completed").len() < 2 {
        seen.push(events.next().await);
    }
    let completed = completions(&seen, &turn_ids);
    assert_eq!(completed[0]["stopReason"], "cancelled");
    assert_eq!(completed[1]["stopReason"], "end_turn");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_graceful_restart_keeps_queued_prompts_and_runs_them_after() {
    let mock = MockLlm::start(vec![endless_stream()]).await;
    let mut daemon = spawn(&mock);
    let (session, turn_ids) = five_prompts_while_the_first_streams(&daemon).await;
    for text in &PROMPTS[1..] {
        mock.push([MockTurn::text(format!("answer to {text}")), done()]);
    }
    // SIGTERM: the running turn is cancelled; the queued prompts start nowhere.
    assert_eq!(daemon.restart(), Some(0));

    let history = history_until_completed(&daemon, &session, &turn_ids).await;
    assert_queued_in_order(&history, &turn_ids);
    let completed = completions(&history, &turn_ids);
    assert_eq!(completed[0]["stopReason"], "cancelled");
    for done in &completed[1..] {
        assert_eq!(done["stopReason"], "end_turn", "{done}");
    }
}

/// The session's busy marker (`store/busy.rs`): next to its log while it has work.
fn busy_marker(daemon: &TestDaemon, session: &str) -> std::path::PathBuf {
    daemon.session_log(session).with_file_name("busy")
}

/// How many durable `"type":"<ty>"` records the session's log file holds (read from disk,
/// so the session is not touched over RPC).
fn logged(daemon: &TestDaemon, session: &str, ty: &str) -> usize {
    let log = std::fs::read_to_string(daemon.session_log(session)).unwrap_or_default();
    log.matches(&format!("\"type\":\"{ty}\"")).count()
}

#[tokio::test(flavor = "multi_thread")]
async fn queued_prompts_run_after_a_restart_without_anyone_attaching() {
    let mock = MockLlm::start(vec![endless_stream()]).await;
    let mut daemon = spawn(&mock);
    let (session, turn_ids) = five_prompts_while_the_first_streams(&daemon).await;
    assert!(
        busy_marker(&daemon, &session).exists(),
        "busy while it streams"
    );
    for text in &PROMPTS[1..] {
        mock.push([MockTurn::text(format!("answer to {text}")), done()]);
    }
    kill_and_restart(&mut daemon);

    // Nobody gets, subscribes or prompts: the daemon resumes the session on its own.
    let expected = 1 + 2 * (PROMPTS.len() - 1);
    amber_tests::steps::eventually("the queued prompts to run", Duration::from_secs(30), || {
        mock.request_count() >= expected
    })
    .await;
    amber_tests::steps::eventually("the session to go idle", Duration::from_secs(30), || {
        !busy_marker(&daemon, &session).exists()
    })
    .await;
    assert_eq!(prompts_after_the_first(&mock), PROMPTS[1..]);

    let history = history_until_completed(&daemon, &session, &turn_ids).await;
    assert_queued_in_order(&history, &turn_ids);
    let completed = completions(&history, &turn_ids);
    assert_eq!(completed[0]["error"]["code"], "interrupted");
    for done in &completed[1..] {
        assert_eq!(done["stopReason"], "end_turn", "{done}");
    }
    assert!(
        !busy_marker(&daemon, &session).exists(),
        "idle again: no marker"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_resume_queued_off_the_cancellations_are_written_at_start() {
    let mock = MockLlm::start(vec![endless_stream()]).await;
    let config = format!("{FAST_RETRIES}[sessions]\nresume_queued = false\n");
    let mut daemon = spawn_config(&mock, &config);
    let (session, turn_ids) = five_prompts_while_the_first_streams(&daemon).await;
    kill_and_restart(&mut daemon);

    // Read from disk only: every acknowledged turn gets its turn_completed at start.
    amber_tests::steps::eventually("the turns to be closed", Duration::from_secs(30), || {
        logged(&daemon, &session, "turn_completed") == turn_ids.len()
    })
    .await;
    amber_tests::steps::eventually("the marker to go", Duration::from_secs(30), || {
        !busy_marker(&daemon, &session).exists()
    })
    .await;
    assert_eq!(mock.request_count(), 1);

    let history = history_until_completed(&daemon, &session, &turn_ids).await;
    let completed = completions(&history, &turn_ids);
    assert_eq!(completed[0]["error"]["code"], "interrupted");
    for cancelled in &completed[1..] {
        assert_eq!(cancelled["stopReason"], "cancelled", "{cancelled}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_busy_marker_is_gone_once_the_session_is_idle() {
    let mock = MockLlm::start(vec![MockTurn::text("hi"), done()]).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    assert!(
        !busy_marker(&daemon, &session).exists(),
        "a new session is idle"
    );
    let mut events = Events::live(&client, &session).await;
    within("prompt", client.session_prompt(&session, "hello"))
        .await
        .unwrap();
    while events.next().await["type"] != "turn_completed" {}
    amber_tests::steps::eventually("the marker to go", Duration::from_secs(10), || {
        !busy_marker(&daemon, &session).exists()
    })
    .await;
    let got = daemon.rpc_ok("session/get", json!({ "sessionId": session }));
    assert_eq!(got["session"]["state"], "idle");
}

// What a crash or a damaged file leaves behind.

const CONFIRM: &str = "Are you finished with the task?";

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
    let asked = sent.last().unwrap()["content"].as_str().unwrap();
    assert_eq!(without_tail(asked), "and now?");
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
    amber_tests::steps::eventually(
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
