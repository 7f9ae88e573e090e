//! End-to-end: external plugins through the real daemon — the example plugin
//! (examples/plugins/wordcount) configured in `[[plugins.external]]`, its tools offered to
//! and called by the model with `source: "plugin:wordcount"`; a plugin that crashes mid-call
//! goes Failed with its tools unwound while the session goes on, and `plugin/enable`
//! restarts it; the same for garbage on stdout, a call hanging past the per-call timeout,
//! and an exit right after `initialize` (with the in-crate tests' mock plugin).

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::e2e::{
    Events, connect, done, new_session, prompt_turn, spawn_config, stop_reason,
};
use amber_tests::e2e3::{call, calls, result_of};
use amber_tests::e2e5::wait_plugin_state as wait_state;
use serde_json::json;

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
    amber_tests::e2e5::plugin_row(daemon, "mock")["state"]
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
