//! Shared value types: modes, usage, session and tool descriptions, approvals, todos.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Agent mode: what may run without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Only read-only tools run.
    Read,
    /// File tools inside the workspace and benign commands run.
    #[default]
    Write,
    /// Nothing asks; workspace confinement still holds.
    Yolo,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::Write => "write",
            Mode::Yolo => "yolo",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read" => Ok(Mode::Read),
            "write" => Ok(Mode::Write),
            "yolo" => Ok(Mode::Yolo),
            other => Err(format!(
                "unknown mode `{other}` (expected read, write or yolo)"
            )),
        }
    }
}

/// Token accounting, for one LLM call or a session total.
///
/// `promptTokens` counts every input token of the request, cached ones included:
/// `cachedTokens` (read from the provider's prompt cache) and `cacheWriteTokens` (written
/// to it) are parts of it, as OpenAI's `prompt_tokens` includes its cached tokens. Dialects
/// whose provider reports them apart (Anthropic's `input_tokens` excludes both) add them up;
/// pricing (`amber_llm::prices`) relies on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub cached_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
    /// Prompt tokens written to the provider's prompt cache (Anthropic's
    /// `cache_creation_input_tokens`); absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// amber extension: what these tokens cost at the model's price; absent when the
    /// model has no known price. A sum counts the calls that had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<crate::CostUsd>,
}

/// What a request whose `usage` event names it was for, besides the turn's own requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsagePurpose {
    /// The silent "are you finished?" exchange after a reply without tool calls.
    Confirm,
    /// Compaction's classify and extract requests.
    Compaction,
    /// A purpose this client does not know (a newer daemon's).
    #[serde(other)]
    Other,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        // Saturating: a provider's absurd counts must neither panic nor wrap a session's
        // spend back under its budget.
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(other.cached_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}

/// Outcome of one tool call, as the model and the clients see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
    Denied,
}

/// What a session is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    #[default]
    Idle,
    Running,
    WaitingApproval,
}

/// A session as listed and returned by `session/*` methods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub session_id: String,
    pub cwd: String,
    pub mode: Mode,
    pub model: String,
    pub title: String,
    /// amber extension: the name the user gave the session (`session/new {name}`,
    /// `session/rename`), unique among the daemon's sessions; absent when unnamed. Params
    /// carrying a `sessionId` accept it in place of the id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub state: SessionState,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    #[serde(default)]
    pub usage: Usage,
    /// amber extension: the provider the session's requests go to (`None`: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The custom agent the session was created with (`session/new {agent}`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// amber extension: the session's effective OS sandbox (read mode is always `read-only`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::SandboxInfo>,
    /// The git worktree the session works in (`session/new {worktree}`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<crate::WorktreeInfo>,
    /// amber extension: the session's spending cap (`session/new {maxBudgetUsd}`, else
    /// `[agent] max_budget_usd`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<crate::CostUsd>,
    /// amber extension: the session's cap on `usage.totalTokens` (`session/new
    /// {maxTokensTotal}`, else `[agent] max_tokens_total`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_total: Option<u64>,
    /// amber extension: where the session's tools run, when not here
    /// (`session/new {environment}`), and the state of its executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<crate::EnvironmentInfo>,
    /// amber extension: the session is a background sub-agent (`task {background: true}`)
    /// of another session; what it owes its parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
    /// amber extension: the session's goal (`session/setGoal`, `/goal`), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<crate::GoalInfo>,
    /// amber extension: the routine fire that made the session (a named session: its
    /// latest fire), and how that fire's turn ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routine: Option<crate::RoutineRun>,
}

/// A background sub-agent's tie to the session that started it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentLink {
    pub session_id: String,
    /// The handle the parent knows it by (`task_status`, `task_wait`, `task_cancel`).
    pub agent_id: String,
    /// A few words naming its task.
    pub task: String,
    /// Its task, as the parent gave it (the child's first prompt).
    pub prompt: String,
    /// Where it stands among the children started, for queue order (nanoseconds since
    /// the Unix epoch when it was made).
    #[serde(default)]
    pub order: u64,
    pub state: ChildState,
    /// Its own caps.
    #[serde(default)]
    pub caps: ChildCaps,
    /// How its task ended, once it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ChildResult>,
    /// It was told once to go on after the daemon stopped while it worked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
}

