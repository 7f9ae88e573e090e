//! One task for an external ACP agent, as its client: start the process, `initialize`
//! (amber offers `fs/read_text_file` and `fs/write_text_file`, no terminals),
//! `session/new` in the session's workspace, one `session/prompt`, then stop the process.
//!
//! While the prompt runs, the agent's `session/update`s become the sub-agent's events (its
//! tool calls as `tool_call_started` / `tool_call_completed`, named `acp__NAME__KIND`), its
//! reply text is gathered as the task's result, and what it reports spending counts to the
//! session ([`AcpHost::spent`]). Its requests go through the [`AcpHost`]: permission asks
//! become approvals, file reads and writes run under the session's policy.
//!
//! **Invariants:** in read mode a permission ask for anything but reading is rejected
//! without asking; a permission ask of an unsandboxed agent always needs a person (the
//! host's approval is person-only); a cancel (the parent's, a cap's) sends `session/cancel`
//! and waits [`CANCEL_GRACE`] for the agent to stop before its process is killed; the agent
//! process never outlives the run.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use amber_exec::sandbox_env::SandboxEnv;
use amber_proto::{EventKind, Mode, StopReason, ToolStatus, Usage};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::config::AcpAgentConfig;
use super::process::{AgentProcess, CallError, Incoming};

/// The ACP version amber speaks.
pub(crate) const PROTOCOL_VERSION: u64 = 1;
/// How long starting the agent (`initialize`, `session/new`) may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a cancelled agent has to answer its prompt before it is killed.
pub(crate) const CANCEL_GRACE: Duration = Duration::from_secs(5);
/// JSON-RPC "method not found".
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC "invalid params".
const INVALID_PARAMS: i64 = -32602;

/// What an agent asks permission for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PermissionAsk {
    /// The sub-agent's call id (the one its `tool_call_started` carried).
    pub call_id: String,
    /// The tool name amber shows: `acp__NAME__KIND`.
    pub tool: String,
    pub title: String,
    pub raw_input: Value,
    /// Whether the agent runs unsandboxed: then only a person may allow it.
    pub unsandboxed: bool,
}

/// The person's (or the policy's) answer to a [`PermissionAsk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PermissionAnswer {
    AllowOnce,
    /// For the rest of the agent's session (ACP's `allow_always`: the agent remembers).
    AllowAlways,
    Reject,
    /// The turn was cancelled while asking.
    Cancelled,
}

/// What the run needs of the session it serves.
pub(crate) trait AcpHost: Sync {
    /// Publishes one of the sub-agent's events (the host tags it with the sub-agent).
    fn publish(&self, kind: EventKind);
    /// The session's mode now.
    fn mode(&self) -> Mode;
    /// Asks the session's approvers.
    fn ask(&self, ask: PermissionAsk) -> BoxFuture<'_, PermissionAnswer>;
    /// A text file in the workspace, under the session's policy for `read`.
    fn read_text<'a>(
        &'a self,
        path: &'a str,
        line: Option<u64>,
        limit: Option<u64>,
    ) -> BoxFuture<'a, Result<String, String>>;
    /// Writes a file under the session's policy for `write` (its mode, rules, approvals).
    fn write_text<'a>(
        &'a self,
        path: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// Counts what the agent reported spending; why it must stop, once a cap is reached.
    fn spent(&self, usage: &Usage) -> Option<String>;
}

/// How the task ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunOutcome {
    pub stop: StopReason,
    /// The agent's reply: its message chunks, joined.
    pub reply: String,
    /// Why it did not finish, when it did not.
    pub error: Option<String>,
}

