//! End-to-end: escalation out of the OS sandbox through the real daemon, in yolo mode with
//! `[sandbox] mode = "workspace-write"`. `bash {command, sandbox: false}` always asks, and
//! the request says it runs unsandboxed; allowed once it runs without the sandbox (it can
//! write outside the workspace); denied it does not run; with no approver it is denied
//! (`no_approver`); a `sandbox = false` allow rule in the config lets it run unasked;
//! an answer covers that call only (`allow_always` stores nothing). `process {action: "start",
//! sandbox: false}` asks the same way: approved, the process runs unsandboxed; denied, it
//! never starts.

use std::path::{Path, PathBuf};

use amber_client::Client;
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

/// A daemon against `mock` with the workspace-write sandbox and no rules.
fn workspace_write(mock: &MockLlm) -> TestDaemon {
    spawn_config(mock, &config(""))
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

/// Whether the escape wrote beside the workspace: it ran without the sandbox.
fn escaped(daemon: &TestDaemon) -> bool {
    outside(daemon, "unsandboxed_outside").exists()
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

/// `asked` is the request to run the escape of call `call_id` unsandboxed, this call only.
fn assert_asks_unsandboxed(asked: &Value, call_id: &str) {
    assert_eq!(asked["callId"], call_id, "{asked}");
    assert_eq!(asked["tool"], "bash", "{asked}");
    assert_eq!(
        asked["arguments"],
        json!({ "command": ESCAPE, "sandbox": false }),
        "{asked}"
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

/// A daemon running a script, a client of it and a yolo session, its events live.
struct Yolo {
    mock: MockLlm,
    daemon: TestDaemon,
    client: Client,
    sid: String,
    events: Events,
}

impl Yolo {
    /// `script` on the daemon `spawn` makes; the client is an approver when `approver`.
    async fn start(
        script: Vec<MockTurn>,
        spawn: impl FnOnce(&MockLlm) -> TestDaemon,
        approver: bool,
    ) -> Yolo {
        let mock = MockLlm::start(script).await;
        let daemon = spawn(&mock);
        let client = if approver {
            connect_approver(&daemon).await
        } else {
            connect(&daemon).await
        };
        let sid = new_session(&client, &daemon, Some(Mode::Yolo)).await;
        let events = Events::live(&client, &sid).await;
        Yolo {
            mock,
            daemon,
            client,
            sid,
            events,
        }
    }

    /// Sends `prompt`: the events before the first approval request, and that request.
    async fn ask(&mut self, prompt: &str) -> (Vec<Value>, Value) {
        self.client.session_prompt(&self.sid, prompt).await.unwrap();
        next_approval(&mut self.events).await
    }

    /// Answers `asked` with `decision`: the rest of the turn.
    async fn answer(&mut self, asked: &Value, decision: Decision) -> Vec<Value> {
        assert!(
            respond(&self.client, &self.sid, &request_id(asked), decision)
                .await
                .unwrap(),
            "{decision:?} was not accepted: {asked}"
        );
        self.events.turn().await
    }

    /// Sends `prompt` and collects the whole turn, answering nothing.
    async fn turn(&mut self, prompt: &str) -> Vec<Value> {
        prompt_turn(&self.client, &mut self.events, &self.sid, prompt).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sandbox_false_asks_in_yolo_and_allow_once_runs_it_unsandboxed() {
    let mut s = Yolo::start(script(), workspace_write, true).await;
    let (before, asked) = s.ask("publish").await;
    assert_sandboxed_call_was_contained(&before, &s.daemon);
    assert_asks_unsandboxed(&asked, "c_escape");
    assert!(!ran(&s.daemon), "ran before it was approved");

    let rest = s.answer(&asked, Decision::AllowOnce).await;
    let resolved = of_type(&rest, "approval_resolved");
    assert_eq!(resolved.len(), 1, "{rest:#?}");
    assert_eq!(resolved[0]["decision"], "allow_once");
    assert_eq!(resolved[0]["by"], "client");
    let (status, output) = result_of(&rest, "c_escape");
    assert_eq!(status, "ok", "{output}");
    assert!(ran(&s.daemon), "the approved command did not run");
    assert!(
        escaped(&s.daemon),
        "the approved command ran inside the sandbox: {output}"
    );
    assert_eq!(stop_reason(&rest), "end_turn");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_unsandboxed_run_does_not_run() {
    let mut s = Yolo::start(script(), workspace_write, true).await;
    let (_, asked) = s.ask("publish").await;
    assert_asks_unsandboxed(&asked, "c_escape");
    let rest = s.answer(&asked, Decision::Deny).await;
    let (status, output) = result_of(&rest, "c_escape");
    assert_eq!(status, "denied", "{output}");
    assert_eq!(envelope_for(&s.mock, "c_escape")["status"], "denied");
    assert!(!ran(&s.daemon), "a denied command ran");
    assert!(!escaped(&s.daemon));
}

#[tokio::test(flavor = "multi_thread")]
async fn with_no_approver_an_unsandboxed_run_is_denied() {
    let mut s = Yolo::start(script(), workspace_write, false).await;
    let turn = s.turn("publish").await;
    assert_sandboxed_call_was_contained(&turn, &s.daemon);
    let asked = of_type(&turn, "approval_requested");
    assert_eq!(asked.len(), 1, "{turn:#?}");
    assert_asks_unsandboxed(asked[0], "c_escape");
    let resolved = of_type(&turn, "approval_resolved");
    assert_eq!(resolved.len(), 1, "{turn:#?}");
    assert_eq!(resolved[0]["decision"], "deny");
    assert_eq!(resolved[0]["by"], "no_approver");
    let (status, output) = result_of(&turn, "c_escape");
    assert_eq!(status, "denied", "{output}");
    assert!(output.contains("approver"), "{output}");
    assert!(!ran(&s.daemon), "ran with nobody to approve it");
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
    let mut s = Yolo::start(script(), |mock| spawn_config(mock, &config(rules)), true).await;
    let turn = s.turn("publish").await;
    assert_sandboxed_call_was_contained(&turn, &s.daemon);
    assert!(
        of_type(&turn, "approval_requested").is_empty(),
        "the rule allows it: {turn:#?}"
    );
    let (status, output) = result_of(&turn, "c_escape");
    assert_eq!(status, "ok", "{output}");
    assert!(ran(&s.daemon));
    assert!(escaped(&s.daemon), "it ran inside the sandbox: {output}");
}

/// An answer to an unsandboxed run covers that call only: the command runs whatever the
/// workspace holds when it starts (a Makefile the model edited since, a script it wrote), so
/// neither `allow_session` nor `allow_always` grants or stores anything.
#[tokio::test(flavor = "multi_thread")]
async fn allow_always_and_allow_session_on_an_unsandboxed_run_count_for_that_call_only() {
    // The same command three times in one session, each asked again whatever the answer
    // before it: (prompt, call id, answer, the call's status).
    let rounds = [
        ("publish", "c_escape", Decision::AllowAlways, "ok"),
        ("again", "c_again", Decision::AllowSession, "ok"),
        ("thrice", "c_third", Decision::Deny, "denied"),
    ];
    let script = rounds
        .iter()
        .flat_map(|(prompt, call_id, _, _)| {
            [
                escape_call(call_id),
                MockTurn::text(format!("Answered {prompt}.")),
                done(),
            ]
        })
        .collect();
    let mut s = Yolo::start(script, workspace_write, true).await;

    for (prompt, call_id, decision, status) in rounds {
        let case = format!("{call_id} answered {decision:?}");
        let (_, asked) = s.ask(prompt).await;
        assert_eq!(
            asked["callId"], call_id,
            "{case}: asked again after the answer before: {asked}"
        );
        assert_asks_unsandboxed(&asked, call_id);
        let turn = s.answer(&asked, decision).await;
        assert_eq!(result_of(&turn, call_id).0, status, "{case}: {turn:#?}");
        assert_eq!(
            escaped(&s.daemon),
            status == "ok",
            "{case}: ran unsandboxed exactly when allowed"
        );
        if escaped(&s.daemon) {
            std::fs::remove_file(outside(&s.daemon, "unsandboxed_outside")).unwrap();
        }
        assert!(
            !rules_file(&s.daemon.workspace).exists(),
            "{case}: nothing is stored for an unsandboxed run"
        );
    }
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
    // Made at once, while the start-up probe may still run: the turn settles the verdict.
    let mut s = Yolo::start(touch_script(), spawn_without_landlock, false).await;
    let turn = s.turn("touch").await;

    let asked = of_type(&turn, "approval_requested");
    assert_eq!(asked.len(), 1, "{turn:#?}");
    assert_eq!(asked[0]["unsandboxed"], true, "{}", asked[0]);
    let reason = asked[0]["reason"].as_str().unwrap();
    assert!(reason.contains("Landlock"), "{reason}");
    let (status, output) = result_of(&turn, "c_plain");
    assert_eq!(status, "denied", "{output}");
    assert!(
        !s.daemon.workspace.join("made_without_sandbox").exists(),
        "ran unsandboxed without an approval"
    );
    let status = within("daemon/status", s.client.daemon_status())
        .await
        .unwrap();
    let sandbox = serde_json::to_value(status.sandbox).unwrap();
    assert_eq!(sandbox["available"], false, "{sandbox}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_landlock_an_approved_command_runs_unsandboxed() {
    let mut s = Yolo::start(touch_script(), spawn_without_landlock, true).await;
    let (_, asked) = s.ask("touch").await;
    assert_eq!(asked["unsandboxed"], true, "{asked}");
    let turn = s.answer(&asked, Decision::AllowOnce).await;
    assert_eq!(result_of(&turn, "c_plain").0, "ok");
    assert!(s.daemon.workspace.join("made_without_sandbox").exists());
}

#[test]
fn amber_cli_run_yes_never_approves_an_unsandboxed_run() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mock = runtime.block_on(MockLlm::start(script()));
    let daemon = workspace_write(&mock);
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
    assert_eq!(code, Some(4), "ended with the call denied: {stderr}");
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
    let mut s = Yolo::start(process_script(), workspace_write, true).await;
    let (before, asked) = s.ask("serve").await;
    let (status, output) = result_of(&before, "p_sandboxed");
    assert_eq!(status, "ok", "yolo starts it sandboxed: {output}");
    assert_asks_process_unsandboxed(&asked);
    assert!(
        !s.daemon.workspace.join("process_marker").exists(),
        "started before it was approved"
    );
    assert_sandboxed_process_was_contained(&s.daemon).await;

    let rest = s.answer(&asked, Decision::AllowOnce).await;
    let (status, output) = result_of(&rest, "p_escape");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("started"), "{output}");
    let escaped = outside(&s.daemon, "process_unsandboxed_outside");
    amber_tests::steps::eventually(
        "the approved process wrote outside the workspace",
        std::time::Duration::from_secs(10),
        || escaped.exists(),
    )
    .await;
    assert!(s.daemon.workspace.join("process_marker").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_unsandboxed_process_start_does_not_run() {
    let mut s = Yolo::start(process_script(), workspace_write, true).await;
    let (_, asked) = s.ask("serve").await;
    assert_asks_process_unsandboxed(&asked);
    let rest = s.answer(&asked, Decision::Deny).await;
    let (status, output) = result_of(&rest, "p_escape");
    assert_eq!(status, "denied", "{output}");
    assert_sandboxed_process_was_contained(&s.daemon).await;
    // Give a wrongly started process the time to write.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        !s.daemon.workspace.join("process_marker").exists(),
        "a denied process ran"
    );
    assert!(!outside(&s.daemon, "process_unsandboxed_outside").exists());
}
