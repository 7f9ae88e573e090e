//! End-to-end: `amber-cli acp` driven by the official ACP client SDK
//! (`@agentclientprotocol/sdk`, tests/mcp-servers/acp-client.mjs), which parses every
//! message it receives against ACP v1 (and checks every line against the SDK's schema for
//! fields it would drop), against the real amberd and a scripted model: initialize, a
//! streamed answer, a tool call with a diff, permissions answered allow, reject and allow
//! always (a stored rule), cancel mid-stream, set_mode, list, load (the timeline it showed
//! live), resume (no history; a waiting approval asked), fork (the unstable SDK), usage
//! after each turn and on load, an unknown session id; the handshake with no daemon and an
//! empty `HOME`, as ACP registries check an agent; and, spoken raw, initialize without
//! params, a malformed line (a parse error, the bridge stays up) and a client that goes away
//! mid-turn (the turn goes on). Also the same session in the TUI (tmux) and an editor at
//! once: both see the stream, and the TUI's answer resolves the editor's permission request.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Decision;
use amber_tests::steps::Events;
use amber_tests::steps::{done, run_bounded, spawn};
use amber_tests::tool_calls::{bash, call, calls, connect_approver, respond};
use amber_tests::{TestDaemon, bin_path};
use serde_json::{Value, json};

use crate::support::tmux;

/// The SDK driver script.
fn driver() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp-servers");
    assert!(
        dir.join("node_modules/@agentclientprotocol/sdk").is_dir(),
        "the ACP SDK is missing: run `npm ci --prefix tests/mcp-servers` (.ci/run does)"
    );
    dir.join("acp-client.mjs")
}

/// Runs the SDK client through `steps` against `amber-cli --no-autostart acp`; every line
/// it logged.
fn run_client(daemon: &TestDaemon, steps: Value, answers: &[&str]) -> Vec<Value> {
    drive(Agent::of(daemon), steps, answers, Sdk::Stable)
}

/// How the driver starts `amber-cli acp`: `cli`'s program, arguments (before `acp`),
/// environment and directory; with `clean_env`, nothing else of the test's environment.
struct Agent {
    cli: Command,
    clean_env: bool,
}

impl Agent {
    /// For `daemon`, as its other clients are started.
    fn of(daemon: &TestDaemon) -> Agent {
        Agent {
            cli: daemon.cli(),
            clean_env: false,
        }
    }

    /// As an ACP registry starts an agent to check it: `HOME` an empty directory, no XDG
    /// variables, nothing but `PATH` besides; `--socket` names `socket`, where nothing
    /// listens (and `--no-autostart` starts nothing), so no real user path is touched.
    fn without_daemon(home: &Path, socket: &Path) -> Agent {
        let mut cli = Command::new(bin_path("amber-cli"));
        cli.env("HOME", home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .arg("--socket")
            .arg(socket)
            .current_dir(home);
        Agent {
            cli,
            clean_env: true,
        }
    }

    /// `amber-cli … --no-autostart acp` itself, stdio the caller's.
    fn command(self) -> Command {
        let mut cmd = Command::new(self.cli.get_program());
        if self.clean_env {
            cmd.env_clear();
        }
        for (k, v) in self.cli.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        if let Some(dir) = self.cli.get_current_dir() {
            cmd.current_dir(dir);
        }
        cmd.args(self.cli.get_args())
            .args(["--no-autostart", "acp"]);
        cmd
    }
}

/// Which entrypoint of the SDK the driver imports.
#[derive(Clone, Copy, PartialEq)]
enum Sdk {
    /// `@agentclientprotocol/sdk`: stable ACP v1, what editors use.
    Stable,
    /// `@agentclientprotocol/sdk/unstable`: with `session/fork`.
    Unstable,
}

/// Runs the SDK client through `steps` against `amber-cli --no-autostart acp` started as
/// `agent` says. Checks that the
/// driver ran to its end, that nothing the agent wrote strays from the SDK's schema, and
/// that the agent exited 0 at the end of its input.
fn drive(agent: Agent, steps: Value, answers: &[&str], sdk: Sdk) -> Vec<Value> {
    let Agent { cli, clean_env } = agent;
    let mut node = Command::new("node");
    if clean_env {
        node.env_clear();
    }
    for (k, v) in cli.get_envs() {
        match v {
            Some(v) => node.env(k, v),
            None => node.env_remove(k),
        };
    }
    if let Some(dir) = cli.get_current_dir() {
        node.current_dir(dir);
    }
    if sdk == Sdk::Unstable {
        node.env("ACP_UNSTABLE", "1");
    }
    node.env("ACP_STEPS", steps.to_string())
        .env("ACP_ANSWERS", answers.join(","))
        .arg(driver())
        .arg("--")
        .arg(cli.get_program())
        .args(cli.get_args())
        .args(["--no-autostart", "acp"]);
    let (code, stdout, stderr) = run_bounded(node);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{stderr}")))
        .collect();
    assert_eq!(code, Some(0), "driver failed:\n{stdout}\n{stderr}");
    let done = lines
        .last()
        .unwrap_or_else(|| panic!("no output:\n{stderr}"));
    assert_eq!(done["kind"], "done", "{stdout}\n{stderr}");
    assert_eq!(
        done["agentExit"], 0,
        "the agent did not end cleanly:\n{stdout}\n{stderr}"
    );
    let strays = of_kind(&lines, "schema");
    assert!(strays.is_empty(), "off the ACP schema: {strays:#?}");
    lines
}

fn results<'a>(log: &'a [Value], op: &str) -> Vec<&'a Value> {
    log.iter()
        .filter(|l| l["kind"] == "result" && l["op"] == op)
        .map(|l| &l["result"])
        .collect()
}

fn errors<'a>(log: &'a [Value], op: &str) -> Vec<&'a Value> {
    log.iter()
        .filter(|l| l["kind"] == "error" && l["op"] == op)
        .collect()
}

fn updates<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter()
        .filter(|l| l["kind"] == "update" && l["update"]["sessionUpdate"] == kind)
        .map(|l| &l["update"])
        .collect()
}

fn text_of(chunks: &[&Value]) -> String {
    chunks
        .iter()
        .map(|c| c["content"]["text"].as_str().unwrap())
        .collect()
}

fn position(log: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    log.iter()
        .position(pred)
        .expect("an entry that is not in the log")
}

fn workspace(daemon: &TestDaemon) -> String {
    daemon.workspace.to_string_lossy().into_owned()
}

