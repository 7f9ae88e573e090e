//! End-to-end: an MCP stdio server with `sandbox = "workspace-write"` in its table starts
//! through `amberd sandbox-exec` and keeps speaking JSON-RPC on its stdio, but what it runs
//! cannot write outside its workspace (the daemon's working directory); the same server
//! without `sandbox` can (it runs with the daemon's access, the default).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::mcp_plugins::wait_mcp_status;
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
