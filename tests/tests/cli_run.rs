//! End-to-end: the real `amber-cli run --no-autostart` against the real `amberd` and a scripted
//! model — `--json` event lines, the final result line, exit codes, permission denials; its
//! approvals: `--yes` answers `allow_once` (and widens nothing else), without `--yes` and with
//! no terminal the call is denied and listed in the result line's `permissionDenials`; on a
//! terminal (a pty from `script`) it asks inline, and when another client answers first the
//! open prompt is dismissed ("answered elsewhere") and amber-cli exits as soon as the turn
//! ends, instead of waiting for the terminal read.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_proto::Decision;
use amber_tests::steps::{Events, done, run_bounded, run_bounded_with_stdin, spawn};
use amber_tests::tool_calls::{
    bash, call, calls, connect_approver, next_approval, request_id, respond,
};
use amber_tests::{TestDaemon, bin_path};
use serde_json::{Value, json};

/// What one `amber-cli run --json` printed: the opening `session_started` line, event lines
/// and the final result line.
struct Run {
    code: Option<i32>,
    started: Value,
    events: Vec<Value>,
    result: Value,
    stderr: String,
}

/// `amber-cli run --json --no-autostart ARGS` with stdin from /dev/null.
fn run_json(daemon: &TestDaemon, args: &[&str]) -> Run {
    let mut cmd = daemon.cli();
    cmd.args(["run", "--json", "--no-autostart"]).args(args);
    let (code, stdout, stderr) = run_bounded(cmd);
    let mut lines: Vec<Value> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l:?}\n{stderr}"))
        })
        .collect();
    let result = lines
        .pop()
        .unwrap_or_else(|| panic!("no output (exit {code:?}): {stderr}"));
    assert_eq!(result["type"], "result", "last line: {result}\n{stderr}");
    assert!(
        !lines.is_empty(),
        "no session_started line: {stdout}\n{stderr}"
    );
    let started = lines.remove(0);
    assert_eq!(started["type"], "session_started", "first line: {started}");
    Run {
        code,
        started,
        events: lines,
        result,
        stderr,
    }
}

fn assert_result_shape(run: &Run, stop: &str) {
    let r = &run.result;
    assert_eq!(r["schemaVersion"], 1, "{r}");
    assert_eq!(r["stopReason"], stop, "{r}\n{}", run.stderr);
    assert!(
        r["sessionId"].as_str().is_some_and(|s| !s.is_empty()),
        "{r}"
    );
    assert!(r["text"].is_string(), "{r}");
    assert!(r["usage"]["totalTokens"].is_u64(), "{r}");
    assert!(r["durationMs"].is_u64(), "{r}");
    assert!(r["numTurns"].is_u64() && r["numRequests"].is_u64(), "{r}");
    assert!(r["permissionDenials"].is_array(), "{r}");
    // The opening line names the session the result is about, before any event.
    assert_eq!(run.started["sessionId"], r["sessionId"], "{}", run.started);
    assert_eq!(run.started["schemaVersion"], 1, "{}", run.started);
    // Every event line is an event of this session; the last is the turn's end.
    assert!(!run.events.is_empty());
    for event in &run.events {
        assert_eq!(event["sessionId"], r["sessionId"], "{event}");
    }
    let last = run.events.last().unwrap();
    assert_eq!(last["type"], "turn_completed", "{last}");
    assert_eq!(last["stopReason"], stop);
}

