//! End-to-end: `amber-cli wait ID` against the real `amberd` and a scripted model — it
//! blocks while a turn runs and exits with that turn's result line and `run`'s exit code;
//! an idle session's last turn is printed at once; a session with no turn is done; its
//! `--timeout` exits 124 and leaves the session running; an unknown id is the daemon's
//! -32001 (exit 1); a session another client deletes mid-wait ends the wait (exit 1) instead
//! of hanging it.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{done, run_bounded, spawn};
use serde_json::{Value, json};

/// What one `amber-cli wait` printed.
struct Waited {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Waited {
    /// The single JSON result line of `--json`.
    fn result(&self) -> Value {
        let lines: Vec<&str> = self.stdout.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "stdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        let line: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(line["type"], "result", "{line}");
        line
    }
}

fn wait_cmd(daemon: &TestDaemon, args: &[&str]) -> std::process::Command {
    let mut cmd = daemon.cli();
    cmd.args(["wait", "--no-autostart"]).args(args);
    cmd
}

fn wait(daemon: &TestDaemon, args: &[&str]) -> Waited {
    let (code, stdout, stderr) = run_bounded(wait_cmd(daemon, args));
    Waited {
        code,
        stdout,
        stderr,
    }
}

/// `amber-cli wait ARGS` on a thread of its own.
fn wait_in_background(daemon: &TestDaemon, args: &[&str]) -> JoinHandle<Waited> {
    let cmd = wait_cmd(daemon, args);
    std::thread::spawn(move || {
        let (code, stdout, stderr) = run_bounded(cmd);
        Waited {
            code,
            stdout,
            stderr,
        }
    })
}

fn new_session(daemon: &TestDaemon) -> String {
    let info = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace.display().to_string()}),
    );
    info["sessionId"].as_str().unwrap().to_owned()
}

/// Sends a prompt; its turn id.
fn prompt(daemon: &TestDaemon, session: &str, text: &str) -> String {
    let got = daemon.rpc_ok(
        "session/prompt",
        json!({"sessionId": session, "text": text}),
    );
    got["turnId"].as_str().unwrap().to_owned()
}

fn state(daemon: &TestDaemon, session: &str) -> String {
    let got = daemon.rpc_ok(
        "session/get",
        json!({"sessionId": session, "messagesLimit": 1}),
    );
    got["session"]["state"].as_str().unwrap().to_owned()
}

