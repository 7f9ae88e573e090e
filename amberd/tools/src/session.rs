//! Per-session state that tools may use: the todo list and the background processes.
//!
//! The session owns one `SessionTools`; tool calls reach it through `ToolContext::session`.
//! Changes that clients must see are reported through the `notify` callback the session
//! installs (it publishes them as session events).

use amber_proto::sync::Locked;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use amber_proto::{EventKind, Todo};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::host::ToolHost;
use super::process::ProcessTable;
use super::sandbox::ToolSandbox;
use amber_exec::env_policy::ToolEnv;

/// One sub-agent task of a `task` call.
#[derive(Debug, Clone, PartialEq)]
pub struct SubTask {
    pub prompt: String,
    pub description: Option<String>,
    /// The custom agent to run it as (its prompt, tools, mode ceiling, iteration cap).
    pub agent: Option<String>,
    /// The caps the call asked for; the session bounds them by its configured ones.
    pub caps: TaskCaps,
}

/// Caps a `task` call asks for one sub-agent (`max_tokens`, `max_requests`,
/// `max_seconds`, `max_usd`); unset: the configured default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TaskCaps {
    pub max_tokens: Option<u64>,
    pub max_requests: Option<u64>,
    pub max_seconds: Option<u64>,
    pub max_usd: Option<f64>,
}

impl TaskCaps {
    /// Each of `self`'s caps, else `fallback`'s.
    pub fn or(self, fallback: TaskCaps) -> TaskCaps {
        TaskCaps {
            max_tokens: self.max_tokens.or(fallback.max_tokens),
            max_requests: self.max_requests.or(fallback.max_requests),
            max_seconds: self.max_seconds.or(fallback.max_seconds),
            max_usd: self.max_usd.or(fallback.max_usd),
        }
    }
}

/// What a sub-agent came back with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubResult {
    /// It finished normally (`end_turn`).
    pub ok: bool,
    /// Its final reply, or why it stopped.
    pub text: String,
}

/// Runs sub-agents for the `task` tool; the session installs one.
pub trait SubagentRunner: Send + Sync {
    /// The most `tasks` may spend, said for the model (`estimated at most $0.40 for 4
    /// sub-agents`), when the session can tell. None by default.
    fn estimate(&self, _tasks: &[SubTask]) -> Option<String> {
        None
    }

    /// Runs `tasks` (concurrently when `parallel`), results in task order. `Err`: none ran
    /// (an agent a task names cannot be used), and why.
    fn run<'a>(
        &'a self,
        tasks: Vec<SubTask>,
        parallel: bool,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Vec<SubResult>, String>>;
}

/// Tools only a session's own turns get: a sub-agent, or a background one, gets none
/// of them (no sub-agent starts another).
pub const PARENT_ONLY_TOOLS: &[&str] = &["task", "task_status", "task_wait", "task_cancel"];

/// A background sub-agent, as its parent sees it (`task_status`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildStatus {
    pub agent_id: String,
    pub session_id: String,
    pub task: String,
    /// `queued`, `running`, `done` (its result is on its way) or `delivered`.
    pub state: String,
    /// How it stopped, once it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    pub tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl ChildStatus {
    /// Whether its result reached (or is about to reach) the parent.
    pub fn finished(&self) -> bool {
        matches!(self.state.as_str(), "done" | "delivered")
    }
}

/// A session's background sub-agents (`task {background: true}`, `task_status`,
/// `task_wait`, `task_cancel`); the session installs one.
pub trait BackgroundAgents: Send + Sync {
    /// Starts each task as a child session; their statuses in task order. `Err`: none
    /// started, and why.
    fn spawn<'a>(
        &'a self,
        tasks: Vec<SubTask>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Vec<ChildStatus>, String>>;
    /// Every child of the session, oldest first.
    fn status(&self) -> Vec<ChildStatus>;
    /// Cancels a child's task (a queued one never starts); its status.
    fn cancel(&self, agent_id: &str) -> Result<ChildStatus, String>;
}

/// The session's path deny rules, for tools that reveal files without naming them
/// (`search` with no path, or a folder): the session installs one.
pub trait DeniedPaths: Send + Sync {
    /// Whether a deny rule hides this workspace-relative path from `tool`.
    fn denied(&self, tool: &str, relative: &str) -> bool;
}

