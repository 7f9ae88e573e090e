//! What deferring MCP tools saves: the prompt tokens of a session's first request with 10
//! configured MCP servers of 20 tools each (200 tools, schemas shaped like real ones),
//! `[mcp] tool_search = "off"` vs `"on"`, one daemon of its own per setting. A token is
//! what the scripted model counts for a request (its body bytes ÷ 4), so the two figures
//! compare like with like; the built-in tools are in both.
//!
//! The servers are this binary in its fixture mode ([`FIXTURE`]): a stdio MCP server of
//! `--tools N` tools, answering `initialize`, `tools/list` and `ping` line by line.

use std::io::{BufRead, Write};
use std::time::Duration;

use amber_client::Client;
use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{EventKind, SessionNewParams};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::daemon::{DaemonProc, DaemonSpec};
use crate::error::BenchError;
use crate::suite::Suite;
use crate::task;

/// The first argument that runs this binary as a fixture MCP server.
pub(crate) const FIXTURE: &str = "__mcp-fixture-server";
const SERVERS: usize = 10;
const TOOLS_PER_SERVER: usize = 20;
/// How long the servers may take to be listed.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let exe = std::env::current_exe().map_err(|e| BenchError::Failed(e.to_string()))?;
    let mut servers = String::new();
    for i in 0..SERVERS {
        servers.push_str(&format!(
            "\n[mcp.servers.service{i}]\ncommand = {:?}\nargs = [{FIXTURE:?}, \"{TOOLS_PER_SERVER}\", \"service{i}\"]\n",
            exe.display().to_string()
        ));
    }
    let mut tokens = Vec::new();
    for mode in ["off", "on"] {
        let endpoint = MockLlm::builder().model(&s.args.model).start_blocking()?;
        endpoint.set_responder(|_| MockTurn::text("ok"));
        let spec = DaemonSpec {
            base_url: endpoint.base_url(),
            api_key: Some("amber-bench".to_owned()),
            extra_config: format!("[mcp]\ntool_search = \"{mode}\"\n{servers}"),
            ..s.spec.clone()
        };
        let daemon = DaemonProc::start(&spec, &format!("tool_search_{mode}")).await?;
        let client = Client::connect(task::connect_options(&daemon.socket)).await?;
        wait_listed(&client).await?;
        let workspace = s.scratch.path().join(format!("tool_search_{mode}"));
        std::fs::create_dir_all(&workspace).map_err(|e| BenchError::Failed(e.to_string()))?;
        let session = client
            .session_new(&SessionNewParams {
                cwd: workspace.to_string_lossy().into_owned(),
                ..SessionNewParams::default()
            })
            .await?;
        prompt_and_wait(&client, &session.session_id).await?;
        let first = endpoint
            .recorded()
            .into_iter()
            .next()
            .ok_or_else(|| BenchError::Failed("no request reached the model".into()))?;
        let offered = first.body["tools"].as_array().map_or(0, Vec::len);
        let bytes = first.body.to_string().len();
        tokens.push((mode, bytes.div_ceil(4), offered));
        daemon.stop();
    }
    let r = &mut s.report;
    r.section("Lazy MCP tools: the first request with 10 servers / 200 tools");
    for (mode, prompt_tokens, offered) in &tokens {
        r.put(
            &format!("tool_search_{mode}_first_request_tokens_count"),
            &format!("tool_search = {mode}: prompt tokens of the first request"),
            *prompt_tokens as f64,
        );
        r.put(
            &format!("tool_search_{mode}_offered_tools_count"),
            &format!("tool_search = {mode}: tools offered"),
            *offered as f64,
        );
    }
    if let [(_, off, _), (_, on, _)] = tokens.as_slice() {
        r.put(
            "tool_search_saved_pct",
            "prompt tokens saved by deferring",
            100.0 * (1.0 - *on as f64 / (*off).max(1) as f64),
        );
    }
    r.note(format!(
        "tool_search: {SERVERS} stdio MCP servers × {TOOLS_PER_SERVER} tools (amber-bench's \
         fixture server); tokens = request body bytes ÷ 4"
    ));
    Ok(())
}

/// Prompts `session` once and waits for its turn to end.
async fn prompt_and_wait(client: &Client, session: &str) -> Result<(), BenchError> {
    let mut events = client.subscribe_raw(session, None).await?;
    client.session_prompt(session, "hello").await?;
    let wait = async {
        while let Some(item) = events.next().await {
            if let Some(event) = item?.event
                && matches!(event.kind, EventKind::TurnCompleted { .. })
            {
                return Ok(());
            }
        }
        Err(BenchError::Failed(
            "the session's events ended before its turn".into(),
        ))
    };
    tokio::time::timeout(READY_TIMEOUT, wait)
        .await
        .map_err(|_| BenchError::Failed("the turn did not end in time".into()))?
}

/// Waits until every fixture server is ready with its tools.
async fn wait_listed(client: &Client) -> Result<(), BenchError> {
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let listed = client
            .request::<amber_proto::methods::McpList>(&amber_proto::Empty {})
            .await?;
        let ready = listed
            .servers
            .iter()
            .filter(|s| s.tools as usize >= TOOLS_PER_SERVER)
            .count();
        if ready == SERVERS {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(BenchError::Failed(format!(
                "{ready} of {SERVERS} MCP fixture servers listed their tools in time"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The fixture server: `ARGS = [TOOLS, NAME]`. Returns the exit code.
pub(crate) fn fixture_server(args: &[std::ffi::OsString]) -> i32 {
    let count: usize = args
        .first()
        .and_then(|a| a.to_str())
        .and_then(|a| a.parse().ok())
        .unwrap_or(TOOLS_PER_SERVER);
    let name = args
        .get(1)
        .and_then(|a| a.to_str())
        .unwrap_or("fixture")
        .to_owned();
    let tools: Vec<Value> = (0..count).map(|i| fixture_tool(&name, i)).collect();
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return 1 };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let result = match message["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": message["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": name, "version": "1.0.0"}
            }),
            Some("tools/list") => json!({"tools": tools}),
            Some("ping") => json!({}),
            _ => {
                let error = json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "method not found"}});
                if writeln!(stdout, "{error}")
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    return 1;
                }
                continue;
            }
        };
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
        if writeln!(stdout, "{answer}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return 1;
        }
    }
    0
}

/// One tool shaped like a real service's: a paragraph of description, five parameters.
fn fixture_tool(server: &str, i: usize) -> Value {
    json!({
        "name": format!("operation_{i}"),
        "description": format!(
            "Performs operation {i} of the {server} service on a resource. Use it to create, \
             update or inspect items of the project: the result lists the affected items with \
             their ids, titles, states and the time they changed. Fails when the caller lacks \
             permission or the resource does not exist."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "owner": {"type": "string", "description": "The account or organization that owns the resource"},
                "project": {"type": "string", "description": "The project's name, as shown in its URL"},
                "item_id": {"type": "integer", "description": "The item's number within the project"},
                "fields": {"type": "array", "items": {"type": "string"}, "description": "Which fields to return; all when omitted"},
                "state": {"type": "string", "enum": ["open", "closed", "all"], "description": "Only items in this state"}
            },
            "required": ["owner", "project"]
        }
    })
}