/// Runs `prompt` on the external agent `name`.
pub(crate) async fn run(
    name: &str,
    config: &AcpAgentConfig,
    sandbox: &SandboxEnv,
    workspace: &std::path::Path,
    prompt: &str,
    host: &dyn AcpHost,
    cancel: &CancellationToken,
) -> RunOutcome {
    let (agent, incoming) = match AgentProcess::spawn(name, config, sandbox, workspace) {
        Ok(started) => started,
        Err(message) => return RunOutcome::failed(format!("ACP agent `{name}`: {message}")),
    };
    let mut run = Run {
        name,
        agent: &agent,
        host,
        unsandboxed: config.sandbox().is_none(),
        incoming,
        calls: HashMap::new(),
        reply: String::new(),
        reported_cost: 0.0,
        budget_stop: None,
    };
    let outcome = run.drive(workspace, prompt, cancel).await;
    run.finish_open_calls();
    drop(agent);
    outcome
}

impl RunOutcome {
    fn failed(message: String) -> Self {
        Self {
            stop: StopReason::Error,
            reply: String::new(),
            error: Some(message),
        }
    }
}

/// A tool call the agent announced and has not finished.
struct OpenCall {
    call_id: String,
    started: Instant,
}

struct Run<'a> {
    name: &'a str,
    agent: &'a AgentProcess,
    host: &'a dyn AcpHost,
    unsandboxed: bool,
    incoming: mpsc::Receiver<Incoming>,
    /// The agent's open tool calls by its `toolCallId`.
    calls: HashMap<String, OpenCall>,
    reply: String,
    /// The agent's cumulative cost as it last reported it (USD).
    reported_cost: f64,
    /// A cap the agent's spending reached: the run was cancelled for it.
    budget_stop: Option<String>,
}

/// Why waiting for an answer stopped.
enum Waited {
    Answer(Result<Value, CallError>),
    Cancelled,
    TimedOut,
}

