//! End-to-end: the MCP host through the real daemon and the real reference server
//! (`@modelcontextprotocol/server-everything`, installed by `.ci/run` under
//! tests/mcp-servers).
//!
//! - A configured server, `mcp/add` at run time with `mcp_status` events in a subscribed
//!   session, its tools in `tool/list` and called by the model, a prompt run as a command,
//!   and `mcp/remove` unwinding everything.
//! - Servers that change under a running daemon: the reference server over streamable HTTP,
//!   its stdio process killed and reconnected, a resource list change and a resource read by
//!   the model — and a small scripted stdio server for what the reference server lacks: a
//!   tool list change and a `destructiveHint` tool, which asks for approval in write mode.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Mode;
use amber_tests::mcp_plugins::{
    HttpEverything, children_of, everything, listed_tool, mcp_row, tools_from, wait_mcp,
    wait_mcp_status,
};
use amber_tests::steps::{
    Events, connect, done, new_session, of_type, prompt_turn, spawn, spawn_config,
};
use amber_tests::tool_calls::{call, calls, result_of};
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
    let ready = wait_mcp_status(&daemon, "everything", "ready");
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
    let offered = amber_tests::steps::offered_tools(&mock.requests()[0]);
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
    let failed = wait_mcp_status(&daemon, "ghost", "failed");
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

// Servers that change under a running daemon.