/// `amber-cli run --json PROMPT` to its end (exit 0); the session it ran in.
fn session_run_by_cli(daemon: &TestDaemon, prompt: &str) -> String {
    let mut run = daemon.cli();
    run.args(["run", "--json", "--no-autostart", prompt]);
    let (code, stdout, stderr) = run_bounded(run);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    result["sessionId"].as_str().unwrap().to_owned()
}

/// initialize, a new session in the workspace, then one prompt of `text`.
fn prompt_steps(daemon: &TestDaemon, text: &str) -> Value {
    json!([
        {"op": "initialize"},
        {"op": "new", "cwd": workspace(daemon)},
        {"op": "prompt", "text": text},
    ])
}

/// The id of the session `new` made.
fn session_id(log: &[Value]) -> String {
    results(log, "new")[0]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session id: {log:#?}"))
        .to_owned()
}

/// The entries of `kind` the driver logged (`permission`, `permission_withdrawn`, …).
fn of_kind<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|l| l["kind"] == kind).collect()
}

/// The last `tool_call_update` of call `id`.
fn last_update<'a>(log: &'a [Value], id: &str) -> &'a Value {
    updates(log, "tool_call_update")
        .into_iter()
        .rfind(|u| u["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no update of {id}: {log:#?}"))
}

/// The SDK client run through `steps` on a thread of its own, while the test acts as
/// another client of the same daemon.
fn editor(
    daemon: &Arc<TestDaemon>,
    steps: Value,
    answers: &'static [&'static str],
) -> JoinHandle<Vec<Value>> {
    let daemon = daemon.clone();
    std::thread::spawn(move || run_client(&daemon, steps, answers))
}

