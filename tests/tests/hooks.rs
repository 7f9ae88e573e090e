//! End-to-end: hooks through the real amberd, against the scripted LLM. The
//! hooks are real programs (one python3 script with a mode per behaviour) written by each
//! test beside its daemon: `pre_tool_use` blocking `git push` by exit 2, deciding by JSON
//! (deny, allow with rewritten arguments, a rewrite into an invalid shape), hanging,
//! crashing and printing garbage (each denies the call: fail closed, with `hook_failed`);
//! matcher globs; `user_prompt` blocking a prompt and adding context the model receives;
//! `turn_completed`, `session_started`, `post_tool_use` and `approval_requested` getting
//! their event JSON in the background; a workspace `.amber/hooks.toml` asking for trust
//! once, remembered, and asking again after it changed; and a hook held by the sandbox.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use amber_client::Client;
use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Decision, Mode};
use amber_tests::TestDaemon;
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, eventually, messages, new_session, of_type, prompt_turn,
    spawn_config, stop_reason, within,
};
use amber_tests::tool_calls::{
    bash, call, calls, connect_approver, envelope_for, next_approval, request_id, respond,
    result_of,
};
use serde_json::{Value, json};

/// The one hook program: `hook.py MODE [ARG]`, reading the event JSON on stdin.
const HOOK_PY: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
mode = sys.argv[1]
event = json.load(sys.stdin)
args = event.get("arguments") or {}
command = args.get("command", "") if isinstance(args, dict) else ""
if mode == "block-push":
    if "git push" in command:
        sys.stderr.write("pushing is not allowed from amber sessions\n")
        sys.exit(2)
elif mode == "always-block":
    sys.stderr.write("blocked by the always-block hook\n")
    sys.exit(2)
elif mode == "json":
    if "original" in command:
        print(json.dumps({"decision": "allow", "arguments": {"command": "echo rewritten > rewritten.txt"}}))
    elif "forbidden" in command:
        print(json.dumps({"decision": "deny", "reason": "forbidden commands stay forbidden"}))
    elif "invalid" in command:
        print(json.dumps({"decision": "allow", "arguments": {"command": 42}}))
    elif "askme" in command:
        print(json.dumps({"decision": "ask", "reason": "the hook wants a human to look"}))
    else:
        print(json.dumps({"decision": "allow", "reason": "pre-approved"}))
elif mode == "hang":
    time.sleep(60)
elif mode == "crash":
    sys.stderr.write("the hook crashed\n")
    sys.exit(1)
elif mode == "garbage":
    print("this is not json")
elif mode == "prompt":
    prompt = event.get("prompt", "")
    if "forbidden" in prompt:
        print(json.dumps({"decision": "deny", "reason": "prompts about forbidden things are blocked"}))
    else:
        print(json.dumps({"additionalContext": "ticket ABC-123 is in progress"}))
elif mode == "context":
    print(json.dumps({"additionalContext": sys.argv[2]}))
elif mode == "record":
    with open(sys.argv[2], "a") as out:
        out.write(json.dumps(event) + "\n")
elif mode == "escape":
    try:
        with open(sys.argv[2], "w") as out:
            out.write("escaped")
        result = "wrote"
    except OSError as err:
        result = "refused: " + str(err)
    with open("escape-attempt.txt", "w") as out:
        out.write(result)
"#;

/// A directory with `hook.py`, made before the daemon (the config names it).
struct HookBin {
    _dir: tempfile::TempDir,
    script: PathBuf,
}

impl HookBin {
    fn new() -> HookBin {
        let dir = tempfile::Builder::new()
            .prefix("amber-hooks-")
            .tempdir()
            .unwrap();
        let script = dir.path().canonicalize().unwrap().join("hook.py");
        std::fs::write(&script, HOOK_PY).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        HookBin { _dir: dir, script }
    }

    /// A `[[hooks]]` entry running `hook.py args…`.
    fn hook(&self, event: &str, args: &[&str], extra: &str) -> String {
        let mut command = vec![json!(self.script.display().to_string())];
        command.extend(args.iter().map(|a| json!(a)));
        format!(
            "[[hooks]]\nevent = \"{event}\"\ncommand = {}\n{extra}\n",
            Value::Array(command)
        )
    }
}

