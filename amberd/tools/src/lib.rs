//! The Tool port and the built-in tools (`read`, `write`, `edit`, `apply_patch`, `bash`, …).
//!
//! A [`Tool`] is an object-safe async trait; the [`ToolRegistry`] holds them by
//! name, and [`dispatch`] runs one assistant turn's tool calls through
//! validation, duplicate check, mode policy and parallel execution.

pub mod apply_patch;
mod args;
pub mod atomic_write;
pub mod bash;
pub mod deferred;
pub mod diff;
pub mod dispatch;
pub(crate) mod edit;
pub mod egress;
pub mod fetch;
pub mod gate;
pub mod git_guard;
pub mod host;
pub mod process;
pub(crate) mod read;
pub mod sandbox;
pub mod search;
pub mod session;
pub mod skills;
pub mod task;
pub(crate) mod task_background;
pub(crate) mod todowrite;
pub(crate) mod truncate;
pub mod watch;
pub(crate) mod write;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use amber_policy::{PathError, confine};
use amber_proto::ToolStatus;
use futures::future::BoxFuture;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

pub use args::ArgError;
pub use dispatch::{DispatchEvent, DispatchRequest, DispatchResult, DispatchSink, dispatch};
pub use host::{LocalToolHost, ToolHost};
pub use session::SessionTools;

/// Limits applied to every tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// Outputs longer than this reach the model truncated (head and tail kept).
    pub max_output_bytes: usize,
    /// `bash` timeout when the call gives no `timeout_ms`.
    pub bash_default_timeout: Duration,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            max_output_bytes: 30_000,
            bash_default_timeout: Duration::from_secs(120),
        }
    }
}

/// Live output of a running call (bash chunks), forwarded to clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    pub call_id: String,
    pub chunk: String,
}

/// Everything a tool may use while it runs.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Canonical absolute workspace root; every path is confined to it.
    pub workspace: PathBuf,
    pub call_id: String,
    /// Cancelled when the session cancels the turn.
    pub cancel: CancellationToken,
    /// Where live output goes, if anyone listens.
    pub output: Option<UnboundedSender<OutputChunk>>,
    pub limits: ToolLimits,
    /// The session's tool state (todos, processes).
    pub session: Arc<SessionTools>,
    /// The leave an approval (or a stored rule) gave this call to run without the OS
    /// sandbox (`bash`/`process` with `sandbox: false`, or any command while the sandbox is
    /// unavailable). Set by dispatch only, from the gate's verdict.
    pub unsandboxed: Option<sandbox::Unsandboxed>,
}

impl ToolContext {
    /// A context with a fresh cancel token, no output listener and default limits.
    pub fn new(workspace: impl Into<PathBuf>, call_id: impl Into<String>) -> Self {
        Self {
            workspace: workspace.into(),
            call_id: call_id.into(),
            cancel: CancellationToken::new(),
            output: None,
            limits: ToolLimits::default(),
            session: Arc::new(SessionTools::detached()),
            unsandboxed: None,
        }
    }

    /// Confine a path argument to the workspace.
    pub fn resolve(&self, input: &str) -> Result<PathBuf, PathError> {
        confine(&self.workspace, input)
    }

    /// How a confined path is shown to the model: relative to the workspace.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.workspace) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// Send a live output chunk to the listener, if any.
    pub fn emit(&self, chunk: impl Into<String>) {
        if let Some(output) = &self.output {
            // A gone listener is not the tool's problem.
            let _ = output.send(OutputChunk {
                call_id: self.call_id.clone(),
                chunk: chunk.into(),
            });
        }
    }
}

/// The result of one tool call as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub status: ToolStatus,
    pub output: String,
    /// For clients only (`tool_call_completed.diff`), never the model: the unified diff
    /// of the files the call changed.
    pub diff: Option<String>,
}

impl ToolOutcome {
    pub fn ok(output: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Ok,
            output: output.into(),
            diff: None,
        }
    }

    pub fn error(output: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Error,
            output: output.into(),
            diff: None,
        }
    }

    pub fn denied(output: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Denied,
            output: output.into(),
            diff: None,
        }
    }

    /// This outcome with the unified diff of what the call changed.
    pub fn with_diff(mut self, diff: String) -> Self {
        self.diff = Some(diff);
        self
    }
}

impl From<PathError> for ToolOutcome {
    fn from(err: PathError) -> Self {
        Self::error(err.to_string())
    }
}

impl From<ArgError> for ToolOutcome {
    fn from(err: ArgError) -> Self {
        Self::error(err.to_string())
    }
}