#[test]
fn run_json_completes_a_task_and_exits_0() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::tool_call("write", &json!({"path": "hello.txt", "content": "hi\n"})),
        MockTurn::text("Wrote hello.txt."),
        done(),
    ]);
    let daemon = spawn(&mock);
    let run = run_json(&daemon, &["write hello.txt"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_result_shape(&run, "end_turn");
    assert_eq!(run.result["text"], "Wrote hello.txt.");
    assert_eq!(run.result["permissionDenials"], json!([]));
    assert!(run.result["usage"]["totalTokens"].as_u64().unwrap() > 0);
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("hello.txt")).unwrap(),
        "hi\n"
    );
    let types: Vec<_> = run
        .events
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    for expected in [
        "turn_started",
        "tool_call_started",
        "tool_call_completed",
        "message_completed",
        "usage",
    ] {
        assert!(types.contains(&expected), "no {expected} line in {types:?}");
    }
    // Every event is printed, the subscription's `synced` marker (before the turn) too.
    assert_eq!(run.events[0]["type"], "synced", "{types:?}");
    // Then the prompt's durable `prompt_queued`, and its turn.
    assert_eq!(run.events[1]["type"], "prompt_queued", "{types:?}");
    assert_eq!(run.events[2]["type"], "turn_started", "{types:?}");
    assert_eq!(run.events[2]["prompt"], "write hello.txt");
    // The session lives on in the daemon, with the workspace as its cwd.
    let sid = run.result["sessionId"].clone();
    let got = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    assert_eq!(
        got["session"]["cwd"],
        daemon.workspace.display().to_string()
    );
    assert_eq!(mock.request_count(), 3);
    // Two replies shown (the call, the text); three requests (the silent confirm too).
    assert_eq!(run.result["numTurns"], 2, "{}", run.result);
    assert_eq!(run.result["numRequests"], 3, "{}", run.result);
    // What the run runs with, said before anything else.
    let started = &run.started;
    assert_eq!(started["resumed"], false, "{started}");
    assert_eq!(started["model"], got["session"]["model"], "{started}");
    assert_eq!(started["mode"], got["session"]["mode"], "{started}");
    assert_eq!(started["cwd"], got["session"]["cwd"], "{started}");
    assert_eq!(
        started["amberVersion"],
        env!("CARGO_PKG_VERSION"),
        "{started}"
    );
    let tools: Vec<&str> = started["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for tool in ["read", "write", "bash"] {
        assert!(tools.contains(&tool), "{tool} not in {tools:?}");
    }
    // Continuing the session says so.
    mock.push([MockTurn::text("Again."), done()]);
    let again = run_json(&daemon, &["--session", sid.as_str().unwrap(), "again"]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.started["resumed"], true, "{}", again.started);
    assert_eq!(again.started["sessionId"], sid);
}

#[test]
fn redirected_stdout_carries_the_final_answer_alone_and_the_narration_goes_to_stderr() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::TextAndToolCalls {
            text: "Let me write the file first.".into(),
            calls: vec![MockToolCall {
                id: Some("call_w".into()),
                name: "write".into(),
                arguments: json!({"path": "a.txt", "content": "a"}).to_string(),
            }],
        },
        MockTurn::text("The file a.txt now holds `a`."),
        done(),
    ]);
    let daemon = spawn(&mock);
    let mut cmd = daemon.cli();
    cmd.args(["run", "--no-autostart", "write a.txt"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout, "The file a.txt now holds `a`.\n",
        "stderr: {stderr}"
    );
    assert!(stderr.contains("Let me write the file first."), "{stderr}");
    assert!(
        stderr.contains("write"),
        "tool activity on stderr: {stderr}"
    );
    // A model without a price: no cost line to wade through.
    assert!(!stderr.contains("cost"), "{stderr}");
}

