//! End-to-end: escalation out of the OS sandbox through the real daemon, in yolo mode with
//! `[sandbox] mode = "workspace-write"`. `bash {command, sandbox: false}` always asks, and
//! the request says it runs unsandboxed; allowed once it runs without the sandbox (it can
//! write outside the workspace); denied it does not run; with no approver it is denied
//! (`no_approver`); a `sandbox = false` allow rule in the config lets it run unasked;
//! an answer covers that call only (`allow_always` stores nothing). `process {action: "start",
//! sandbox: false}` asks the same way: approved, the process runs unsandboxed; denied, it
//! never starts.

use std::path::{Path, PathBuf};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Decision, Mode};
use amber_tests::TestDaemon;
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, new_session, of_type, prompt_turn, spawn_config,
    stop_reason, within,
};
use amber_tests::tool_calls::{
    call, calls, connect_approver, envelope_for, next_approval, request_id, respond, result_of,
};
use serde_json::{Value, json};

/// The daemon's config: every session's commands run in the workspace-write sandbox.
fn config(rules: &str) -> String {
    format!("{FAST_RETRIES}\n[sandbox]\nmode = \"workspace-write\"\n{rules}")
}

/// Writes the marker in the workspace and one beside it, outside: only an unsandboxed run
/// can write the second.
const ESCAPE: &str = "touch unsandboxed_marker ../unsandboxed_outside";

fn escape_call(id: &str) -> MockTurn {
    calls(vec![call(
        id,
        "bash",
        &json!({ "command": ESCAPE, "sandbox": false }),
    )])
}

/// First a sandboxed write outside the workspace (it must fail: the session really is
/// sandboxed), then the escalation.
fn script() -> Vec<MockTurn> {
    vec![
        calls(vec![call(
            "c_sandboxed",
            "bash",
            &json!({ "command": "touch ../sandboxed_outside" }),
        )]),
        escape_call("c_escape"),
        MockTurn::text("Done."),
        done(),
    ]
}

fn outside(daemon: &TestDaemon, name: &str) -> PathBuf {
    daemon.workspace.parent().unwrap().join(name)
}

fn ran(daemon: &TestDaemon) -> bool {
    daemon.workspace.join("unsandboxed_marker").exists()
}

/// The sandboxed call ran (inside the sandbox, so it could not write outside).
fn assert_sandboxed_call_was_contained(events: &[Value], daemon: &TestDaemon) {
    let (status, output) = result_of(events, "c_sandboxed");
    assert_ne!(status, "denied", "yolo runs it sandboxed: {output}");
    assert!(
        !outside(daemon, "sandboxed_outside").exists(),
        "the session is not sandboxed; this suite needs `[sandbox]`: {output}"
    );
}

fn assert_asks_unsandboxed(asked: &Value) {
    assert_eq!(asked["callId"], "c_escape", "{asked}");
    assert_eq!(asked["tool"], "bash");
    assert_eq!(
        asked["arguments"],
        json!({ "command": ESCAPE, "sandbox": false })
    );
    let reason = asked["reason"].as_str().unwrap();
    assert!(reason.contains("unsandboxed"), "{asked}");
    let scope = asked["scope"].as_str().unwrap();
    assert!(
        scope.contains("unsandboxed") && scope.contains(ESCAPE) && scope.contains("this call only"),
        "the scope is this command unsandboxed, once: {asked}"
    );
    assert_eq!(
        asked["personOnly"], true,
        "only a person answers it: {asked}"
    );
}

async fn yolo_session(client: &amber_client::Client, daemon: &TestDaemon) -> (String, Events) {
    let sid = new_session(client, daemon, Some(Mode::Yolo)).await;
    let events = Events::live(client, &sid).await;
    (sid, events)
}

