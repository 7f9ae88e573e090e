//! amber-acp: amber as an Agent Client Protocol (v1) agent on stdin/stdout, bridging to
//! amberd — what `amber-cli acp` runs ([`serve`]). stdout carries only protocol lines (logs
//! go to stderr through `tracing`); the bridge connects to amberd as an approver, so its
//! client answers approvals while — and only while — it is connected; the client going away
//! ends the bridge and never cancels a turn.
//!
//! - `wire`: JSON-RPC framing and error codes.
//! - `updates`: amber events as `session/update` payloads, prompts as text.
//! - `permissions`: approvals as `session/request_permission`.
//! - `session`: one followed session: its event stream, its waiting prompts.
//! - `commands`: amberd's slash commands offered to the editor and run from a prompt.

mod commands;
mod permissions;
mod session;
mod updates;
mod wire;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use amber_client::bridge::lines::{BoundedLines, MAX_LINE_BYTES};
use amber_client::{Client, ConnectOptions};
use amber_proto::{Mode, SessionNewParams};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc, oneshot};

use session::Followed;
use wire::{Incoming, RpcError};

/// The ACP protocol version this agent speaks.
const PROTOCOL_VERSION: u64 = 1;

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// amberd could not be reached (or refused the connection).
    #[error(transparent)]
    Connect(#[from] amber_client::ClientError),
}

/// Runs the agent on stdin/stdout until the client goes away (end of input). `opts` says
/// how to reach amberd; the bridge always connects as an approver (`approvals` is set).
/// Only a failed connection to amberd is an error: a bad line is answered and the next read.
pub async fn serve(mut opts: ConnectOptions) -> Result<(), AcpError> {
    opts.approvals = true;
    let client = Client::connect(opts).await?;
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<String>();
    let bridge = Arc::new(Bridge {
        client,
        out: out_tx,
        sessions: Mutex::default(),
        asked: Mutex::default(),
        next_id: AtomicU64::new(1),
        modes: Mutex::default(),
        watching: std::sync::atomic::AtomicBool::new(false),
        in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
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
    // Each line on its own, never held whole past the limit: a bad one is answered and the
    // next is read; only end of input (or a signal) ends the bridge.
    let mut lines = BoundedLines::new(BufReader::new(tokio::io::stdin()), MAX_LINE_BYTES);
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("acp: stdin: {e}");
                break;
            }
        };
        let Some(incoming) = wire::parse_input(&line, lines.limit()) else {
            continue;
        };
        drop(line);
        bridge.clone().handle(incoming);
    }
    // The client went away: turns go on in amberd; pending answers are dropped.
    drop(bridge);
    writer.abort();
    Ok(())
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
    /// The last mode told to the client per followed session: a mode changed by another
    /// client (seen through `session/watch`) becomes a `current_mode_update`.
    modes: Mutex<HashMap<String, Told>>,
    /// Whether the mode watch runs (started with the first followed session).
    watching: std::sync::atomic::AtomicBool,
    /// Requests and notifications of the client being handled: a flood is refused past
    /// [`MAX_IN_FLIGHT`] instead of growing without end.
    in_flight: Arc<Semaphore>,
}

/// How many of the client's messages are handled at once.
const MAX_IN_FLIGHT: usize = 1024;

/// A request's answer, and notifications that must follow it (a session's first updates
/// are only meaningful once the client knows the session).
struct Answer {
    result: Value,
    then: Vec<String>,
}