/// A tool the model can call. Object safe: registries hold `Arc<dyn Tool>`.
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments object.
    fn input_schema(&self) -> serde_json::Value;
    /// Read-only tools run in read mode and concurrently with anything.
    fn read_only(&self) -> bool;
    /// The tool says it may destroy data (MCP `destructiveHint`): write mode asks first.
    fn destructive(&self) -> bool {
        false
    }
    /// The workspace paths a call writes, as given, so that dispatch runs the calls that
    /// write one file in order. By default a writing tool's `path` argument.
    fn written_paths(&self, args: &serde_json::Value) -> Vec<String> {
        if self.read_only() {
            return Vec::new();
        }
        args.get("path")
            .and_then(serde_json::Value::as_str)
            .map(|path| vec![path.to_owned()])
            .unwrap_or_default()
    }
    /// Whether the call may change files in the workspace, so the turn takes its
    /// checkpoint before it runs. By default: any tool that is not read-only.
    fn may_change_files(&self, _args: &serde_json::Value) -> bool {
        !self.read_only()
    }
    /// Whether the call acts on the workspace's files or runs its commands, so that it runs
    /// where the workspace is (the session's [`ToolHost`]). By default no: a tool runs in
    /// amberd (todos, sub-agents, MCP and plugin tools, `fetch`).
    fn runs_in_workspace(&self) -> bool {
        false
    }
    /// The group a tool may be deferred with (an MCP tool's server): when the session
    /// defers tools, the model gets its schema only once `tool_search` loaded it
    /// (`deferred.rs`). `None`, the default: always offered.
    fn defer_group(&self) -> Option<&str> {
        None
    }
    /// Run the call. Failures are outcomes (`error`), never panics.
    fn call<'a>(
        &'a self,
        args: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutcome>;
}

/// Where the `skills` tool finds skills besides the workspace's own.
#[derive(Debug, Clone, Default)]
pub struct SkillDirs {
    /// The daemon's data dir: the skills compaction extracted live under it.
    pub data_dir: Option<PathBuf>,
    /// The user's skills folder.
    pub user_dir: Option<PathBuf>,
}

/// The built-in tools of PROTOCOL.md, in the order the model sees them.
pub fn builtin_tools(dirs: SkillDirs) -> Vec<Arc<dyn Tool>> {
    let skills = skills::SkillsTool::with_user_dir(dirs.user_dir);
    let skills = match dirs.data_dir {
        Some(dir) => skills.with_data_dir(dir),
        None => skills,
    };
    vec![
        Arc::new(read::ReadTool),
        Arc::new(write::WriteTool),
        Arc::new(edit::EditTool),
        Arc::new(bash::BashTool),
        Arc::new(process::ProcessTool),
        Arc::new(todowrite::TodoWriteTool),
        Arc::new(skills),
        Arc::new(task::TaskTool),
        Arc::new(task_background::TaskStatusTool),
        Arc::new(task_background::TaskWaitTool),
        Arc::new(task_background::TaskCancelTool),
        Arc::new(search::SearchTool::new()),
        Arc::new(apply_patch::ApplyPatchTool),
    ]
}

/// Tools by name, in registration order. Cheap to clone.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    /// Tools taken out for one turn (an agent's allow-list), with the reason dispatch gives
    /// for denying a call to one.
    withheld: Vec<(String, String)>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry of the built-in tools (tests; the daemon gets them from the plugins).
    pub fn builtin() -> Self {
        let mut registry = Self::new();
        for tool in builtin_tools(SkillDirs::default()) {
            registry.register(tool);
        }
        registry
    }

    /// Add a tool; a tool of the same name is replaced and returned.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Option<Arc<dyn Tool>> {
        match self.tools.iter_mut().find(|t| t.name() == tool.name()) {
            Some(slot) => Some(std::mem::replace(slot, tool)),
            None => {
                self.tools.push(tool);
                None
            }
        }
    }

    /// Remove a tool by name.
    pub fn remove(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        let index = self.tools.iter().position(|t| t.name() == name)?;
        Some(self.tools.remove(index))
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Takes `name` out: it is not offered, and a call to it is denied with `reason`.
    pub fn withhold(&mut self, name: &str, reason: String) {
        if self.remove(name).is_some() {
            self.withheld.push((name.to_owned(), reason));
        }
    }

    /// Why a call to `name` is refused, when it was withheld.
    pub fn withheld(&self, name: &str) -> Option<&str> {
        self.withheld
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, reason)| reason.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// `(name, description, input schema)` of every tool, for the LLM request.
    pub fn specs(&self) -> Vec<(String, String, serde_json::Value)> {
        self.tools
            .iter()
            .map(|t| {
                (
                    t.name().to_owned(),
                    t.description().to_owned(),
                    t.input_schema(),
                )
            })
            .collect()
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}
