//! End-to-end: `amber-cli run --timeout SECS` cancels the turn when the time is up (its
//! `turn_completed` says `cancelled`), still prints the result line and exits 124;
//! a timeout while the prompt waits behind another client's turn cancels nothing (that turn
//! is not ours) and exits 124 too;
//! `--max-iterations N` caps that run's model requests (`session/prompt {maxIterations}`)
//! and the turn stops with `max_iterations` (exit 3), while the session's own cap holds for
//! the next prompt.

use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{done, run_bounded, spawn};
use serde_json::{Value, json};

fn run_json(daemon: &amber_tests::TestDaemon, args: &[&str]) -> (Option<i32>, Vec<Value>, String) {
    let mut cmd = daemon.cli();
    cmd.args(["run", "--json", "--no-autostart"]).args(args);
    let (code, stdout, stderr) = run_bounded(cmd);
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (code, lines, stderr)
}

#[test]
fn run_timeout_cancels_the_turn_and_exits_124() {
    let mock = MockLlm::start_blocking(vec![MockTurn::Delay {
        ms: 30_000,
        then: Box::new(MockTurn::text("too late")),
    }]);
    let daemon = spawn(&mock);
    let begun = Instant::now();
    let (code, lines, stderr) = run_json(&daemon, &["--timeout", "1", "take forever"]);
    assert_eq!(code, Some(124), "{stderr}");
    assert!(
        begun.elapsed() < Duration::from_secs(20),
        "it waited for the model"
    );
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(result["stopReason"], "cancelled", "{result}");
    assert_eq!(result["error"]["code"], "timeout", "{result}");
    // The turn itself was cancelled in the daemon, not just left behind.
    let completed: Vec<&Value> = lines
        .iter()
        .filter(|e| e["type"] == "turn_completed")
        .collect();
    assert_eq!(completed.len(), 1, "{lines:?}");
    assert_eq!(completed[0]["stopReason"], "cancelled");
    let session = result["sessionId"].as_str().unwrap();
    let got = daemon.rpc_ok("session/get", json!({"sessionId": session}));
    assert_eq!(got["session"]["state"], "idle", "{got}");
    assert!(stderr.contains("timed out"), "{stderr}");
}

#[test]
fn a_timeout_while_queued_behind_another_turn_cancels_nothing() {
    let mock = MockLlm::start_blocking(vec![MockTurn::Delay {
        ms: 30_000,
        then: Box::new(MockTurn::text("first, late")),
    }]);
    let daemon = spawn(&mock);
    let info = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string()}),
    );
    let session = info["sessionId"].as_str().unwrap();
    daemon.rpc_ok(
        "session/prompt",
        json!({"sessionId": session, "text": "first"}),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while mock.request_count() < 1 {
        assert!(
            Instant::now() < deadline,
            "the first turn never asked the model"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let (code, lines, stderr) = run_json(
        &daemon,
        &["--session", session, "--timeout", "0.5", "second"],
    );
    assert_eq!(code, Some(124), "{stderr}");
    let result = lines.last().unwrap();
    assert_eq!(result["error"]["code"], "timeout", "{result}");
    assert!(stderr.contains("stays queued"), "{stderr}");
    // The other client's turn was left alone: no turn ended.
    assert!(
        !lines.iter().any(|e| e["type"] == "turn_completed"),
        "{lines:?}"
    );
    let got = daemon.rpc_ok("session/get", json!({"sessionId": session}));
    assert_eq!(got["session"]["state"], "running", "{got}");
    daemon.rpc_ok("session/cancel", json!({"sessionId": session}));
}

#[test]
fn a_run_that_ends_before_its_timeout_exits_as_usual() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("quick"), done()]);
    let daemon = spawn(&mock);
    let (code, lines, stderr) = run_json(&daemon, &["--timeout", "30", "be quick"]);
    assert_eq!(code, Some(0), "{stderr}");
    let result = lines.last().unwrap();
    assert_eq!(result["stopReason"], "end_turn");
    assert!(result.get("error").is_none(), "{result}");
}

#[test]
fn run_max_iterations_1_stops_a_model_that_keeps_calling_tools() {
    let read = |n: u32| MockTurn::tool_call("read", &json!({"path": format!("f{n}.txt")}));
    let mut script: Vec<MockTurn> = (0..6).map(read).collect();
    script.push(MockTurn::text("gave up"));
    script.push(done());
    let mock = MockLlm::start_blocking(script);
    let daemon = spawn(&mock);
    for n in 0..6 {
        std::fs::write(daemon.workspace.join(format!("f{n}.txt")), "x\n").unwrap();
    }
    let (code, lines, stderr) = run_json(&daemon, &["--max-iterations", "1", "read everything"]);
    assert_eq!(code, Some(3), "{stderr}");
    let result = lines.last().unwrap();
    assert_eq!(result["stopReason"], "max_iterations", "{result}");
    assert_eq!(mock.request_count(), 1, "one model request only");

    // The cap was this run's: the session's next prompt runs under its own (larger) one.
    let session = result["sessionId"].as_str().unwrap();
    let (code, lines, stderr) = run_json(
        &daemon,
        &["--session", session, "--max-iterations", "3", "go on"],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(lines.last().unwrap()["stopReason"], "max_iterations");
    assert_eq!(mock.request_count(), 4);
    let (code, lines, stderr) = run_json(&daemon, &["--session", session, "finish"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(lines.last().unwrap()["text"], "gave up");
    assert_eq!(mock.request_count(), 8);
}