#[test]
fn a_failed_turn_exits_1_with_the_error() {
    let mock = MockLlm::start_blocking(vec![MockTurn::Status {
        code: 400,
        retry_after: None,
        body: r#"{"error":{"message":"bad request from the script"}}"#.into(),
    }]);
    let daemon = spawn(&mock);
    let run = run_json(&daemon, &["fail please"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_result_shape(&run, "error");
    assert!(run.result["error"]["message"].is_string(), "{}", run.result);
    assert!(run.events.iter().any(|e| e["type"] == "error"));
}

#[test]
fn a_failure_before_the_turn_still_ends_with_a_result_line() {
    let mock = MockLlm::start_blocking(Vec::new());
    let daemon = spawn(&mock);
    let mut cmd = daemon.cli();
    cmd.args(["run", "--json", "--no-autostart", "--session", "nope", "hi"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(5), "never started: {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let result: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(result["schemaVersion"], 1);
    assert_eq!(result["stopReason"], "error");
    assert_eq!(result["sessionId"], "nope");
    assert_eq!(result["error"]["code"], "-32001", "{result}");
    assert!(
        result["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nope")),
        "{result}"
    );
    assert_eq!(result["permissionDenials"], json!([]));
    // The code is the result line's; a person reads words.
    assert!(stderr.contains("session not found"), "{stderr}");
    assert!(!stderr.contains("-32001"), "{stderr}");
    assert_eq!(mock.request_count(), 0);
}

#[test]
fn human_mode_ends_with_a_line_listing_the_denials() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::ToolCalls(vec![MockToolCall {
            id: Some("call_w".into()),
            name: "write".into(),
            arguments: json!({"path": "nope.txt", "content": "x"}).to_string(),
        }]),
        MockTurn::text("Read mode: I could not write."),
        done(),
    ]);
    let daemon = spawn(&mock);
    let mut cmd = daemon.cli();
    cmd.args(["run", "--no-autostart", "--mode", "read", "write nope.txt"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(4), "a call was denied: {stderr}");
    assert_eq!(stdout, "Read mode: I could not write.\n");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("amber-cli: 1 tool call was denied: write ("),
        "last stderr line: {last:?}\n{stderr}"
    );
}

#[test]
fn bad_usage_exits_2_without_touching_the_daemon() {
    let mock = MockLlm::start_blocking(Vec::new());
    let daemon = spawn(&mock);
    for args in [
        &["run", "--mode", "admin", "hi"][..],
        &["run", "--no-such-flag", "hi"][..],
    ] {
        let mut cmd = daemon.cli();
        cmd.args(args).arg("--no-autostart");
        let (code, _, stderr) = run_bounded(cmd);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(!stderr.is_empty());
    }
    // An empty prompt is a usage error too; with --json it still ends with a result line.
    let mut cmd = daemon.cli();
    cmd.args(["run", "--json", "--no-autostart", ""]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(2), "{stderr}");
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(result["stopReason"], "error");
    assert_eq!(result["error"]["code"], "usage", "{result}");
    assert!(stderr.contains("the prompt is empty"), "{stderr}");
    let list = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(list["sessions"], json!([]));
    assert_eq!(mock.request_count(), 0);
}

#[test]
fn a_reader_that_goes_away_ends_the_run_quietly() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("hello"), done()]);
    let daemon = spawn(&mock);
    // `amber-cli run --json hi | head -0`: the pipe's reader is gone before anything is written.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = daemon.cli();
    cmd.args(["run", "--json", "--no-autostart", "hi"])
        .stdin(std::process::Stdio::null())
        .stdout(writer)
        .stderr(std::process::Stdio::piped());
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}

#[test]
fn a_guard_stop_exits_3() {
    let same = || MockTurn::tool_call("read", &json!({"path": "x.txt"}));
    let mock = MockLlm::start_blocking(vec![same(), same(), same()]);
    let daemon = spawn(&mock);
    std::fs::write(daemon.workspace.join("x.txt"), "x").unwrap();
    let run = run_json(&daemon, &["loop"]);
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert_result_shape(&run, "loop_detected");
}