/// How an MCP server's requests reach the person while one of its tools runs (the session
/// installs one; without it every request gets the safe answer: declined).
pub trait ServerAsks: Send + Sync {
    /// An elicitation: `message` and the form's flat JSON Schema; what the person answered.
    fn elicit<'a>(
        &'a self,
        call_id: &'a str,
        server: &'a str,
        message: &'a str,
        schema: &'a serde_json::Value,
    ) -> futures::future::BoxFuture<'a, Elicited>;
    /// Sampling: the model answers the server's messages, once the person allowed it.
    fn sample<'a>(
        &'a self,
        call_id: &'a str,
        server: &'a str,
        request: SampleRequest,
    ) -> futures::future::BoxFuture<'a, Result<Sampled, String>>;
}

/// The person's answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited {
    Accept(serde_json::Value),
    Decline,
    Cancel,
}

/// What a server asks the model (text only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRequest {
    pub system: Option<String>,
    /// `(role, text)`: `user` or `assistant`.
    pub messages: Vec<(String, String)>,
    pub max_tokens: u32,
}

/// The model's answer to a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampled {
    pub text: String,
    pub model: String,
    /// `endTurn` or `maxTokens`.
    pub stop_reason: String,
}

type Notify = Box<dyn Fn(EventKind) + Send + Sync>;

/// Session-scoped tool state.
pub struct SessionTools {
    todos: Mutex<Vec<Todo>>,
    /// Background processes (`process` tool); killed on [`SessionTools::shutdown`] or drop.
    pub processes: ProcessTable,
    notify: Notify,
    subagents: OnceLock<Arc<dyn SubagentRunner>>,
    background: OnceLock<Arc<dyn BackgroundAgents>>,
    denied_paths: OnceLock<Arc<dyn DeniedPaths>>,
    server_asks: OnceLock<Arc<dyn ServerAsks>>,
    /// The proxy of its allowlist sandbox's commands, when the session installed it.
    egress: OnceLock<Arc<dyn crate::egress::EgressService>>,
    /// The owning session's id, for the records of spawned process groups (`reaper`).
    session_id: OnceLock<String>,
    /// The environment of its tool processes (`env_policy`); the default policy until set.
    tool_env: OnceLock<Arc<ToolEnv>>,
    /// The sandbox its commands start in; changes with the session's mode.
    sandbox: Mutex<ToolSandbox>,
    /// Where its workspace tools run; this process until set.
    host: OnceLock<Arc<dyn ToolHost>>,
    /// Where the workspace's configuration (skills) is read when the workspace is
    /// elsewhere: amberd's mirror of it; the workspace itself until set.
    config_root: OnceLock<std::path::PathBuf>,
    /// The deferred tools this session's model has loaded (`tool_search`).
    pub loaded_tools: crate::deferred::LoadedTools,
}

impl std::fmt::Debug for SessionTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTools")
            .field("todos", &self.lock_todos().len())
            .field("processes", &self.processes)
            .finish_non_exhaustive()
    }
}

impl SessionTools {
    pub fn new(notify: impl Fn(EventKind) + Send + Sync + 'static) -> Self {
        Self {
            todos: Mutex::new(Vec::new()),
            processes: ProcessTable::new(),
            notify: Box::new(notify),
            subagents: OnceLock::new(),
            background: OnceLock::new(),
            denied_paths: OnceLock::new(),
            server_asks: OnceLock::new(),
            egress: OnceLock::new(),
            session_id: OnceLock::new(),
            tool_env: OnceLock::new(),
            sandbox: Mutex::new(ToolSandbox::Off),
            host: OnceLock::new(),
            config_root: OnceLock::new(),
            loaded_tools: crate::deferred::LoadedTools::default(),
        }
    }

    /// Installs where the session's workspace tools run (once; later calls are ignored).
    pub fn set_host(&self, host: Arc<dyn ToolHost>) {
        let _ = self.host.set(host);
    }

    /// Where the session's workspace tools run, when not in this process.
    pub fn host(&self) -> Option<&Arc<dyn ToolHost>> {
        self.host.get()
    }

    /// Background processes of the session still running, here or where its tools run.
    pub fn processes_running(&self) -> usize {
        self.processes.running() + self.host().map_or(0, |h| h.processes_running())
    }

    /// Sets the sandbox of the session's next commands (at creation, restore and every
    /// mode change).
    pub fn set_sandbox(&self, sandbox: ToolSandbox) {
        *self.sandbox.locked() = sandbox;
    }

    /// The sandbox of the session's next command.
    pub fn sandbox(&self) -> ToolSandbox {
        self.sandbox.locked().clone()
    }

    /// Installs the environment of this session's tool processes (once; later calls are
    /// ignored).
    pub fn set_tool_env(&self, env: Arc<ToolEnv>) {
        let _ = self.tool_env.set(env);
    }