/// Polls `session/list` until a session matches `pred`, for at most `timeout`: its id.
fn wait_for_session(
    daemon: &TestDaemon,
    what: &str,
    timeout: Duration,
    pred: impl Fn(&Value) -> bool,
) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let list = daemon.rpc_ok("session/list", json!({}));
        if let Some(s) = list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| pred(s))
        {
            return s["sessionId"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "{what} within {timeout:?}: {list}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_streams_message_chunks_then_answers_end_turn() {
    let mock = MockLlm::start(vec![
        MockTurn::Reasoning {
            reasoning: "Think first.".into(),
            text: "Hello from amber, in several chunks.".into(),
        },
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let log = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "new", "cwd": workspace(&daemon)},
            {"op": "prompt", "blocks": [
                {"type": "text", "text": "say hello"},
                {"type": "resource", "resource": {"uri": "file:///w/notes.md", "text": "NOTES BODY"}},
            ]},
        ]),
        &[],
    );
    let init = results(&log, "initialize")[0];
    let answered = [
        ("/protocolVersion", json!(1)),
        ("/agentInfo/name", json!("amber")),
        ("/agentCapabilities/loadSession", json!(true)),
        (
            "/agentCapabilities/promptCapabilities/embeddedContext",
            json!(true),
        ),
        ("/agentCapabilities/promptCapabilities/image", json!(false)),
        ("/agentCapabilities/mcpCapabilities/http", json!(true)),
        ("/agentCapabilities/sessionCapabilities/list", json!({})),
        ("/agentCapabilities/sessionCapabilities/resume", json!({})),
        ("/authMethods/0/id", json!("amber-config")),
    ];
    for (field, expected) in answered {
        assert_eq!(
            init.pointer(field),
            Some(&expected),
            "initialize {field}: {init}"
        );
    }

    let new = results(&log, "new")[0];
    assert!(new["sessionId"].is_string(), "{new}");
    assert_eq!(new["modes"]["currentModeId"], "write");
    let ids: Vec<&str> = new["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["read", "write", "yolo"]);

    let chunks = updates(&log, "agent_message_chunk");
    assert!(!chunks.is_empty(), "no message chunks: {log:#?}");
    assert_eq!(text_of(&chunks), "Hello from amber, in several chunks.");
    assert_eq!(
        text_of(&updates(&log, "agent_thought_chunk")),
        "Think first."
    );
    assert_eq!(results(&log, "prompt")[0]["stopReason"], "end_turn");
    let last_chunk = log
        .iter()
        .rposition(|l| l["update"]["sessionUpdate"] == "agent_message_chunk")
        .unwrap();
    let answered = position(&log, |l| l["kind"] == "result" && l["op"] == "prompt");
    assert!(last_chunk < answered, "chunks came after the stop reason");
    // The embedded resource reached the model with its URI.
    let sent = mock.requests()[0].to_string();
    assert!(
        sent.contains("file:///w/notes.md") && sent.contains("NOTES BODY"),
        "{sent}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn file_changes_show_as_tool_calls_with_diff_blocks() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "c_w",
            "write",
            &json!({"path": "a.txt", "content": "one\ntwo\n"}),
        )]),
        calls(vec![call(
            "c_e",
            "edit",
            &json!({"path": "a.txt", "old_string": "two", "new_string": "TWO"}),
        )]),
        MockTurn::text("Edited."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let log = run_client(&daemon, prompt_steps(&daemon, "edit a.txt"), &[]);
    let file = daemon.workspace.join("a.txt");
    let started = updates(&log, "tool_call")
        .into_iter()
        .find(|u| u["toolCallId"] == "c_e")
        .unwrap_or_else(|| panic!("{log:#?}"));
    assert_eq!(started["kind"], "edit");
    assert_eq!(started["rawInput"]["old_string"], "two");
    assert_eq!(started["locations"][0]["path"], json!(file));

    let diff_of = |id: &str| -> &Value {
        let ended = last_update(&log, id);
        ended["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "diff")
            .unwrap_or_else(|| panic!("no diff block: {ended}"))
    };
    let edit = last_update(&log, "c_e");
    assert_eq!(edit["status"], "completed", "{edit}");
    let diff = diff_of("c_e");
    assert_eq!(diff["path"], json!(file));
    assert_eq!(diff["oldText"], "one\ntwo\n");
    assert_eq!(diff["newText"], "one\nTWO\n");

    let diff = diff_of("c_w");
    assert!(
        diff["oldText"].is_null(),
        "a created file has no old text: {diff}"
    );
    assert_eq!(results(&log, "prompt")[0]["stopReason"], "end_turn");
}

/// The model removes `build` (call `c_build`) then `dist` (`c_dist`), each `rm` asking
/// permission; the editor answers with `answers`, in order.
async fn remove_build_then_dist(answers: &[&str]) -> (MockLlm, TestDaemon, Vec<Value>) {
    let mock = MockLlm::start(vec![
        bash("c_build", "rm -rf build"),
        bash("c_dist", "rm -rf dist"),
        MockTurn::text("Handled."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    for dir in ["build", "dist"] {
        std::fs::create_dir_all(daemon.workspace.join(dir)).unwrap();
    }
    let log = run_client(&daemon, prompt_steps(&daemon, "clean up"), answers);
    (mock, daemon, log)
}

#[tokio::test(flavor = "multi_thread")]
async fn permission_requests_answered_allow_once_run_and_reject_once_are_denied() {
    let (_mock, daemon, log) = remove_build_then_dist(&["allow_once", "reject_once"]).await;
    let asked = of_kind(&log, "permission");
    assert_eq!(asked.len(), 2, "{log:#?}");
    let first = &asked[0]["params"];
    assert_eq!(first["toolCall"]["toolCallId"], "c_build");
    assert_eq!(first["toolCall"]["kind"], "execute");
    let kinds: Vec<&str> = first["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
    assert_eq!(asked[1]["params"]["toolCall"]["toolCallId"], "c_dist");

    assert_eq!(last_update(&log, "c_build")["status"], "completed");
    assert_eq!(last_update(&log, "c_dist")["status"], "failed");
    assert!(
        !daemon.workspace.join("build").exists(),
        "the allowed call did not run"
    );
    assert!(
        daemon.workspace.join("dist").exists(),
        "the rejected call ran"
    );
    assert_eq!(results(&log, "prompt")[0]["stopReason"], "end_turn");
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_always_stores_a_rule_so_the_same_scope_is_not_asked_again() {
    let (_mock, daemon, log) = remove_build_then_dist(&["allow_always"]).await;
    let asked = of_kind(&log, "permission");
    assert_eq!(asked.len(), 1, "the second rm was asked again: {log:#?}");
    assert!(!daemon.workspace.join("build").exists());
    assert!(!daemon.workspace.join("dist").exists());
    let rules = std::fs::read_to_string(daemon.workspace.join(".amber/rules.toml"))
        .expect("allow_always wrote no rules file");
    assert!(rules.contains("rm"), "{rules}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_mid_stream_answers_the_prompt_cancelled() {
    let chunks: Vec<String> = (0..40).map(|i| format!("word{i} ")).collect();
    let mock = MockLlm::start(vec![
        MockTurn::Slow {
            chunks,
            interval_ms: 150,
        },
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let log = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "new", "cwd": workspace(&daemon)},
            {"op": "prompt", "text": "talk", "cancelOnChunk": true},
        ]),
        &[],
    );
    assert_eq!(
        results(&log, "prompt")[0]["stopReason"],
        "cancelled",
        "{log:#?}"
    );
    let streamed = text_of(&updates(&log, "agent_message_chunk"));
    assert!(
        streamed.starts_with("word0 "),
        "nothing streamed before the cancel: {log:#?}"
    );
    assert!(
        !streamed.contains("word39"),
        "the stream ran to its end: {streamed}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn set_mode_changes_the_amber_mode_list_finds_the_session_and_unknown_ids_are_not_found() {
    let mock = MockLlm::start(vec![done()]).await;
    let daemon = spawn(&mock);
    let log = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "new", "cwd": workspace(&daemon)},
            {"op": "set_mode", "mode": "read"},
            {"op": "set_mode", "mode": "nonsense"},
            {"op": "prompt", "text": "hi", "session": "no-such-session"},
            {"op": "set_mode", "mode": "yolo", "session": "no-such-session"},
            {"op": "list", "cwd": workspace(&daemon)},
        ]),
        &[],
    );
    let sid = session_id(&log);
    assert_eq!(results(&log, "set_mode").len(), 1, "{log:#?}");
    let mode_updates = updates(&log, "current_mode_update");
    assert_eq!(mode_updates[0]["currentModeId"], "read");
    let got = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    assert_eq!(got["session"]["mode"], "read");

    let listed = results(&log, "list")[0]["sessions"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        listed
            .iter()
            .any(|s| s["sessionId"] == sid.as_str() && s["cwd"] == workspace(&daemon)),
        "{listed:?}"
    );

    // (the call, its op and place among that op's errors, the JSON-RPC error code)
    let refused = [
        ("set_mode to an unknown mode", "set_mode", 0, -32602),
        ("set_mode of an unknown session", "set_mode", 1, -32002),
        ("a prompt to an unknown session", "prompt", 0, -32002),
    ];
    for (case, op, nth, code) in refused {
        let got = errors(&log, op);
        let error = got
            .get(nth)
            .unwrap_or_else(|| panic!("{case}: not refused: {got:?}"));
        assert_eq!(error["code"], code, "{case}: {got:?}");
    }
    let prompt_errors = errors(&log, "prompt");
    let message = prompt_errors[0]["message"].as_str().unwrap();
    assert!(
        message.contains("no-such-session") || message.contains("not found"),
        "{prompt_errors:?}"
    );
}

/// The `initialize` request, raw, with id 1.
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;

/// `amber-cli --no-autostart acp` spoken to raw, line by line.
struct RawAgent {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::sync::mpsc::Receiver<String>,
}

impl RawAgent {
    fn start(daemon: &TestDaemon) -> RawAgent {
        Self::spawn(Agent::of(daemon))
    }

    fn spawn(agent: Agent) -> RawAgent {
        let mut child = agent
            .command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        RawAgent {
            child,
            stdin,
            stdout: rx,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn next(&self) -> Value {
        let line = self
            .stdout
            .recv_timeout(Duration::from_secs(20))
            .expect("a line from the agent");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {line}"))
    }

    /// Lines until the answer to request `id`.
    fn until_answer(&self, id: u64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let v = self.next();
            if v["id"] == id && v.get("method").is_none() {
                return (before, v);
            }
            before.push(v);
        }
    }
}

impl Drop for RawAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malformed_line_is_a_parse_error_and_the_bridge_stays_up() {
    let mock = MockLlm::start(vec![done()]).await;
    let daemon = spawn(&mock);
    let mut agent = RawAgent::start(&daemon);
    agent.send("{this is not json");
    let err = agent.next();
    assert_eq!(err["error"]["code"], -32700, "{err}");
    assert_eq!(err["id"], Value::Null, "{err}");
    agent.send(INITIALIZE);
    let (_, init) = agent.until_answer(1);
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    agent.send(r#"{"jsonrpc":"2.0","id":2,"method":"no/such_method","params":{}}"#);
    let (_, unknown) = agent.until_answer(2);
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_goes_away_mid_turn_leaves_the_turn_running() {
    let chunks: Vec<String> = (0..12).map(|i| format!("part{i} ")).collect();
    let mock = MockLlm::start(vec![
        MockTurn::Slow {
            chunks,
            interval_ms: 100,
        },
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let mut agent = RawAgent::start(&daemon);
    agent.send(INITIALIZE);
    agent.until_answer(1);
    let new = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": workspace(&daemon), "mcpServers": []}});
    agent.send(&new.to_string());
    let (_, new) = agent.until_answer(2);
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let commands = agent.next();
    assert_eq!(
        commands["params"]["update"]["sessionUpdate"], "available_commands_update",
        "{commands}"
    );
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}});
    agent.send(&prompt.to_string());
    let first = agent.next();
    assert_eq!(
        first["params"]["update"]["sessionUpdate"], "agent_message_chunk",
        "{first}"
    );
    // The editor closes the pipe: the bridge ends, the turn does not.
    agent.stdin = None;
    let status = agent.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut ended = None;
    // Up to 60 s: the turn's 1.2 s of chunks may take much longer on a loaded machine.
    for _ in 0..600 {
        let got = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
        if got["session"]["state"] == "idle" {
            ended = Some(got);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = ended.expect("the turn never ended");
    let last = got["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last["content"],
        "part0 part1 part2 part3 part4 part5 part6 part7 part8 part9 part10 part11 ",
        "{got}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn loading_a_session_started_by_amber_cli_run_replays_its_history_then_goes_live() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "c_w",
            "write",
            &json!({"path": "hist.txt", "content": "x\n"}),
        )]),
        MockTurn::text("Wrote hist.txt."),
        done(),
        MockTurn::text("Second answer."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let sid = session_run_by_cli(&daemon, "write hist.txt");

    let log = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "load", "session": sid, "cwd": workspace(&daemon)},
            {"op": "prompt", "text": "again"},
        ]),
        &[],
    );
    let loaded = position(&log, |l| l["kind"] == "result" && l["op"] == "load");
    assert_eq!(results(&log, "load")[0]["modes"]["currentModeId"], "write");
    let history: Vec<&Value> = log[..loaded]
        .iter()
        .filter(|l| l["kind"] == "update")
        .collect();
    let kinds: Vec<&str> = history
        .iter()
        .filter_map(|l| l["update"]["sessionUpdate"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ],
        "{history:#?}"
    );
    assert_eq!(history[0]["update"]["content"]["text"], "write hist.txt");
    assert_eq!(history[1]["update"]["toolCallId"], "c_w");
    assert_eq!(history[1]["update"]["kind"], "edit");
    assert_eq!(history[2]["update"]["status"], "completed");
    assert_eq!(history[3]["update"]["content"]["text"], "Wrote hist.txt.");

    // Live traffic follows on the loaded session.
    let live = text_of(
        &log[loaded..]
            .iter()
            .filter(|l| l["update"]["sessionUpdate"] == "agent_message_chunk")
            .map(|l| &l["update"])
            .collect::<Vec<_>>(),
    );
    assert_eq!(live, "Second answer.");
    assert_eq!(results(&log, "prompt")[0]["stopReason"], "end_turn");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_turn_answers_the_prompt_with_a_json_rpc_error() {
    let mock = MockLlm::start(vec![MockTurn::Status {
        code: 400,
        retry_after: None,
        body: r#"{"error":{"message":"model refuses this request"}}"#.into(),
    }])
    .await;
    let daemon = spawn(&mock);
    let log = run_client(&daemon, prompt_steps(&daemon, "hi"), &[]);
    assert!(results(&log, "prompt").is_empty(), "{log:#?}");
    let failed = errors(&log, "prompt");
    assert_eq!(failed[0]["code"], -32603, "{failed:?}");
    assert!(
        failed[0]["message"].as_str().unwrap().contains("400")
            || failed[0]["message"].as_str().unwrap().contains("refuses"),
        "{failed:?}"
    );
}

/// The model removes `build` (call `c_rm`), then says `reply`.
fn rm_build_script(reply: &str) -> Vec<MockTurn> {
    vec![bash("c_rm", "rm -rf build"), MockTurn::text(reply), done()]
}

/// An editor, on a thread of its own, prompts `prompt` to a daemon running
/// [`rm_build_script`]; it never answers the permission request, waiting for it to be
/// withdrawn when another client answers.
fn editor_awaiting_rm_build(
    mock: &MockLlm,
    prompt: &str,
) -> (Arc<TestDaemon>, JoinHandle<Vec<Value>>) {
    let daemon = Arc::new(spawn(mock));
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let editor = editor(&daemon, prompt_steps(&daemon, prompt), &["wait"]);
    (daemon, editor)
}

/// Another client allowed `c_rm`: the editor's request was withdrawn, the call ran and the
/// turn ended.
fn assert_withdrawn_and_ran(log: &[Value], daemon: &TestDaemon) {
    let withdrawn = of_kind(log, "permission_withdrawn");
    assert_eq!(withdrawn.len(), 1, "{log:#?}");
    assert_eq!(withdrawn[0]["toolCallId"], "c_rm");
    assert_eq!(last_update(log, "c_rm")["status"], "completed", "{log:#?}");
    assert!(
        !daemon.workspace.join("build").exists(),
        "the approved call did not run"
    );
    assert_eq!(results(log, "prompt")[0]["stopReason"], "end_turn");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_answered_by_another_client_withdraws_the_permission_request() {
    let mock = MockLlm::start(rm_build_script("Handled.")).await;
    let (daemon, editor) = editor_awaiting_rm_build(&mock, "clean up");

    // Another approver (the TUI, say) finds the waiting request and answers it; up to 60 s
    // on a loaded machine.
    let sid = wait_for_session(
        &daemon,
        "a session waiting for an approval",
        Duration::from_secs(60),
        |s| s["state"] == "waiting_approval",
    );
    let tui = connect_approver(&daemon).await;
    let _events = Events::live(&tui, &sid).await;
    let got = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    let request_id = got["pendingApprovals"][0]["requestId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        respond(&tui, &sid, &request_id, Decision::AllowOnce)
            .await
            .unwrap()
    );

    let log = editor.join().unwrap();
    assert_withdrawn_and_ran(&log, &daemon);
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_servers_given_to_session_new_serve_that_session_and_go_with_it() {
    use amber_tests::mcp_plugins::{children_of, everything};
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "e1",
            "mcp__everything__echo",
            &json!({"message": "from the editor's server"}),
        )]),
        MockTurn::text("Echoed."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let server =
        json!({"name": "everything", "command": everything(), "args": ["stdio"], "env": []});
    let log = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "new", "cwd": workspace(&daemon), "mcpServers": [server]},
            {"op": "prompt", "text": "echo something"},
        ]),
        &[],
    );
    assert_eq!(
        results(&log, "prompt")[0]["stopReason"],
        "end_turn",
        "{log:#?}"
    );
    let sid = session_id(&log);
    // The first prompt, sent as soon as session/new answered, already had the tool.
    let offered = amber_tests::steps::offered_tools(&mock.requests()[0]);
    assert!(
        offered.iter().any(|t| t == "mcp__everything__echo"),
        "{offered:?}"
    );
    let done_call = last_update(&log, "e1");
    assert_eq!(done_call["status"], "completed", "{done_call}");
    assert!(
        done_call.to_string().contains("from the editor's server"),
        "{done_call}"
    );
    // Not daemon-wide, and gone with the session.
    assert!(
        !daemon
            .rpc_ok("tool/list", json!({}))
            .to_string()
            .contains("mcp__everything__echo")
    );
    let running = |d: &TestDaemon| {
        children_of(d.pid())
            .iter()
            .filter(|(_, cmd)| cmd.contains("mcp-server-everything"))
            .count()
    };
    assert_eq!(running(&daemon), 1);
    daemon.rpc_ok("session/delete", json!({"sessionId": sid}));
    assert_eq!(
        running(&daemon),
        0,
        "the editor's server outlived its session"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_are_offered_and_a_slash_prompt_runs_one() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    let log = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "new", "cwd": workspace(&daemon)},
            {"op": "wait_update", "update": "available_commands_update"},
            {"op": "prompt", "text": "/mode yolo"},
            {"op": "wait_update", "update": "current_mode_update", "mode": "yolo"},
        ]),
        &[],
    );
    let offered = updates(&log, "available_commands_update");
    assert_eq!(offered.len(), 1, "{log:#?}");
    let commands = offered[0]["availableCommands"].as_array().unwrap();
    let named = |n: &str| commands.iter().find(|c| c["name"] == n);
    assert!(named("compact").is_some(), "{commands:?}");
    assert_eq!(named("mode").unwrap()["input"]["hint"], "[read|write|yolo]");
    assert!(
        named("detach").is_none(),
        "a client-only command was offered"
    );
    // It came after the answer that named the session.
    let answered = position(&log, |l| l["kind"] == "result" && l["op"] == "new");
    let update = position(&log, |l| {
        l["update"]["sessionUpdate"] == "available_commands_update"
    });
    assert!(answered < update);

    // `/mode yolo` ran as amberd's command, not as a prompt to the model.
    assert_eq!(results(&log, "prompt")[0]["stopReason"], "end_turn");
    assert!(mock.requests().is_empty(), "the command reached the model");
    assert!(
        text_of(&updates(&log, "agent_message_chunk")).contains("yolo"),
        "{log:#?}"
    );
    let sid = session_id(&log);
    let got = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    assert_eq!(got["session"]["mode"], "yolo");
    assert_eq!(results(&log, "wait_update")[1]["seen"], true, "{log:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mode_changed_by_another_client_reaches_the_editor() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = Arc::new(spawn(&mock));
    let steps = json!([
        {"op": "initialize"},
        {"op": "new", "cwd": workspace(&daemon)},
        {"op": "wait_update", "update": "current_mode_update", "mode": "read"},
    ]);
    let editor = editor(&daemon, steps, &[]);
    let sid = wait_for_session(
        &daemon,
        "the editor's session",
        Duration::from_secs(60),
        |_| true,
    );
    // The TUI (say) switches the session to read mode.
    daemon.rpc_ok("session/setMode", json!({"sessionId": sid, "mode": "read"}));
    let log = editor.join().unwrap();
    assert_eq!(results(&log, "wait_update")[0]["seen"], true, "{log:#?}");
    let told = updates(&log, "current_mode_update");
    assert_eq!(told.len(), 1, "told once: {told:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_reasons_map_to_acp_and_resource_links_reach_the_prompt() {
    let failing: Vec<_> = (0..6)
        .map(|i| {
            call(
                &format!("r{i}"),
                "read",
                &json!({"path": format!("missing-{i}.txt")}),
            )
        })
        .collect();
    let mock = MockLlm::start(vec![
        // Turn 1: six failed calls in a row stop the turn (tool_failures).
        calls(failing),
        // Turn 2: the iteration cap (1 request) ends it after one tool round.
        calls(vec![call("l1", "read", &json!({"path": "missing.txt"}))]),
    ])
    .await;
    let daemon = amber_tests::steps::spawn_config(
        &mock,
        &format!(
            "{}\n[agent]\nmax_tool_iterations = 1\n",
            amber_tests::steps::FAST_RETRIES
        ),
    );
    let link = json!({"type": "resource_link", "uri": "file:///src/lib.rs", "name": "lib.rs"});
    let log = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "new", "cwd": workspace(&daemon)},
            {"op": "prompt", "blocks": [{"type": "text", "text": "read these"}, link]},
            {"op": "prompt", "text": "list the files"},
        ]),
        &[],
    );
    let stops: Vec<&Value> = results(&log, "prompt")
        .iter()
        .map(|r| &r["stopReason"])
        .collect();
    assert_eq!(
        stops,
        [&json!("end_turn"), &json!("max_turn_requests")],
        "{log:#?}"
    );
    assert!(
        text_of(&updates(&log, "agent_message_chunk")).contains("tool_failures"),
        "the reason is told as a final agent message: {log:#?}"
    );
    let first = mock.requests()[0].to_string();
    assert!(
        first.contains("file:///src/lib.rs"),
        "the link reached the model"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn loading_a_session_mid_reply_shows_what_streamed_before_then_the_rest() {
    // Six seconds of reply: the editor (node, started after the first part is out) loads the
    // session while it streams, however slow the machine.
    let chunks: Vec<String> = (0..30).map(|i| format!("part{i} ")).collect();
    let whole: String = chunks.concat();
    let mock = MockLlm::start(vec![
        MockTurn::Slow {
            chunks,
            interval_ms: 200,
        },
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let made = daemon.rpc_ok("session/new", json!({"cwd": workspace(&daemon)}));
    let sid = made["sessionId"].as_str().unwrap().to_owned();
    daemon.rpc_ok(
        "session/prompt",
        json!({"sessionId": sid, "text": "write slowly"}),
    );
    // Part of the reply is out before the editor loads the session.
    tokio::time::sleep(Duration::from_millis(450)).await;
    let log = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "load", "session": sid, "cwd": workspace(&daemon)},
            // The rest of the reply, however long the loaded machine takes to stream it.
            {"op": "wait_text", "text": whole},
        ]),
        &[],
    );
    let replayed = text_of(&updates(&log, "user_message_chunk"));
    assert_eq!(replayed, "write slowly");
    // Nothing lost, nothing twice: the missed part, then the live deltas.
    let said = text_of(&updates(&log, "agent_message_chunk"));
    assert_eq!(said, whole, "{log:#?}");
    assert!(
        updates(&log, "agent_message_chunk").len() > 1,
        "the live part streamed on"
    );
}