fn daemon(mock: &MockLlm, hooks: &str) -> TestDaemon {
    spawn_config(mock, &format!("{FAST_RETRIES}{hooks}"))
}

/// A client of `daemon` (an approver when `approver`) and a new session in `mode`, its
/// events live.
async fn session(
    daemon: &TestDaemon,
    approver: bool,
    mode: Option<Mode>,
) -> (Client, String, Events) {
    let client = if approver {
        connect_approver(daemon).await
    } else {
        connect(daemon).await
    };
    let sid = new_session(&client, daemon, mode).await;
    let events = Events::live(&client, &sid).await;
    (client, sid, events)
}

/// Answers the approval request `asked` with `decision`; it must be accepted.
async fn answer(client: &Client, sid: &str, asked: &Value, decision: Decision) {
    assert!(
        respond(client, sid, &request_id(asked), decision)
            .await
            .unwrap(),
        "{decision:?} was not accepted: {asked}"
    );
}

fn hook_failed(events: &[Value]) -> Vec<&Value> {
    of_type(events, "hook_failed")
}

/// Reads the JSON lines a `record` hook appended to `path`, waiting for `n` of them.
async fn recorded(path: &Path, n: usize) -> Vec<Value> {
    eventually(
        &format!("{n} lines in {}", path.display()),
        Duration::from_secs(20),
        || {
            std::fs::read_to_string(path)
                .map(|t| t.lines().count() >= n)
                .unwrap_or(false)
        },
    )
    .await;
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pre_tool_use_hook_blocks_git_push_by_exit_2_and_matchers_pick_the_tools() {
    let bin = HookBin::new();
    let hooks = format!(
        "{}{}",
        bin.hook("pre_tool_use", &["block-push"], "matcher = \"ba*\""),
        // Never runs: no MCP tool is called.
        bin.hook("pre_tool_use", &["always-block"], "matcher = \"mcp__*\""),
    );
    let mock = MockLlm::start(vec![
        calls(vec![
            call(
                "call_push",
                "bash",
                &json!({"command": "git push origin main"}),
            ),
            call(
                "call_echo",
                "bash",
                &json!({"command": "echo fine > fine.txt"}),
            ),
        ]),
        MockTurn::text("Pushing was refused."),
        done(),
    ])
    .await;
    let daemon = daemon(&mock, &hooks);
    let (client, sid, mut events) = session(&daemon, false, Some(Mode::Yolo)).await;
    let turn = prompt_turn(&client, &mut events, &sid, "push it").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, output) = result_of(&turn, "call_push");
    assert_eq!(status, "denied", "{output}");
    assert!(
        output.contains("pushing is not allowed from amber sessions"),
        "the hook's stderr is the reason: {output}"
    );
    let envelope = envelope_for(&mock, "call_push");
    assert_eq!(envelope["status"], "denied");
    assert!(
        envelope["output"]
            .as_str()
            .unwrap()
            .contains("pushing is not allowed")
    );
    assert_eq!(result_of(&turn, "call_echo").0, "ok");
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("fine.txt")).unwrap(),
        "fine\n"
    );
    assert!(
        hook_failed(&turn).is_empty(),
        "a block is a decision: {turn:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn json_answers_deny_rewrite_and_an_invalid_rewrite_is_denied_with_hook_failed() {
    let bin = HookBin::new();
    let hooks = bin.hook("pre_tool_use", &["json"], "matcher = \"bash\"");
    let mock = MockLlm::start(vec![
        calls(vec![
            call(
                "call_orig",
                "bash",
                &json!({"command": "echo original > original.txt"}),
            ),
            call(
                "call_forbidden",
                "bash",
                &json!({"command": "echo forbidden > forbidden.txt"}),
            ),
            call(
                "call_invalid",
                "bash",
                &json!({"command": "echo invalid > invalid.txt"}),
            ),
        ]),
        MockTurn::text("Done."),
        done(),
    ])
    .await;
    let daemon = daemon(&mock, &hooks);
    let (client, sid, mut events) = session(&daemon, false, Some(Mode::Yolo)).await;
    let turn = prompt_turn(&client, &mut events, &sid, "run them").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    // allow + arguments: the tool ran with the hook's arguments, not the model's.
    assert_eq!(result_of(&turn, "call_orig").0, "ok");
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("rewritten.txt")).unwrap(),
        "rewritten\n"
    );
    assert!(!daemon.workspace.join("original.txt").exists());

    // deny, and an allow whose rewrite has an invalid shape (the reason names the field):
    // (call, what its output says, the file it did not write).
    let denied: &[(&str, &[&str], &str)] = &[
        (
            "call_forbidden",
            &["forbidden commands stay forbidden"],
            "forbidden.txt",
        ),
        ("call_invalid", &["invalid shape", "command"], "invalid.txt"),
    ];
    for &(call_id, says, file) in denied {
        let (status, output) = result_of(&turn, call_id);
        assert_eq!(status, "denied", "{call_id}: {output}");
        for needle in says {
            assert!(
                output.contains(needle),
                "{call_id}: no {needle:?} in {output}"
            );
        }
        assert!(!daemon.workspace.join(file).exists(), "{call_id} ran");
    }
    let failed = hook_failed(&turn);
    assert_eq!(failed.len(), 1, "{turn:#?}");
    assert_eq!(failed[0]["hookEvent"], "pre_tool_use");
    assert_eq!(failed[0]["toolCallId"], "call_invalid");
    assert_eq!(failed[0]["command"][0], bin.script.display().to_string());
    assert_eq!(failed[0]["command"][1], "json");
    assert!(
        failed[0]["reason"]
            .as_str()
            .unwrap()
            .contains("invalid shape")
    );
    assert!(failed[0]["seq"].is_u64(), "hook_failed is durable");
}

