//! End-to-end: the MCP host through the real daemon and the real reference server
//! (`@modelcontextprotocol/server-everything`, installed by `.ci/run` under
//! tests/mcp-servers): a configured server, `mcp/add` at run time with `mcp_status` events
//! in a subscribed session, its tools in `tool/list` and called by the model, a prompt run as
//! a command, and `mcp/remove` unwinding everything.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::e2e::{Events, connect, done, new_session, prompt_turn, spawn, spawn_config};
use amber_tests::e2e3::{call, calls, result_of};
use amber_tests::e2e5::{everything, wait_mcp_status as wait_status};
use serde_json::{Value, json};

fn tool<'a>(tools: &'a Value, name: &str) -> Option<&'a Value> {
    tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configured_server_brings_tools_the_model_calls_and_prompts_as_commands() {
    let config = format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [mcp.servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
        everything().display().to_string()
    );
    let mock = MockLlm::start(vec![
        calls(vec![
            call(
                "e1",
                "mcp__everything__echo",
                &json!({"message": "hello mcp"}),
            ),
            call("s1", "mcp__everything__get-sum", &json!({"a": 2, "b": 40})),
        ]),
        MockTurn::text("done"),
        done(),
        MockTurn::text("answered the prompt"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config);
    let ready = wait_status(&daemon, "everything", "ready");
    assert!(ready["protocolVersion"].is_string(), "{ready}");
    assert!(ready["tools"].as_u64().unwrap() >= 2, "{ready}");
    assert!(ready["prompts"].as_u64().unwrap() >= 1, "{ready}");

    let tools = daemon.rpc_ok("tool/list", json!({}));
    let echo = tool(&tools, "mcp__everything__echo").expect("echo listed");
    assert_eq!(echo["source"], "mcp:everything");
    assert_eq!(echo["readOnly"], true, "readOnlyHint");
    assert!(tool(&tools, "mcp__everything__read_resource").is_some());
    assert!(tool(&tools, "mcp__everything__list_resources").is_some());

    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "use the server").await;
    let (status, output) = result_of(&turn, "e1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("hello mcp"), "{output}");
    let (status, output) = result_of(&turn, "s1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("42"), "{output}");
    let offered = amber_tests::e2e::offered_tools(&mock.requests()[0]);
    assert!(
        offered.iter().any(|t| t == "mcp__everything__get-sum"),
        "{offered:?}"
    );

    // Prompts are commands: running one sends its text to the session as a prompt.
    let commands = daemon.rpc_ok("command/list", json!({}));
    assert!(
        commands["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "mcp__everything__simple-prompt"),
        "{commands}"
    );
    let ran = daemon.rpc_ok(
        "command/run",
        json!({"sessionId": sid, "name": "/mcp__everything__args-prompt", "args": "city=Paris"}),
    );
    assert_eq!(ran["action"]["type"], "prompted", "{ran}");
    let turn = events.turn().await;
    let started = turn.iter().find(|e| e["type"] == "turn_started").unwrap();
    assert!(
        started["prompt"].as_str().unwrap().contains("Paris"),
        "{started}"
    );
    let panel = daemon.rpc_ok("panel/get", json!({"name": "mcp"}));
    assert!(
        panel["lines"][0]
            .as_str()
            .unwrap()
            .starts_with("everything ready"),
        "{panel}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_add_reports_status_events_to_sessions_and_remove_unwinds() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;

    let added = daemon.rpc_ok(
        "mcp/add",
        json!({"name": "ev", "transport": {"type": "stdio", "command": everything(), "args": ["stdio"]}}),
    );
    assert_eq!(added["status"], "connecting", "{added}");
    let mut statuses = Vec::new();
    while !statuses.contains(&"ready".to_owned()) {
        let event = events.next().await;
        if event["type"] == "mcp_status" {
            assert_eq!(event["name"], "ev");
            assert!(event["seq"].is_u64(), "mcp_status is durable: {event}");
            statuses.push(event["status"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(statuses.last().unwrap(), "ready", "{statuses:?}");
    let tools = daemon.rpc_ok("tool/list", json!({}));
    assert_eq!(tool(&tools, "mcp__ev__echo").unwrap()["source"], "mcp:ev");

    let taken = daemon.rpc(
        "mcp/add",
        json!({"name": "ev", "transport": {"type": "stdio", "command": "true"}}),
    );
    assert_eq!(taken["error"]["code"], -32602, "{taken}");
    let bad = daemon.rpc(
        "mcp/add",
        json!({"name": "bad name!", "transport": {"type": "stdio", "command": "true"}}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let missing = daemon.rpc_ok(
        "mcp/add",
        json!({"name": "ghost", "transport": {"type": "stdio", "command": "/nonexistent/mcp-server"}}),
    );
    assert_eq!(missing["status"], "connecting");
    let failed = wait_status(&daemon, "ghost", "failed");
    assert!(
        failed["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{failed}"
    );

    daemon.rpc_ok("mcp/remove", json!({"name": "ev"}));
    let tools = daemon.rpc_ok("tool/list", json!({}));
    assert!(tool(&tools, "mcp__ev__echo").is_none(), "unwound: {tools}");
    let list = daemon.rpc_ok("mcp/list", json!({}));
    assert!(
        !list["servers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "ev"),
        "{list}"
    );
    let unknown = daemon.rpc("mcp/remove", json!({"name": "ev"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(
        unknown["error"]["message"], "no MCP server named `ev` (known: ghost)",
        "{unknown}"
    );
    // The daemon and the session are fine throughout.
    let got = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    assert_eq!(got["session"]["state"], "idle");
}
