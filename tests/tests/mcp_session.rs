//! End-to-end: MCP servers scoped to one session (`session/new {mcpServers}`, `mcp/add
//! {sessionId}`), with the real reference server (`@modelcontextprotocol/server-everything`,
//! installed by `.ci/run` under tests/mcp-servers) and the real daemon.
//!
//! A session's server is connected for it alone: its tools are listed and offered to that
//! session's turns only, never daemon-wide; it is kept with the session across a daemon
//! restart and goes (its child process too) when the session is deleted.

use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::mcp_plugins::{children_of, everything};
use amber_tests::steps::{Events, connect, done, prompt_turn, spawn};
use amber_tests::tool_calls::{call, result_of};
use serde_json::{Value, json};

const ECHO: &str = "mcp__everything__echo";

/// The `tool/list {sessionId}` entry named `name`.
fn session_tool(daemon: &TestDaemon, sid: &str, name: &str) -> Option<Value> {
    let tools = daemon.rpc_ok("tool/list", json!({"sessionId": sid}));
    tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .cloned()
}

/// Waits until the session's server has listed its tools.
fn wait_session_tool(daemon: &TestDaemon, sid: &str, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(tool) = session_tool(daemon, sid, name) {
            return tool;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never listed for {sid}\n{}",
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The daemon's children running the reference server.
fn servers_of(daemon: &TestDaemon) -> Vec<u32> {
    children_of(daemon.pid())
        .into_iter()
        .filter(|(_, cmd)| cmd.contains("mcp-server-everything"))
        .map(|(pid, _)| pid)
        .collect()
}

fn new_session_with(daemon: &TestDaemon, servers: Value) -> String {
    let made = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace, "mcpServers": servers}),
    );
    made["sessionId"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_server_serves_that_session_alone_and_goes_with_it() {
    let mock = MockLlm::start(vec![
        call_turn("e1", "hello session"),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    // ACP's flat shape (an editor's `mcpServers` passed through unchanged).
    let sid = new_session_with(
        &daemon,
        json!([{"name": "everything", "command": everything(), "args": ["stdio"], "env": []}]),
    );
    let other = new_session_with(&daemon, json!([]));

    let echo = wait_session_tool(&daemon, &sid, ECHO);
    assert_eq!(echo["source"], "mcp:everything", "{echo}");
    assert!(
        session_tool(&daemon, &other, ECHO).is_none(),
        "leaked to another session"
    );
    let global = daemon.rpc_ok("tool/list", json!({}));
    assert!(!global.to_string().contains(ECHO), "leaked daemon-wide");
    assert!(
        daemon.rpc_ok("mcp/list", json!({}))["servers"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    let client = connect(&daemon).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "use the server").await;
    let (status, output) = result_of(&turn, "e1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("hello session"), "{output}");
    let offered = amber_tests::steps::offered_tools(&mock.requests()[0]);
    assert!(offered.iter().any(|t| t == ECHO), "{offered:?}");

    let children = servers_of(&daemon);
    assert_eq!(children.len(), 1, "one server process: {children:?}");
    daemon.rpc_ok("session/delete", json!({"sessionId": sid}));
    assert!(
        servers_of(&daemon).is_empty(),
        "the session's server outlived it"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_add_with_a_session_id_is_kept_with_the_session_across_a_restart() {
    let mock = MockLlm::start(vec![]).await;
    let mut daemon = spawn(&mock);
    let sid = new_session_with(&daemon, json!([]));
    let transport = json!({"type": "stdio", "command": everything(), "args": ["stdio"]});
    let added = daemon.rpc_ok(
        "mcp/add",
        json!({"name": "everything", "transport": transport, "sessionId": sid}),
    );
    assert_eq!(added["status"], "connecting", "{added}");
    wait_session_tool(&daemon, &sid, ECHO);
    // The same server again (an editor loading the session twice) changes nothing.
    let again = daemon.rpc_ok(
        "mcp/add",
        json!({"name": "everything", "transport": transport, "sessionId": sid}),
    );
    assert_eq!(again["status"], "ready", "{again}");
    assert_eq!(servers_of(&daemon).len(), 1);

    daemon.restart();
    // Loaded again, the session reconnects its server.
    wait_session_tool(&daemon, &sid, ECHO);
    let unknown = daemon.rpc(
        "mcp/add",
        json!({"name": "x", "transport": transport, "sessionId": "no-such-session"}),
    );
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_session_servers_are_refused_before_anything_is_made() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    let cases = [
        json!([{"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}]),
        json!([{"name": "bad name!", "command": "x"}]),
        json!([{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]),
    ];
    for servers in cases {
        let refused = daemon.rpc(
            "session/new",
            json!({"cwd": daemon.workspace, "mcpServers": servers}),
        );
        assert_eq!(refused["error"]["code"], -32602, "{servers}: {refused}");
    }
    let listed = daemon.rpc_ok("session/list", json!({}));
    assert!(
        listed["sessions"].as_array().unwrap().is_empty(),
        "{listed}"
    );
}

fn call_turn(id: &str, message: &str) -> MockTurn {
    amber_tests::tool_calls::calls(vec![call(id, ECHO, &json!({"message": message}))])
}
