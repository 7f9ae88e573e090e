//! One run of an external plugin: the child process (its own process group), the writer
//! task feeding its stdin, the supervisor task reading its stdout and waiting for its exit,
//! the stderr drain, and the table of requests waiting for an answer.
//!
//! **Invariants:** a connection dies once, with the first reason; when it dies every
//! pending request is answered with that reason, the process group is killed, and the
//! child is reaped by the supervisor. A death is reported to the runtime only after the
//! handshake (the connection is "armed") and never while we are closing it ourselves.

use amber_exec::child::{ChildInput, ChildSpec, Unsandboxed};
use amber_exec::containment::SpawnSandbox;
use amber_exec::sandbox_env::SandboxEnv;
use amber_proto::sync::Locked;
use std::collections::HashMap;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::protocol::{self, Incoming, RpcError};
use super::stderr::{self, LastLine};
use crate::child_lines::LineReader;
use crate::plugins::config::ExternalPluginConfig;

/// How long `shutdown` may take (answer and exit) before the group is killed.
pub(super) const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// After stdout closes, how long the process may take to exit before it is killed.
const EOF_GRACE: Duration = Duration::from_secs(1);
/// After the process exits, how long to keep reading what it printed (a grandchild that
/// holds stdout open must not delay the verdict).
const EXIT_GRACE: Duration = Duration::from_millis(200);
/// How long to wait for the last stderr line when describing an exit.
const STDERR_GRACE: Duration = Duration::from_millis(200);
/// After a write to stdin fails, how long to wait for the exit (the better reason).
const WRITE_FAIL_GRACE: Duration = Duration::from_millis(500);
/// Longest preview of a garbage line in the error.
const GARBAGE_PREVIEW: usize = 200;

/// Called once with the reason when an armed connection dies.
pub(super) type OnFailure = Box<dyn FnOnce(String) + Send>;

/// Why a request got no result.
#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum CallError {
    #[error("the plugin answered with an error: {0}")]
    Rpc(RpcError),
    /// The plugin is gone (the reason it died).
    #[error("{0}")]
    Dead(String),
    #[error("no answer within {}", humantime::format_duration(*.0))]
    TimedOut(Duration),
}

type Reply = oneshot::Sender<Result<Value, CallError>>;

#[derive(Default)]
struct State {
    dead: Option<String>,
    pending: HashMap<u64, Reply>,
    on_failure: Option<OnFailure>,
}

enum Out {
    Line(String),
    /// Close stdin (after `shutdown`, so a plugin that reads to EOF exits too).
    Close,
}

struct Shared {
    plugin: String,
    pgid: Option<i32>,
    outbox: mpsc::UnboundedSender<Out>,
    next_id: AtomicU64,
    state: Mutex<State>,
    /// We are stopping it: its exit is expected, not a failure.
    closing: AtomicBool,
    /// Cancelled when it dies: the writer stops, the supervisor kills and reaps.
    stop: CancellationToken,
}

/// A request on its way; await [`Pending::rx`] for the answer.
pub(super) struct Pending {
    pub id: u64,
    pub rx: oneshot::Receiver<Result<Value, CallError>>,
}

/// A running plugin process.
pub(super) struct Connection {
    shared: Arc<Shared>,
    pid: Option<u32>,
    supervisor: Mutex<Option<JoinHandle<()>>>,
}

