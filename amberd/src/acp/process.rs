//! One external ACP agent process and the JSON-RPC 2.0 connection on its stdio (one message
//! per line): requests both ways, notifications both ways, answers matched by id.
//!
//! **Invariants:** the process runs in its own process group, in the sandbox its table names
//! (else unsandboxed, the user's configuration), with the tool environment (provider keys
//! removed) plus its own `env`; what it writes is handled in its order (a notification is
//! queued before a later answer is handed over); its stdout is read under the flood limits of
//! [`crate::child_lines`]; when the connection ends (end of output, a flood, the process
//! exiting) every request still waiting is answered with the reason; dropping the
//! [`AgentProcess`] kills the whole group, and the supervisor task reaps the child.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use amber_exec::child::{ChildInput, ChildSpec, Unsandboxed};
use amber_exec::containment::SpawnSandbox;
use amber_exec::sandbox_env::SandboxEnv;
use amber_proto::sync::Locked;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStderr, ChildStdin};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::config::AcpAgentConfig;
use crate::child_lines::LineReader;

/// Messages from the agent waiting for the run loop; a fuller queue stops the reading.
const INCOMING_QUEUE: usize = 64;
/// Longest stderr line kept for an exit's explanation.
const MAX_STDERR_LINE: usize = 500;

/// A request or notification the agent sent.
#[derive(Debug)]
pub(crate) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
}

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CallError {
    /// The agent answered with a JSON-RPC error.
    #[error("{message} ({code})")]
    Rpc { code: i64, message: String },
    /// The connection ended first.
    #[error("{0}")]
    Closed(String),
}

type Waiters = HashMap<u64, oneshot::Sender<Result<Value, CallError>>>;

/// The connection's state shared by the reader, the writer and callers.
struct Shared {
    outbox: mpsc::UnboundedSender<String>,
    waiting: Mutex<Waiters>,
    next_id: AtomicU64,
    /// Why the connection ended, once it has.
    ended: Mutex<Option<String>>,
    closed: CancellationToken,
    /// The last line the agent wrote to stderr.
    last_stderr: Mutex<Option<String>>,
}

impl Shared {
    /// Ends the connection once: the first reason stands, and every waiting request gets it.
    fn end(&self, reason: String) {
        {
            let mut ended = self.ended.locked();
            if ended.is_some() {
                return;
            }
            let reason = match self.last_stderr.locked().as_deref() {
                Some(line) => format!("{reason}; last stderr line: {line}"),
                None => reason,
            };
            *ended = Some(reason);
        }
        self.closed.cancel();
        let reason = self.reason();
        for (_, waiter) in self.waiting.locked().drain() {
            let _ = waiter.send(Err(CallError::Closed(reason.clone())));
        }
    }

    fn reason(&self) -> String {
        self.ended
            .locked()
            .clone()
            .unwrap_or_else(|| "the connection ended".to_owned())
    }

    fn send(&self, message: &Value) {
        // A closed writer means the connection ended; `end` has said so already.
        let _ = self.outbox.send(message.to_string());
    }
}

/// A running agent and its connection.
pub(crate) struct AgentProcess {
    shared: Arc<Shared>,
    pgid: Option<i32>,
}

impl AgentProcess {
    /// Starts `config`'s command in `workspace`: the process, and what it sends, in order.
    /// `Err` is one line naming the command.
    pub(crate) fn spawn(
        name: &str,
        config: &AcpAgentConfig,
        sandbox: &SandboxEnv,
        workspace: &Path,
    ) -> Result<(Self, mpsc::Receiver<Incoming>), String> {
        let command = &config.command;
        let contained = match config.sandbox() {
            Some(info) => Some(
                sandbox
                    .extension_spec("acp", name, info, workspace)
                    .map_err(|e| format!("cannot start `{command}` sandboxed: {e}"))?,
            ),
            None => None,
        };
        let contained = match &contained {
            Some(spec) => SpawnSandbox::Sandboxed(spec),
            None => SpawnSandbox::Unsandboxed(Unsandboxed::configured_by_user()),
        };
        // Provider keys stay with amberd: the tool environment policy, then the agent's
        // own `env`. Its own process group: killing the group stops what it started too.
        let mut cmd = ChildSpec::new(command, contained)
            .args(&config.args)
            .envs(sandbox.extension_vars(&config.env))
            .stdin(ChildInput::Piped)
            .cwd(workspace)
            .tokio_command()
            .map_err(|e| format!("cannot start `{command}`: {e}"))?;
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start `{command}`: {e}"))?;
        let pgid = child.id().and_then(|id| i32::try_from(id).ok());
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            sweep(pgid);
            return Err(format!("`{command}` started without stdio pipes"));
        };
        let (outbox, outgoing) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            outbox,
            waiting: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            ended: Mutex::new(None),
            closed: CancellationToken::new(),
            last_stderr: Mutex::new(None),
        });
        let (incoming_tx, incoming) = mpsc::channel(INCOMING_QUEUE);
        tokio::spawn(write_loop(stdin, outgoing, shared.closed.clone()));
        let stderr_done = tokio::spawn(drain_stderr(name.to_owned(), stderr, shared.clone()));
        let reader = shared.clone();
        let agent = name.to_owned();
        tokio::spawn(async move {
            let reason = read_loop(&agent, stdout, &reader, incoming_tx).await;
            // The exit status says more than "end of output": wait for it briefly.
            let status = tokio::time::timeout(std::time::Duration::from_secs(2), child.wait());
            let reason = match status.await {
                Ok(Ok(status)) => {
                    // Its last words, if it wrote any before going.
                    let _ =
                        tokio::time::timeout(std::time::Duration::from_millis(200), stderr_done)
                            .await;
                    format!("{reason} ({status})")
                }
                _ => reason,
            };
            reader.end(reason);
            // Reaped, whatever happens: killed by the owner's drop or exiting on its own.
            let _ = child.wait().await;
        });
        Ok((Self { shared, pgid }, incoming))
    }

    /// Sends a request and waits for its answer (or the connection's end).
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.shared.waiting.locked().insert(id, tx);
        // Registered first: an end that comes now still answers it.
        if self.shared.closed.is_cancelled() {
            self.shared.waiting.locked().remove(&id);
            return Err(CallError::Closed(self.shared.reason()));
        }
        self.shared.send(&json!({
            "jsonrpc": "2.0", "id": id, "method": method, "params": params,
        }));
        rx.await
            .unwrap_or_else(|_| Err(CallError::Closed(self.shared.reason())))
    }

    pub(crate) fn notify(&self, method: &str, params: Value) {
        self.shared.send(&json!({
            "jsonrpc": "2.0", "method": method, "params": params,
        }));
    }

    /// Answers the agent's request `id`.
    pub(crate) fn respond(&self, id: Value, answer: Result<Value, (i64, String)>) {
        let message = match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => json!({
                "jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message},
            }),
        };
        self.shared.send(&message);
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.shared.end("stopped by amber".to_owned());
        sweep(self.pgid);
    }
}