impl<'a> Run<'a> {
    async fn drive(
        &mut self,
        workspace: &std::path::Path,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> RunOutcome {
        let name = self.name;
        let initialize = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {
                "fs": {"readTextFile": true, "writeTextFile": true},
                "terminal": false,
            },
            "clientInfo": {"name": "amber", "version": env!("CARGO_PKG_VERSION")},
        });
        let agent_info = match self
            .call(
                "initialize",
                initialize,
                Some(HANDSHAKE_TIMEOUT),
                cancel,
                None,
            )
            .await
        {
            Waited::Answer(Ok(result)) => result,
            other => return self.handshake_failed("initialize", other),
        };
        match agent_info.get("protocolVersion").and_then(Value::as_u64) {
            Some(PROTOCOL_VERSION) => {}
            other => {
                let said =
                    other.map_or_else(|| "no version".to_owned(), |v| format!("version {v}"));
                return RunOutcome::failed(format!(
                    "ACP agent `{name}` answered initialize with protocol {said}; amber speaks \
                     version {PROTOCOL_VERSION}"
                ));
            }
        }
        let new_session = json!({
            "cwd": workspace.to_string_lossy(),
            "mcpServers": [],
        });
        let session_id = match self
            .call(
                "session/new",
                new_session,
                Some(HANDSHAKE_TIMEOUT),
                cancel,
                None,
            )
            .await
        {
            Waited::Answer(Ok(result)) => match result.get("sessionId").and_then(Value::as_str) {
                Some(id) => id.to_owned(),
                None => {
                    return RunOutcome::failed(format!(
                        "ACP agent `{name}`: session/new answered without a sessionId"
                    ));
                }
            },
            Waited::Answer(Err(CallError::Rpc {
                code: -32000,
                message,
            })) => {
                let methods = agent_info
                    .get("authMethods")
                    .and_then(Value::as_array)
                    .map(|methods| {
                        methods
                            .iter()
                            .filter_map(|m| m.get("name").and_then(Value::as_str))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                return RunOutcome::failed(format!(
                    "ACP agent `{name}` needs you to sign in first ({message}; its methods: \
                     {methods}): sign in with the agent's own command, then try again"
                ));
            }
            other => return self.handshake_failed("session/new", other),
        };
        let params = json!({
            "sessionId": session_id,
            "prompt": [{"type": "text", "text": prompt}],
        });
        // Asked to stop, the agent gets `session/cancel` and its chance to end the turn.
        let notice = json!({"sessionId": session_id});
        let answer = match self
            .call("session/prompt", params, None, cancel, Some(notice))
            .await
        {
            Waited::Answer(answer) => answer,
            Waited::Cancelled | Waited::TimedOut => {
                return self.outcome(
                    StopReason::Cancelled,
                    Some(format!(
                        "ACP agent `{name}` did not stop within {} s of the cancel; it was killed",
                        CANCEL_GRACE.as_secs()
                    )),
                );
            }
        };
        match answer {
            Ok(result) => {
                self.count_prompt_usage(&result);
                let stop = match result.get("stopReason").and_then(Value::as_str) {
                    Some("end_turn") => StopReason::EndTurn,
                    Some("max_tokens") => StopReason::MaxTokens,
                    Some("max_turn_requests") => StopReason::MaxIterations,
                    Some("refusal") => StopReason::Refusal,
                    Some("cancelled") => StopReason::Cancelled,
                    other => {
                        return self.outcome(
                            StopReason::Error,
                            Some(format!(
                                "ACP agent `{name}` ended its turn with stop reason {}",
                                other.map_or_else(|| "(none)".to_owned(), str::to_owned)
                            )),
                        );
                    }
                };
                let error = match stop {
                    StopReason::EndTurn => None,
                    StopReason::Cancelled if self.budget_stop.is_some() => {
                        return self.outcome(StopReason::BudgetExceeded, self.budget_stop.clone());
                    }
                    stop => Some(format!("ACP agent `{name}` stopped: {}", stop.as_str())),
                };
                self.outcome(stop, error)
            }
            Err(error) => self.outcome(
                StopReason::Error,
                Some(format!(
                    "ACP agent `{name}`: session/prompt failed: {error}"
                )),
            ),
        }
    }

    fn outcome(&self, stop: StopReason, error: Option<String>) -> RunOutcome {
        RunOutcome {
            stop,
            reply: self.reply.trim().to_owned(),
            error,
        }
    }

    fn handshake_failed(&self, method: &str, waited: Waited) -> RunOutcome {
        let name = self.name;
        match waited {
            Waited::Answer(Ok(_)) => RunOutcome::failed(format!("ACP agent `{name}`: {method}")),
            Waited::Answer(Err(error)) => {
                RunOutcome::failed(format!("ACP agent `{name}`: {method} failed: {error}"))
            }
            Waited::Cancelled => RunOutcome {
                stop: StopReason::Cancelled,
                reply: String::new(),
                error: Some(format!("ACP agent `{name}`: cancelled while it started")),
            },
            Waited::TimedOut => RunOutcome::failed(format!(
                "ACP agent `{name}`: no answer to {method} within {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            )),
        }
    }

    /// Sends a request and serves the agent until its answer comes (or the cancel, or the
    /// timeout). The agent's own requests are answered meanwhile, concurrently. With a
    /// `cancel_notice`, a cancel sends it as `session/cancel` and waits [`CANCEL_GRACE`] more
    /// for the answer.
    async fn call(
        &mut self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
        cancel_notice: Option<Value>,
    ) -> Waited {
        let agent = self.agent;
        let request = agent.request(method, params);
        tokio::pin!(request);
        let far = || tokio::time::Instant::now() + Duration::from_secs(86_400 * 365);
        let deadline = timeout.map_or_else(far, |t| tokio::time::Instant::now() + t);
        let mut grace: Option<tokio::time::Instant> = None;
        let mut handlers: FuturesUnordered<BoxFuture<'a, ()>> = FuturesUnordered::new();
        loop {
            tokio::select! {
                answer = &mut request => {
                    self.drain_after_answer(cancel);
                    return Waited::Answer(answer);
                }
                () = cancel.cancelled(), if grace.is_none() => match &cancel_notice {
                    None => return Waited::Cancelled,
                    Some(notice) => {
                        agent.notify("session/cancel", notice.clone());
                        grace = Some(tokio::time::Instant::now() + CANCEL_GRACE);
                    }
                },
                () = tokio::time::sleep_until(grace.unwrap_or_else(far)), if grace.is_some() => {
                    return Waited::Cancelled;
                }
                () = tokio::time::sleep_until(deadline) => return Waited::TimedOut,
                Some(()) = handlers.next(), if !handlers.is_empty() => {}
                message = self.incoming.recv() => match message {
                    Some(message) => {
                        if let Some(handler) = self.take(message, cancel) {
                            handlers.push(handler);
                        }
                    }
                    // The reader ended: the request's answer (an error) is on its way.
                    None => return Waited::Answer((&mut request).await),
                },
            }
        }
    }

    /// What the agent sent before its answer: the reader queued it before handing the
    /// answer over, so it is all here now (its last message chunks, its last usage).
    /// A request it sent meanwhile is refused: the exchange it belonged to is over.
    fn drain_after_answer(&mut self, cancel: &CancellationToken) {
        while let Ok(message) = self.incoming.try_recv() {
            match message {
                Incoming::Request { id, .. } => self.agent.respond(
                    id,
                    Err((-32603, "amber no longer waits on this exchange".to_owned())),
                ),
                notification @ Incoming::Notification { .. } => {
                    let _ = self.take(notification, cancel);
                }
            }
        }
    }

    /// Handles one message from the agent: a notification at once, a request as a future
    /// answering it.
    fn take(&mut self, message: Incoming, cancel: &CancellationToken) -> Option<BoxFuture<'a, ()>> {
        match message {
            Incoming::Notification { method, params } => {
                if method == "session/update" {
                    self.update(&params, cancel);
                }
                None
            }
            Incoming::Request { id, method, params } => {
                Some(self.serve(id, method, params, cancel))
            }
        }
    }

    fn serve(
        &mut self,
        id: Value,
        method: String,
        params: Value,
        cancel: &CancellationToken,
    ) -> BoxFuture<'a, ()> {
        let agent = self.agent;
        let host = self.host;
        match method.as_str() {
            "session/request_permission" => {
                let ask = self.permission_ask(&params);
                let options = params.get("options").cloned().unwrap_or(Value::Null);
                let mode = host.mode();
                let unsandboxed = self.unsandboxed;
                let cancelled = cancel.is_cancelled();
                Box::pin(async move {
                    let answer = if cancelled {
                        PermissionAnswer::Cancelled
                    } else {
                        match policy_answer(mode, unsandboxed, &params) {
                            Some(answer) => answer,
                            None => host.ask(ask).await,
                        }
                    };
                    agent.respond(id, Ok(permission_outcome(answer, &options)));
                })
            }
            "fs/read_text_file" => Box::pin(async move {
                let Some(path) = params.get("path").and_then(Value::as_str) else {
                    agent.respond(id, Err((INVALID_PARAMS, "`path` is required".to_owned())));
                    return;
                };
                let line = params.get("line").and_then(Value::as_u64);
                let limit = params.get("limit").and_then(Value::as_u64);
                let answer = host
                    .read_text(path, line, limit)
                    .await
                    .map(|content| json!({"content": content}))
                    .map_err(|message| (-32603, message));
                agent.respond(id, answer);
            }),
            "fs/write_text_file" => Box::pin(async move {
                let (Some(path), Some(content)) = (
                    params.get("path").and_then(Value::as_str),
                    params.get("content").and_then(Value::as_str),
                ) else {
                    agent.respond(
                        id,
                        Err((
                            INVALID_PARAMS,
                            "`path` and `content` are required".to_owned(),
                        )),
                    );
                    return;
                };
                let answer = host
                    .write_text(path, content)
                    .await
                    .map(|()| json!({}))
                    .map_err(|message| (-32603, message));
                agent.respond(id, answer);
            }),
            other => {
                let message = if other.starts_with("terminal/") {
                    "amber offers no terminals to ACP agents (clientCapabilities.terminal is false)"
                        .to_owned()
                } else {
                    format!("amber does not serve `{other}`")
                };
                Box::pin(async move { agent.respond(id, Err((METHOD_NOT_FOUND, message))) })
            }
        }
    }

    /// The ask as amber shows it, on the call the agent announced (or a new one).
    fn permission_ask(&mut self, params: &Value) -> PermissionAsk {
        let call = params.get("toolCall").cloned().unwrap_or(Value::Null);
        let tool_call_id = call
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or("permission");
        let call_id = self.call_id(tool_call_id);
        let title = call
            .get("title")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("ACP agent `{}` asks to go on", self.name));
        PermissionAsk {
            call_id,
            tool: tool_name(self.name, call.get("kind").and_then(Value::as_str)),
            title,
            raw_input: call.get("rawInput").cloned().unwrap_or(Value::Null),
            unsandboxed: self.unsandboxed,
        }
    }