#[test]
fn read_mode_denials_are_listed_in_the_result() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::ToolCalls(vec![MockToolCall {
            id: Some("call_w".into()),
            name: "write".into(),
            arguments: json!({"path": "nope.txt", "content": "x"}).to_string(),
        }]),
        MockTurn::text("Read mode: I could not write."),
        done(),
    ]);
    let daemon = spawn(&mock);
    let run = run_json(&daemon, &["--mode", "read", "write nope.txt"]);
    assert_eq!(run.code, Some(4), "a call was denied: {}", run.stderr);
    assert_result_shape(&run, "end_turn");
    assert!(!daemon.workspace.join("nope.txt").exists());
    let denials = run.result["permissionDenials"].as_array().unwrap();
    assert_eq!(denials.len(), 1, "{}", run.result);
    assert_eq!(denials[0]["callId"], "call_w");
    assert_eq!(denials[0]["tool"], "write");
    assert_eq!(denials[0]["arguments"]["path"], "nope.txt");
    let sid = run.result["sessionId"].clone();
    let got = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    assert_eq!(got["session"]["mode"], "read");
}

#[test]
fn no_daemon_and_no_autostart_fails_clearly() {
    let mock = MockLlm::start_blocking(Vec::new());
    let daemon = spawn(&mock);
    let mut cmd = daemon.cli();
    cmd.env("AMBER_SOCKET", daemon.dir.path().join("nothing-here.sock"))
        .args(["run", "--json", "--no-autostart", "hi"]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(5), "never started: {stderr}");
    assert!(stderr.contains("not running"), "{stderr}");
    assert!(
        !daemon.dir.path().join("nothing-here.sock").exists(),
        "autostarted anyway"
    );
}

#[test]
fn ctrl_c_cancels_the_turn_and_exits_130() {
    let chunks = (0..30).map(|i| format!("slow{i} ")).collect();
    let mock = MockLlm::start_blocking(vec![MockTurn::Slow {
        chunks,
        interval_ms: 1_000,
    }]);
    let daemon = spawn(&mock);
    let mut cmd = daemon.cli();
    cmd.args(["run", "--json", "--no-autostart", "talk"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // Wait until the turn is streaming: the session is running and the model was asked.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list = daemon.rpc_ok("session/list", json!({}));
        if list["sessions"][0]["state"] == "running" && mock.request_count() == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the turn never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid; no memory-safety preconditions.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let _ = tx.send(std::io::read_to_string(stdout));
    });
    let Ok(stdout) = rx.recv_timeout(Duration::from_secs(20)) else {
        let _ = child.kill();
        panic!("amber-cli did not exit after Ctrl-C");
    };
    let stdout = stdout.unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{stdout}");
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["stopReason"], "cancelled", "{result}");
    // The daemon really cancelled: the session is idle again.
    let got = daemon.rpc_ok("session/get", json!({"sessionId": result["sessionId"]}));
    assert_eq!(got["session"]["state"], "idle");
}

#[tokio::test]
async fn the_rpc_bridge_forwards_requests_sent_right_behind_initialize_after_it() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    // All lines at once, as `printf … | amber-cli rpc` sends them: the requests behind the
    // handshake must not overtake it (the daemon would refuse them with -32002).
    let input = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": 1, "clientInfo": {"name": "sh", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "daemon/status", "params": {}}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect::<String>();
    let path = daemon.workspace.join("rpc-input.ndjson");
    for _ in 0..5 {
        std::fs::write(&path, &input).unwrap();
        let mut cmd = daemon.cli();
        cmd.args(["rpc", "--no-autostart"]);
        let stdin = Stdio::from(std::fs::File::open(&path).unwrap());
        let (code, stdout, stderr) = run_bounded_with_stdin(cmd, stdin);
        assert_eq!(code, Some(0), "{stderr}");
        let answers: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        for id in 1..=3 {
            let answer = answers
                .iter()
                .find(|a| a["id"] == id)
                .unwrap_or_else(|| panic!("no answer to {id}: {stdout}"));
            assert!(answer["result"].is_object(), "{answer}");
        }
    }
}

// Approvals without a terminal: `--yes`, and denials listed in the result line.

fn of<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