#[tokio::test(flavor = "multi_thread")]
async fn sandbox_false_asks_in_yolo_and_allow_once_runs_it_unsandboxed() {
    let mock = MockLlm::start(script()).await;
    let daemon = spawn_config(&mock, &config(""));
    let client = connect_approver(&daemon).await;
    let (sid, mut events) = yolo_session(&client, &daemon).await;

    client.session_prompt(&sid, "publish").await.unwrap();
    let (before, asked) = next_approval(&mut events).await;
    assert_sandboxed_call_was_contained(&before, &daemon);
    assert_asks_unsandboxed(&asked);
    assert!(!ran(&daemon), "ran before it was approved");

    let rid = request_id(&asked);
    assert!(
        respond(&client, &sid, &rid, Decision::AllowOnce)
            .await
            .unwrap()
    );
    let rest = events.turn().await;
    let resolved = of_type(&rest, "approval_resolved");
    assert_eq!(resolved.len(), 1, "{rest:#?}");
    assert_eq!(resolved[0]["decision"], "allow_once");
    assert_eq!(resolved[0]["by"], "client");
    let (status, output) = result_of(&rest, "c_escape");
    assert_eq!(status, "ok", "{output}");
    assert!(ran(&daemon), "the approved command did not run");
    assert!(
        outside(&daemon, "unsandboxed_outside").exists(),
        "the approved command ran inside the sandbox: {output}"
    );
    assert_eq!(stop_reason(&rest), "end_turn");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_unsandboxed_run_does_not_run() {
    let mock = MockLlm::start(script()).await;
    let daemon = spawn_config(&mock, &config(""));
    let client = connect_approver(&daemon).await;
    let (sid, mut events) = yolo_session(&client, &daemon).await;

    client.session_prompt(&sid, "publish").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    assert_asks_unsandboxed(&asked);
    let rid = request_id(&asked);
    assert!(respond(&client, &sid, &rid, Decision::Deny).await.unwrap());
    let rest = events.turn().await;
    let (status, output) = result_of(&rest, "c_escape");
    assert_eq!(status, "denied", "{output}");
    assert_eq!(envelope_for(&mock, "c_escape")["status"], "denied");
    assert!(!ran(&daemon), "a denied command ran");
    assert!(!outside(&daemon, "unsandboxed_outside").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn with_no_approver_an_unsandboxed_run_is_denied() {
    let mock = MockLlm::start(script()).await;
    let daemon = spawn_config(&mock, &config(""));
    let plain = connect(&daemon).await;
    let (sid, mut events) = yolo_session(&plain, &daemon).await;

    let turn = prompt_turn(&plain, &mut events, &sid, "publish").await;
    assert_sandboxed_call_was_contained(&turn, &daemon);
    let asked = of_type(&turn, "approval_requested");
    assert_eq!(asked.len(), 1, "{turn:#?}");
    assert_asks_unsandboxed(asked[0]);
    let resolved = of_type(&turn, "approval_resolved");
    assert_eq!(resolved.len(), 1, "{turn:#?}");
    assert_eq!(resolved[0]["decision"], "deny");
    assert_eq!(resolved[0]["by"], "no_approver");
    let (status, output) = result_of(&turn, "c_escape");
    assert_eq!(status, "denied", "{output}");
    assert!(output.contains("approver"), "{output}");
    assert!(!ran(&daemon), "ran with nobody to approve it");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_false_rule_in_the_config_lets_the_command_run_unasked() {
    let rules = r#"
[[rules]]
tool = "bash"
command = "touch unsandboxed_marker*"
sandbox = false
decision = "allow"
"#;
    let mock = MockLlm::start(script()).await;
    let daemon = spawn_config(&mock, &config(rules));
    let client = connect_approver(&daemon).await;
    let (sid, mut events) = yolo_session(&client, &daemon).await;

    let turn = prompt_turn(&client, &mut events, &sid, "publish").await;
    assert_sandboxed_call_was_contained(&turn, &daemon);
    assert!(
        of_type(&turn, "approval_requested").is_empty(),
        "the rule allows it: {turn:#?}"
    );
    let (status, output) = result_of(&turn, "c_escape");
    assert_eq!(status, "ok", "{output}");
    assert!(ran(&daemon));
    assert!(
        outside(&daemon, "unsandboxed_outside").exists(),
        "it ran inside the sandbox: {output}"
    );
}

/// An answer to an unsandboxed run covers that call only: the command runs whatever the
/// workspace holds when it starts (a Makefile the model edited since, a script it wrote), so
/// neither `allow_session` nor `allow_always` grants or stores anything.
#[tokio::test(flavor = "multi_thread")]
async fn allow_always_and_allow_session_on_an_unsandboxed_run_count_for_that_call_only() {
    let mock = MockLlm::start(vec![
        escape_call("c_escape"),
        MockTurn::text("Once."),
        done(),
        escape_call("c_again"),
        MockTurn::text("Twice."),
        done(),
        escape_call("c_third"),
        MockTurn::text("Thrice."),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config(""));
    let client = connect_approver(&daemon).await;
    let (sid, mut events) = yolo_session(&client, &daemon).await;

    client.session_prompt(&sid, "publish").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    assert_asks_unsandboxed(&asked);
    assert!(
        respond(&client, &sid, &request_id(&asked), Decision::AllowAlways)
            .await
            .unwrap()
    );
    let first = events.turn().await;
    assert_eq!(result_of(&first, "c_escape").0, "ok");
    assert!(outside(&daemon, "unsandboxed_outside").exists());
    assert!(
        !rules_file(&daemon.workspace).exists(),
        "nothing is stored for an unsandboxed run"
    );

    // The same command again, in the same session: asked again; `allow_session` too covers
    // only that call.
    std::fs::remove_file(outside(&daemon, "unsandboxed_outside")).unwrap();
    client.session_prompt(&sid, "again").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    assert_eq!(asked["callId"], "c_again", "{asked}");
    assert!(
        respond(&client, &sid, &request_id(&asked), Decision::AllowSession)
            .await
            .unwrap()
    );
    let second = events.turn().await;
    assert_eq!(result_of(&second, "c_again").0, "ok");

    client.session_prompt(&sid, "thrice").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    assert_eq!(
        asked["callId"], "c_third",
        "asked again after allow_session: {asked}"
    );
    assert!(
        respond(&client, &sid, &request_id(&asked), Decision::Deny)
            .await
            .unwrap()
    );
    let third = events.turn().await;
    assert_eq!(result_of(&third, "c_third").0, "denied");
    assert!(!rules_file(&daemon.workspace).exists());
}

fn rules_file(workspace: &Path) -> PathBuf {
    workspace.join(".amber/rules.toml")
}

/// One ordinary command, the kind that runs sandboxed without asking in yolo.
fn touch_script() -> Vec<MockTurn> {
    vec![
        calls(vec![call(
            "c_plain",
            "bash",
            &json!({ "command": "touch made_without_sandbox" }),
        )]),
        MockTurn::text("Done."),
        done(),
    ]
}

/// A daemon on a kernel without Landlock (the test-only switch): its sandbox is unavailable.
fn spawn_without_landlock(mock: &MockLlm) -> TestDaemon {
    TestDaemon::spawn_with(amber_tests::daemon::DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: config(""),
        env: vec![("AMBER_TEST_SANDBOX_NO_LANDLOCK".to_owned(), "1".to_owned())],
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn without_landlock_every_command_asks_even_in_yolo_and_no_approver_denies_it() {
    let mock = MockLlm::start(touch_script()).await;
    let daemon = spawn_without_landlock(&mock);
    let plain = connect(&daemon).await;
    // Made at once, while the start-up probe may still run: the turn settles the verdict.
    let (sid, mut events) = yolo_session(&plain, &daemon).await;
    let turn = prompt_turn(&plain, &mut events, &sid, "touch").await;

    let asked = of_type(&turn, "approval_requested");
    assert_eq!(asked.len(), 1, "{turn:#?}");
    assert_eq!(asked[0]["unsandboxed"], true, "{}", asked[0]);
    let reason = asked[0]["reason"].as_str().unwrap();
    assert!(reason.contains("Landlock"), "{reason}");
    let (status, output) = result_of(&turn, "c_plain");
    assert_eq!(status, "denied", "{output}");
    assert!(
        !daemon.workspace.join("made_without_sandbox").exists(),
        "ran unsandboxed without an approval"
    );
    let status = within("daemon/status", plain.daemon_status())
        .await
        .unwrap();
    let sandbox = serde_json::to_value(status.sandbox).unwrap();
    assert_eq!(sandbox["available"], false, "{sandbox}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_landlock_an_approved_command_runs_unsandboxed() {
    let mock = MockLlm::start(touch_script()).await;
    let daemon = spawn_without_landlock(&mock);
    let client = connect_approver(&daemon).await;
    let (sid, mut events) = yolo_session(&client, &daemon).await;
    client.session_prompt(&sid, "touch").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    assert_eq!(asked["unsandboxed"], true, "{asked}");
    assert!(
        respond(&client, &sid, &request_id(&asked), Decision::AllowOnce)
            .await
            .unwrap()
    );
    let turn = events.turn().await;
    assert_eq!(result_of(&turn, "c_plain").0, "ok");
    assert!(daemon.workspace.join("made_without_sandbox").exists());
}

#[test]
fn amber_cli_run_yes_never_approves_an_unsandboxed_run() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mock = runtime.block_on(MockLlm::start(script()));
    let daemon = spawn_config(&mock, &config(""));
    let mut cmd = daemon.cli();
    cmd.args([
        "run",
        "--json",
        "--no-autostart",
        "--mode",
        "yolo",
        "--yes",
        "publish",
    ]);
    let (code, stdout, stderr) = amber_tests::steps::run_bounded(cmd);
    assert!(!ran(&daemon), "--yes approved an escape from the sandbox");
    assert!(stderr.contains("never approves"), "{stderr}");
    let resolved: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "approval_resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{stdout}");
    assert_eq!(resolved[0]["decision"], "deny");
    assert_eq!(resolved[0]["by"], "client");
    assert_eq!(code, Some(0), "{stderr}");
}

// `process {action: "start", sandbox: false}`: the same escalation for background processes.

/// Writes a marker in the workspace and one beside it, outside: only an unsandboxed process
/// can write the second.
const PROCESS_ESCAPE: &str = "touch process_marker ../process_unsandboxed_outside";

fn process_escape_args() -> Value {
    json!({ "action": "start", "command": PROCESS_ESCAPE, "sandbox": false })
}

/// A sandboxed start that tries the same outside write (and then says it is done), then the
/// escalated start.
fn process_script() -> Vec<MockTurn> {
    vec![
        calls(vec![call(
            "p_sandboxed",
            "process",
            &json!({
                "action": "start",
                "command": "touch ../process_sandboxed_outside; touch sandboxed_process_done",
            }),
        )]),
        calls(vec![call("p_escape", "process", &process_escape_args())]),
        MockTurn::text("Started."),
        done(),
    ]
}

/// Waits until the sandboxed process has tried its outside write; it must have failed.
async fn assert_sandboxed_process_was_contained(daemon: &TestDaemon) {
    let done_marker = daemon.workspace.join("sandboxed_process_done");
    amber_tests::steps::eventually(
        "the sandboxed process ran",
        std::time::Duration::from_secs(10),
        || done_marker.exists(),
    )
    .await;
    assert!(
        !outside(daemon, "process_sandboxed_outside").exists(),
        "a sandboxed process wrote outside the workspace"
    );
}

fn assert_asks_process_unsandboxed(asked: &Value) {
    assert_eq!(asked["callId"], "p_escape", "{asked}");
    assert_eq!(asked["tool"], "process");
    assert_eq!(asked["arguments"], process_escape_args());
    assert_eq!(asked["unsandboxed"], true, "{asked}");
    let reason = asked["reason"].as_str().unwrap();
    assert!(reason.contains("unsandboxed"), "{asked}");
}

#[tokio::test(flavor = "multi_thread")]
async fn process_start_sandbox_false_asks_in_yolo_and_allow_once_runs_it_unsandboxed() {
    let mock = MockLlm::start(process_script()).await;
    let daemon = spawn_config(&mock, &config(""));
    let client = connect_approver(&daemon).await;
    let (sid, mut events) = yolo_session(&client, &daemon).await;

    client.session_prompt(&sid, "serve").await.unwrap();
    let (before, asked) = next_approval(&mut events).await;
    let (status, output) = result_of(&before, "p_sandboxed");
    assert_eq!(status, "ok", "yolo starts it sandboxed: {output}");
    assert_asks_process_unsandboxed(&asked);
    assert!(
        !daemon.workspace.join("process_marker").exists(),
        "started before it was approved"
    );
    assert_sandboxed_process_was_contained(&daemon).await;

    assert!(
        respond(&client, &sid, &request_id(&asked), Decision::AllowOnce)
            .await
            .unwrap()
    );
    let rest = events.turn().await;
    let (status, output) = result_of(&rest, "p_escape");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("started"), "{output}");
    let escaped = outside(&daemon, "process_unsandboxed_outside");
    amber_tests::steps::eventually(
        "the approved process wrote outside the workspace",
        std::time::Duration::from_secs(10),
        || escaped.exists(),
    )
    .await;
    assert!(daemon.workspace.join("process_marker").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_unsandboxed_process_start_does_not_run() {
    let mock = MockLlm::start(process_script()).await;
    let daemon = spawn_config(&mock, &config(""));
    let client = connect_approver(&daemon).await;
    let (sid, mut events) = yolo_session(&client, &daemon).await;

    client.session_prompt(&sid, "serve").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    assert_asks_process_unsandboxed(&asked);
    assert!(
        respond(&client, &sid, &request_id(&asked), Decision::Deny)
            .await
            .unwrap()
    );
    let rest = events.turn().await;
    let (status, output) = result_of(&rest, "p_escape");
    assert_eq!(status, "denied", "{output}");
    assert_sandboxed_process_was_contained(&daemon).await;
    // Give a wrongly started process the time to write.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        !daemon.workspace.join("process_marker").exists(),
        "a denied process ran"
    );
    assert!(!outside(&daemon, "process_unsandboxed_outside").exists());
}