impl From<Value> for Answer {
    fn from(result: Value) -> Self {
        Answer {
            result,
            then: Vec::new(),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewSessionParams {
    cwd: PathBuf,
    #[serde(default)]
    mcp_servers: Vec<amber_proto::SessionMcpServer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoadSessionParams {
    session_id: String,
    #[serde(default)]
    mcp_servers: Vec<amber_proto::SessionMcpServer>,
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
                let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
                    tracing::warn!(
                        "acp: {MAX_IN_FLIGHT} messages in flight: notification {method} dropped"
                    );
                    return;
                };
                tokio::spawn(async move {
                    self.notification(&method, params).await;
                    drop(permit);
                });
            }
            Incoming::Request { id, method, params } => {
                // Refused at once rather than queued: reading must go on, for the answers
                // to our own requests that the ones in flight may wait for.
                let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
                    let error = RpcError::new(
                        wire::OVERLOADED,
                        format!(
                            "overloaded: {MAX_IN_FLIGHT} requests in flight; send this again once some are answered"
                        ),
                    );
                    self.send(wire::error_response(&id, &error));
                    return;
                };
                tokio::spawn(async move {
                    let _permit = permit;
                    match self.clone().request(&method, params).await {
                        Ok(answer) => {
                            self.send(wire::response(&id, answer.result));
                            for line in answer.then {
                                self.send(line);
                            }
                        }
                        Err(error) => self.send(wire::error_response(&id, &error)),
                    }
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

    async fn request(self: Arc<Self>, method: &str, params: Value) -> Result<Answer, RpcError> {
        match method {
            "initialize" => Ok(initialize_result().into()),
            "authenticate" => Ok(json!({}).into()),
            "session/new" => self.session_new(wire::params(params)?).await,
            "session/load" => self.session_load(wire::params(params)?).await,
            "session/prompt" => self
                .session_prompt(wire::params(params)?)
                .await
                .map(Into::into),
            "session/set_mode" => self.set_mode(wire::params(params)?).await.map(Into::into),
            "session/list" => self
                .session_list(wire::params(params)?)
                .await
                .map(Into::into),
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

    async fn session_new(self: Arc<Self>, p: NewSessionParams) -> Result<Answer, RpcError> {
        if !p.cwd.is_absolute() {
            return Err(RpcError::invalid_params("cwd must be an absolute path"));
        }
        self.ensure_watch().await;
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
            // The editor's servers, for this session only (amberd connects them).
            mcp_servers: p.mcp_servers,
            max_budget_usd: None,
            max_tokens_total: None,
            name: None,
            environment: None,
            ..Default::default()
        };
        let info = self.client.session_new(&params).await?;
        let cwd = PathBuf::from(&info.cwd);
        Followed::start(self.clone(), info.session_id.clone(), cwd, None).await?;
        self.follow_mode(&info.session_id, info.mode).await;
        Ok(Answer {
            result: json!({"sessionId": info.session_id, "modes": modes(info.mode)}),
            then: self.commands_update(&info.session_id).await,
        })
    }

    async fn session_load(self: Arc<Self>, p: LoadSessionParams) -> Result<Answer, RpcError> {
        self.ensure_watch().await;
        let got = self.client.session_get_all(&p.session_id).await?;
        // The editor's servers join the session's own (one it already has stays connected).
        for server in p.mcp_servers {
            let params = amber_proto::McpAddParams {
                name: server.name,
                transport: server.transport,
                session_id: Some(p.session_id.clone()),
            };
            self.client
                .request::<amber_proto::methods::McpAdd>(&params)
                .await?;
        }
        let cwd = PathBuf::from(&got.session.cwd);
        session::replay(&self, &p.session_id, &got.messages, &cwd);
        if !got.todos.is_empty() {
            self.update(&p.session_id, updates::plan(&got.todos));
        }
        let already = self.followed(&p.session_id).is_ok();
        if !already {
            Followed::start(self.clone(), p.session_id.clone(), cwd, Some(got.last_seq)).await?;
        }
        self.follow_mode(&p.session_id, got.session.mode).await;
        Ok(Answer {
            result: json!({"modes": modes(got.session.mode)}),
            then: self.commands_update(&p.session_id).await,
        })
    }

    async fn session_prompt(self: Arc<Self>, p: PromptParams) -> Result<Value, RpcError> {
        let followed = self.followed(&p.session_id)?;
        let text = updates::prompt_text(&p.prompt)?;
        let turn_id = match self.command_in(&text).await {
            Some((name, args)) => {
                let ran = commands::run(&self.client, &p.session_id, &name, &args).await?;
                if !ran.output.is_empty() {
                    self.update(
                        &p.session_id,
                        updates::chunk("agent_message_chunk", &ran.output),
                    );
                }
                match ran.turn_id {
                    Some(turn_id) => turn_id,
                    // Done when it answered (`/compact`, `/mode`, `/help`, …).
                    None => return Ok(json!({"stopReason": "end_turn"})),
                }
            }
            None => {
                self.client
                    .session_prompt(&p.session_id, &text)
                    .await?
                    .turn_id
            }
        };
        let (stop, note) = followed.wait_turn(&turn_id).await?;
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
            parent: None,
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
        if let Ok(mut modes) = self.modes.lock() {
            modes.entry(p.session_id.clone()).or_default().mode = info.mode;
        }
        self.update(
            &p.session_id,
            json!({"sessionUpdate": "current_mode_update", "currentModeId": info.mode.as_str()}),
        );
        Ok(json!({}))
    }
}

impl Bridge {
    /// `/NAME args` when the prompt's text runs one of amberd's commands.
    async fn command_in(&self, text: &str) -> Option<(String, String)> {
        if !text.trim_start().starts_with('/') {
            return None;
        }
        let offered = commands::offered(&self.client).await.ok()?;
        commands::parse(text, &offered).map(|(n, a)| (n.to_owned(), a.to_owned()))
    }

    /// The session's `available_commands_update`, as a line to send after the answer.
    async fn commands_update(&self, session_id: &str) -> Vec<String> {
        match commands::offered(&self.client).await {
            Ok(offered) => vec![wire::notification(
                "session/update",
                json!({"sessionId": session_id, "update": commands::update(&offered)}),
            )],
            Err(e) => {
                tracing::warn!("acp: command/list: {}", e.message);
                Vec::new()
            }
        }
    }

    /// Starts following `session/watch` once, and returns when it is subscribed: called
    /// before a session is made or read, so no later mode change can slip past.
    async fn ensure_watch(self: &Arc<Self>) {
        if self.watching.swap(true, Ordering::SeqCst) {
            return;
        }
        match self.client.watch_sessions(false).await {
            Ok(changes) => {
                let bridge = self.clone();
                tokio::spawn(async move { bridge.watch_modes(changes).await });
            }
            Err(e) => tracing::warn!(
                "acp: session/watch: {e}; mode changes by other clients are not shown"
            ),
        }
    }

    /// Remembers the mode the client was told. A change made between reading the session
    /// and this (the watch passed it over: the session was not followed yet) is caught by
    /// reading the mode once more.
    async fn follow_mode(self: &Arc<Self>, session_id: &str, told: Mode) {
        let asked_at = self.modes.lock().ok().map(|mut modes| {
            let known = modes.entry(session_id.to_owned()).or_default();
            known.mode = told;
            known.watched
        });
        // The info with the newest message only: the smallest page amberd serves.
        match self.client.session_snapshot(session_id).await {
            // A change the watch reported since the snapshot was asked for is at least as
            // new as it: the snapshot would only tell an older mode again.
            Ok(now) if self.watched(session_id) == asked_at => {
                self.mode_seen(session_id, now.session.mode, false);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(
                "acp: session/get {session_id}: {e}; a mode changed meanwhile is not shown"
            ),
        }
    }

    /// A mode amberd reports for `session_id`: told to the client when it differs from
    /// what the client was last told.
    /// `watched`: reported by the watch (counted, so a snapshot asked for earlier defers).
    fn mode_seen(&self, session_id: &str, mode: Mode, watched: bool) {
        let changed =
            self.modes
                .lock()
                .ok()
                .is_some_and(|mut modes| match modes.get_mut(session_id) {
                    Some(known) => {
                        known.watched += u64::from(watched);
                        let changed = known.mode != mode;
                        known.mode = mode;
                        changed
                    }
                    None => false,
                });
        if changed {
            self.update(
                session_id,
                json!({"sessionUpdate": "current_mode_update", "currentModeId": mode.as_str()}),
            );
        }
    }

    /// Follows `session/watch`: a followed session whose mode changed elsewhere (the TUI, a
    /// `/mode` command, another editor) gets a `current_mode_update`.
    async fn watch_modes(self: Arc<Self>, mut changes: amber_client::SessionWatchStream) {
        use futures::StreamExt;
        while let Some(Ok(change)) = changes.next().await {
            self.mode_seen(&change.session.session_id, change.session.mode, true);
        }
    }
}

/// What a followed session's client was last told of its mode.
#[derive(Debug, Default)]
struct Told {
    mode: Mode,
    /// How many of the session's changes the watch reported so far.
    watched: u64,
}

impl Bridge {
    /// How many changes of `session_id` the watch reported so far.
    fn watched(&self, session_id: &str) -> Option<u64> {
        let modes = self.modes.lock().ok()?;
        modes.get(session_id).map(|known| known.watched)
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