#[test]
fn yes_approves_the_destructive_command_but_not_an_escape() {
    let mock = MockLlm::start_blocking(vec![
        bash("call_rm", "rm -rf build"),
        calls(vec![call(
            "call_escape",
            "write",
            &json!({"path": "../escaped-by-yes.txt", "content": "x"}),
        )]),
        MockTurn::text("Removed build."),
        done(),
    ]);
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build/deep")).unwrap();
    let Run {
        code,
        events,
        result,
        stderr,
        ..
    } = run_json(&daemon, &["--yes", "remove build"]);

    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    assert!(
        !daemon.workspace.join("build").exists(),
        "--yes did not let the command run"
    );
    let asked = of(&events, "approval_requested");
    assert_eq!(asked.len(), 1, "{events:#?}");
    assert_eq!(asked[0]["callId"], "call_rm");
    let resolved = of(&events, "approval_resolved");
    assert_eq!(resolved.len(), 1, "{events:#?}");
    assert_eq!(resolved[0]["requestId"], asked[0]["requestId"]);
    assert_eq!(resolved[0]["decision"], "allow_once");
    assert_eq!(resolved[0]["by"], "client");
    let rm_done = of(&events, "tool_call_completed")
        .into_iter()
        .find(|e| e["callId"] == "call_rm")
        .unwrap();
    assert_eq!(rm_done["status"], "ok", "{rm_done}");

    // Confinement still holds under --yes.
    let escape = of(&events, "tool_call_completed")
        .into_iter()
        .find(|e| e["callId"] == "call_escape")
        .unwrap();
    assert_eq!(escape["status"], "error", "{escape}");
    assert!(
        !daemon
            .workspace
            .parent()
            .unwrap()
            .join("escaped-by-yes.txt")
            .exists()
    );
    let denials = result["permissionDenials"].as_array().unwrap();
    assert!(denials.iter().all(|d| d["callId"] != "call_rm"), "{result}");
}

#[test]
fn without_yes_and_without_a_terminal_the_call_is_denied_and_reported() {
    let mock = MockLlm::start_blocking(vec![
        bash("call_rm", "rm -rf build"),
        MockTurn::text("I was not allowed to remove build."),
        done(),
    ]);
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    // run_bounded gives the child /dev/null as stdin: not a terminal.
    let Run {
        code,
        events,
        result,
        stderr,
        ..
    } = run_json(&daemon, &["remove build"]);

    assert_eq!(result["stopReason"], "end_turn", "{result}");
    assert_eq!(code, Some(4), "the turn ended with a call denied: {stderr}");
    assert!(daemon.workspace.join("build").exists(), "ran unapproved");
    let resolved = of(&events, "approval_resolved");
    assert_eq!(resolved.len(), 1, "{events:#?}");
    assert_eq!(resolved[0]["decision"], "deny");
    assert_eq!(resolved[0]["by"], "no_approver");
    let denials = result["permissionDenials"].as_array().unwrap();
    assert_eq!(denials.len(), 1, "{result}");
    assert_eq!(denials[0]["callId"], "call_rm");
    assert_eq!(denials[0]["tool"], "bash");
    assert_eq!(denials[0]["arguments"]["command"], "rm -rf build");
    assert!(
        !stderr.contains("could not answer"),
        "the CLI must not try to answer: {stderr}"
    );
}

#[test]
fn a_denied_call_in_a_failing_turn_exits_with_the_turn_code() {
    // The model asks for the same denied call three times: the loop guard stops the turn,
    // and the exit code is the guard's (3), the denials still listed.
    let same = || MockTurn::tool_call("bash", &json!({"command": "rm -rf build"}));
    let mock = MockLlm::start_blocking(vec![same(), same(), same()]);
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let Run {
        code,
        result,
        stderr,
        ..
    } = run_json(&daemon, &["remove build"]);
    assert_eq!(result["stopReason"], "loop_detected", "{result}\n{stderr}");
    assert_eq!(code, Some(3), "{stderr}");
    assert!(daemon.workspace.join("build").exists());
    let denials = result["permissionDenials"].as_array().unwrap();
    assert!(!denials.is_empty(), "{result}");
    assert!(denials.iter().all(|d| d["tool"] == "bash"), "{result}");
}