/// Kills the agent's whole process group.
fn sweep(pgid: Option<i32>) {
    if let Some(pgid) = pgid.filter(|p| *p > 1) {
        // SAFETY: killpg only sends a signal. The group is the one spawn created for the
        // agent (its own process group), never ours; ESRCH (already gone) is expected.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

async fn write_loop(
    mut stdin: ChildStdin,
    mut outgoing: mpsc::UnboundedReceiver<String>,
    closed: CancellationToken,
) {
    loop {
        let line = tokio::select! {
            line = outgoing.recv() => line,
            () = closed.cancelled() => None,
        };
        let Some(mut line) = line else { return };
        line.push('\n');
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}

/// Reads the agent's messages until its output ends; the reason it ended.
async fn read_loop(
    agent: &str,
    stdout: tokio::process::ChildStdout,
    shared: &Shared,
    incoming: mpsc::Sender<Incoming>,
) -> String {
    let mut lines = LineReader::new(stdout);
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => return "the agent closed its output".to_owned(),
            Err(e) => return format!("the agent {e}"),
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            tracing::debug!(agent, "ACP agent wrote a line that is not JSON; ignored");
            continue;
        };
        let method = message.get("method").and_then(Value::as_str);
        let item = match (method, message.get("id")) {
            (Some(method), Some(id)) if !id.is_null() => Incoming::Request {
                id: id.clone(),
                method: method.to_owned(),
                params: message.get("params").cloned().unwrap_or(Value::Null),
            },
            (Some(method), _) => Incoming::Notification {
                method: method.to_owned(),
                params: message.get("params").cloned().unwrap_or(Value::Null),
            },
            (None, Some(id)) => {
                answer(shared, id, &message);
                continue;
            }
            (None, None) => {
                tracing::debug!(
                    agent,
                    "ACP agent wrote a message with neither method nor id"
                );
                continue;
            }
        };
        if incoming.send(item).await.is_err() {
            return "stopped by amber".to_owned();
        }
    }
}

/// Hands an answer to the request waiting for it; an answer nobody waits for is dropped.
fn answer(shared: &Shared, id: &Value, message: &Value) {
    let Some(id) = id.as_u64() else { return };
    let Some(waiter) = shared.waiting.locked().remove(&id) else {
        return;
    };
    let result = match message.get("error") {
        Some(error) => Err(CallError::Rpc {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("error without a message")
                .to_owned(),
        }),
        None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
    };
    let _ = waiter.send(result);
}

/// Logs the agent's stderr (target `amberd::acp::stderr`) and keeps its last line.
async fn drain_stderr(agent: String, mut pipe: ChildStderr, shared: Arc<Shared>) {
    let mut buf = Vec::with_capacity(8 * 1024);
    let mut chunk = [0u8; 8 * 1024];
    loop {
        let n = match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => 0,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        while let Some(at) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=at).collect();
            keep_stderr_line(&agent, &shared, &line);
        }
        if n == 0 {
            keep_stderr_line(&agent, &shared, &buf);
            return;
        }
        if buf.len() > 64 * 1024 {
            keep_stderr_line(&agent, &shared, &buf);
            buf.clear();
        }
    }
}

fn keep_stderr_line(agent: &str, shared: &Shared, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    let text: String = text.chars().take(MAX_STDERR_LINE).collect();
    tracing::debug!(target: "amberd::acp::stderr", agent, "{text}");
    *shared.last_stderr.locked() = Some(text);
}