impl ParentLink {
    /// Whether it holds a slot now: started, and its task not ended.
    pub fn running(&self) -> bool {
        self.state == ChildState::Running && self.result.is_none()
    }
}

/// Where a background sub-agent stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildState {
    /// Waiting for a slot (`[agents] max_running`, `max_running_per_parent`).
    Queued,
    Running,
    /// Its task ended; its result is on its way to the parent.
    Done,
    /// Its result is in the parent's conversation.
    Delivered,
}

impl ChildState {
    pub fn as_str(self) -> &'static str {
        match self {
            ChildState::Queued => "queued",
            ChildState::Running => "running",
            ChildState::Done => "done",
            ChildState::Delivered => "delivered",
        }
    }
}

/// A background sub-agent's caps (`task {max_*}` within `[agents] subagent_max_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildCaps {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_usd: Option<crate::CostUsd>,
}

/// How a background sub-agent's task ended: what its parent receives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildResult {
    pub stop_reason: crate::StopReason,
    /// Its last reply, led by why it stopped when it did not finish.
    pub text: String,
}

/// Where a tool comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    /// `builtin`, `plugin:NAME` or `mcp:SERVER`.
    pub source: String,
    pub read_only: bool,
    pub input_schema: Value,
}

/// An answer to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    AllowOnce,
    AllowSession,
    AllowAlways,
    Deny,
}

/// Who resolved an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolvedBy {
    Client,
    Rule,
    Policy,
    NoApprover,
}

/// A pending approval request, as `session/get` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    pub request_id: String,
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    pub reason: String,
    pub scope: String,
    /// amber extension: approving runs the command without the OS sandbox (`sandbox: false`,
    /// or a sandbox the kernel cannot give). `amber-cli run --yes` never approves these.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unsandboxed: bool,
    /// amber extension: only a person may answer it (a secret read, a protected write, a run
    /// without the OS sandbox, trusting workspace configuration); whatever the answer, it
    /// covers this request only. `amber-cli run --yes` never approves these.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub person_only: bool,
    /// amber extension: an MCP server asks the person while one of its tools runs (a form
    /// to fill in, or the use of the model); `call_id` is that tool's call. Allowing it is
    /// accepting (an elicitation's answer is `approval/respond {content}`), denying it
    /// declines; with nobody to ask it is declined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpAsk>,
}

/// What an MCP server asks in an [`Approval`] (amber extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpAsk {
    pub server: String,
    pub kind: McpAskKind,
    /// What the server says (an elicitation's message; for sampling, what it asks the
    /// model, cut to a preview).
    pub message: String,
    /// An elicitation's form: a flat JSON Schema object of the fields wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_schema: Option<Value>,
    /// Sampling: the most tokens the server lets the model write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

/// Which kind of request an [`McpAsk`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpAskKind {
    Elicitation,
    Sampling,
}

/// Progress of one todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Done,
}

/// One entry of a session's todo list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Todo {
    pub id: String,
    pub text: String,
    pub status: TodoStatus,
}

/// `{}`: the result of methods that return nothing, and params of methods that take nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Empty {}

#[cfg(test)]
mod usage_tests {
    use super::Usage;
    use crate::CostUsd;

    #[test]
    fn sums_saturate_instead_of_wrapping() {
        let absurd = Usage {
            prompt_tokens: u64::MAX - 1,
            completion_tokens: u64::MAX,
            cached_tokens: u64::MAX,
            total_tokens: u64::MAX - 1,
            cache_write_tokens: u64::MAX,
            cost_usd: Some(CostUsd::from_nanos(u64::MAX)),
        };
        let mut total = Usage::default();
        total.add(&absurd);
        total.add(&absurd);
        assert_eq!(total.total_tokens, u64::MAX);
        assert_eq!(total.prompt_tokens, u64::MAX);
        assert_eq!(total.cost_usd, Some(CostUsd::from_nanos(u64::MAX)));
    }
}