fn stdio_config(extra: &str) -> String {
    format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n{extra}\n\
         [mcp.servers.ev]\ncommand = {:?}\nargs = [\"stdio\"]\n",
        everything().display().to_string()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http_server_added_at_run_time_serves_the_model() {
    let server = HttpEverything::start();
    let mock = MockLlm::start(vec![
        calls(vec![
            call("e1", "mcp__web__echo", &json!({"message": "over http"})),
            call("s1", "mcp__web__get-sum", &json!({"a": 20, "b": 22})),
        ]),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let added = daemon.rpc_ok(
        "mcp/add",
        json!({"name": "web", "transport": {"type": "http", "url": server.url()}}),
    );
    assert_eq!(added["status"], "connecting", "{added}");
    let ready = wait_mcp_status(&daemon, "web", "ready");
    assert!(ready["protocolVersion"].is_string(), "{ready}");
    let echo = listed_tool(&daemon, "mcp__web__echo").expect("echo listed");
    assert_eq!(echo["source"], "mcp:web");
    assert!(tools_from(&daemon, "mcp:web").contains(&"mcp__web__get-sum".to_owned()));

    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "use the web server").await;
    assert_eq!(
        result_of(&turn, "e1"),
        ("ok".into(), "Echo: over http".into())
    );
    let (status, output) = result_of(&turn, "s1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("42"), "{output}");
}

/// The daemon's child running `mcp-server-everything stdio`.
fn stdio_server_pid(daemon: &amber_tests::TestDaemon) -> u32 {
    let children = children_of(daemon.pid());
    children
        .iter()
        .find(|(_, cmd)| cmd.contains("mcp-server-everything") && cmd.ends_with("stdio "))
        .map(|(pid, _)| *pid)
        .unwrap_or_else(|| panic!("no stdio server among the daemon's children: {children:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_stdio_server_is_reconnected_and_serves_again() {
    let config = stdio_config("[mcp]\nreconnect_base_ms = 200\nreconnect_max_ms = 400\n");
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "e1",
            "mcp__ev__echo",
            &json!({"message": "again"}),
        )]),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    wait_mcp_status(&daemon, "ev", "ready");
    let pid = stdio_server_pid(&daemon);
    // SAFETY: kill(2) only sends a signal, to the daemon's MCP child this test means to kill.
    unsafe {
        libc::kill(libc::pid_t::try_from(pid).unwrap(), libc::SIGKILL);
    }
    // mcp_status events after the kill: failed (with why), connecting (nothing stale),
    // ready. (A `ready` from before the kill may come first.)
    let mut seen: Vec<Value> = Vec::new();
    while !(seen.iter().any(|e| e["status"] == "failed")
        && seen.last().is_some_and(|e| e["status"] == "ready"))
    {
        let event = events.next().await;
        if event["type"] == "mcp_status" && event["name"] == "ev" {
            seen.push(event);
        }
    }
    let statuses: Vec<&str> = seen.iter().map(|e| e["status"].as_str().unwrap()).collect();
    let failed = seen.iter().position(|e| e["status"] == "failed");
    let failed = failed.unwrap_or_else(|| panic!("no failed status: {statuses:?}"));
    assert!(
        seen[failed]["error"]
            .as_str()
            .is_some_and(|e| e.contains("exited")),
        "{}",
        seen[failed]
    );
    assert!(statuses[failed..].contains(&"connecting"), "{statuses:?}");
    let connecting = seen.iter().find(|e| e["status"] == "connecting").unwrap();
    assert_eq!(connecting["tools"], 0, "no stale counts: {connecting}");
    assert_eq!(connecting.get("protocolVersion"), None, "{connecting}");
    assert_ne!(stdio_server_pid(&daemon), pid, "a new process");

    let turn = prompt_turn(&client, &mut events, &sid, "call it again").await;
    assert_eq!(result_of(&turn, "e1"), ("ok".into(), "Echo: again".into()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resource_list_change_and_a_resource_read_reach_the_model() {
    let doc = "demo://resource/static/document/features.md";
    let session_uri = "demo://resource/session/amber.txt.gz";
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "g1",
            "mcp__ev__gzip-file-as-resource",
            &json!({"name": "amber.txt.gz", "data": "data:text/plain;base64,aGVsbG8gYW1iZXI=", "outputType": "resource"}),
        )]),
        MockTurn::text("stored"),
        done(),
        calls(vec![
            call("l1", "mcp__ev__list_resources", &json!({})),
            call("r1", "mcp__ev__read_resource", &json!({"uri": doc})),
        ]),
        MockTurn::text("read"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &stdio_config(""));
    let ready = wait_mcp_status(&daemon, "ev", "ready");
    let resources = ready["resources"].as_u64().unwrap();
    let tools = tools_from(&daemon, "mcp:ev");
    assert!(
        tools.contains(&"mcp__ev__read_resource".to_owned()),
        "{tools:?}"
    );

    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "store a file").await;
    let (status, output) = result_of(&turn, "g1");
    assert_eq!(status, "ok", "{output}");
    // The server announces `resources/list_changed`; the daemon re-lists.
    wait_mcp(&daemon, "ev", "one more resource", |r| {
        r["resources"].as_u64() == Some(resources + 1)
    });
    // Re-publishing the server's set leaves its tools in place.
    assert_eq!(tools_from(&daemon, "mcp:ev"), tools);

    let turn = prompt_turn(&client, &mut events, &sid, "read").await;
    let (status, listing) = result_of(&turn, "l1");
    assert_eq!(status, "ok", "{listing}");
    assert!(listing.contains(session_uri), "{listing}");
    assert!(listing.contains(doc), "{listing}");
    let (status, text) = result_of(&turn, "r1");
    assert_eq!(status, "ok", "{text}");
    assert!(text.starts_with(&format!("[resource {doc}]\n")), "{text}");
    assert!(text.len() > doc.len() + 40, "{text}");
    assert_eq!(mcp_row(&daemon, "ev").unwrap()["status"], "ready");
}

/// A minimal MCP server on stdio: `drop_table` carries `destructiveHint: true`; calling
/// `grow` adds the tool `extra` and sends `notifications/tools/list_changed`.
const SCRIPTED_SERVER: &str = r#"
import json, sys
tools = [
    {"name": "drop_table", "description": "Drops a table.", "inputSchema": {"type": "object"},
     "annotations": {"destructiveHint": True}},
    {"name": "grow", "description": "Adds a tool.", "inputSchema": {"type": "object"}},
]
def send(message):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if rid is None or method is None:
        continue
    if method == "initialize":
        send({"id": rid, "result": {"protocolVersion": msg["params"]["protocolVersion"],
              "capabilities": {"tools": {"listChanged": True}},
              "serverInfo": {"name": "scripted", "version": "1"}}})
    elif method == "tools/list":
        send({"id": rid, "result": {"tools": tools}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "grow" and len(tools) == 2:
            tools.append({"name": "extra", "description": "Added.", "inputSchema": {"type": "object"}})
        send({"id": rid, "result": {"content": [{"type": "text", "text": name + " done"}]}})
        if name == "grow":
            send({"method": "notifications/tools/list_changed"})
    elif method == "ping":
        send({"id": rid, "result": {}})
    else:
        send({"id": rid, "error": {"code": -32601, "message": "method not found"}})
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_list_change_shows_in_tool_list_and_destructive_tools_ask() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("scripted_mcp.py");
    std::fs::write(&script, SCRIPTED_SERVER).unwrap();
    let config = format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [mcp.servers.fake]\ncommand = \"python3\"\nargs = [{:?}]\n",
        script.display().to_string()
    );
    let mock = MockLlm::start(vec![
        calls(vec![
            call("d1", "mcp__fake__drop_table", &json!({})),
            call("g1", "mcp__fake__grow", &json!({})),
        ]),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config);
    let ready = wait_mcp_status(&daemon, "fake", "ready");
    assert_eq!(ready["tools"], 2, "{ready}");
    assert_eq!(
        tools_from(&daemon, "mcp:fake"),
        ["mcp__fake__drop_table", "mcp__fake__grow"]
    );

    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Write)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "tidy up").await;
    // destructiveHint: write mode asks; with no approver connected the call is denied.
    let asked = of_type(&turn, "approval_requested");
    assert_eq!(asked.len(), 1, "{turn:#?}");
    assert_eq!(asked[0]["tool"], "mcp__fake__drop_table");
    let (status, output) = result_of(&turn, "d1");
    assert_eq!(status, "denied", "{output}");
    assert!(output.contains("needs approval"), "{output}");
    // An unannotated tool runs without asking.
    assert_eq!(result_of(&turn, "g1"), ("ok".into(), "grow done".into()));

    wait_mcp(&daemon, "fake", "three tools", |r| r["tools"] == 3);
    assert_eq!(
        tools_from(&daemon, "mcp:fake"),
        [
            "mcp__fake__drop_table",
            "mcp__fake__grow",
            "mcp__fake__extra"
        ]
    );
}

/// The description of tool `name` in a chat-completions request.
fn offered_description(request: &Value, name: &str) -> Option<String> {
    request["tools"]
        .as_array()?
        .iter()
        .find(|t| t["function"]["name"] == name)
        .and_then(|t| t["function"]["description"].as_str())
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread")]
async fn deferred_mcp_tools_are_indexed_loaded_by_tool_search_then_offered_and_called() {
    let config = format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [mcp]\ntool_search = \"on\"\n\n\
         [mcp.servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
        everything().display().to_string()
    );
    let mock = MockLlm::start(vec![
        calls(vec![call("t1", "tool_search", &json!({"query": "echo"}))]),
        calls(vec![call(
            "e1",
            "mcp__everything__echo",
            &json!({"message": "loaded lazily"}),
        )]),
        MockTurn::text("done"),
        done(),
        MockTurn::text("second turn"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config);
    wait_mcp_status(&daemon, "everything", "ready");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "echo something").await;

    let requests = mock.requests();
    let first = amber_tests::steps::offered_tools(&requests[0]);
    assert!(first.iter().any(|t| t == "tool_search"), "{first:?}");
    assert!(
        first.iter().any(|t| t == "read"),
        "built-ins stay: {first:?}"
    );
    assert!(
        !first.iter().any(|t| t.starts_with("mcp__")),
        "MCP schemas are deferred: {first:?}"
    );
    let index = offered_description(&requests[0], "tool_search").unwrap();
    assert!(
        index.contains("everything: mcp__everything__echo — "),
        "the index names each deferred tool: {index}"
    );
    let (status, output) = result_of(&turn, "t1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("## mcp__everything__echo"), "{output}");
    assert!(output.contains("\"message\""), "its schema: {output}");
    // From the next request on, the loaded tool is offered whole (and only it).
    let second = amber_tests::steps::offered_tools(&requests[1]);
    assert!(
        second.iter().any(|t| t == "mcp__everything__echo"),
        "{second:?}"
    );
    assert!(
        !second.iter().any(|t| t == "mcp__everything__get-sum"),
        "{second:?}"
    );
    let (status, output) = result_of(&turn, "e1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("loaded lazily"), "{output}");

    // The session keeps what it loaded for its next turn.
    prompt_turn(&client, &mut events, &sid, "again").await;
    let requests = mock.requests();
    let later = amber_tests::steps::offered_tools(requests.last().unwrap());
    assert!(
        later.iter().any(|t| t == "mcp__everything__echo"),
        "{later:?}"
    );
    let index = offered_description(requests.last().unwrap(), "tool_search").unwrap();
    assert!(!index.contains("mcp__everything__echo "), "{index}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_marked_always_load_is_never_deferred() {
    let config = format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [mcp]\ntool_search = \"on\"\n\n\
         [mcp.servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\nalways_load = true\n",
        everything().display().to_string()
    );
    let mock = MockLlm::start(vec![MockTurn::text("ok"), done()]).await;
    let daemon = spawn_config(&mock, &config);
    wait_mcp_status(&daemon, "everything", "ready");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "hi").await;
    let offered = amber_tests::steps::offered_tools(&mock.requests()[0]);
    assert!(
        offered.iter().any(|t| t == "mcp__everything__echo"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|t| t == "tool_search"),
        "nothing deferred, no search: {offered:?}"
    );
}

/// Each server in the era it speaks: the official SDK v2's server, refusing the initialize
/// era, is reached over the stateless revision (`server/discover`, then requests carrying
/// their own `_meta`); the reference server of the initialize era through `initialize`.
#[tokio::test(flavor = "multi_thread")]
async fn servers_of_either_protocol_era_are_negotiated_and_called() {
    let config = format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [mcp.servers.modern]\ncommand = \"node\"\nargs = [{:?}]\nenv = {{ MODERN_ONLY = \"1\" }}\n\n\
         [mcp.servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
        amber_tests::mcp_plugins::modern_server()
            .display()
            .to_string(),
        everything().display().to_string()
    );
    let mock = MockLlm::start(vec![
        calls(vec![
            call("m1", "mcp__modern__shout", &json!({"text": "stateless"})),
            call(
                "e1",
                "mcp__everything__echo",
                &json!({"message": "stateful"}),
            ),
        ]),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config);
    let modern = wait_mcp_status(&daemon, "modern", "ready");
    assert_eq!(modern["protocolVersion"], "2026-07-28", "{modern}");
    assert_eq!(modern["tools"], 2, "shout and greet: {modern}");
    let everything = wait_mcp_status(&daemon, "everything", "ready");
    assert_ne!(
        everything["protocolVersion"], "2026-07-28",
        "the reference server is of the initialize era: {everything}"
    );
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "call both").await;
    let (status, output) = result_of(&turn, "m1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("STATELESS"), "{output}");
    let (status, output) = result_of(&turn, "e1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("stateful"), "{output}");
}

/// A server configured `lazy = true` is not started with the daemon: `closed` in `mcp/list`,
/// named in `tool_search`'s index; a search that names it starts it, and its tool is loaded
/// and called in the same turn.
#[tokio::test(flavor = "multi_thread")]
async fn a_lazy_server_starts_when_a_search_names_it_and_serves_the_same_turn() {
    let config = format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [mcp.servers.modern]\ncommand = \"node\"\nargs = [{:?}]\nlazy = true\n",
        amber_tests::mcp_plugins::modern_server()
            .display()
            .to_string(),
    );
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "t1",
            "tool_search",
            &json!({"query": "modern shout"}),
        )]),
        calls(vec![call(
            "s1",
            "mcp__modern__shout",
            &json!({"text": "lazy"}),
        )]),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config);
    // Not started: no process, `closed`, no tools.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let row = amber_tests::mcp_plugins::mcp_row(&daemon, "modern").unwrap();
    assert_eq!(row["status"], "closed", "{row}");
    assert_eq!(row["tools"], 0, "{row}");

    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "shout lazy").await;
    let requests = mock.requests();
    let index = offered_description(&requests[0], "tool_search").unwrap();
    assert!(index.contains("Servers not started yet"), "{index}");
    assert!(index.contains("modern"), "{index}");
    let (status, output) = result_of(&turn, "t1");
    assert_eq!(status, "ok", "{output}");
    assert!(
        output.starts_with("Started MCP server `modern`."),
        "{output}"
    );
    assert!(output.contains("## mcp__modern__shout"), "{output}");
    // Loaded and callable in the same turn.
    let offered = amber_tests::steps::offered_tools(&requests[1]);
    assert!(
        offered.iter().any(|t| t == "mcp__modern__shout"),
        "{offered:?}"
    );
    let (status, output) = result_of(&turn, "s1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("LAZY"), "{output}");
    assert_eq!(
        amber_tests::mcp_plugins::mcp_row(&daemon, "modern").unwrap()["status"],
        "ready"
    );
}