/// Polls until the mock has received `n` requests.
fn until_requests(mock: &MockLlm, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while mock.request_count() < n {
        assert!(Instant::now() < deadline, "the model never got request {n}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls until more than `before` connections are open on the daemon.
fn until_connections_above(daemon: &TestDaemon, before: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = daemon.rpc_ok("daemon/status", json!({}));
        if status["connections"].as_u64().unwrap() > before {
            return;
        }
        assert!(Instant::now() < deadline, "amber-cli wait never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn delayed(ms: u64, then: MockTurn) -> MockTurn {
    MockTurn::Delay {
        ms,
        then: Box::new(then),
    }
}

#[test]
fn wait_returns_when_the_running_turn_ends_with_its_result_line() {
    let mock = MockLlm::start_blocking(vec![delayed(1500, MockTurn::text("All done.")), done()]);
    let daemon = spawn(&mock);
    let session = new_session(&daemon);
    let turn = prompt(&daemon, &session, "take your time");
    until_requests(&mock, 1);
    assert_ne!(state(&daemon, &session), "idle");
    let waited = wait(&daemon, &[&session, "--json"]);
    assert_eq!(waited.code, Some(0), "{}", waited.stderr);
    let result = waited.result();
    assert_eq!(result["sessionId"], session.as_str());
    assert_eq!(result["turnId"], turn.as_str());
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(result["text"], "All done.");
    assert!(
        result["usage"]["totalTokens"].as_u64().unwrap() > 0,
        "{result}"
    );
    // The turn took the model's 1.5 s; the duration is the turn's, from its events.
    assert!(result["durationMs"].as_u64().unwrap() >= 1000, "{result}");
    // It returned because the session is idle: both requests were made.
    assert_eq!(state(&daemon, &session), "idle");
    assert_eq!(mock.request_count(), 2);
}

#[test]
fn wait_exits_with_runs_code_for_a_turn_that_failed() {
    let failure = MockTurn::Status {
        code: 400,
        retry_after: None,
        body: r#"{"error":{"message":"bad request from the script"}}"#.into(),
    };
    let mock = MockLlm::start_blocking(vec![delayed(800, failure)]);
    let daemon = spawn(&mock);
    let session = new_session(&daemon);
    let turn = prompt(&daemon, &session, "fail slowly");
    until_requests(&mock, 1);
    let waited = wait(&daemon, &[&session, "--json"]);
    assert_eq!(waited.code, Some(1), "{}", waited.stderr);
    let result = waited.result();
    assert_eq!(result["turnId"], turn.as_str());
    assert_eq!(result["stopReason"], "error");
    assert!(result["error"]["message"].is_string(), "{result}");
}

#[test]
fn wait_on_an_idle_session_prints_its_last_turn_at_once() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::text("first answer"),
        done(),
        MockTurn::text("second answer"),
        done(),
    ]);
    let daemon = spawn(&mock);
    let mut run = daemon.cli();
    run.args(["run", "--json", "--no-autostart", "one"]);
    let (code, stdout, stderr) = run_bounded(run);
    assert_eq!(code, Some(0), "{stderr}");
    let first: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let session = first["sessionId"].as_str().unwrap().to_owned();
    let mut again = daemon.cli();
    again.args([
        "run",
        "--json",
        "--no-autostart",
        "--session",
        &session,
        "two",
    ]);
    let (code, stdout, stderr) = run_bounded(again);
    assert_eq!(code, Some(0), "{stderr}");
    let second: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();

    let waited = wait(&daemon, &[&session, "--json"]);
    assert_eq!(waited.code, Some(0), "{}", waited.stderr);
    let result = waited.result();
    // The last turn, not the first, with what `run --json` said of it.
    assert_eq!(result["turnId"], second["turnId"]);
    assert_eq!(result["text"], "second answer");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(result["usage"], second["usage"]);
    assert_eq!(result["permissionDenials"], json!([]));

    // Without --json: the turn's text on stdout, how it ended on stderr.
    let human = wait(&daemon, &[&session]);
    assert_eq!(human.code, Some(0), "{}", human.stderr);
    assert_eq!(human.stdout, "second answer\n");
    assert!(human.stderr.contains("ended: end_turn"), "{}", human.stderr);
    assert_eq!(mock.request_count(), 4, "wait asks the model nothing");
}

#[test]
fn wait_on_a_long_turn_reaches_back_to_its_start() {
    // 150 writes denied in read mode, then a read that works (so the failure guard does not
    // stop the turn): the turn's start is ~300 events before the end, past the first window.
    let mut calls: Vec<MockToolCall> = (0..150)
        .map(|n| {
            MockToolCall::new(
                "write",
                &json!({"path": format!("w{n}.txt"), "content": "x"}),
            )
        })
        .collect();
    calls.push(MockToolCall::new("read", &json!({"path": "seen.txt"})));
    let mock = MockLlm::start_blocking(vec![
        MockTurn::ToolCalls(calls),
        MockTurn::text("summary"),
        done(),
    ]);
    let daemon = spawn(&mock);
    std::fs::write(daemon.workspace.join("seen.txt"), "x\n").unwrap();
    let mut run = daemon.cli();
    run.args(["run", "--json", "--no-autostart", "--mode", "read", "try"]);
    let (code, stdout, stderr) = run_bounded(run);
    assert_eq!(code, Some(4), "ended with calls denied: {stderr}");
    let ran: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let session = ran["sessionId"].as_str().unwrap();
    let got = daemon.rpc_ok(
        "session/get",
        json!({"sessionId": session, "messagesLimit": 1}),
    );
    assert!(got["lastSeq"].as_u64().unwrap() > 300, "{}", got["lastSeq"]);

    let waited = wait(&daemon, &[session, "--json"]);
    assert_eq!(waited.code, Some(4), "the code run had: {}", waited.stderr);
    let result = waited.result();
    assert_eq!(result["turnId"], ran["turnId"]);
    assert_eq!(result["numTurns"], ran["numTurns"]);
    assert_eq!(result["text"], "summary");
    // Every denial of the turn, the first ones included: the whole turn was read.
    assert_eq!(result["permissionDenials"].as_array().unwrap().len(), 150);
    assert_eq!(result["permissionDenials"], ran["permissionDenials"]);
}

#[test]
fn wait_on_a_session_without_a_turn_is_done_at_once() {
    let mock = MockLlm::start_blocking(Vec::new());
    let daemon = spawn(&mock);
    let session = new_session(&daemon);
    let waited = wait(&daemon, &[&session, "--json"]);
    assert_eq!(waited.code, Some(0), "{}", waited.stderr);
    let result = waited.result();
    assert_eq!(result["sessionId"], session.as_str());
    assert_eq!(result["turnId"], "");
    assert!(result.get("error").is_none(), "{result}");
    let human = wait(&daemon, &[&session]);
    assert_eq!(human.code, Some(0));
    assert!(human.stderr.contains("has no turn yet"), "{}", human.stderr);
}

#[test]
fn wait_timeout_exits_124_and_leaves_the_session_running() {
    let mock = MockLlm::start_blocking(vec![delayed(30_000, MockTurn::text("late"))]);
    let daemon = spawn(&mock);
    let session = new_session(&daemon);
    prompt(&daemon, &session, "never mind");
    until_requests(&mock, 1);
    let begun = Instant::now();
    let waited = wait(&daemon, &[&session, "--json", "--timeout", "0.5"]);
    assert_eq!(waited.code, Some(124), "{}", waited.stderr);
    assert!(begun.elapsed() < Duration::from_secs(15));
    assert_eq!(waited.stdout, "", "no turn ended, so no result line");
    assert!(waited.stderr.contains("still busy"), "{}", waited.stderr);
    assert_eq!(state(&daemon, &session), "running");
    daemon.rpc_ok("session/cancel", json!({"sessionId": session}));
}

#[test]
fn wait_on_an_unknown_id_exits_1_with_the_daemons_message() {
    let mock = MockLlm::start_blocking(Vec::new());
    let daemon = spawn(&mock);
    let waited = wait(&daemon, &["nope", "--json"]);
    assert_eq!(waited.code, Some(1), "{}", waited.stderr);
    assert!(
        waited.stderr.contains("session not found"),
        "{}",
        waited.stderr
    );
    assert!(waited.stderr.contains("nope"), "{}", waited.stderr);
}

#[test]
fn wait_on_a_session_another_client_deletes_exits_1() {
    let mock = MockLlm::start_blocking(vec![delayed(30_000, MockTurn::text("never"))]);
    let daemon = spawn(&mock);
    let session = new_session(&daemon);
    prompt(&daemon, &session, "long task");
    until_requests(&mock, 1);
    let before = daemon.rpc_ok("daemon/status", json!({}))["connections"]
        .as_u64()
        .unwrap();
    let begun = Instant::now();
    let waiting = wait_in_background(&daemon, &[&session, "--json"]);
    until_connections_above(&daemon, before);
    // Connected; give it a moment to subscribe.
    std::thread::sleep(Duration::from_millis(300));
    daemon.rpc_ok("session/delete", json!({"sessionId": session}));
    let waited = waiting.join().unwrap();
    assert_eq!(waited.code, Some(1), "{}", waited.stderr);
    assert!(begun.elapsed() < Duration::from_secs(15), "it hung");
    assert!(
        waited.stderr.contains("was deleted while waiting"),
        "{}",
        waited.stderr
    );
}
