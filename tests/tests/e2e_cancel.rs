//! End-to-end: `session/cancel` while the model streams and while a bash command runs —
//! the turn ends `cancelled`, the stream is abandoned, no process is left behind, and the
//! session keeps working.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::e2e::{
    Events, connect, done, eventually, new_session, of_type, prompt_turn, spawn, stop_reason,
    within,
};
use serde_json::json;

/// Far beyond any wait below: a cancel that does not work is seen as a timeout.
const SLOW_INTERVAL_MS: u64 = 1_000;

/// Pids of live (non-zombie) processes whose command line has `arg` as an argument.
fn live_processes_with_arg(arg: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()) && is_alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// A process exists and is not a zombie (a zombie has released everything it held; in a
/// container without a reaping init it may linger).
fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S ...`: the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_mid_stream_ends_the_turn_and_hangs_up_on_the_model() {
    let chunks = (0..30).map(|i| format!("tick {i} ")).collect();
    let mock = MockLlm::start(vec![MockTurn::Slow {
        chunks,
        interval_ms: SLOW_INTERVAL_MS,
    }])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "talk slowly").await.unwrap();
    let before = events.until("message_delta").await;
    assert_eq!(before[0]["type"], "prompt_queued");
    assert_eq!(before[1]["type"], "turn_started");
    let running = client.session_get(&sid).await.unwrap().session;
    assert_eq!(serde_json::to_value(running.state).unwrap(), "running");

    let asked = Instant::now();
    let cancel = within("session/cancel", client.session_cancel(&sid))
        .await
        .unwrap();
    assert!(cancel.cancelled);
    let rest = events.turn().await;
    let waited = asked.elapsed();
    assert_eq!(stop_reason(&rest), "cancelled", "{rest:#?}");
    assert!(rest.last().unwrap()["error"].is_null());
    // Nowhere near the 30 s the stream would take; loose bound, not a benchmark.
    assert!(waited < Duration::from_secs(5), "cancel took {waited:?}");
    assert!(of_type(&rest, "error").is_empty());
    eventually(
        "the mock to see the hang-up",
        Duration::from_secs(5),
        || mock.interrupted_streams() == 1,
    )
    .await;

    // Idle now: nothing to cancel, and a new prompt works.
    assert!(!client.session_cancel(&sid).await.unwrap().cancelled);
    mock.push([MockTurn::text("Fast this time."), done()]);
    let turn = prompt_turn(&client, &mut events, &sid, "again").await;
    assert_eq!(stop_reason(&turn), "end_turn");
    // The abandoned partial reply did not enter the context.
    let got = client.session_get(&sid).await.unwrap();
    assert!(got.messages.iter().all(|m| !m.content.contains("tick 0")));
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_mid_bash_kills_the_whole_process_group() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    // Arguments unique to this daemon, to find the processes in /proc.
    let (bg_arg, fg_arg) = (
        format!("31.{}", daemon.pid()),
        format!("32.{}", daemon.pid()),
    );
    let command = format!("sleep {bg_arg} & echo $! > bg.pid; echo started; sleep {fg_arg}");
    mock.push([
        MockTurn::tool_call("bash", &json!({ "command": command })),
        MockTurn::text("unused"),
    ]);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "sleep").await.unwrap();
    loop {
        let event = events.next().await;
        assert_ne!(event["type"], "turn_completed", "bash ended early: {event}");
        if event["type"] == "tool_output_delta"
            && event["chunk"].as_str().unwrap().contains("started")
        {
            break;
        }
    }
    let bg_pid: u32 = std::fs::read_to_string(daemon.workspace.join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(is_alive(bg_pid), "background sleep should be running");
    eventually(
        "the foreground sleep to start",
        Duration::from_secs(5),
        || live_processes_with_arg(&fg_arg).len() == 1,
    )
    .await;

    assert!(client.session_cancel(&sid).await.unwrap().cancelled);
    let rest = events.turn().await;
    assert_eq!(stop_reason(&rest), "cancelled", "{rest:#?}");
    let completed = of_type(&rest, "tool_call_completed");
    assert_eq!(
        completed.len(),
        1,
        "the bash call still completes: {rest:#?}"
    );
    assert_ne!(completed[0]["status"], "ok");
    assert_eq!(mock.request_count(), 1, "no LLM call after the cancel");

    eventually(
        "every process of the command to die",
        Duration::from_secs(5),
        || {
            !is_alive(bg_pid)
                && live_processes_with_arg(&bg_arg).is_empty()
                && live_processes_with_arg(&fg_arg).is_empty()
        },
    )
    .await;
    assert_eq!(
        serde_json::to_value(client.session_get(&sid).await.unwrap().session.state).unwrap(),
        "idle"
    );
}
