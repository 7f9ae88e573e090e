//! amber-acp: amber as an Agent Client Protocol (v1) agent on stdin/stdout, bridging to
//! amberd — what `amber-cli acp` runs ([`serve`]). stdout carries only protocol lines (logs
//! go to stderr through `tracing`); the bridge connects to amberd as an approver, so its
//! client answers approvals while — and only while — it is connected; the client going away
//! ends the bridge and never cancels a turn. amberd is reached on the first request that
//! needs it: the handshake is answered without it.
//!
//! - `wire`: JSON-RPC framing and error codes.
//! - `handshake`: `initialize` and `authenticate`, answered without amberd.
//! - `daemon`: the connection to amberd, made when first needed.
//! - `lifecycle`: `session/new`, `load`, `resume`, `fork` and `list`.
//! - `updates`: amber events as `session/update` payloads, prompts as text.
//! - `usage`: context use and cost as `usage_update`, a turn's tokens for its answer.
//! - `permissions`: approvals as `session/request_permission`.
//! - `session`: one followed session: its event stream (history and live), its waiting
//!   prompts.
//! - `modes`: amber's modes as ACP modes, kept current through `session/watch`.
//! - `commands`: amberd's slash commands offered to the editor and run from a prompt.

mod commands;
mod daemon;
mod handshake;
mod lifecycle;
mod modes;
mod permissions;
mod session;
mod updates;
mod usage;
mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use amber_client::ConnectOptions;
use amber_client::bridge::lines::{BoundedLines, MAX_LINE_BYTES};
use amber_proto::Mode;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc, oneshot};

use daemon::Daemon;
use session::Followed;
use wire::{Incoming, RpcError};

/// Why the agent stopped other than at the end of its input.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// Reading stdin failed.
    #[error("reading stdin: {0}")]
    Stdin(#[source] std::io::Error),
}

/// Runs the agent on stdin/stdout until the client goes away (end of input). `opts` says
/// how to reach amberd, which is connected to on the first request that needs it (always
/// as an approver); a request that needs it while it cannot be reached fails alone, with
/// the reason. A bad line is answered and the next one read; only a failed read of stdin
/// is an error.
pub async fn serve(opts: ConnectOptions) -> Result<(), AcpError> {
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<String>();
    let bridge = Arc::new(Bridge {
        daemon: Daemon::new(opts),
        out: out_tx,
        sessions: Mutex::default(),
        asked: Mutex::default(),
        next_id: AtomicU64::new(1),
        modes: Mutex::default(),
        watching: AtomicBool::new(false),
        in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        elicits_forms: AtomicBool::new(false),
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
    let ended = loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break Ok(()),
            Err(e) => break Err(AcpError::Stdin(e)),
        };
        let Some(incoming) = wire::parse_input(&line, lines.limit()) else {
            continue;
        };
        drop(line);
        bridge.clone().handle(incoming);
    };
    // The client went away: turns go on in amberd; pending answers are dropped.
    drop(bridge);
    writer.abort();
    ended
}

/// The bridge's shared state.
pub(crate) struct Bridge {
    daemon: Daemon,
    /// Lines for stdout, written in order by one task.
    out: mpsc::UnboundedSender<String>,
    /// Sessions this client follows (made, loaded, resumed or forked).
    sessions: Mutex<HashMap<String, Arc<Followed>>>,
    /// Our requests to the client awaiting its answer, by id.
    asked: Mutex<HashMap<u64, oneshot::Sender<Result<Value, Value>>>>,
    next_id: AtomicU64,
    /// The last mode told to the client per followed session.
    modes: Mutex<HashMap<String, modes::Told>>,
    /// Whether the mode watch runs (started with the first followed session).
    watching: AtomicBool,
    /// Requests and notifications of the client being handled: a flood is refused past
    /// [`MAX_IN_FLIGHT`] instead of growing without end.
    in_flight: Arc<Semaphore>,
    /// The client renders forms (`clientCapabilities.elicitation.form` at `initialize`): an
    /// MCP server's form then goes to it as `elicitation/create`.
    elicits_forms: AtomicBool,
}

/// How many of the client's messages are handled at once.
const MAX_IN_FLIGHT: usize = 1024;

/// A request's answer, and notifications that must follow it (a session's first updates
/// are only meaningful once the client knows the session).
pub(crate) struct Answer {
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
                let cancelled = match self.daemon.client().await {
                    Ok(client) => client
                        .session_cancel(&p.session_id)
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.message),
                };
                if let Err(e) = cancelled {
                    tracing::warn!("acp: session/cancel {}: {e}", p.session_id);
                }
            }
            other => tracing::debug!("acp: notification {other} ignored"),
        }
    }

    async fn request(self: Arc<Self>, method: &str, params: Value) -> Result<Answer, RpcError> {
        match method {
            "initialize" => {
                let answer = handshake::initialize(&params)?;
                self.elicits_forms
                    .store(handshake::elicits_forms(&params), Ordering::Relaxed);
                Ok(answer.into())
            }
            "authenticate" => handshake::authenticate(&params).map(Into::into),
            "session/new" => self.session_new(wire::params(params)?).await,
            "session/load" => self.session_load(wire::params(params)?).await,
            "session/resume" => self.session_resume(wire::params(params)?).await,
            "session/fork" => self.session_fork(wire::params(params)?).await,
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

    async fn session_prompt(self: Arc<Self>, p: PromptParams) -> Result<Value, RpcError> {
        let followed = self.followed(&p.session_id)?;
        let client = self.daemon.client().await?;
        let text = updates::prompt_text(&p.prompt)?;
        let turn_id = match self.command_in(&client, &text).await {
            Some((name, args)) => {
                let ran = commands::run(&client, &p.session_id, &name, &args).await?;
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
            None => client.session_prompt(&p.session_id, &text).await?.turn_id,
        };
        let ended = followed.wait_turn(&turn_id).await?;
        if let Some(note) = ended.note {
            self.update(&p.session_id, updates::chunk("agent_message_chunk", &note));
        }
        Ok(json!({"stopReason": ended.stop, "usage": usage::turn(&ended.usage)}))
    }

    async fn set_mode(self: Arc<Self>, p: SetModeParams) -> Result<Value, RpcError> {
        self.followed(&p.session_id)?;
        let mode: Mode = p.mode_id.parse().map_err(RpcError::invalid_params)?;
        let client = self.daemon.client().await?;
        let info = client.session_set_mode(&p.session_id, mode).await?;
        self.mode_told(&p.session_id, info.mode);
        self.update(&p.session_id, modes::update(info.mode));
        Ok(json!({}))
    }

    /// `/NAME args` when the prompt's text runs one of amberd's commands.
    async fn command_in(
        &self,
        client: &amber_client::Client,
        text: &str,
    ) -> Option<(String, String)> {
        if !text.trim_start().starts_with('/') {
            return None;
        }
        let offered = commands::offered(client).await.ok()?;
        commands::parse(text, &offered).map(|(n, a)| (n.to_owned(), a.to_owned()))
    }
}