    fn call_id(&self, tool_call_id: &str) -> String {
        self.calls.get(tool_call_id).map_or_else(
            || format!("acp_{}_{tool_call_id}", self.name),
            |open| open.call_id.clone(),
        )
    }

    /// One `session/update`.
    fn update(&mut self, params: &Value, cancel: &CancellationToken) {
        let update = params.get("update").unwrap_or(&Value::Null);
        match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("agent_message_chunk") => {
                if let Some(text) = update
                    .get("content")
                    .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
                    .and_then(|c| c.get("text"))
                    .and_then(Value::as_str)
                {
                    self.reply.push_str(text);
                }
            }
            // A call first seen as an update is started all the same: no client shows an end
            // without its start.
            Some("tool_call" | "tool_call_update") => {
                if let Some(id) = update.get("toolCallId").and_then(Value::as_str) {
                    self.start_call(id, update);
                    match update.get("status").and_then(Value::as_str) {
                        Some("completed") => self.complete(id, ToolStatus::Ok, update),
                        Some("failed") => self.complete(id, ToolStatus::Error, update),
                        _ => {}
                    }
                }
            }
            Some("usage_update") => self.cost_update(update, cancel),
            _ => {}
        }
    }

    /// Announces the agent's call `id`, once.
    fn start_call(&mut self, id: &str, update: &Value) {
        if self.calls.contains_key(id) {
            return;
        }
        let call_id = self.call_id(id);
        let arguments = match update.get("rawInput") {
            Some(input @ Value::Object(_)) => input.clone(),
            _ => json!({"title": update.get("title").cloned().unwrap_or(Value::Null)}),
        };
        self.host.publish(EventKind::ToolCallStarted {
            item_id: format!("tool_{call_id}"),
            call_id: call_id.clone(),
            name: tool_name(self.name, update.get("kind").and_then(Value::as_str)),
            arguments,
        });
        self.calls.insert(
            id.to_owned(),
            OpenCall {
                call_id,
                started: Instant::now(),
            },
        );
    }

    fn complete(&mut self, id: &str, status: ToolStatus, update: &Value) {
        let Some(open) = self.calls.remove(id) else {
            return;
        };
        self.host.publish(EventKind::ToolCallCompleted {
            call_id: open.call_id,
            status,
            output: call_output(update),
            duration_ms: u64::try_from(open.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            diff: None,
        });
    }

    /// Calls the agent never finished end as errors, so no client shows them running.
    fn finish_open_calls(&mut self) {
        let open: Vec<String> = self.calls.keys().cloned().collect();
        let update = json!({"content": [{"type": "content", "content": {
            "type": "text", "text": "the agent ended without finishing this call"}}]});
        for id in open {
            self.complete(&id, ToolStatus::Error, &update);
        }
    }

    /// `usage_update`: its `cost` is the agent session's total so far; the growth counts.
    fn cost_update(&mut self, update: &Value, cancel: &CancellationToken) {
        let Some(cost) = update.get("cost") else {
            return;
        };
        let usd = cost.get("currency").and_then(Value::as_str) == Some("USD");
        let Some(amount) = cost.get("amount").and_then(Value::as_f64).filter(|_| usd) else {
            return;
        };
        let grown = amount - self.reported_cost;
        if !grown.is_finite() || grown <= 0.0 {
            return;
        }
        self.reported_cost = amount;
        let usage = Usage {
            cost_usd: amber_proto::CostUsd::from_usd(grown),
            ..Usage::default()
        };
        self.charge(&usage, cancel);
    }

    /// The prompt response's `usage` (tokens; the cost came with `usage_update`).
    fn count_prompt_usage(&mut self, result: &Value) {
        let Some(usage) = result.get("usage") else {
            return;
        };
        let tokens = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        let counted = Usage {
            prompt_tokens: tokens("inputTokens"),
            completion_tokens: tokens("outputTokens") + tokens("thoughtTokens"),
            cached_tokens: tokens("cachedReadTokens"),
            cache_write_tokens: tokens("cachedWriteTokens"),
            total_tokens: tokens("totalTokens"),
            cost_usd: None,
        };
        if counted != Usage::default() {
            // The turn is over: a cap it reached stops nothing more.
            let _ = self.host.spent(&counted);
        }
    }

    fn charge(&mut self, usage: &Usage, cancel: &CancellationToken) {
        if let Some(reason) = self.host.spent(usage)
            && self.budget_stop.is_none()
        {
            self.budget_stop = Some(reason);
            cancel.cancel();
        }
    }
}