#[test]
fn the_tui_and_an_editor_share_a_session_and_the_tui_answers_its_approval() {
    let mock = MockLlm::start_blocking(rm_build_script("Cleaned up the build directory."));
    let (daemon, editor) = editor_awaiting_rm_build(&mock, "clean up the build");
    let sid = wait_for_session(
        &daemon,
        "the editor's session",
        Duration::from_secs(20),
        |_| true,
    );

    let tui = tmux::Tmux::new("acp");
    tui.start("t", &daemon, &["--session", &sid]);
    let screen = tui.wait("t", "the editor's approval in the TUI", |s| {
        s.contains("Approval needed")
    });
    assert!(screen.contains("rm -rf build"), "{screen}");
    assert!(
        screen.contains("clean up the build"),
        "the editor's prompt: {screen}"
    );
    tui.keys("t", &["y"]);
    let screen = tui.wait("t", "the reply in the TUI", |s| {
        s.contains("Cleaned up the build directory.")
    });
    assert!(!screen.contains("Approval needed"), "{screen}");

    let log = editor.join().unwrap();
    assert_withdrawn_and_ran(&log, &daemon);
    assert_eq!(
        text_of(&updates(&log, "agent_message_chunk")),
        "Cleaned up the build directory."
    );
    tui.keys("t", &["C-d"]);
    tui.wait("t", "amber to exit", |s| s.contains("[amber exited 0]"));
}

