//! Params and results of the v1 methods (PROTOCOL.md "Handshake" and "Methods").

use serde::{Deserialize, Serialize};

use crate::{Approval, Decision, Message, Mode, SessionInfo, Todo, ToolInfo};

/// Name and version of a client or server.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerInfo {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
}

/// What a client can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCapabilities {
    /// The connection answers approval requests.
    #[serde(default)]
    pub approvals: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub protocol_version: u32,
    #[serde(default)]
    pub client_info: PeerInfo,
    #[serde(default)]
    pub capabilities: ClientCapabilities,
}

/// What the daemon offers beyond the v1 baseline.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerCapabilities {
    /// Methods this daemon serves.
    #[serde(default)]
    pub methods: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub protocol_version: u32,
    pub server_info: PeerInfo,
    #[serde(default)]
    pub capabilities: ServerCapabilities,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonStatus {
    pub version: String,
    pub pid: u32,
    pub uptime_ms: u64,
    pub sessions: u64,
    pub connections: u64,
    /// amber: how many of `sessions` are loaded in memory (the rest are only in the store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions_loaded: Option<u64>,
    /// The daemon's default LLM endpoint (PROTOCOL.md's second wave); never the key itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderStatus>,
    /// What the OS sandbox can enforce here (PROTOCOL.md's second wave).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::SandboxStatus>,
    /// Why the config file's last change was not applied (the last good config stays in
    /// force); absent while the file in force is the file on disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_error: Option<String>,
    /// amber: a client started this daemon on demand (autostart), rather than the user or
    /// systemd; such a daemon may be restarted to follow a client's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostarted: Option<bool>,
    /// amber: loaded sessions with a turn running, an approval pending or a background
    /// process alive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<u64>,
    /// amber: the executors the loaded sessions' tools run on, each with its state and how
    /// many sessions use it (absent: every loaded session is local).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environments: Vec<EnvironmentUse>,
    /// amber: where amberd listens for executors that dial in (`[executors] listen`); absent
    /// when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_listener: Option<String>,
    /// amber: the daemon's spend against `[budget]` (`daily_usd`, `monthly_usd`); absent
    /// without one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budget: Vec<BudgetUse>,
}

/// `daemon/status.budget[]`: one daemon-wide cap and what its period has spent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetUse {
    /// `daily` or `monthly` (all sessions), `model` or `pool`.
    pub scope: crate::LimitScope,
    /// The model or the pool, for those scopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The period, in the daemon's local time: `2026-12-07` or `2026-12`.
    pub period: String,
    pub spent_usd: crate::CostUsd,
    pub cap_usd: crate::CostUsd,
}

/// `daemon/status.environments[]`: one executor and the loaded sessions on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentUse {
    pub environment: crate::EnvironmentInfo,
    pub sessions: u64,
}

/// `daemon/status.provider`: the default endpoint the daemon's sessions use.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderStatus {
    /// The OpenAI-compatible base URL; absent when no endpoint is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    pub model: String,
    /// Whether an API key was found (in `AMBER_API_KEY` or the provider's key variable).
    pub key_set: bool,
    /// amber extension: the wire dialect (`openai`, a preset's name, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNewParams {
    /// Absolute workspace root (on the environment's machine; may be empty when the
    /// `environment` names the path).
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// amber extension: a provider name from `provider/list` (default: the configured one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// A custom agent from `agent/list` (PROTOCOL.md's second wave): its prompt, tools and
    /// limits for the session; explicit params here override its defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// amber extension: the session's OS sandbox (default: `[sandbox]` of the config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::SandboxRequest>,
    /// Work in a new git worktree of the cwd's repository (PROTOCOL.md's second wave).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<crate::WorktreeRequest>,
    /// MCP servers for this session only (PROTOCOL.md's second wave; the ACP bridge's):
    /// connected in the background like `mcp/add`, offered to its turns alone, kept with
    /// the session (reconnected when it is loaded again) and removed with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<crate::SessionMcpServer>,
    /// amber extension: stop the session's turns once its cost reaches this many US
    /// dollars (`budget_exceeded`); refused (-32602) when the model has no known price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<crate::CostUsd>,
    /// amber extension: stop the session's turns once its `usage.totalTokens` reaches
    /// this many (`budget_exceeded`), whatever the price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_total: Option<u64>,
    /// amber extension: a name for the session, unique among the daemon's sessions (see
    /// `session/rename` for the rules); absent or empty: unnamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// amber extension: where the session's tools run: `local` (the default),
    /// `ssh://HOST/PATH` (an executor started over SSH; PATH is the workspace there, else
    /// `cwd`) or `executor:NAME` (`[environments.NAME]` of the config), or `fleet`
    /// (whichever runner of the fleet takes it: `repo` and `ref` required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// amber extension, with `environment: "fleet"`: the repository the runner clones
    /// (https, ssh, git or file URL, no credentials in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// amber extension, with `environment: "fleet"`: the branch, tag or commit checked out.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    /// amber extension, with `environment: "fleet"`: commands run in the session's sandbox
    /// after each fresh clone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<String>,
    /// amber extension, with `environment: "fleet"`: labels the runner must have.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// amber extension, with `environment: "fleet"`: higher is assigned first (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// amber extension, with `environment: "fleet"`: push the result as a branch of
    /// `repo` at the end of each turn that completes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<PushParams>,
    /// Set by the daemon only, never read from the wire: the session is a background
    /// sub-agent of this parent (`task {background: true}`).
    #[serde(skip)]
    pub parent: Option<crate::ParentLink>,
    /// Set by the daemon only, never read from the wire: the routine fire that makes the
    /// session.
    #[serde(skip)]
    pub routine: Option<crate::RoutineRun>,
}