// Approvals on a terminal.

/// Shell-quotes one word for `script -c`.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_answered_elsewhere_dismisses_the_prompt_and_run_exits() {
    let mock = MockLlm::start(vec![
        bash("call_rm", "rm -rf build"),
        MockTurn::text("Removed build."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();

    // amber-cli with a terminal on stdin (so it asks inline), through script(1).
    let cli = daemon.cli();
    let line = [
        quote(&bin_path("amber-cli").display().to_string()),
        "--no-autostart".into(),
        "run".into(),
        quote("remove build"),
    ]
    .join(" ");
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"]);
    for (key, value) in cli.get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    cmd.current_dir(&daemon.workspace)
        // Kept open and silent: nobody types an answer at the prompt.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });

    // Another client answers the request while amber-cli's prompt is open.
    let approver = connect_approver(&daemon).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let sid = loop {
        let list = daemon.rpc_ok("session/list", json!({}));
        if let Some(id) = list["sessions"][0]["sessionId"].as_str() {
            break id.to_owned();
        }
        assert!(Instant::now() < deadline, "amber-cli created no session");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let mut events = Events::subscribe(&approver, &sid, Some(0)).await;
    let (_, approval) = next_approval(&mut events).await;
    // Give amber-cli's prompt time to open (it got the same event).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let accepted = respond(&approver, &sid, &request_id(&approval), Decision::AllowOnce)
        .await
        .unwrap();
    assert!(accepted, "amber-cli answered although nobody typed");

    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("amber-cli still waits on its terminal prompt after the turn ended");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    drop(child.stdin.take());
    let out = reader.join().unwrap();
    assert_eq!(status.code(), Some(0), "{out}");
    assert!(out.contains("approval needed: bash: rm -rf build"), "{out}");
    assert!(
        out.contains("was answered elsewhere (allowed once)"),
        "{out}"
    );
    assert!(out.contains("Removed build."), "{out}");
    assert!(!daemon.workspace.join("build").exists());
}

/// Processes whose command line names `needle`.
fn processes_naming(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                found.push(cmdline);
            }
        }
    }
    found
}

#[test]
fn standalone_runs_on_a_private_daemon_with_this_shells_provider_and_leaves_nothing_behind() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("From a private daemon."), done()]);
    // The shared daemon: its socket's directory is where private ones go too.
    let shared = spawn(&mock);
    let socket_dir = shared.socket.parent().unwrap().to_owned();
    let mut cmd = shared.cli();
    cmd.env("AMBER_BASE_URL", mock.base_url())
        .env("AMBER_MODEL", "model-of-this-shell")
        .env("AMBER_API_KEY", "key-of-this-shell")
        .args(["run", "--json", "--standalone", "--mode", "read", "hello"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "session_started", "{stdout}");
    // The run's provider settings are this shell's, not the shared daemon's.
    assert_eq!(lines[0]["model"], "model-of-this-shell", "{}", lines[0]);
    let result = lines.last().unwrap();
    assert_eq!(result["text"], "From a private daemon.", "{result}");
    assert_eq!(mock.requests()[0]["model"], "model-of-this-shell");
    // The shared daemon saw nothing of it.
    let listed = shared.rpc_ok("session/list", json!({}));
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    // The private daemon is gone, and its directory (socket, sessions, logs) with it.
    let left: Vec<_> = std::fs::read_dir(&socket_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("standalone-"))
        .collect();
    assert_eq!(
        left,
        Vec::<String>::new(),
        "left behind in {}",
        socket_dir.display()
    );
    let running = processes_naming(&format!("{}/standalone-", socket_dir.display()));
    assert_eq!(running, Vec::<String>::new());
}