#[test]
fn the_handshake_answers_without_amberd_and_session_requests_fail_with_the_reason() {
    let home = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let socket = elsewhere.path().join("amberd.sock");
    let cwd = home.path().to_string_lossy().into_owned();
    let log = drive(
        Agent::without_daemon(home.path(), &socket),
        json!([
            // As ACP registries check an agent.
            {"op": "initialize", "clientCapabilities": {"terminal": true,
                "fs": {"readTextFile": true, "writeTextFile": true},
                "_meta": {"terminal-auth": true}}},
            {"op": "authenticate", "methodId": "amber-config"},
            {"op": "authenticate", "methodId": "oauth"},
            {"op": "new", "cwd": cwd},
            {"op": "list"},
            {"op": "load", "session": "s1", "cwd": cwd},
            {"op": "initialize"},
        ]),
        &[],
        Sdk::Stable,
    );
    let inits = results(&log, "initialize");
    assert_eq!(inits.len(), 2, "{log:#?}");
    let init = inits[0];
    assert_eq!(init["protocolVersion"], 1, "{init}");
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"]["list"],
        json!({}),
        "{init}"
    );
    let methods = init["authMethods"].as_array().unwrap();
    assert_eq!(methods.len(), 1, "{init}");
    // No `type`: an `agent` method, the kind registries accept without client support.
    assert!(methods[0].get("type").is_none(), "{init}");
    assert_eq!(methods[0]["id"], "amber-config");
    assert!(
        methods[0]["description"]
            .as_str()
            .unwrap()
            .contains("config.toml"),
        "{init}"
    );

    assert_eq!(results(&log, "authenticate"), [&json!({})], "{log:#?}");
    assert_eq!(errors(&log, "authenticate")[0]["code"], -32602, "{log:#?}");
    for op in ["new", "list", "load"] {
        let failed = errors(&log, op);
        assert_eq!(failed.len(), 1, "{op}: {log:#?}");
        assert_eq!(failed[0]["code"], -32603, "{op}: {failed:?}");
        let message = failed[0]["message"].as_str().unwrap();
        assert!(
            message.starts_with("cannot reach amberd")
                && message.contains(&socket.display().to_string()),
            "{op}: {message}"
        );
    }
    assert_eq!(
        std::fs::read_dir(home.path()).unwrap().count(),
        0,
        "the agent wrote into HOME"
    );
    assert!(!socket.exists(), "something was started");
}