    /// The environment of this session's tool processes: the installed one, else the
    /// default policy over the daemon's environment (never the raw environment).
    pub fn tool_env(&self) -> Arc<ToolEnv> {
        self.tool_env
            .get()
            .cloned()
            .unwrap_or_else(ToolEnv::process_default)
    }

    /// Installs the sub-agent runner (once; later calls are ignored).
    pub fn set_subagents(&self, runner: Arc<dyn SubagentRunner>) {
        let _ = self.subagents.set(runner);
    }

    /// Names the owning session (once; later calls are ignored).
    pub fn set_session_id(&self, id: &str) {
        let _ = self.session_id.set(id.to_owned());
    }

    /// The owning session's id; empty when detached.
    pub fn session_id(&self) -> &str {
        self.session_id.get().map_or("", String::as_str)
    }

    /// Names where the workspace's configuration is read (once; later calls are ignored).
    pub fn set_config_root(&self, root: &std::path::Path) {
        let _ = self.config_root.set(root.to_path_buf());
    }

    /// Where the workspace's configuration is read, if not in the workspace.
    pub fn config_root(&self) -> Option<&std::path::Path> {
        self.config_root.get().map(std::path::PathBuf::as_path)
    }

    /// Installs the session's path deny rules (once; later calls are ignored).
    pub fn set_denied_paths(&self, rules: Arc<dyn DeniedPaths>) {
        let _ = self.denied_paths.set(rules);
    }

    /// Installs how MCP servers' requests reach the person (once; later calls are ignored).
    pub fn set_server_asks(&self, asks: Arc<dyn ServerAsks>) {
        let _ = self.server_asks.set(asks);
    }

    pub fn set_egress(&self, service: Arc<dyn crate::egress::EgressService>) {
        let _ = self.egress.set(service);
    }

    /// The proxy of its allowlist sandbox's commands, when the session installed it.
    pub fn egress(&self) -> Option<Arc<dyn crate::egress::EgressService>> {
        self.egress.get().cloned()
    }

    /// How MCP servers' requests reach the person, when the session installed it.
    pub fn server_asks(&self) -> Option<Arc<dyn ServerAsks>> {
        self.server_asks.get().cloned()
    }

    /// Whether a deny rule of the session hides `relative` from `tool` (never, without
    /// installed rules).
    pub fn path_denied(&self, tool: &str, relative: &str) -> bool {
        self.denied_paths
            .get()
            .is_some_and(|rules| rules.denied(tool, relative))
    }

    /// Installs the background sub-agents (once; later calls are ignored).
    pub fn set_background(&self, agents: Arc<dyn BackgroundAgents>) {
        let _ = self.background.set(agents);
    }

    /// The background sub-agents, if this session may have them.
    pub fn background(&self) -> Option<&Arc<dyn BackgroundAgents>> {
        self.background.get()
    }

    /// The sub-agent runner, if this session has one.
    pub fn subagents(&self) -> Option<&Arc<dyn SubagentRunner>> {
        self.subagents.get()
    }

    /// State that reports to nobody (tests, in-process use).
    pub fn detached() -> Self {
        Self::new(|_| {})
    }

    fn lock_todos(&self) -> MutexGuard<'_, Vec<Todo>> {
        self.todos.locked()
    }

    pub fn todos(&self) -> Vec<Todo> {
        self.lock_todos().clone()
    }

    /// Puts back the list a restored session had, without reporting it again.
    pub fn restore_todos(&self, todos: Vec<Todo>) {
        *self.lock_todos() = todos;
    }

    /// Replaces the todo list and reports `todo_updated`.
    pub fn set_todos(&self, todos: Vec<Todo>) {
        *self.lock_todos() = todos.clone();
        (self.notify)(EventKind::TodoUpdated { todos });
    }

    /// Ends the session's tool state: terminates every background process
    /// (SIGTERM, then SIGKILL after a short grace, done by each process's
    /// supervisor task) and refuses new ones. Does not block. Call it when
    /// the session is deleted or the daemon stops; dropping does the same.
    pub fn shutdown(&self) {
        self.processes.shutdown();
    }

    /// [`SessionTools::shutdown`], then wait (at most the SIGTERM grace plus a
    /// little) until every process has been reaped. For a graceful daemon stop.
    pub async fn shutdown_and_wait(&self) {
        self.shutdown();
        let limit = super::process::KILL_GRACE + std::time::Duration::from_secs(1);
        if !self.processes.wait_all(limit).await {
            tracing::warn!("session processes not all reaped after shutdown");
        }
    }
}