impl Connection {
    /// Starts the process and its tasks. `Err` is a one-line reason (not found, …).
    pub(super) fn spawn(
        plugin: &str,
        spec: &ExternalPluginConfig,
        sandbox: &SandboxEnv,
    ) -> Result<Self, String> {
        let sandboxed = match spec.sandbox()? {
            // Its workspace is its working directory: its `cwd`, else the daemon's.
            Some(info) => {
                let cwd = match &spec.cwd {
                    Some(cwd) => cwd.clone(),
                    None => {
                        std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?
                    }
                };
                let contained = sandbox
                    .extension_spec("plugin", plugin, info, &cwd)
                    .map_err(|e| format!("cannot start `{}` sandboxed: {e}", spec.command))?;
                Some(contained)
            }
            None => None,
        };
        let contained = match &sandboxed {
            Some(contained) => SpawnSandbox::Sandboxed(contained),
            None => SpawnSandbox::Unsandboxed(Unsandboxed::configured_by_user()),
        };
        // Provider keys stay with amberd: the tool environment policy, then the plugin's
        // own `env`. Its own process group: a terminal's Ctrl-C does not reach it, and
        // killing the group also stops whatever it started.
        let mut child_spec = ChildSpec::new(&spec.command, contained)
            .args(&spec.args)
            .envs(sandbox.extension_vars(&spec.env))
            .stdin(ChildInput::Piped);
        if let Some(cwd) = &spec.cwd {
            child_spec = child_spec.cwd(cwd);
        }
        let mut cmd = child_spec
            .tokio_command()
            .map_err(|e| format!("cannot start `{}`: {e}", spec.command))?;
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| match &spec.cwd {
            // Spawn reports a missing working directory like a missing program.
            Some(cwd) if !cwd.is_dir() => {
                format!(
                    "cannot start `{}`: no directory {}",
                    spec.command,
                    cwd.display()
                )
            }
            _ => format!("cannot start `{}`: {e}", spec.command),
        })?;
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(err_pipe)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("the process has no stdio pipes".to_owned());
        };
        let (outbox, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            plugin: plugin.to_owned(),
            pgid: pid.and_then(|p| i32::try_from(p).ok()),
            outbox,
            next_id: AtomicU64::new(1),
            state: Mutex::new(State::default()),
            closing: AtomicBool::new(false),
            stop: CancellationToken::new(),
        });
        let last = LastLine::default();
        let drain = tokio::spawn(stderr::drain(plugin.to_owned(), err_pipe, last.clone()));
        tokio::spawn(write_loop(shared.clone(), stdin, rx));
        let supervisor = tokio::spawn(supervise(shared.clone(), child, stdout, drain, last));
        tracing::debug!(plugin, pid, command = %spec.command, "plugin process started");
        Ok(Self {
            shared,
            pid,
            supervisor: Mutex::new(Some(supervisor)),
        })
    }

    /// The process id (for tests and logs).
    pub(super) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Why it died, if it did.
    pub(super) fn dead(&self) -> Option<String> {
        self.shared.lock().dead.clone()
    }

    /// From now on a death is reported through `on_failure`. `Err` when it already died
    /// (say, right after answering `initialize`): then there is nothing to arm.
    pub(super) fn arm(&self, on_failure: OnFailure) -> Result<(), String> {
        let mut state = self.shared.lock();
        match &state.dead {
            Some(reason) => Err(reason.clone()),
            None => {
                state.on_failure = Some(on_failure);
                Ok(())
            }
        }
    }

    /// Sends a request; the answer arrives on the returned receiver.
    pub(super) fn send(&self, method: &str, params: Value) -> Result<Pending, CallError> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            // Checked under the same lock `die` drains under, so no request is stranded.
            let mut state = self.shared.lock();
            if let Some(reason) = &state.dead {
                return Err(CallError::Dead(reason.clone()));
            }
            state.pending.insert(id, tx);
        }
        // A closed outbox means it just died; `die` answers the request.
        let _ = self
            .shared
            .outbox
            .send(Out::Line(protocol::request(id, method, params)));
        Ok(Pending { id, rx })
    }

    /// Sends a request and waits up to `timeout` for the answer.
    pub(super) async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let pending = self.send(method, params)?;
        match tokio::time::timeout(timeout, pending.rx).await {
            Ok(answer) => answer.unwrap_or_else(|_| Err(self.gone())),
            Err(_) => {
                self.forget(pending.id);
                Err(CallError::TimedOut(timeout))
            }
        }
    }

    /// The error for a reply channel dropped without an answer.
    pub(super) fn gone(&self) -> CallError {
        CallError::Dead(
            self.dead()
                .unwrap_or_else(|| "the connection closed".to_owned()),
        )
    }

    /// Stops waiting for request `id` (a late answer is then ignored).
    pub(super) fn forget(&self, id: u64) {
        self.shared.lock().pending.remove(&id);
    }

    /// Sends a notification (nothing is answered).
    pub(super) fn notify(&self, method: &str, params: Value) {
        let _ = self
            .shared
            .outbox
            .send(Out::Line(protocol::notification(method, params)));
    }

    /// Declares it dead: answers every pending request, kills the group, reports.
    pub(super) fn die(&self, reason: impl Into<String>) {
        self.shared.die(reason.into());
    }

    /// Shuts it down: `shutdown {}`, then up to [`SHUTDOWN_GRACE`] for the answer and the
    /// exit, then the process group is killed. Returns once the child is reaped (or after
    /// a bounded wait for a process that cannot even be killed). Fine on a dead one.
    pub(super) async fn close(&self) {
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        self.shared.closing.store(true, Ordering::SeqCst);
        if self.dead().is_none() {
            let answer = tokio::time::timeout_at(
                deadline,
                self.request(protocol::SHUTDOWN, json!({}), SHUTDOWN_GRACE),
            )
            .await;
            if !matches!(answer, Ok(Ok(_))) {
                tracing::debug!(plugin = %self.shared.plugin, "no answer to shutdown");
            }
            let _ = self.shared.outbox.send(Out::Close);
        }
        self.reap(deadline).await;
    }

    /// Kills it at once (no `shutdown`): for a process that never finished its handshake.
    pub(super) async fn kill(&self) {
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.die("killed".to_owned());
        self.reap(Instant::now() + SHUTDOWN_GRACE).await;
    }

    /// Waits until `deadline` for the supervisor (the exit), kills the group if it is
    /// still running, and waits for the reaping.
    async fn reap(&self, deadline: Instant) {
        let Some(mut supervisor) = self.take_supervisor() else {
            return;
        };
        if tokio::time::timeout_at(deadline, &mut supervisor)
            .await
            .is_ok()
        {
            return;
        }
        if self.dead().is_none() {
            tracing::info!(plugin = %self.shared.plugin, "plugin did not exit after shutdown; killing it");
        }
        self.shared.die("did not exit after shutdown".to_owned());
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut supervisor)
            .await
            .is_err()
        {
            // Unkillable (uninterruptible sleep): stop waiting; kill_on_drop and tokio's
            // orphan reaping take over.
            tracing::warn!(plugin = %self.shared.plugin, "plugin process could not be reaped");
            supervisor.abort();
        }
    }

    fn take_supervisor(&self) -> Option<JoinHandle<()>> {
        self.supervisor.locked().take()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The last handle is gone without a close: never leave the process behind.
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.die("dropped".to_owned());
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    fn die(&self, reason: String) {
        let (pending, on_failure) = {
            let mut state = self.lock();
            if state.dead.is_some() {
                return;
            }
            state.dead = Some(reason.clone());
            (std::mem::take(&mut state.pending), state.on_failure.take())
        };
        self.stop.cancel();
        sweep(self.pgid, libc::SIGKILL);
        for (_, reply) in pending {
            let _ = reply.send(Err(CallError::Dead(reason.clone())));
        }
        if self.closing.load(Ordering::SeqCst) {
            tracing::debug!(plugin = %self.plugin, %reason, "plugin process stopped");
        } else if let Some(report) = on_failure {
            report(reason);
        } else {
            tracing::debug!(plugin = %self.plugin, %reason, "plugin process died before it was armed");
        }
    }

    /// One line from stdout.
    fn handle(&self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let message = match protocol::parse(line) {
            Ok(message) => message,
            Err(why) => {
                tracing::debug!(plugin = %self.plugin, %why, "not a JSON-RPC message");
                self.die(format!("printed garbage: {}", preview(line)));
                return;
            }
        };
        match message {
            Incoming::Response { id, result } => {
                let reply = id.and_then(|id| self.lock().pending.remove(&id));
                match reply {
                    Some(reply) => {
                        let _ = reply.send(result.map_err(CallError::Rpc));
                    }
                    None => {
                        tracing::debug!(plugin = %self.plugin, ?id, "answer to an unknown or abandoned request ignored");
                    }
                }
            }
            Incoming::Notification { method, params } if method == protocol::LOG => {
                stderr::log(&self.plugin, &params);
            }
            Incoming::Notification { method, .. } => {
                tracing::debug!(plugin = %self.plugin, %method, "notification ignored");
            }
            Incoming::Request { id, method } => {
                let message = format!("the daemon serves no method `{method}`");
                let _ = self.outbox.send(Out::Line(protocol::error_response(
                    id,
                    protocol::METHOD_NOT_FOUND,
                    &message,
                )));
            }
        }
    }
}