/// `session/new {push}`: where a fleet session's runner pushes its result.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushParams {
    /// The branch (absent: `amber/<session id>`). A branch that exists must be at the
    /// session's `ref` commit or at its own last push: amber never forces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionListParams {
    /// amber extension: only the background sub-agents of this session (id or name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionListResult {
    pub sessions: Vec<SessionInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Params of methods that name only a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionIdParams {
    pub session_id: String,
}

/// `session/get`: a session's snapshot and one page of its messages.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionGetParams {
    pub session_id: String,
    /// At most this many messages (at least 1); without it, as many as fit in one response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_limit: Option<u32>,
    /// The page ends just before this message index (at most `totalMessages`); without it,
    /// at the newest message. The previous page is `beforeIndex` = this page's `firstIndex`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_index: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionGetResult {
    pub session: SessionInfo,
    /// Messages `firstIndex ..< firstIndex + messages.len()`, oldest first; string fields
    /// over `[server] max_field_bytes` are elided (docs/protocol.md, "Elision").
    pub messages: Vec<Message>,
    pub pending_approvals: Vec<Approval>,
    pub todos: Vec<Todo>,
    /// Seq of the newest durable event; subscribe with `afterSeq` = this to continue seamlessly.
    pub last_seq: u64,
    /// Index of `messages[0]` in the whole history (0 from daemons that do not page).
    #[serde(default)]
    pub first_index: u64,
    /// How many messages the history holds.
    #[serde(default)]
    pub total_messages: u64,
    /// Older messages exist before `firstIndex`: fetch them with `beforeIndex` = `firstIndex`.
    #[serde(default)]
    pub has_more: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionPromptParams {
    pub session_id: String,
    pub text: String,
    /// A JSON Schema the turn's final answer must be valid against (PROTOCOL.md's second
    /// wave): `turn_completed` then carries the parsed value as `output`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    /// amber extension: at most this many model calls in this turn (default: the session's
    /// limit, `[agent] max_tool_iterations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionPromptResult {
    pub turn_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCancelResult {
    pub cancelled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSetModeParams {
    pub session_id: String,
    pub mode: Mode,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSubscribeParams {
    pub session_id: String,
    /// Replay durable events with a greater seq first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRespondParams {
    pub session_id: String,
    pub request_id: String,
    pub decision: Decision,
    /// amber: with `deny`, what the person wants instead; the model gets it in the denied
    /// call's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// amber: with an allowing decision on an MCP elicitation (`Approval.mcp`), the form's
    /// values (an object keyed by the schema's properties); absent: the schema's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRespondResult {
    pub accepted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolListParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolListResult {
    pub tools: Vec<ToolInfo>,
}

/// Result of `session/compact` (amber extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCompactResult {
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// The first thing wrong in a session's persisted history: a link of the hash chain that
/// does not match its message, or a damaged record of the log (then `record` and `reason`
/// are set and `stored`/`computed` are empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokenLink {
    /// Index of the message in the session's context (for a damaged record: how many
    /// messages the records before it hold).
    pub index: u64,
    /// The stored and the recomputed hash, as 16 hex digits.
    pub stored: String,
    pub computed: String,
    /// 1-based number of the damaged record (line) in the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<u64>,
    /// What is wrong with the damaged record (e.g. a CRC mismatch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Result of `session/verify` (amber extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionVerifyResult {
    /// No broken link and no torn record.
    pub ok: bool,
    pub messages: u64,
    pub events: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_broken: Option<BrokenLink>,
    /// The log ends in a torn record (dropped the next time the session loads).
    #[serde(default)]
    pub torn_tail: bool,
}

/// `agent/list` (PROTOCOL.md's second wave): the custom agents a session in `cwd` can use.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentListParams {
    /// The workspace whose `.amber/agents/` is listed too; without it only the user's and
    /// the bundled agents are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentListResult {
    pub agents: Vec<AgentInfo>,
}

/// One custom agent, as `agent/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInfo {
    pub name: String,
    pub description: String,
    pub source: AgentSource,
    /// amber extension: a workspace agent whose current version the user has not trusted
    /// (`trust/respond`); `session/new` refuses it until then. Absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untrusted: bool,
}

/// Where an agent file comes from; on a name clash the first of these wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentSource {
    /// `.amber/agents/NAME.md` in the workspace.
    Workspace,
    /// `$XDG_CONFIG_HOME/amber/agents/NAME.md`.
    User,
    /// Compiled into the daemon (`plan`, `review`).
    Bundled,
    /// amber extension: an external agent speaking ACP, from `[agents.acp.NAME]` of
    /// config.toml; it serves `task {agent}` only (not `session/new`), and wins a name clash.
    Acp,
}

impl AgentSource {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentSource::Workspace => "workspace",
            AgentSource::User => "user",
            AgentSource::Bundled => "bundled",
            AgentSource::Acp => "acp",
        }
    }
}