/// One turn of a `json` pre_tool_use hook against the session's mode.
struct ModeCase {
    /// Also the prompt.
    label: &'static str,
    mode: Mode,
    call_id: &'static str,
    command: &'static str,
    /// The reason of the approval request the hook's `ask` raises (answered allow once).
    hook_asks: Option<&'static str>,
    status: &'static str,
    /// What the call's output says, when it matters.
    output_says: Option<&'static str>,
    /// A path the command creates or removes, and whether it exists after the turn.
    path: &'static str,
    exists_after: bool,
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_may_ask_or_pre_approve_but_never_overrides_a_deny() {
    let cases = [
        ModeCase {
            label: "yolo would run it; the hook asks",
            mode: Mode::Yolo,
            call_id: "call_ask",
            command: "echo askme > asked.txt",
            hook_asks: Some("the hook wants a human to look"),
            status: "ok",
            output_says: None,
            path: "asked.txt",
            exists_after: true,
        },
        ModeCase {
            label: "write mode would ask; the hook pre-approves",
            mode: Mode::Write,
            call_id: "call_rm",
            command: "rm -rf build",
            hook_asks: None,
            status: "ok",
            output_says: None,
            path: "build",
            exists_after: false,
        },
        ModeCase {
            label: "read mode denies writes; the hook's allow does not change that",
            mode: Mode::Read,
            call_id: "call_write",
            command: "echo x > w.txt",
            hook_asks: None,
            status: "denied",
            output_says: Some("read mode"),
            path: "w.txt",
            exists_after: false,
        },
    ];
    let bin = HookBin::new();
    let hooks = bin.hook("pre_tool_use", &["json"], "");
    let script = cases
        .iter()
        .flat_map(|c| [bash(c.call_id, c.command), MockTurn::text(c.label), done()])
        .collect();
    let mock = MockLlm::start(script).await;
    let daemon = daemon(&mock, &hooks);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let (client, sid, mut events) = session(&daemon, true, Some(Mode::Yolo)).await;

    for c in &cases {
        let label = c.label;
        client.session_set_mode(&sid, c.mode).await.unwrap();
        let turn = match c.hook_asks {
            Some(reason) => {
                client.session_prompt(&sid, label).await.unwrap();
                let (_, asked) = next_approval(&mut events).await;
                assert_eq!(asked["callId"], c.call_id, "{label}: {asked}");
                assert!(
                    asked["reason"].as_str().unwrap().contains(reason),
                    "{label}: {asked}"
                );
                answer(&client, &sid, &asked, Decision::AllowOnce).await;
                within("the asking turn", events.turn()).await
            }
            None => {
                let turn = prompt_turn(&client, &mut events, &sid, label).await;
                assert!(
                    of_type(&turn, "approval_requested").is_empty(),
                    "{label}: {turn:#?}"
                );
                turn
            }
        };
        let (status, output) = result_of(&turn, c.call_id);
        assert_eq!(status, c.status, "{label}: {turn:#?}");
        if let Some(says) = c.output_says {
            assert!(output.contains(says), "{label}: {output}");
        }
        assert_eq!(
            daemon.workspace.join(c.path).exists(),
            c.exists_after,
            "{label}: {} after the turn",
            c.path
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hanging_crashing_and_garbage_hooks_deny_the_call_and_the_session_goes_on() {
    let bin = HookBin::new();
    let hooks = format!(
        "{}{}{}{}",
        bin.hook(
            "pre_tool_use",
            &["hang"],
            "matcher = \"bash\"\ntimeout_ms = 500"
        ),
        bin.hook("pre_tool_use", &["crash"], "matcher = \"write\""),
        bin.hook("pre_tool_use", &["garbage"], "matcher = \"edit\""),
        // Fail open: a hanging post_tool_use hook changes nothing for the call.
        bin.hook(
            "post_tool_use",
            &["hang"],
            "matcher = \"read\"\ntimeout_ms = 300"
        ),
    );
    let mock = MockLlm::start(vec![
        calls(vec![
            call(
                "call_bash",
                "bash",
                &json!({"command": "echo ran > ran.txt"}),
            ),
            call(
                "call_write",
                "write",
                &json!({"path": "w.txt", "content": "x"}),
            ),
            call(
                "call_edit",
                "edit",
                &json!({"path": "r.txt", "old_string": "a", "new_string": "b"}),
            ),
            call("call_read", "read", &json!({"path": "r.txt"})),
        ]),
        MockTurn::text("Some calls were refused."),
        done(),
        MockTurn::text("Still here."),
        done(),
    ])
    .await;
    let daemon = daemon(&mock, &hooks);
    std::fs::write(daemon.workspace.join("r.txt"), "a\n").unwrap();
    let (client, sid, mut events) = session(&daemon, false, Some(Mode::Yolo)).await;
    let started = Instant::now();
    let turn = prompt_turn(&client, &mut events, &sid, "try everything").await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "a 60 s hook held the turn: {:?}",
        started.elapsed()
    );
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let cases = [
        ("call_bash", "timed out after 500 ms"),
        ("call_write", "exited with code 1: the hook crashed"),
        ("call_edit", "not a JSON object on stdout: this is not json"),
    ];
    for (call_id, why) in cases {
        let (status, output) = result_of(&turn, call_id);
        assert_eq!(status, "denied", "{call_id}: {output}");
        assert!(output.contains(why), "{call_id}: {output}");
        assert!(output.contains("pre_tool_use hook"), "{output}");
        let failed = hook_failed(&turn)
            .into_iter()
            .find(|e| e["toolCallId"] == call_id)
            .unwrap_or_else(|| panic!("no hook_failed for {call_id}: {turn:#?}"));
        assert!(failed["reason"].as_str().unwrap().contains(why), "{failed}");
    }
    assert!(!daemon.workspace.join("ran.txt").exists());
    assert!(!daemon.workspace.join("w.txt").exists());
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("r.txt")).unwrap(),
        "a\n"
    );
    // The read ran; its hanging post_tool_use hook is killed in the background.
    assert_eq!(result_of(&turn, "call_read").0, "ok");
    let mut later = Vec::new();
    let post = loop {
        let event = events.next().await;
        if event["type"] == "hook_failed" && event["hookEvent"] == "post_tool_use" {
            break event;
        }
        later.push(event);
    };
    assert_eq!(post["toolCallId"], "call_read");
    assert!(
        post["reason"]
            .as_str()
            .unwrap()
            .contains("timed out after 300 ms")
    );

    let second = prompt_turn(&client, &mut events, &sid, "still there?").await;
    assert_eq!(stop_reason(&second), "end_turn", "{second:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn user_prompt_hooks_block_a_prompt_and_add_context_the_model_receives() {
    let bin = HookBin::new();
    let hooks = format!(
        "{}{}",
        // Fails open: logged as hook_failed, the prompt goes on.
        bin.hook("user_prompt", &["garbage"], ""),
        bin.hook("user_prompt", &["prompt"], ""),
    );
    let mock = MockLlm::start(vec![MockTurn::text("On it."), done()]).await;
    let daemon = daemon(&mock, &hooks);
    let (client, sid, mut events) = session(&daemon, false, None).await;

    let blocked = prompt_turn(&client, &mut events, &sid, "do the forbidden thing").await;
    assert_eq!(stop_reason(&blocked), "error", "{blocked:#?}");
    let completed = blocked.last().unwrap();
    assert_eq!(completed["error"]["code"], "hook_denied", "{completed}");
    let message = completed["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("prompts about forbidden things are blocked"),
        "{message}"
    );
    let errors = of_type(&blocked, "error");
    assert_eq!(errors.len(), 1, "{blocked:#?}");
    assert_eq!(errors[0]["code"], "hook_denied");
    assert_eq!(
        hook_failed(&blocked).len(),
        1,
        "the garbage hook: {blocked:#?}"
    );
    assert_eq!(hook_failed(&blocked)[0]["hookEvent"], "user_prompt");
    assert!(
        mock.requests().is_empty(),
        "a blocked prompt reaches no model"
    );

    let turn = prompt_turn(&client, &mut events, &sid, "fix the bug").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let requests = mock.requests();
    let first = &requests[0];
    let sent: Vec<&str> = messages(first)
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        sent.iter()
            .any(|t| t.contains("fix the bug") && t.contains("ticket ABC-123 is in progress")),
        "the model got the hook's context with the prompt: {sent:#?}"
    );
    assert!(
        !sent.iter().any(|t| t.contains("forbidden thing")),
        "the blocked prompt never entered the context: {sent:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn fire_and_forget_hooks_get_their_event_json() {
    let bin = HookBin::new();
    let hooks = format!(
        "{}{}{}",
        bin.hook("session_started", &["record", "started.jsonl"], ""),
        bin.hook("turn_completed", &["record", "completed.jsonl"], ""),
        bin.hook(
            "post_tool_use",
            &["record", "post.jsonl"],
            "matcher = \"bash\""
        ),
    );
    let mock = MockLlm::start(vec![
        bash("call_echo", "echo hello"),
        MockTurn::text("Said hello."),
        done(),
    ])
    .await;
    let daemon = daemon(&mock, &hooks);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let ws = daemon.workspace.clone();

    // Recorded before any prompt.
    let started = recorded(&ws.join("started.jsonl"), 1).await;

    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "say hello").await;
    assert_eq!(stop_reason(&turn), "end_turn");
    let turn_id = turn.last().unwrap()["turnId"].as_str().unwrap().to_owned();
    let completed = recorded(&ws.join("completed.jsonl"), 1).await;
    let post = recorded(&ws.join("post.jsonl"), 1).await;

    // Every event JSON names the event, the session, the turn (none outside one) and the
    // workspace.
    let cases = [
        ("session_started", &started[0], Value::Null),
        ("turn_completed", &completed[0], json!(turn_id)),
        ("post_tool_use", &post[0], json!(turn_id)),
    ];
    for (event, got, turn) in cases {
        assert_eq!(got["event"], event, "{event}: {got}");
        assert_eq!(got["sessionId"], sid.as_str(), "{event}: {got}");
        assert_eq!(got["turnId"], turn, "{event}: {got}");
        assert_eq!(got["cwd"], ws.display().to_string(), "{event}: {got}");
    }

    let c = &completed[0];
    assert_eq!(c["stopReason"], "end_turn");
    assert!(c.get("tool").is_none(), "{c}");

    let p = &post[0];
    assert_eq!(p["tool"], "bash");
    assert_eq!(p["arguments"], json!({"command": "echo hello"}));
    assert_eq!(p["result"]["status"], "ok");
    assert!(
        p["result"]["output"].as_str().unwrap().contains("hello"),
        "{p}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_request_runs_the_approval_requested_hooks() {
    let bin = HookBin::new();
    let hooks = bin.hook("approval_requested", &["record", "asked.jsonl"], "");
    let mock = MockLlm::start(vec![
        bash("call_rm", "rm -rf build"),
        MockTurn::text("Left it."),
        done(),
    ])
    .await;
    let daemon = daemon(&mock, &hooks);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let (client, sid, mut events) = session(&daemon, true, Some(Mode::Write)).await;
    client.session_prompt(&sid, "clean").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    let lines = recorded(&daemon.workspace.join("asked.jsonl"), 1).await;
    assert_eq!(lines[0]["event"], "approval_requested");
    assert_eq!(lines[0]["tool"], "bash");
    assert_eq!(lines[0]["arguments"], json!({"command": "rm -rf build"}));
    assert_eq!(lines[0]["turnId"], asked["turnId"]);
    answer(&client, &sid, &asked, Decision::Deny).await;
    let rest = within("the turn", events.turn()).await;
    assert_eq!(result_of(&rest, "call_rm").0, "denied");
    assert!(daemon.workspace.join("build").exists());
}

fn workspace_hooks(daemon: &TestDaemon, bin: &HookBin, context: &str) {
    let file = daemon.workspace.join(".amber/hooks.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, bin.hook("user_prompt", &["context", context], "")).unwrap();
}

/// Whether the last model request of the turn that began at request `from` carried `text`.
fn model_saw(mock: &MockLlm, from: usize, text: &str) -> bool {
    mock.requests()[from..].iter().any(|r| {
        messages(r)
            .iter()
            .any(|m| m["content"].as_str().is_some_and(|c| c.contains(text)))
    })
}

/// Sends `prompt`, which must ask to trust the workspace's `.amber/hooks.toml` (a person's
/// question, naming the file and its hooks); answers `decision`: the turn, ended.
async fn trust_turn(
    client: &Client,
    events: &mut Events,
    sid: &str,
    daemon: &TestDaemon,
    prompt: &str,
    decision: Decision,
) -> Vec<Value> {
    client.session_prompt(sid, prompt).await.unwrap();
    let (_, asked) = next_approval(events).await;
    assert_eq!(asked["tool"], "hooks", "{prompt}: {asked}");
    assert_eq!(asked["personOnly"], true, "{prompt}: {asked}");
    let path = daemon.workspace.join(".amber/hooks.toml");
    assert_eq!(
        asked["arguments"]["trust"],
        path.display().to_string(),
        "{prompt}: {asked}"
    );
    assert_eq!(
        asked["arguments"]["hooks"][0]["event"], "user_prompt",
        "{prompt}: {asked}"
    );
    assert!(
        asked["reason"]
            .as_str()
            .unwrap()
            .contains(".amber/hooks.toml"),
        "{prompt}: {asked}"
    );
    answer(client, sid, &asked, decision).await;
    let turn = within(prompt, events.turn()).await;
    assert_eq!(
        stop_reason(&turn),
        "end_turn",
        "{prompt}: a denied trust is no error"
    );
    turn
}

#[tokio::test(flavor = "multi_thread")]
async fn workspace_hooks_ask_for_trust_once_and_again_after_the_file_changes() {
    let bin = HookBin::new();
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|_| MockTurn::text("DONE"));
    let daemon = daemon(&mock, "");
    workspace_hooks(&daemon, &bin, "workspace hook v1");
    let (client, sid, mut events) = session(&daemon, true, Some(Mode::Yolo)).await;

    // First use: asked (even in yolo), trusted always.
    trust_turn(
        &client,
        &mut events,
        &sid,
        &daemon,
        "one",
        Decision::AllowAlways,
    )
    .await;
    assert!(model_saw(&mock, 0, "workspace hook v1"));
    let path = daemon.workspace.join(".amber/hooks.toml");
    let trusted = std::fs::read_to_string(daemon.dir.path().join("data/workspace-trust.json"))
        .expect("the trust is remembered in the data dir");
    assert!(trusted.contains(&path.display().to_string()), "{trusted}");

    // Remembered: no question, the hook runs.
    let before = mock.requests().len();
    let turn = prompt_turn(&client, &mut events, &sid, "two").await;
    assert!(of_type(&turn, "approval_requested").is_empty(), "{turn:#?}");
    assert!(model_saw(&mock, before, "workspace hook v1"));

    // Changed: asked again; denied, the hook is skipped.
    workspace_hooks(&daemon, &bin, "workspace hook v2");
    let before = mock.requests().len();
    trust_turn(&client, &mut events, &sid, &daemon, "three", Decision::Deny).await;
    assert!(!model_saw(&mock, before, "workspace hook v2"));
    assert!(!model_saw(&mock, before, "workspace hook v1"));

    // Still untrusted: asked again next time; allowed once, it runs.
    let before = mock.requests().len();
    trust_turn(
        &client,
        &mut events,
        &sid,
        &daemon,
        "four",
        Decision::AllowOnce,
    )
    .await;
    assert!(model_saw(&mock, before, "workspace hook v2"));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_an_approver_workspace_hooks_stay_untrusted_and_the_turn_goes_on() {
    let bin = HookBin::new();
    let mock = MockLlm::start(vec![MockTurn::text("ok"), done()]).await;
    let daemon = daemon(&mock, "");
    workspace_hooks(&daemon, &bin, "never seen");
    let (client, sid, mut events) = session(&daemon, false, None).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let resolved = of_type(&turn, "approval_resolved");
    assert_eq!(resolved.len(), 1, "{turn:#?}");
    assert_eq!(resolved[0]["by"], "no_approver");
    assert!(of_type(&turn, "error").is_empty(), "{turn:#?}");
    assert!(!model_saw(&mock, 0, "never seen"));
    assert!(!daemon.dir.path().join("data/workspace-trust.json").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_users_own_hooks_run_as_the_user_and_a_workspaces_in_the_sandbox() {
    // (where the hook is configured, its extra lines, whether it may write outside)
    let table: &[(&str, &str, bool)] = &[
        ("config", "", true),
        ("config", "sandbox = true", false),
        // A repository cannot take its hooks out of the sandbox.
        ("workspace", "sandbox = false", false),
        ("workspace", "", false),
    ];
    for (from, extra, escapes) in table {
        let bin = HookBin::new();
        let outside = tempfile::Builder::new()
            .prefix("amber-hooks-outside-")
            .tempdir()
            .unwrap();
        let sentinel = outside.path().canonicalize().unwrap().join("sentinel.txt");
        let hook = bin.hook(
            "user_prompt",
            &["escape", &sentinel.display().to_string()],
            extra,
        );
        let config = match *from {
            "config" => hook.clone(),
            _ => String::new(),
        };
        let mock = MockLlm::start(Vec::new()).await;
        mock.set_responder(|_| MockTurn::text("ok"));
        let daemon = spawn_config(
            &mock,
            &format!("{FAST_RETRIES}[sandbox]\nmode = \"workspace-write\"\n{config}"),
        );
        let (client, sid, mut events) = session(&daemon, true, None).await;
        let case = format!("{from} hook, `{extra}`");
        if *from == "workspace" {
            let file = daemon.workspace.join(".amber/hooks.toml");
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, &hook).unwrap();
            // Trusted first (a person's answer), so that it runs at all.
            client.session_prompt(&sid, "trust it").await.unwrap();
            let (_, asked) = next_approval(&mut events).await;
            assert_eq!(asked["tool"], "hooks", "{case}: {asked}");
            answer(&client, &sid, &asked, Decision::AllowAlways).await;
            within(&case, events.turn()).await;
            let _ = std::fs::remove_file(daemon.workspace.join("escape-attempt.txt"));
            let _ = std::fs::remove_file(&sentinel);
        }
        let turn = prompt_turn(&client, &mut events, &sid, "hello").await;
        assert_eq!(stop_reason(&turn), "end_turn", "{case}: {turn:#?}");
        let attempt = std::fs::read_to_string(daemon.workspace.join("escape-attempt.txt"))
            .unwrap_or_else(|_| panic!("{case}: the hook did not run"));
        match escapes {
            true => {
                assert_eq!(attempt, "wrote", "{case}");
                assert!(sentinel.exists(), "{case}");
            }
            false => {
                assert!(attempt.starts_with("refused"), "{case}: {attempt}");
                assert!(
                    !sentinel.exists(),
                    "{case}: the hook wrote outside the workspace"
                );
            }
        }
    }
}