/// Writes queued messages to stdin, one flush per message (the plugin reads lines).
async fn write_loop(
    shared: Arc<Shared>,
    mut stdin: ChildStdin,
    mut rx: mpsc::UnboundedReceiver<Out>,
) {
    loop {
        let line = tokio::select! {
            () = shared.stop.cancelled() => return,
            out = rx.recv() => match out {
                Some(Out::Line(line)) => line,
                Some(Out::Close) | None => return,
            },
        };
        let written = tokio::select! {
            () = shared.stop.cancelled() => return,
            r = async {
                stdin.write_all(line.as_bytes()).await?;
                stdin.flush().await
            } => r,
        };
        if let Err(err) = written {
            // Usually it exited; the supervisor then reports the exit status instead.
            tokio::select! {
                () = shared.stop.cancelled() => {}
                () = tokio::time::sleep(WRITE_FAIL_GRACE) => {
                    shared.die(format!("stopped reading its stdin ({err})"));
                }
            }
            return;
        }
    }
}

/// Reads stdout and waits for the exit; on either end (or a stop) kills and reaps.
async fn supervise(
    shared: Arc<Shared>,
    mut child: Child,
    stdout: ChildStdout,
    mut drain: JoinHandle<()>,
    last: LastLine,
) {
    let mut lines = LineReader::new(stdout);
    let mut status: Option<std::io::Result<ExitStatus>> = None;
    let mut eof = false;
    // Set once stdout closed or the process exited: how long to wait for the other.
    let mut deadline: Option<Instant> = None;
    while !(eof && status.is_some()) {
        tokio::select! {
            biased;
            () = shared.stop.cancelled() => break,
            s = child.wait(), if status.is_none() => {
                status = Some(s);
                deadline.get_or_insert(Instant::now() + EXIT_GRACE);
            }
            line = lines.next_line(), if !eof => match line {
                Ok(Some(line)) => shared.handle(&line),
                Ok(None) => {
                    eof = true;
                    deadline.get_or_insert(Instant::now() + EOF_GRACE);
                }
                Err(err) => shared.die(err.to_string()),
            },
            () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => break,
        }
    }
    let already = shared.lock().dead.is_some();
    let reason = match &status {
        // The first reason stands; nothing to describe.
        _ if already => String::new(),
        Some(Ok(status)) => {
            let mut reason = describe_exit(*status);
            // Its last words on stderr usually say why (a traceback, a missing module).
            let _ = tokio::time::timeout(STDERR_GRACE, &mut drain).await;
            if let Some(line) = last.get() {
                reason = format!("{reason}; last stderr line: {line}");
            }
            reason
        }
        Some(Err(err)) => format!("could not be waited for ({err})"),
        None if eof => "closed its stdout".to_owned(),
        None => "stopped".to_owned(),
    };
    shared.die(reason);
    if status.is_none() {
        // `die` sent SIGKILL to the group; reap the leader so no zombie is left.
        let _ = child.wait().await;
    }
}

/// "exited with status N" / "killed by signal N".
pub(super) fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => format!("exited ({status})"),
    }
}

/// The first [`GARBAGE_PREVIEW`] characters of a line, for the error.
fn preview(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let mut chars = text.chars();
    // Control characters (terminal escapes) would garble the error where it is shown.
    let head: String = chars
        .by_ref()
        .take(GARBAGE_PREVIEW)
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// Sends `signal` to the plugin's process group.
fn sweep(pgid: Option<i32>, signal: libc::c_int) {
    if let Some(pgid) = pgid.filter(|p| *p > 1) {
        // SAFETY: killpg only sends a signal. The group is the one spawn created for the
        // plugin (process_group(0)), never ours; ESRCH (already gone) is expected.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
}
