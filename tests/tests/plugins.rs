//! End-to-end: plugins through the real daemon.
//!
//! - The `hello` example is opt-in: absent from `plugin/list`'s active rows, `tool/list`
//!   and the request's tools by default; `[plugins] enabled = ["hello"]` or `plugin/enable`
//!   turns it on.
//! - The plugin runtime: `plugin/list` rows with capabilities, `plugin/disable` /
//!   `plugin/enable` reflected at once in `tool/list`, `command/list` and in the tools the
//!   model is offered; commands (`command/run`), status segments (`status/get`), panels
//!   (`panel/*`), providers (`provider/list`, `session/setModel`, `session/new` with
//!   `provider`).
//! - External plugins: the example plugin (examples/plugins/wordcount) configured in
//!   `[[plugins.external]]`, its tools offered to and called by the model with
//!   `source: "plugin:wordcount"`; a plugin that crashes mid-call goes Failed with its tools
//!   unwound while the session goes on, and `plugin/enable` restarts it; the same for garbage
//!   on stdout, a call hanging past the per-call timeout, and an exit right after
//!   `initialize` (with the in-crate tests' mock plugin).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::mcp_plugins::wait_plugin_state as wait_state;
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, new_session, prompt_turn, spawn, spawn_config, stop_reason,
};
use amber_tests::tool_calls::{call, calls, result_of};
use serde_json::{Value, json};

fn names(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn row<'a>(plugins: &'a Value, name: &str) -> &'a Value {
    plugins["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no plugin {name}: {plugins}"))
}