#[test]
fn initialize_without_params_or_a_protocol_version_is_invalid_params() {
    let home = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let mut agent = RawAgent::spawn(Agent::without_daemon(
        home.path(),
        &elsewhere.path().join("amberd.sock"),
    ));
    let refused = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":null}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":[1]}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"clientCapabilities":{}}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"1"}}"#,
    ];
    for (n, line) in refused.iter().enumerate() {
        agent.send(line);
        let (_, answer) = agent.until_answer(n as u64 + 1);
        assert_eq!(answer["error"]["code"], -32602, "{line}: {answer}");
        assert!(answer.get("result").is_none(), "{line}: {answer}");
    }
    // A newer client, unknown fields and capabilities of odd shapes: answered with our
    // version, for the client to decide.
    agent.send(
        r#"{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":7,
        "clientCapabilities":{"fs":"odd","auth":{"terminal":true}},"future":{"x":1}}}"#
            .replace('\n', "")
            .as_str(),
    );
    let (_, answer) = agent.until_answer(6);
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    agent.send(INITIALIZE);
    let (_, answer) = agent.until_answer(1);
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
}

/// The projection of the tool updates in `log` that the editor's timeline shows.
fn tool_timeline(log: &[Value]) -> Vec<Value> {
    log.iter()
        .filter(|l| {
            l["kind"] == "update"
                && matches!(
                    l["update"]["sessionUpdate"].as_str(),
                    Some("tool_call" | "tool_call_update")
                )
        })
        .map(|l| l["update"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn loading_a_session_shows_the_timeline_it_showed_live() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "c_w",
            "write",
            &json!({"path": "a.txt", "content": "one\ntwo\n"}),
        )]),
        calls(vec![call(
            "c_e",
            "edit",
            &json!({"path": "a.txt", "old_string": "two", "new_string": "TWO"}),
        )]),
        calls(vec![call("c_r", "read", &json!({"path": "missing.txt"}))]),
        MockTurn::text("Edited."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let live = run_client(&daemon, prompt_steps(&daemon, "edit a.txt"), &[]);
    let sid = session_id(&live);
    let loaded = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "load", "session": sid, "cwd": workspace(&daemon)},
        ]),
        &[],
    );
    let answered = position(&loaded, |l| l["kind"] == "result" && l["op"] == "load");
    let history = &loaded[..answered];

    // Each call as it started, then as it ended (a diff for the file changes, the failed
    // read failed), in the order they happened — exactly what the live editor saw.
    let shown = tool_timeline(&live);
    let ids: Vec<(&str, &str)> = shown
        .iter()
        .map(|u| {
            (
                u["sessionUpdate"].as_str().unwrap(),
                u["toolCallId"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("tool_call", "c_w"),
            ("tool_call_update", "c_w"),
            ("tool_call", "c_e"),
            ("tool_call_update", "c_e"),
            ("tool_call", "c_r"),
            ("tool_call_update", "c_r"),
        ],
        "{live:#?}"
    );
    assert_eq!(tool_timeline(history), shown, "{loaded:#?}");
    let started = &shown[2];
    assert_eq!(started["title"], "edit a.txt");
    assert_eq!(started["kind"], "edit");
    assert_eq!(started["status"], "pending");
    assert_eq!(started["rawInput"]["new_string"], "TWO");
    let edited = &shown[3];
    assert_eq!(edited["status"], "completed");
    assert_eq!(edited["content"][0]["type"], "diff", "{edited}");
    assert_eq!(edited["content"][0]["newText"], "one\nTWO\n", "{edited}");
    assert_eq!(shown[5]["status"], "failed", "{:?}", shown[5]);

    // The prompt, then the calls, then the answer; the plan and text as live.
    let kinds: Vec<&str> = history
        .iter()
        .filter(|l| l["kind"] == "update")
        .filter_map(|l| l["update"]["sessionUpdate"].as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"user_message_chunk"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"agent_message_chunk"), "{kinds:?}");
    assert_eq!(
        text_of(&updates(history, "user_message_chunk")),
        "edit a.txt"
    );
    assert_eq!(
        text_of(&updates(history, "agent_message_chunk")),
        text_of(&updates(&live, "agent_message_chunk"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn resume_attaches_without_history_then_goes_live() {
    let mock = MockLlm::start(vec![
        calls(vec![call("c_r", "read", &json!({"path": "a.txt"}))]),
        MockTurn::text("First answer."),
        done(),
        MockTurn::text("Second answer."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    std::fs::write(daemon.workspace.join("a.txt"), "hello\n").unwrap();
    let sid = session_run_by_cli(&daemon, "read a.txt");

    let log = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "resume", "session": "no-such-session", "cwd": workspace(&daemon)},
            {"op": "resume", "session": sid, "cwd": workspace(&daemon)},
            {"op": "prompt", "text": "again"},
        ]),
        &[],
    );
    assert_eq!(errors(&log, "resume")[0]["code"], -32002, "{log:#?}");
    let resumed = results(&log, "resume");
    assert_eq!(resumed.len(), 1, "{log:#?}");
    assert_eq!(resumed[0]["modes"]["currentModeId"], "write");
    // Nothing of the past: no prompt, no call, no answer of the first turn.
    for kind in ["user_message_chunk", "tool_call", "tool_call_update"] {
        assert!(updates(&log, kind).is_empty(), "{kind}: {log:#?}");
    }
    assert_eq!(
        text_of(&updates(&log, "agent_message_chunk")),
        "Second answer."
    );
    assert_eq!(results(&log, "prompt")[0]["stopReason"], "end_turn");
    // Its commands and how full its context is come right after the answer.
    let answered = position(&log, |l| l["kind"] == "result" && l["op"] == "resume");
    let usage = position(&log, |l| l["update"]["sessionUpdate"] == "usage_update");
    assert!(answered < usage, "{log:#?}");
    assert!(
        log[usage]["update"]["used"].as_u64().unwrap() > 0,
        "{log:#?}"
    );
    // The prompt reached the session, with its history.
    let got = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    let messages = got["messages"].to_string();
    assert!(
        messages.contains("read a.txt") && messages.contains("Second answer."),
        "{got}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn resume_asks_the_approval_the_session_waits_for() {
    let mock = MockLlm::start(rm_build_script("Handled.")).await;
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let made = daemon.rpc_ok("session/new", json!({"cwd": workspace(&daemon)}));
    let sid = made["sessionId"].as_str().unwrap().to_owned();
    // Another approver (the TUI, say) keeps the approval waiting without answering it.
    let tui = connect_approver(&daemon).await;
    let _events = Events::live(&tui, &sid).await;
    daemon.rpc_ok(
        "session/prompt",
        json!({"sessionId": sid, "text": "clean up"}),
    );
    wait_for_session(
        &daemon,
        "the session waiting for its approval",
        Duration::from_secs(60),
        |s| s["sessionId"] == sid.as_str() && s["state"] == "waiting_approval",
    );
    let log = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "resume", "session": sid, "cwd": workspace(&daemon)},
            {"op": "wait_text", "text": "Handled."},
        ]),
        &["allow_once"],
    );
    let asked = of_kind(&log, "permission");
    assert_eq!(asked.len(), 1, "{log:#?}");
    assert_eq!(asked[0]["params"]["toolCall"]["toolCallId"], "c_rm");
    assert_eq!(last_update(&log, "c_rm")["status"], "completed", "{log:#?}");
    assert!(
        !daemon.workspace.join("build").exists(),
        "the allowed call did not run"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn fork_branches_a_new_session_from_the_whole_history() {
    let mock = MockLlm::start(vec![
        MockTurn::text("The original answer."),
        done(),
        MockTurn::text("The fork's answer."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let log = drive(
        Agent::of(&daemon),
        json!([
            {"op": "initialize"},
            {"op": "new", "cwd": workspace(&daemon)},
            {"op": "prompt", "text": "first question"},
            {"op": "fork", "session": "no-such-session", "cwd": workspace(&daemon)},
            {"op": "fork", "cwd": workspace(&daemon)},
            {"op": "prompt", "text": "in the fork"},
        ]),
        &[],
        Sdk::Unstable,
    );
    let init = results(&log, "initialize")[0];
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"]["fork"],
        json!({}),
        "{init}"
    );
    assert_eq!(errors(&log, "fork")[0]["code"], -32002, "{log:#?}");
    let original = session_id(&log);
    let forked = results(&log, "fork")[0];
    let fork = forked["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(fork, original);
    assert_eq!(forked["modes"]["currentModeId"], "write", "{forked}");
    // No history replayed: the fork's updates are its own turn's.
    let of_fork: Vec<&Value> = log
        .iter()
        .filter(|l| l["kind"] == "update" && l["sessionId"] == fork.as_str())
        .collect();
    assert!(
        !of_fork
            .iter()
            .any(|l| l["update"]["sessionUpdate"] == "user_message_chunk"),
        "{of_fork:#?}"
    );
    assert_eq!(
        text_of(
            &of_fork
                .iter()
                .filter(|l| l["update"]["sessionUpdate"] == "agent_message_chunk")
                .map(|l| &l["update"])
                .collect::<Vec<_>>()
        ),
        "The fork's answer."
    );
    // The fork's model saw the original's history; the original did not move on.
    let asked = mock.requests().last().unwrap().to_string();
    assert!(
        asked.contains("first question") && asked.contains("The original answer."),
        "{asked}"
    );
    let got = daemon.rpc_ok("session/get", json!({"sessionId": original}));
    assert!(
        !got["messages"].to_string().contains("in the fork"),
        "{got}"
    );
    let got = daemon.rpc_ok("session/get", json!({"sessionId": fork}));
    let messages = got["messages"].to_string();
    assert!(
        messages.contains("first question") && messages.contains("in the fork"),
        "{got}"
    );
}

/// A streamed reply of `words` reporting a fixed usage (1000 prompt tokens of which 400
/// cached, 100 completion tokens): $0.001 at [`PRICED`]'s price.
fn priced_reply(words: &str) -> MockTurn {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let usage = json!({"id": "c1", "object": "chat.completion.chunk", "model": "mock-model",
        "choices": [],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100,
                  "prompt_tokens_details": {"cached_tokens": 400}}});
    MockTurn::Raw(format!(
        "data: {}\n\ndata: {}\n\ndata: {usage}\n\ndata: [DONE]\n\n",
        chunk(json!({"role": "assistant", "content": words}), Value::Null),
        chunk(json!({}), json!("stop")),
    ))
}

/// The mock model priced at $1 / $2 / $0.50 per million tokens (input / output / cached),
/// one request per reply (no silent confirm exchange).
const PRICED: &str = "[provider]\nmax_retries = 1\nretry_base_ms = 10\nretry_max_ms = 50\n\
    [[provider.prices]]\nmodel = \"mock-model\"\ninput = 1.0\noutput = 2.0\ncached = 0.5\n\n\
    [agent]\nconfirm_finish = false\n";

#[tokio::test(flavor = "multi_thread")]
async fn each_turn_ends_with_its_usage_and_a_loaded_session_shows_its_cost() {
    let mock = MockLlm::start(vec![priced_reply("One."), priced_reply("Two.")]).await;
    let daemon = amber_tests::steps::spawn_config(&mock, PRICED);
    let log = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "new", "cwd": workspace(&daemon)},
            {"op": "prompt", "text": "one"},
            {"op": "prompt", "text": "two"},
        ]),
        &[],
    );
    let told = updates(&log, "usage_update");
    assert_eq!(told.len(), 2, "one per turn: {log:#?}");
    for (update, dollars) in told.iter().zip([0.001, 0.002]) {
        assert!(update["used"].as_u64().unwrap() > 0, "{update}");
        assert!(
            update["size"].as_u64().unwrap() > update["used"].as_u64().unwrap(),
            "{update}"
        );
        assert_eq!(update["cost"]["currency"], "USD", "{update}");
        let amount = update["cost"]["amount"].as_f64().unwrap();
        assert!((amount - dollars).abs() < 1e-9, "{update}");
    }
    assert!(
        told[1]["used"].as_u64() > told[0]["used"].as_u64(),
        "the context grew: {told:?}"
    );
    // Each before its turn's answer, which carries the turn's tokens.
    let first_usage = position(&log, |l| l["update"]["sessionUpdate"] == "usage_update");
    let first_answer = position(&log, |l| l["kind"] == "result" && l["op"] == "prompt");
    assert!(first_usage < first_answer, "{log:#?}");
    let answer = results(&log, "prompt")[0];
    assert_eq!(answer["usage"]["inputTokens"], 1000, "{answer}");
    assert_eq!(answer["usage"]["outputTokens"], 100, "{answer}");
    assert_eq!(answer["usage"]["totalTokens"], 1100, "{answer}");
    assert_eq!(answer["usage"]["cachedReadTokens"], 400, "{answer}");

    let sid = session_id(&log);
    let loaded = run_client(
        &daemon,
        json!([
            {"op": "initialize"},
            {"op": "load", "session": sid, "cwd": workspace(&daemon)},
            {"op": "wait_update", "update": "usage_update"},
        ]),
        &[],
    );
    let told = updates(&loaded, "usage_update");
    assert_eq!(told.len(), 1, "{loaded:#?}");
    let amount = told[0]["cost"]["amount"].as_f64().unwrap();
    assert!((amount - 0.002).abs() < 1e-9, "{loaded:#?}");
    assert_eq!(told[0]["size"], updates(&log, "usage_update")[1]["size"]);
}

