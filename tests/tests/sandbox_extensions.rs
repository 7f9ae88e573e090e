//! End-to-end: an MCP stdio server or an external plugin with `sandbox = "workspace-write"`
//! in its table starts through `amberd sandbox-exec` and keeps speaking JSON-RPC on its
//! stdio, but what it runs cannot write outside its workspace (its working directory); the
//! same server or plugin without `sandbox` can (it runs with the daemon's access, the
//! default).

use std::path::Path;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::mcp_plugins::{wait_mcp_status, wait_plugin_state};
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, new_session, prompt_turn, spawn_config,
};
use amber_tests::tool_calls::{call, calls, result_of};
use serde_json::json;

/// A minimal MCP server on stdio with one tool, `put {path}`, that writes `x` to `path`
/// and answers what happened.
const WRITING_SERVER: &str = r#"
import json, sys
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
              "capabilities": {"tools": {}}, "serverInfo": {"name": "writer", "version": "1"}}})
    elif method == "tools/list":
        send({"id": rid, "result": {"tools": [{"name": "put", "description": "Writes a file.",
              "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}]}})
    elif method == "tools/call":
        path = msg["params"]["arguments"]["path"]
        try:
            open(path, "w").write("x")
            text = "wrote " + path
        except OSError as err:
            text = "refused: " + str(err)
        send({"id": rid, "result": {"content": [{"type": "text", "text": text}]}})
    else:
        send({"id": rid, "error": {"code": -32601, "message": "method not found"}})
"#;

async fn put_through_server(sandbox: &str, target: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("writer.py");
    std::fs::write(&script, WRITING_SERVER).unwrap();
    let config = format!(
        "{FAST_RETRIES}\n[mcp.servers.writer]\ncommand = \"python3\"\nargs = [{:?}]\n{sandbox}\n",
        script.display().to_string()
    );
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "p1",
            "mcp__writer__put",
            &json!({ "path": target.display().to_string() }),
        )]),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config);
    wait_mcp_status(&daemon, "writer", "ready");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, Some(amber_proto::Mode::Yolo)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "write").await;
    let (status, output) = result_of(&turn, "p1");
    assert_eq!(status, "ok", "{output}");
    output
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_mcp_server_speaks_on_stdio_but_cannot_write_outside() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("from_sandboxed_server");
    let output = put_through_server("sandbox = \"workspace-write\"", &target).await;
    assert!(output.contains("refused"), "{output}");
    assert!(output.contains("Read-only file system"), "{output}");
    assert!(
        !target.exists(),
        "a sandboxed MCP server wrote outside its workspace"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_server_without_sandbox_runs_with_the_daemons_access() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("from_plain_server");
    let output = put_through_server("", &target).await;
    assert!(output.contains("wrote"), "{output}");
    assert!(target.exists());
}

/// A minimal external plugin (amber's JSON-RPC on stdio) with one tool, `plugin_put {path}`,
/// that writes `x` to `path` and answers what happened.
const WRITING_PLUGIN: &str = r#"
import json, sys
def send(message):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if rid is None or method is None:
        continue
    if method == "initialize":
        tools = [{"name": "plugin_put", "description": "Writes a file.",
                  "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}]
        send({"id": rid, "result": {"name": "writer", "version": "1", "tools": tools}})
    elif method == "tool/call":
        path = msg["params"]["arguments"]["path"]
        try:
            open(path, "w").write("x")
            send({"id": rid, "result": {"status": "ok", "output": "wrote " + path}})
        except OSError as err:
            send({"id": rid, "result": {"status": "ok", "output": "refused: " + str(err)}})
    elif method == "shutdown":
        send({"id": rid, "result": {}})
        sys.exit(0)
    else:
        send({"id": rid, "error": {"code": -32601, "message": "method not found"}})
"#;

/// Runs the writing plugin (with `cwd` its own temp dir, and `sandbox` lines in its table),
/// has the model call it once for each of `targets`, and returns the results in order.
async fn put_through_plugin(sandbox: &str, targets: &[&Path], cwd: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("writer.py");
    std::fs::write(&script, WRITING_PLUGIN).unwrap();
    let config = format!(
        "{FAST_RETRIES}\n[[plugins.external]]\nname = \"writer\"\ncommand = \"python3\"\n\
         args = [{:?}]\ncwd = {:?}\n{sandbox}\n",
        script.display().to_string(),
        cwd.display().to_string(),
    );
    let ids: Vec<String> = (0..targets.len()).map(|n| format!("w{n}")).collect();
    let mock = MockLlm::start(vec![
        calls(
            targets
                .iter()
                .zip(&ids)
                .map(|(target, id)| {
                    call(
                        id,
                        "plugin_put",
                        &json!({ "path": target.display().to_string() }),
                    )
                })
                .collect(),
        ),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config);
    let row = wait_plugin_state(&daemon, "writer", "active");
    assert_eq!(row.get("error"), None, "{row}");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, Some(amber_proto::Mode::Yolo)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "write").await;
    ids.iter()
        .map(|id| {
            let (status, output) = result_of(&turn, id);
            assert_eq!(status, "ok", "{id}: {output}");
            output
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_plugin_writes_in_its_workspace_but_not_outside() {
    let workspace = tempfile::tempdir().unwrap();
    let workspace = workspace.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let inside_target = workspace.join("from_sandboxed_plugin");
    let outside_target = outside.path().join("from_sandboxed_plugin");
    let outputs = put_through_plugin(
        "sandbox = \"workspace-write\"",
        &[&inside_target, &outside_target],
        &workspace,
    )
    .await;
    assert!(outputs[0].contains("wrote"), "{}", outputs[0]);
    assert!(inside_target.exists(), "its own workspace stays writable");
    assert!(outputs[1].contains("refused"), "{}", outputs[1]);
    assert!(
        outputs[1].contains("Read-only file system"),
        "{}",
        outputs[1]
    );
    assert!(
        !outside_target.exists(),
        "a sandboxed plugin wrote outside its workspace"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_without_sandbox_runs_with_the_daemons_access() {
    let workspace = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("from_plain_plugin");
    let outputs = put_through_plugin("", &[&target], workspace.path()).await;
    assert!(outputs[0].contains("wrote"), "{}", outputs[0]);
    assert!(target.exists());
}