/// `acp__NAME__KIND` (`other` when the agent names no kind).
fn tool_name(agent: &str, kind: Option<&str>) -> String {
    let kind: String = kind
        .unwrap_or("other")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(24)
        .collect();
    format!("acp__{agent}__{kind}")
}

/// A finished call's text: its text content, else its raw output.
fn call_output(update: &Value) -> String {
    let texts: Vec<&str> = update
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| {
                    item.get("content")
                        .and_then(|c| c.get("text"))
                        .and_then(Value::as_str)
                })
                .collect()
        })
        .unwrap_or_default();
    if !texts.is_empty() {
        return texts.join("\n");
    }
    match update.get("rawOutput") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// What the mode decides without asking: read mode rejects all but reading; yolo allows a
/// sandboxed agent. `None`: a person (or `--yes`, for a sandboxed agent) decides.
fn policy_answer(mode: Mode, unsandboxed: bool, params: &Value) -> Option<PermissionAnswer> {
    let kind = params
        .get("toolCall")
        .and_then(|c| c.get("kind"))
        .and_then(Value::as_str);
    let reads = matches!(kind, Some("read" | "search" | "think" | "fetch"));
    match mode {
        Mode::Read if !reads => Some(PermissionAnswer::Reject),
        Mode::Yolo if !unsandboxed => Some(PermissionAnswer::AllowOnce),
        _ => None,
    }
}