/// An MCP server's form during a tool call, to an editor that renders forms
/// (`clientCapabilities.elicitation.form`): it goes as `elicitation/create`, and the values
/// the editor accepts it with reach the server; an editor without forms is asked the
/// permission way (allowing sends the schema's defaults).
#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_servers_form_goes_to_an_editor_that_renders_forms() {
    let mock = MockLlm::start(vec![
        amber_tests::tool_calls::calls(vec![amber_tests::tool_calls::call(
            "e1",
            "mcp__everything__trigger-elicitation-request",
            &json!({}),
        )]),
        MockTurn::text("thanks"),
        done(),
    ])
    .await;
    let daemon = amber_tests::steps::spawn_config(
        &mock,
        &format!(
            "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n[mcp]\ntool_search = \"off\"\n\n\
             [mcp.servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            amber_tests::mcp_plugins::everything().display().to_string()
        ),
    );
    amber_tests::mcp_plugins::wait_mcp_status(&daemon, "everything", "ready");
    let mut agent = Agent::of(&daemon);
    agent
        .cli
        .env("ACP_FORM", r#"{"name":"Grace Hopper","check":true}"#);
    let steps = json!([
        {"op": "initialize", "clientCapabilities": {"elicitation": {"form": {}}}},
        {"op": "new", "cwd": workspace(&daemon)},
        {"op": "prompt", "text": "ask me"},
    ]);
    let log = drive(agent, steps, &[], Sdk::Stable);
    let asked = of_kind(&log, "elicitation");
    assert_eq!(asked.len(), 1, "{log:#?}");
    let params = &asked[0]["params"];
    assert_eq!(params["mode"], "form", "{params}");
    assert_eq!(params["toolCallId"], "e1", "{params}");
    assert!(
        params["requestedSchema"]["properties"]["name"].is_object(),
        "{params}"
    );
    assert!(
        of_kind(&log, "permission").is_empty(),
        "asked once, as a form: {log:#?}"
    );
    let output = last_update(&log, "e1")["rawOutput"].to_string()
        + &last_update(&log, "e1")["content"].to_string();
    assert!(
        output.contains("Grace Hopper"),
        "the values reached the server: {output}"
    );
    assert_eq!(results(&log, "prompt")[0]["stopReason"], "end_turn");
}
