//! End-to-end: external plugins through the real daemon — the example plugin
//! (examples/plugins/wordcount) configured in `[[plugins.external]]`, its tools offered to
//! and called by the model with `source: "plugin:wordcount"`; a plugin that crashes mid-call
//! goes Failed with its tools unwound while the session goes on, and `plugin/enable`
//! restarts it.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use amber_tests::e2e::{
    Events, connect, done, new_session, prompt_turn, spawn_config, stop_reason,
};
use amber_tests::e2e3::{call, calls, result_of};
use amber_tests::{MockLlm, MockTurn, TestDaemon};
use serde_json::{Value, json};

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/plugins/wordcount/wordcount.py")
}

fn plugin(daemon: &TestDaemon, name: &str) -> Value {
    let list = daemon.rpc_ok("plugin/list", json!({}));
    list["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no plugin {name}: {list}"))
}

fn wait_state(daemon: &TestDaemon, name: &str, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let row = plugin(daemon, name);
        if row["state"] == state {
            return row;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never became {state}: {row}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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