#[test]
fn standalone_refuses_what_a_private_daemon_cannot_do() {
    let mock = MockLlm::start_blocking(Vec::new());
    let shared = spawn(&mock);
    let cases: &[&[&str]] = &[
        &["--standalone", "--session", "s_1", "hi"],
        &["--standalone", "--worktree=x", "hi"],
        &["--standalone", "--remote", "host", "hi"],
        &["--standalone", "--socket", "/tmp/x.sock", "hi"],
    ];
    for args in cases {
        let mut cmd = shared.cli();
        cmd.args(["run"]).args(*args);
        let (code, _, stderr) = run_bounded(cmd);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
    }
    assert_eq!(mock.request_count(), 0);
}

#[test]
fn an_autostart_that_fails_says_why_in_the_daemons_own_words() {
    let mock = MockLlm::start_blocking(Vec::new());
    let shared = spawn(&mock);
    // A directory autostart makes itself, private as it must be.
    let run_dir = shared.dir.path().join("elsewhere");
    let config = shared.dir.path().join("broken.toml");
    std::fs::write(&config, "[agent]\nmax_iterations = 3\n").unwrap();
    let mut cmd = shared.cli();
    cmd.env("AMBER_SOCKET", run_dir.join("amberd.sock"))
        .env("AMBER_CONFIG", &config)
        .args(["run", "hi"]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(5), "never started: {stderr}");
    // The daemon's own reason, not just "see the log".
    assert!(stderr.contains("max_iterations"), "{stderr}");
    assert!(stderr.contains("broken.toml"), "{stderr}");
}

#[test]
fn an_ephemeral_run_leaves_no_session_however_it_ends() {
    let mock = MockLlm::start_blocking(vec![
        MockTurn::text("Gone after this."),
        done(),
        MockTurn::Status {
            code: 400,
            retry_after: None,
            body: r#"{"error":{"message":"refused"}}"#.into(),
        },
    ]);
    let daemon = spawn(&mock);
    for (prompt, code) in [("hi", 0), ("fail", 1)] {
        let run = run_json(&daemon, &["--ephemeral", prompt]);
        assert_eq!(run.code, Some(code), "{prompt}: {}", run.stderr);
        let listed = daemon.rpc_ok("session/list", json!({}));
        assert_eq!(listed["sessions"], json!([]), "{prompt}: {listed}");
    }
}

#[test]
fn sessions_prune_deletes_idle_sessions_older_than_asked_and_a_dry_run_nothing() {
    let mock = MockLlm::start_blocking(Vec::new());
    let daemon = spawn(&mock);
    let cwd = daemon.workspace.display().to_string();
    let ids: Vec<String> = (0..2)
        .map(|_| {
            daemon.rpc_ok("session/new", json!({"cwd": cwd}))["sessionId"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let prune = |extra: &[&str]| {
        let mut cmd = daemon.cli();
        cmd.args(["--no-autostart", "sessions", "prune", "--json"])
            .args(extra);
        let (code, stdout, stderr) = run_bounded(cmd);
        assert_eq!(code, Some(0), "{stderr}");
        let listed: Vec<Value> = serde_json::from_str(&stdout).unwrap();
        let mut pruned: Vec<String> = listed
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap().to_owned())
            .collect();
        pruned.sort();
        pruned
    };
    let count = || {
        daemon.rpc_ok("session/list", json!({}))["sessions"]
            .as_array()
            .unwrap()
            .len()
    };
    let mut all = ids.clone();
    all.sort();
    // Older than a day: none.
    assert_eq!(prune(&["--older-than", "1d"]), Vec::<String>::new());
    // A dry run names them and deletes nothing.
    assert_eq!(prune(&["--older-than", "10ms", "--dry-run"]), all);
    assert_eq!(count(), 2);
    assert_eq!(prune(&["--older-than", "10ms"]), all);
    assert_eq!(count(), 0);
    // A bad age is a usage error.
    let mut cmd = daemon.cli();
    cmd.args([
        "--no-autostart",
        "sessions",
        "prune",
        "--older-than",
        "soon",
    ]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(2), "{stderr}");
}
