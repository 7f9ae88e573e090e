//! `amber-cli acp`: an Agent Client Protocol (v1) agent on stdin/stdout that bridges to
//! amberd. stdout carries only protocol lines (logs go to stderr); the bridge connects to
//! amberd as an approver, so its client answers approvals while — and only while — it is
//! connected; the client going away ends the bridge and never cancels a turn.
//!
//! - [`wire`]: JSON-RPC framing and error codes.
//! - [`updates`]: amber events as `session/update` payloads, prompts as text.
//! - [`permissions`]: approvals as `session/request_permission`.
//! - [`session`]: one followed session: its event stream, its waiting prompts.

mod permissions;
mod session;
mod updates;
mod wire;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use amber_client::Client;
use amber_proto::{Mode, SessionNewParams};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::args::ConnectArgs;
use crate::output::connect_options;
use crate::turn::exit;
use session::Followed;
use wire::{Incoming, RpcError};

/// The ACP protocol version this agent speaks.
const PROTOCOL_VERSION: u64 = 1;

pub async fn acp(conn: &ConnectArgs) -> anyhow::Result<u8> {
    let client = Client::connect(connect_options(conn, true)).await?;
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<String>();
    let bridge = Arc::new(Bridge {
        client,
        out: out_tx,
        sessions: Mutex::default(),
        asked: Mutex::default(),
        next_id: AtomicU64::new(1),
    });
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = out_rx.recv().await {
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            if stdout.write_all(&bytes).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("acp: stdin: {e}");
                break;
            }
        };
        let Some(incoming) = wire::parse_line(&line) else {
            continue;
        };
        bridge.clone().handle(incoming);
    }
    // The client went away: turns go on in amberd; pending answers are dropped.
    drop(bridge);
    writer.abort();
    Ok(exit::OK)
}