/// A daemon against `mock` with the opt-in `hello` example enabled.
fn spawn_with_hello(mock: &MockLlm) -> TestDaemon {
    spawn_config(
        mock,
        &format!("{FAST_RETRIES}[plugins]\nenabled = [\"hello\"]\n"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hello_example_is_off_by_default_and_plugin_enable_turns_it_on() {
    let mock = MockLlm::start(vec![
        MockTurn::text("one"),
        done(),
        MockTurn::text("two"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let hello = row(&daemon.rpc_ok("plugin/list", json!({})), "hello").clone();
    assert_eq!(hello["state"], "registered", "{hello}");
    assert_eq!(hello["capabilities"], json!([]), "{hello}");
    let tools = names(&daemon.rpc_ok("tool/list", json!({})), "tools");
    assert!(!tools.contains(&"hello".to_owned()), "{tools:?}");
    assert!(tools.contains(&"read".to_owned()), "{tools:?}");
    let commands = names(&daemon.rpc_ok("command/list", json!({})), "commands");
    assert!(!commands.contains(&"hello".to_owned()), "{commands:?}");

    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "first").await;
    let offered = amber_tests::steps::offered_tools(&mock.requests()[0]);
    assert!(!offered.contains(&"hello".to_owned()), "{offered:?}");
    assert!(offered.contains(&"read".to_owned()), "{offered:?}");

    let enabled = daemon.rpc_ok("plugin/enable", json!({"name": "hello"}));
    assert_eq!(enabled["state"], "active", "{enabled}");
    prompt_turn(&client, &mut events, &sid, "second").await;
    let requests = mock.requests();
    let offered = amber_tests::steps::offered_tools(&requests[requests.len() - 2]);
    assert!(offered.contains(&"hello".to_owned()), "{offered:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn plugin_rows_carry_capabilities_and_disable_enable_change_tools_at_once() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn_with_hello(&mock);
    let plugins = daemon.rpc_ok("plugin/list", json!({}));
    for name in [
        "core-tools",
        "providers",
        "commands",
        "status",
        "panels",
        "hello",
    ] {
        let r = row(&plugins, name);
        assert_eq!(r["state"], "active", "{r}");
        assert_eq!(r["kind"], "bundled", "{r}");
    }
    let hello = row(&plugins, "hello");
    let caps = hello["capabilities"].as_array().unwrap();
    assert!(
        caps.contains(&json!({"kind": "tool", "name": "hello"})),
        "{hello}"
    );
    assert!(
        caps.contains(&json!({"kind": "command", "name": "hello"})),
        "{hello}"
    );
    let core = row(&plugins, "core-tools");
    assert!(
        core["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!({"kind": "tool", "name": "bash"}))
    );
    assert!(
        row(&plugins, "providers")["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!({"kind": "provider", "name": "openrouter"}))
    );

    let tools = daemon.rpc_ok("tool/list", json!({}));
    let source = |tools: &Value, name: &str| {
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["source"].as_str().unwrap().to_owned())
    };
    assert_eq!(source(&tools, "bash").as_deref(), Some("builtin"));
    assert_eq!(source(&tools, "hello").as_deref(), Some("plugin:hello"));

    let disabled = daemon.rpc_ok("plugin/disable", json!({"name": "hello"}));
    assert_eq!(disabled["state"], "deactivated", "{disabled}");
    assert_eq!(disabled["capabilities"], json!([]));
    let tools = daemon.rpc_ok("tool/list", json!({}));
    assert_eq!(source(&tools, "hello"), None, "unwound at once");
    assert!(source(&tools, "bash").is_some());
    let commands = names(&daemon.rpc_ok("command/list", json!({})), "commands");
    assert!(!commands.contains(&"hello".to_owned()), "{commands:?}");

    let enabled = daemon.rpc_ok("plugin/enable", json!({"name": "hello"}));
    assert_eq!(enabled["state"], "active", "{enabled}");
    let tools = daemon.rpc_ok("tool/list", json!({}));
    assert_eq!(source(&tools, "hello").as_deref(), Some("plugin:hello"));

    let unknown = daemon.rpc("plugin/enable", json!({"name": "nope"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nope")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_model_is_offered_exactly_the_registered_tools_and_can_call_a_plugin_tool() {
    let mock = MockLlm::start(vec![
        calls(vec![call("h1", "hello", &json!({"name": "Ada"}))]),
        MockTurn::text("greeted"),
        done(),
        MockTurn::text("again"),
        done(),
    ])
    .await;
    let daemon = spawn_with_hello(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "say hello").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, output) = result_of(&turn, "h1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("Hello, Ada!"), "{output}");
    let offered = amber_tests::steps::offered_tools;
    assert!(offered(&mock.requests()[0]).contains(&"hello".to_owned()));

    daemon.rpc_ok("plugin/disable", json!({"name": "hello"}));
    let turn = prompt_turn(&client, &mut events, &sid, "again").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let last = mock.requests().len() - 2;
    let tools = offered(&mock.requests()[last]);
    assert!(!tools.contains(&"hello".to_owned()), "{tools:?}");
    assert!(tools.contains(&"read".to_owned()), "{tools:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_run_in_the_daemon_against_the_session() {
    let mock = MockLlm::start(vec![MockTurn::text("hi"), done()]).await;
    let daemon = spawn_with_hello(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;

    let commands = names(&daemon.rpc_ok("command/list", json!({})), "commands");
    for needed in [
        "help", "mode", "model", "compact", "clear", "new", "sessions", "mcp", "plugins", "detach",
    ] {
        assert!(
            commands.contains(&needed.to_owned()),
            "missing {needed}: {commands:?}"
        );
    }
    let help = daemon.rpc_ok("command/run", json!({"name": "help"}));
    assert!(
        help["output"].as_str().unwrap().contains("/compact"),
        "{help}"
    );

    let mode = daemon.rpc_ok(
        "command/run",
        json!({"sessionId": sid, "name": "/mode", "args": "read"}),
    );
    assert_eq!(mode["output"], "mode: read");
    let info = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    assert_eq!(info["session"]["mode"], "read");
    let bad = daemon.rpc(
        "command/run",
        json!({"sessionId": sid, "name": "mode", "args": "loud"}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let needs = daemon.rpc("command/run", json!({"name": "mode", "args": "read"}));
    assert_eq!(needs["error"]["code"], -32602, "{needs}");
    assert!(
        needs["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sessionId")
    );
    let unknown = daemon.rpc("command/run", json!({"name": "frobnicate"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    let detach = daemon.rpc_ok("command/run", json!({"sessionId": sid, "name": "detach"}));
    assert_eq!(detach["action"], json!({"type": "detach"}));

    // A turn, then /clear: the conversation is gone, the system prompt stays.
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "remember me").await;
    let before = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    assert!(before["messages"].as_array().unwrap().len() >= 3);
    let cleared = daemon.rpc_ok("command/run", json!({"sessionId": sid, "name": "clear"}));
    assert_eq!(cleared["action"], json!({"type": "cleared"}), "{cleared}");
    let after = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    let messages = after["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["role"], "system");
    let verify = daemon.rpc_ok("session/verify", json!({"sessionId": sid}));
    assert_eq!(verify["ok"], true, "{verify}");

    let new = daemon.rpc_ok("command/run", json!({"sessionId": sid, "name": "new"}));
    let new_id = new["action"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(new["action"]["type"], "open_session");
    let created = daemon.rpc_ok("session/get", json!({"sessionId": new_id}));
    assert_eq!(created["session"]["cwd"], after["session"]["cwd"]);
    assert_eq!(created["session"]["mode"], "read", "the mode carries over");

    let sessions = daemon.rpc_ok("command/run", json!({"name": "sessions"}));
    let text = sessions["output"].as_str().unwrap();
    assert!(text.contains(&sid) && text.contains(&new_id), "{text}");

    let listed = daemon.rpc_ok("command/run", json!({"name": "plugins"}));
    assert!(
        listed["output"].as_str().unwrap().contains("hello"),
        "{listed}"
    );
    let off = daemon.rpc_ok(
        "command/run",
        json!({"name": "plugins", "args": ["disable", "hello"]}),
    );
    assert!(
        off["output"].as_str().unwrap().contains("deactivated"),
        "{off}"
    );
    let mcp = daemon.rpc_ok("command/run", json!({"name": "mcp"}));
    assert_eq!(mcp["output"], "no MCP servers");
}

#[tokio::test(flavor = "multi_thread")]
async fn status_segments_panels_and_providers() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "t1",
            "todowrite",
            &json!({"todos": [{"id": "1", "text": "write tests", "status": "in_progress"}]}),
        )]),
        MockTurn::text("planned"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    std::fs::create_dir_all(daemon.workspace.join(".git")).unwrap();
    std::fs::write(
        daemon.workspace.join(".git/HEAD"),
        "ref: refs/heads/topic\n",
    )
    .unwrap();
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "plan").await;

    let status = daemon.rpc_ok("status/get", json!({"sessionId": sid}));
    let segment = |name: &str| {
        status["segments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["text"].as_str().unwrap().to_owned())
    };
    assert_eq!(segment("mode").as_deref(), Some("write"), "{status}");
    assert_eq!(segment("state").as_deref(), Some("idle"), "{status}");
    assert_eq!(segment("git").as_deref(), Some("⎇ topic"), "{status}");
    assert!(segment("context").unwrap().starts_with("ctx "), "{status}");
    assert!(segment("tokens").unwrap().ends_with("tok"), "{status}");
    assert!(segment("model").is_some(), "{status}");
    assert_eq!(segment("processes"), None, "nothing running: left out");
    let missing = daemon.rpc("status/get", json!({"sessionId": "nope"}));
    assert_eq!(missing["error"]["code"], -32001, "{missing}");

    let panels = daemon.rpc_ok("panel/list", json!({}));
    assert_eq!(names(&panels, "panels"), ["todos", "mcp", "processes"]);
    let todos = daemon.rpc_ok("panel/get", json!({"sessionId": sid, "name": "todos"}));
    assert_eq!(todos["lines"], json!(["[~] write tests"]), "{todos}");
    let mcp = daemon.rpc_ok("panel/get", json!({"name": "mcp"}));
    assert_eq!(mcp["lines"], json!([]));
    let bad = daemon.rpc("panel/get", json!({"name": "nope"}));
    assert_eq!(bad["error"]["code"], -32602);

    let providers = daemon.rpc_ok("provider/list", json!({}));
    let listed = names(&providers, "providers");
    for needed in [
        "openai",
        "openrouter",
        "ollama",
        "vllm",
        "llamacpp",
        "lmstudio",
        "groq",
        "deepseek",
        "together",
        "mistral",
    ] {
        assert!(
            listed.contains(&needed.to_owned()),
            "missing {needed}: {listed:?}"
        );
    }

    let switched = daemon.rpc_ok(
        "session/setModel",
        json!({"sessionId": sid, "model": "other-model"}),
    );
    assert_eq!(switched["model"], "other-model");
    let switched = daemon.rpc_ok(
        "session/setModel",
        json!({"sessionId": sid, "provider": "ollama", "model": "qwen3"}),
    );
    assert_eq!(switched["provider"], "ollama");
    assert_eq!(switched["model"], "qwen3");
    let bad = daemon.rpc(
        "session/setModel",
        json!({"sessionId": sid, "provider": "no-such-provider"}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let model_cmd = daemon.rpc_ok(
        "command/run",
        json!({"sessionId": sid, "name": "model", "args": "@default m2"}),
    );
    assert!(
        model_cmd["output"].as_str().unwrap().contains("m2"),
        "{model_cmd}"
    );

    let created = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace, "provider": "groq"}),
    );
    assert_eq!(created["provider"], "groq");
    assert!(
        !created["model"].as_str().unwrap().is_empty(),
        "the preset's default model"
    );
    let bad = daemon.rpc(
        "session/new",
        json!({"cwd": daemon.workspace, "provider": "nope"}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[tokio::test(flavor = "multi_thread")]
async fn amber_cli_runs_commands_and_picks_a_provider() {
    use amber_tests::steps::run_bounded;
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn_with_hello(&mock);

    let mut help = daemon.cli();
    help.args(["--no-autostart", "command", "help"]);
    let (code, out, err) = run_bounded(help);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("/plugins") && out.contains("/detach"), "{out}");

    let mut off = daemon.cli();
    off.args(["--no-autostart", "command", "/plugins", "disable", "hello"]);
    let (code, out, err) = run_bounded(off);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("hello") && out.contains("deactivated"),
        "{out}"
    );
    let row = daemon.rpc_ok("plugin/list", json!({}));
    assert_eq!(row_state(&row, "hello"), "deactivated");

    let mut needs = daemon.cli();
    needs.args(["--no-autostart", "command", "mode", "read"]);
    let (code, _, err) = run_bounded(needs);
    assert_ne!(code, Some(0));
    assert!(err.contains("sessionId"), "{err}");

    let mut bad = daemon.cli();
    bad.args(["--no-autostart", "run", "--provider", "no-such", "hi"]);
    let (code, _, err) = run_bounded(bad);
    assert_ne!(code, Some(0));
    assert!(err.contains("unknown provider"), "{err}");
}

fn row_state(plugins: &Value, name: &str) -> String {
    row(plugins, name)["state"].as_str().unwrap().to_owned()
}

// External plugins: separate processes that may misbehave.

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/plugins/wordcount/wordcount.py")
}

fn tool_source(daemon: &TestDaemon, name: &str) -> Option<String> {
    let tools = daemon.rpc_ok("tool/list", json!({}));
    tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .map(|t| t["source"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_example_plugin_serves_tools_to_the_model() {
    let config = format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [[plugins.external]]\nname = \"wordcount\"\ncommand = \"python3\"\nargs = [{:?}]\n",
        example().display().to_string()
    );
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "w1",
            "word_count",
            &json!({"text": "one two three\nfour"}),
        )]),
        MockTurn::text("counted"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config);
    let row = wait_state(&daemon, "wordcount", "active");
    assert_eq!(row["kind"], "external", "{row}");
    assert!(
        row["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!({"kind": "tool", "name": "word_count"})),
        "{row}"
    );
    assert_eq!(
        tool_source(&daemon, "word_count").as_deref(),
        Some("plugin:wordcount")
    );

    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "count").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, output) = result_of(&turn, "w1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains('4'), "four words: {output}");

    let row = daemon.rpc_ok("plugin/disable", json!({"name": "wordcount"}));
    assert_eq!(row["state"], "deactivated");
    assert_eq!(tool_source(&daemon, "word_count"), None);
}

/// A plugin that answers `initialize` and then dies on its first tool call.
const CRASHER: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        tools = [{"name": "fragile", "description": "dies", "inputSchema": {"type": "object"}}]
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"name": "crasher", "version": "1", "tools": tools}}), flush=True)
    elif msg.get("method") == "tool/call":
        sys.exit(3)
    elif msg.get("method") == "shutdown":
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}}), flush=True)
        sys.exit(0)
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_crashing_plugin_fails_alone_and_enable_restarts_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("crasher.py");
    std::fs::write(&script, CRASHER).unwrap();
    let config = format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [[plugins.external]]\nname = \"crasher\"\ncommand = \"python3\"\nargs = [{:?}]\n",
        script.display().to_string()
    );
    let mock = MockLlm::start(vec![
        calls(vec![call("f1", "fragile", &json!({}))]),
        MockTurn::text("it broke"),
        done(),
        MockTurn::text("still here"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config);
    wait_state(&daemon, "crasher", "active");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "call it").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, output) = result_of(&turn, "f1");
    assert_eq!(status, "error", "{output}");

    let row = wait_state(&daemon, "crasher", "failed");
    let error = row["error"].as_str().unwrap();
    assert!(
        error.contains("exited") || error.contains("status 3"),
        "{error}"
    );
    assert_eq!(row["capabilities"], json!([]));
    assert_eq!(tool_source(&daemon, "fragile"), None, "unwound");

    // The session and the daemon go on.
    let turn = prompt_turn(&client, &mut events, &sid, "again").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let row = daemon.rpc_ok("plugin/enable", json!({"name": "crasher"}));
    assert_eq!(row["state"], "active", "{row}");
    assert_eq!(row.get("error"), None, "{row}");
    assert_eq!(
        tool_source(&daemon, "fragile").as_deref(),
        Some("plugin:crasher")
    );
}

/// The in-crate tests' misbehaving plugin: argv[1] picks the mode, the `act` tool's `do`
/// argument how a call misbehaves; each start appends `start PID` to $MOCK_EVENTS.
fn mock_plugin() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../amberd/src/plugins/external/tests/mock.py")
}

/// How many times the mock plugin was started.
fn starts(events: &Path) -> usize {
    std::fs::read_to_string(events)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("start "))
        .count()
}

/// The mock plugin in `mode` (with `extra` lines in its `[[plugins.external]]` entry)
/// misbehaves — on an `act` call doing `act`, or by itself — and must end Failed with
/// `expected` in its error and its tools unwound, the session going on, and
/// `plugin/enable` starting a fresh process.
async fn fails_alone(mode: &str, act: Option<&str>, extra: &str, expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events");
    let config = format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [[plugins.external]]\nname = \"mock\"\ncommand = \"python3\"\nargs = [{:?}, {mode:?}]\n\
         env = {{ MOCK_EVENTS = {:?} }}\n{extra}\n",
        mock_plugin().display().to_string(),
        events.display().to_string()
    );
    let mut script = Vec::new();
    if let Some(what) = act {
        script.extend([
            calls(vec![call("a1", "act", &json!({"do": what}))]),
            MockTurn::text("it broke"),
            done(),
        ]);
    }
    script.extend([MockTurn::text("still here"), done()]);
    let mock = MockLlm::start(script).await;
    let daemon = spawn_config(&mock, &config);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events_stream = Events::live(&client, &sid).await;
    if act.is_some() {
        wait_state(&daemon, "mock", "active");
        assert_eq!(tool_source(&daemon, "act").as_deref(), Some("plugin:mock"));
        let started = Instant::now();
        let turn = prompt_turn(&client, &mut events_stream, &sid, "act up").await;
        assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
        let (status, output) = result_of(&turn, "a1");
        assert_eq!(status, "error", "{output}");
        assert!(started.elapsed() < Duration::from_secs(10), "bounded");
    }

    let row = wait_state(&daemon, "mock", "failed");
    let error = row["error"].as_str().unwrap_or_default();
    assert!(error.contains(expected), "{mode}/{act:?}: {error}");
    assert_eq!(row["capabilities"], json!([]), "{row}");
    assert_eq!(tool_source(&daemon, "act"), None, "unwound");
    assert_eq!(tool_source(&daemon, "peek"), None, "unwound");
    let turn = prompt_turn(&client, &mut events_stream, &sid, "still there?").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");

    let before = starts(&events);
    daemon.rpc_ok("plugin/enable", json!({"name": "mock"}));
    let deadline = Instant::now() + Duration::from_secs(10);
    while starts(&events) == before {
        assert!(
            Instant::now() < deadline,
            "plugin/enable started no process"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if act.is_some() {
        assert_eq!(plugin_state(&daemon), "active");
        assert_eq!(tool_source(&daemon, "act").as_deref(), Some("plugin:mock"));
    } else {
        // It exits after initialize again: Failed again, with the same reason.
        let row = wait_state(&daemon, "mock", "failed");
        assert!(
            row["error"].as_str().unwrap_or_default().contains(expected),
            "{row}"
        );
    }
}

fn plugin_state(daemon: &TestDaemon) -> String {
    amber_tests::mcp_plugins::plugin_row(daemon, "mock")["state"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_on_stdout_fails_the_plugin_alone() {
    fails_alone("ok", Some("garbage"), "", "printed garbage").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_hanging_past_the_timeout_fails_the_plugin_alone() {
    fails_alone(
        "ok",
        Some("hang"),
        "timeout_ms = 500",
        "hung: no answer to tool/call within 500ms",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn exiting_after_initialize_fails_the_plugin_alone() {
    fails_alone("exit_after_init", None, "", "exited with status 0").await;
}
