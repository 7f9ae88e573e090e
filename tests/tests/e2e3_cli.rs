//! End-to-end: approvals through the real `amber-cli run --no-autostart` — `--yes` answers
//! `allow_once` (and widens nothing else), without `--yes` and with no terminal the call is
//! denied and listed in the result line's `permissionDenials`.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::e2e::{done, run_bounded, spawn};
use amber_tests::e2e3::{bash, call, calls};
use serde_json::{Value, json};

/// `amber-cli run --json --no-autostart ARGS` with stdin from /dev/null: exit code, the
/// event lines, the result line, stderr.
fn run_json(daemon: &TestDaemon, args: &[&str]) -> (Option<i32>, Vec<Value>, Value, String) {
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
    assert_eq!(result["type"], "result", "{result}\n{stderr}");
    (code, lines, result, stderr)
}

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
    let (code, events, result, stderr) = run_json(&daemon, &["--yes", "remove build"]);

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
    let (code, events, result, stderr) = run_json(&daemon, &["remove build"]);

    assert_eq!(result["stopReason"], "end_turn", "{result}");
    assert_eq!(code, Some(0), "exit code follows the stop reason: {stderr}");
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
    let (code, _events, result, stderr) = run_json(&daemon, &["remove build"]);
    assert_eq!(result["stopReason"], "loop_detected", "{result}\n{stderr}");
    assert_eq!(code, Some(3), "{stderr}");
    assert!(daemon.workspace.join("build").exists());
    let denials = result["permissionDenials"].as_array().unwrap();
    assert!(!denials.is_empty(), "{result}");
    assert!(denials.iter().all(|d| d["tool"] == "bash"), "{result}");
}