/// The bridge's shared state.
pub(crate) struct Bridge {
    client: Client,
    /// Lines for stdout, written in order by one task.
    out: mpsc::UnboundedSender<String>,
    /// Sessions this client created or loaded.
    sessions: Mutex<HashMap<String, Arc<Followed>>>,
    /// Our requests to the client awaiting its answer, by id.
    asked: Mutex<HashMap<u64, oneshot::Sender<Result<Value, Value>>>>,
    next_id: AtomicU64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewSessionParams {
    cwd: PathBuf,
    #[serde(default)]
    mcp_servers: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoadSessionParams {
    session_id: String,
    #[serde(default)]
    mcp_servers: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptParams {
    session_id: String,
    prompt: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionIdParams {
    session_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListParams {
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetModeParams {
    session_id: String,
    mode_id: String,
}

impl Bridge {
    fn send(&self, line: String) {
        let _ = self.out.send(line);
    }

    /// A `session/update` notification.
    pub(crate) fn update(&self, session_id: &str, update: Value) {
        self.send(wire::notification(
            "session/update",
            json!({"sessionId": session_id, "update": update}),
        ));
    }

    /// Sends a request to the client: its id, and the answer to come (`None` when the
    /// request was withdrawn or the bridge ended first).
    pub(crate) fn ask(
        &self,
        method: &str,
        params: Value,
    ) -> (
        u64,
        impl Future<Output = Option<Result<Value, Value>>> + use<>,
    ) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut asked) = self.asked.lock() {
            asked.insert(id, tx);
        }
        self.send(wire::request(id, method, params));
        (id, async move { rx.await.ok() })
    }

    /// Withdraws request `id` if the client has not answered it yet (`$/cancel_request`).
    pub(crate) fn withdraw(&self, id: u64) {
        let pending = self
            .asked
            .lock()
            .ok()
            .and_then(|mut asked| asked.remove(&id))
            .is_some();
        if pending {
            self.send(wire::notification(
                "$/cancel_request",
                json!({"requestId": id}),
            ));
        }
    }

    fn handle(self: Arc<Self>, incoming: Incoming) {
        match incoming {
            Incoming::Invalid { id, error } => self.send(wire::error_response(&id, &error)),
            Incoming::Response { id, result } => {
                let waiter = id
                    .as_u64()
                    .and_then(|id| self.asked.lock().ok()?.remove(&id));
                match waiter {
                    Some(tx) => {
                        let _ = tx.send(result);
                    }
                    None => tracing::warn!("acp: an answer to no request of ours: {id}"),
                }
            }
            Incoming::Notification { method, params } => {
                tokio::spawn(async move { self.notification(&method, params).await });
            }
            Incoming::Request { id, method, params } => {
                tokio::spawn(async move {
                    let line = match self.clone().request(&method, params).await {
                        Ok(result) => wire::response(&id, result),
                        Err(error) => wire::error_response(&id, &error),
                    };
                    self.send(line);
                });
            }
        }
    }

    async fn notification(self: Arc<Self>, method: &str, params: Value) {
        match method {
            "session/cancel" => {
                let Ok(p) = wire::params::<SessionIdParams>(params) else {
                    return;
                };
                if let Err(e) = self.client.session_cancel(&p.session_id).await {
                    tracing::warn!("acp: session/cancel {}: {e}", p.session_id);
                }
            }
            other => tracing::debug!("acp: notification {other} ignored"),
        }
    }

    async fn request(self: Arc<Self>, method: &str, params: Value) -> Result<Value, RpcError> {
        match method {
            "initialize" => Ok(initialize_result()),
            "authenticate" => Ok(json!({})),
            "session/new" => self.session_new(wire::params(params)?).await,
            "session/load" => self.session_load(wire::params(params)?).await,
            "session/prompt" => self.session_prompt(wire::params(params)?).await,
            "session/set_mode" => self.set_mode(wire::params(params)?).await,
            "session/list" => self.session_list(wire::params(params)?).await,
            other => Err(RpcError::new(
                wire::METHOD_NOT_FOUND,
                format!("method not found: {other}"),
            )),
        }
    }

    fn followed(&self, session_id: &str) -> Result<Arc<Followed>, RpcError> {
        self.sessions
            .lock()
            .ok()
            .and_then(|s| s.get(session_id).cloned())
            .ok_or_else(|| RpcError::session_not_found(session_id))
    }

    async fn session_new(self: Arc<Self>, p: NewSessionParams) -> Result<Value, RpcError> {
        if !p.cwd.is_absolute() {
            return Err(RpcError::invalid_params("cwd must be an absolute path"));
        }
        note_mcp_servers(&p.mcp_servers);
        let params = SessionNewParams {
            cwd: p.cwd.to_string_lossy().into_owned(),
            mode: None,
            model: None,
            title: None,
            system_prompt: None,
            provider: None,
            agent: None,
            sandbox: None,
            worktree: None,
            max_budget_usd: None,
            max_tokens_total: None,
        };
        let info = self.client.session_new(&params).await?;
        let cwd = PathBuf::from(&info.cwd);
        Followed::start(self.clone(), info.session_id.clone(), cwd, None).await?;
        Ok(json!({"sessionId": info.session_id, "modes": modes(info.mode)}))
    }

    async fn session_load(self: Arc<Self>, p: LoadSessionParams) -> Result<Value, RpcError> {
        note_mcp_servers(&p.mcp_servers);
        let got = self.client.session_get_all(&p.session_id).await?;
        let cwd = PathBuf::from(&got.session.cwd);
        session::replay(&self, &p.session_id, &got.messages, &cwd);
        if !got.todos.is_empty() {
            self.update(&p.session_id, updates::plan(&got.todos));
        }
        let already = self.followed(&p.session_id).is_ok();
        if !already {
            Followed::start(self.clone(), p.session_id.clone(), cwd, Some(got.last_seq)).await?;
        }
        Ok(json!({"modes": modes(got.session.mode)}))
    }

    async fn session_prompt(self: Arc<Self>, p: PromptParams) -> Result<Value, RpcError> {
        let followed = self.followed(&p.session_id)?;
        let text = updates::prompt_text(&p.prompt)?;
        let result = self.client.session_prompt(&p.session_id, &text).await?;
        let (stop, note) = followed.wait_turn(&result.turn_id).await?;
        if let Some(note) = note {
            self.update(&p.session_id, updates::chunk("agent_message_chunk", &note));
        }
        Ok(json!({"stopReason": stop}))
    }

    /// `session/list`: amberd's sessions (every client's), one page per call, filtered by
    /// `cwd` when given.
    async fn session_list(self: Arc<Self>, p: Option<ListParams>) -> Result<Value, RpcError> {
        let p = p.unwrap_or(ListParams {
            cwd: None,
            cursor: None,
        });
        let params = amber_proto::SessionListParams {
            cursor: p.cursor,
            limit: None,
        };
        let page = self.client.session_list(&params).await?;
        let sessions: Vec<Value> = page
            .sessions
            .iter()
            .filter(|s| p.cwd.as_deref().is_none_or(|cwd| s.cwd == cwd))
            .map(|s| {
                json!({
                    "sessionId": s.session_id,
                    "cwd": s.cwd,
                    "title": s.title,
                    "updatedAt": s.updated_at,
                })
            })
            .collect();
        let mut result = json!({"sessions": sessions});
        if let Some(cursor) = page.next_cursor {
            result["nextCursor"] = json!(cursor);
        }
        Ok(result)
    }

    async fn set_mode(self: Arc<Self>, p: SetModeParams) -> Result<Value, RpcError> {
        self.followed(&p.session_id)?;
        let mode: Mode = p.mode_id.parse().map_err(RpcError::invalid_params)?;
        let info = self.client.session_set_mode(&p.session_id, mode).await?;
        self.update(
            &p.session_id,
            json!({"sessionUpdate": "current_mode_update", "currentModeId": info.mode.as_str()}),
        );
        Ok(json!({}))
    }
}

/// MCP servers passed by the client are not connected yet (amberd's per-session MCP
/// servers come later); the session works without them.
fn note_mcp_servers(servers: &[Value]) {
    if !servers.is_empty() {
        let names: Vec<&str> = servers
            .iter()
            .filter_map(|s| s.get("name").and_then(Value::as_str))
            .collect();
        crate::output::note(&format!(
            "acp: MCP servers from the client are not connected yet: {}",
            names.join(", ")
        ));
    }
}

/// The `initialize` result.
fn initialize_result() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "agentInfo": {"name": "amber", "version": env!("CARGO_PKG_VERSION")},
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"embeddedContext": true, "image": false, "audio": false},
            "mcpCapabilities": {"http": true, "sse": false},
            "sessionCapabilities": {"list": {}},
        },
        "authMethods": [],
    })
}

/// amber's modes as ACP session modes.
fn modes(current: Mode) -> Value {
    json!({
        "currentModeId": current.as_str(),
        "availableModes": [
            {"id": "read", "name": "Read", "description": "Only read-only tools run"},
            {"id": "write", "name": "Write", "description": "File tools in the workspace and benign commands run; the rest asks"},
            {"id": "yolo", "name": "Yolo", "description": "Nothing asks; workspace confinement still holds"},
        ],
    })
}