/// The `session/request_permission` result for `answer`, picking the agent's option of the
/// matching kind (the nearest one when it offers no exact match).
fn permission_outcome(answer: PermissionAnswer, options: &Value) -> Value {
    let options: Vec<(&str, &str)> = options
        .as_array()
        .map(|options| {
            options
                .iter()
                .filter_map(|o| {
                    Some((
                        o.get("optionId")?.as_str()?,
                        o.get("kind").and_then(Value::as_str).unwrap_or(""),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let preference: &[&str] = match answer {
        PermissionAnswer::AllowOnce => &["allow_once", "allow_always"],
        PermissionAnswer::AllowAlways => &["allow_always", "allow_once"],
        PermissionAnswer::Reject => &["reject_once", "reject_always"],
        PermissionAnswer::Cancelled => &[],
    };
    let chosen = preference
        .iter()
        .find_map(|kind| options.iter().find(|(_, k)| k == kind).map(|(id, _)| *id));
    match chosen {
        Some(option_id) => json!({"outcome": {"outcome": "selected", "optionId": option_id}}),
        // Nothing fits (or the turn was cancelled): the ask ends unanswered, as ACP's
        // `cancelled` outcome says; an agent treats it as not allowed.
        None => json!({"outcome": {"outcome": "cancelled"}}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Value {
        json!([
            {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
            {"optionId": "ever", "name": "Always", "kind": "allow_always"},
            {"optionId": "no", "name": "Reject", "kind": "reject_once"},
        ])
    }

    #[test]
    fn each_answer_picks_the_agents_option_of_its_kind() {
        let cases = [
            (PermissionAnswer::AllowOnce, json!("yes")),
            (PermissionAnswer::AllowAlways, json!("ever")),
            (PermissionAnswer::Reject, json!("no")),
        ];
        for (answer, want) in cases {
            let outcome = permission_outcome(answer, &options());
            assert_eq!(outcome["outcome"]["outcome"], "selected", "{answer:?}");
            assert_eq!(outcome["outcome"]["optionId"], want, "{answer:?}");
        }
        let cancelled = permission_outcome(PermissionAnswer::Cancelled, &options());
        assert_eq!(cancelled["outcome"]["outcome"], "cancelled");
    }

    #[test]
    fn a_missing_option_kind_falls_back_to_its_nearest_or_cancels() {
        let only_always = json!([{"optionId": "a", "kind": "allow_always"}]);
        let outcome = permission_outcome(PermissionAnswer::AllowOnce, &only_always);
        assert_eq!(outcome["outcome"]["optionId"], "a");
        // No reject option offered: not allowed all the same.
        let outcome = permission_outcome(PermissionAnswer::Reject, &only_always);
        assert_eq!(outcome["outcome"]["outcome"], "cancelled");
    }

    #[test]
    fn the_mode_decides_before_a_person_is_asked() {
        let ask = |kind: &str| json!({"toolCall": {"kind": kind}});
        let cases = [
            (Mode::Read, false, "edit", Some(PermissionAnswer::Reject)),
            (Mode::Read, true, "execute", Some(PermissionAnswer::Reject)),
            (Mode::Read, true, "read", None),
            (Mode::Write, false, "edit", None),
            (
                Mode::Yolo,
                false,
                "execute",
                Some(PermissionAnswer::AllowOnce),
            ),
            // Unsandboxed: even yolo leaves it to a person.
            (Mode::Yolo, true, "execute", None),
        ];
        for (mode, unsandboxed, kind, want) in cases {
            assert_eq!(
                policy_answer(mode, unsandboxed, &ask(kind)),
                want,
                "{mode:?} unsandboxed={unsandboxed} {kind}"
            );
        }
    }

    #[test]
    fn tool_names_carry_the_agent_and_a_clean_kind() {
        assert_eq!(tool_name("claude", Some("edit")), "acp__claude__edit");
        assert_eq!(tool_name("a", None), "acp__a__other");
        assert_eq!(tool_name("a", Some("we ird/kind")), "acp__a__we_ird_kind");
    }

    #[test]
    fn a_calls_output_is_its_text_content_else_its_raw_output() {
        let text = json!({"content": [
            {"type": "content", "content": {"type": "text", "text": "one"}},
            {"type": "diff", "path": "/x", "newText": "y"},
            {"type": "content", "content": {"type": "text", "text": "two"}},
        ]});
        assert_eq!(call_output(&text), "one\ntwo");
        assert_eq!(
            call_output(&json!({"rawOutput": {"code": 0}})),
            r#"{"code":0}"#
        );
        assert_eq!(call_output(&json!({})), "");
    }
}
