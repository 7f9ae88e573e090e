//! Session events (PROTOCOL.md "Events"): the envelope and every event type.
//!
//! Durable events carry a `seq` that rises by one per session and are replayed on
//! `session/subscribe {afterSeq}`; live events (deltas) carry none and are never replayed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Approval, Decision, McpServerInfo, ResolvedBy, Role, Todo, ToolStatus, Usage, UsagePurpose,
};

/// One event of a session, as carried by `session/event` notifications.
///
/// Serialized by hand (below) so a sub-agent's tag goes out twice: as `agent` (the
/// original name, kept for existing clients) and as `agentId` (PROTOCOL.md's name).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Set on events raised by a sub-agent (`task` tool): its `agentId`. On the wire it is
    /// `agent`, and also `agentId` on every event whose own fields do not already carry one
    /// (`subagent_*` events do, with the same value). Read from `agent`.
    #[serde(default, rename = "agent", skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// RFC 3339.
    pub time: String,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The wire shape of [`Event`] for serialization.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    session_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_id: Option<&'a str>,
    time: &'a str,
    #[serde(flatten)]
    kind: &'a EventKind,
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let agent = self.agent_id.as_deref();
        // `subagent_*` events carry `agentId` themselves; a second key would be a duplicate.
        let carries_own = matches!(
            self.kind,
            EventKind::SubagentStarted { .. } | EventKind::SubagentCompleted { .. }
        );
        EventOut {
            seq: self.seq,
            session_id: &self.session_id,
            turn_id: self.turn_id.as_deref(),
            agent,
            agent_id: if carries_own { None } else { agent },
            time: &self.time,
            kind: &self.kind,
        }
        .serialize(serializer)
    }
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    Cancelled,
    LoopDetected,
    ToolFailures,
    MaxIterations,
    Error,
    /// amber extension: the session's cost (`maxBudgetUsd`) or tokens (`maxTokensTotal`)
    /// reached its budget; the turn stopped before its next model request.
    BudgetExceeded,
    /// amber extension: the model declined to answer (Anthropic's `refusal` stop, OpenAI's
    /// refusal content). `error` is `{code: "refusal", message: what the model said}`.
    Refusal,
    /// amber extension: the model's last reply was cut at its output limit (`max_tokens`);
    /// the cut text is kept and shown. `error` says so (`code: "max_tokens"`).
    MaxTokens,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::Cancelled => "cancelled",
            StopReason::LoopDetected => "loop_detected",
            StopReason::ToolFailures => "tool_failures",
            StopReason::MaxIterations => "max_iterations",
            StopReason::Error => "error",
            StopReason::BudgetExceeded => "budget_exceeded",
            StopReason::Refusal => "refusal",
            StopReason::MaxTokens => "max_tokens",
        }
    }
}

/// Why the daemon steered the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SteerReason {
    RepeatedText,
    ToolFailures,
}

/// A machine-readable error with a human-readable message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub code: String,
    pub message: String,
    /// amber extension: the cap a `budget_exceeded` stop reached, when it was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
}

impl ErrorInfo {
    /// An error that names no cap.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> ErrorInfo {
        ErrorInfo {
            code: code.into(),
            message: message.into(),
            limit: None,
        }
    }
}

/// A cap that stopped a turn or a sub-agent: whose cap, of what, and how much was used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limit {
    pub scope: LimitScope,
    pub kind: LimitKind,
    /// What was used when the cap stopped it (tokens, dollars, requests or seconds).
    pub used: f64,
    pub cap: f64,
}

/// Whose cap a [`Limit`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitScope {
    /// One sub-agent's own caps (`task {max_*}`, `[agents] subagent_max_*`).
    Subagent,
    /// The session's budget (`maxBudgetUsd`, `maxTokensTotal`).
    Session,
    /// A background sub-agent's parent session's budget, which its children spend too.
    Parent,
    /// The daemon's day (`[budget] daily_usd`).
    Daily,
    /// The daemon's month (`[budget] monthly_usd`).
    Monthly,
    /// A model's cap (`[budget.models.NAME]`).
    Model,
    /// A fleet pool's cap (`[budget.pools.NAME]`).
    Pool,
}

/// A `budget_warning` as a line: `budget: $16.52 of the daily $20.00 spent (2026-12-07)`.
pub fn describe_budget(
    scope: LimitScope,
    key: Option<&str>,
    period: &str,
    spent: crate::CostUsd,
    cap: crate::CostUsd,
) -> String {
    format!(
        "budget: ${:.2} of the {} ${:.2} spent ({period})",
        spent.usd(),
        scope.named(key),
        cap.usd()
    )
}

/// A `network_connection` as a line: `network: registry.npmjs.org:443 allowed (preset:npm),
/// 312 B sent, 48.2 kB received` or `network: evil.example:443 denied: not on the allowlist`.
pub fn describe_connection(connection: &NetworkConnection) -> String {
    let NetworkConnection {
        host,
        port,
        verdict,
        rule,
        reason,
        bytes_sent,
        bytes_received,
        ..
    } = connection;
    let destination = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut line = format!("network: {destination} {}", verdict.as_str());
    if let Some(rule) = rule {
        line.push_str(&format!(" ({rule})"));
    }
    match verdict {
        ConnectionVerdict::Allowed => line.push_str(&format!(
            ", {} sent, {} received",
            bytes(*bytes_sent),
            bytes(*bytes_received)
        )),
        ConnectionVerdict::Denied | ConnectionVerdict::Failed => {
            if let Some(reason) = reason {
                line.push_str(&format!(": {reason}"));
            }
        }
    }
    line
}

/// A byte count in words: `312 B`, `48.2 kB`, `3.1 MB`.
fn bytes(count: u64) -> String {
    match count {
        0..1_000 => format!("{count} B"),
        1_000..1_000_000 => format!("{:.1} kB", count as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", count as f64 / 1e6),
        _ => format!("{:.1} GB", count as f64 / 1e9),
    }
}

impl LimitScope {
    /// The scope with the model or pool it is of: `daily`, `model gpt-4o`.
    pub fn named(self, key: Option<&str>) -> String {
        match key {
            Some(key) => format!("{} {key}", self.as_str()),
            None => self.as_str().to_owned(),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LimitScope::Subagent => "subagent",
            LimitScope::Session => "session",
            LimitScope::Parent => "parent",
            LimitScope::Daily => "daily",
            LimitScope::Monthly => "monthly",
            LimitScope::Model => "model",
            LimitScope::Pool => "pool",
        }
    }
}

/// What a [`Limit`] caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    Tokens,
    Usd,
    Requests,
    Seconds,
}

impl LimitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Tokens => "tokens",
            LimitKind::Usd => "usd",
            LimitKind::Requests => "requests",
            LimitKind::Seconds => "seconds",
        }
    }
}

impl std::fmt::Display for Limit {
    /// `subagent tokens 200412/200000`, `session usd 0.5012/0.5`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}/{}",
            self.scope.as_str(),
            self.kind.as_str(),
            self.used,
            self.cap
        )
    }
}

/// The type-specific part of an event, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum EventKind {
    /// `session/prompt` accepted a prompt: durable (and on disk) before the call answers;
    /// the envelope's `turnId` is the one the call returns. Its `turn_started` follows
    /// when the turn begins; turns begin in `prompt_queued` order.
    PromptQueued {
        prompt: String,
    },
    TurnStarted {
        prompt: String,
    },
    MessageDelta {
        item_id: String,
        delta: String,
    },
    ReasoningDelta {
        item_id: String,
        delta: String,
    },
    MessageCompleted {
        item_id: String,
        role: Role,
        text: String,
    },
    ToolCallStarted {
        item_id: String,
        call_id: String,
        name: String,
        arguments: Value,
    },
    ToolOutputDelta {
        call_id: String,
        chunk: String,
    },
    /// Live: an LLM request failed before anything was streamed and is retried after
    /// `delay_ms`: retry number `attempt` (1-based) of at most `max_attempts`. `reason` is
    /// short and human (`429 rate limited`, `stream idle for 30 s`).
    Retrying {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        reason: String,
    },
    ToolCallCompleted {
        call_id: String,
        status: ToolStatus,
        output: String,
        duration_ms: u64,
        /// A unified diff (`--- a/PATH` / `+++ b/PATH`, 3 lines of context) of what a
        /// file-changing tool (`write`, `edit`, `apply_patch`) changed; absent otherwise,
        /// and in events stored before it existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    /// A call waits for an answer (`session/approve`); the same shape as the pending
    /// approvals `session/get` lists.
    ApprovalRequested(Approval),
    ApprovalResolved {
        request_id: String,
        decision: Decision,
        by: ResolvedBy,
    },
    Steer {
        reason: SteerReason,
        text: String,
    },
    CompactionStarted {
        tokens_before: u64,
    },
    CompactionCompleted {
        tokens_before: u64,
        tokens_after: u64,
    },
    CompactionFailed {
        tokens_before: u64,
        error: String,
    },
    /// Usage of the last LLM call (`usage`) and the session's running total (`total`).
    /// The last call's fields are also at the top level of the event (`call`, flattened:
    /// PROTOCOL.md calls the event itself the last call's usage). Build it with
    /// [`EventKind::usage`], which keeps the two copies equal. With a known price the
    /// call's cost is `costUsd` (from `call`) and the session's `sessionCostUsd`.
    Usage {
        usage: Usage,
        total: Usage,
        #[serde(flatten)]
        call: Usage,
        /// amber extension: the session's total cost so far (`total.costUsd`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_cost_usd: Option<crate::CostUsd>,
        /// amber extension: which request this was, when not one of the turn's own
        /// (`confirm`, `compaction`); absent for the turn's requests.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        purpose: Option<UsagePurpose>,
    },
    TodoUpdated {
        todos: Vec<Todo>,
    },
    SubagentStarted {
        agent_id: String,
        task: String,
    },
    /// amber extension: a sub-agent waits for a slot (`[agents] max_running` sub-agents
    /// run in the daemon); its `subagent_started` follows when it gets one.
    SubagentQueued {
        agent_id: String,
        task: String,
    },
    SubagentCompleted {
        agent_id: String,
        task: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<String>,
        /// amber extension: how the sub-agent stopped (`end_turn` when it finished).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_reason: Option<StopReason>,
        /// amber extension: the cap that stopped it, when one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<Limit>,
    },
    McpStatus(McpServerInfo),
    TurnCompleted {
        stop_reason: StopReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorInfo>,
        usage: Usage,
        /// The final answer parsed and valid against the prompt's `outputSchema`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
        /// amber extension: what the turn cost (`usage.costUsd`; 0 for a turn that made
        /// no request), when the model's price is known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<crate::CostUsd>,
        /// amber extension: the session's total cost after the turn, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_cost_usd: Option<crate::CostUsd>,
        /// amber extension: the part of `usage` spent on the silent confirm exchange
        /// ("are you finished?"); absent when the turn sent none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        confirm_usage: Option<Usage>,
    },
    Error {
        code: String,
        message: String,
        retryable: bool,
    },
    /// `session/rewind` restored the workspace and/or popped the conversation back to
    /// before the envelope's `turnId` (PROTOCOL.md's `rewound {turnId, …}`: the field is the
    /// envelope's, so it is read as every event's is). Durable: replay shows history as it
    /// happened.
    Rewound {
        restored: Vec<String>,
        conflicts: Vec<String>,
        removed_turns: u32,
    },
    /// A hook (`[[hooks]]`) timed out, crashed, or answered what could not be read; the
    /// session went on (fail-open), except a `pre_tool_use` hook's call, which was denied.
    HookFailed {
        /// The hook's event: `pre_tool_use`, `post_tool_use`, `user_prompt`, …
        hook_event: String,
        /// The hook's argv.
        command: Vec<String>,
        reason: String,
        /// The tool call the hook ran for, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
    },
    /// amber extension: the session's executor answered (at the session's first need of
    /// it, or a new one after the last was gone). A new one whose workspace was empty got
    /// the session's newest checkpoint restored into it first: `restoredFiles` says how many
    /// files (absent when nothing was restored).
    EnvironmentConnected {
        environment: crate::EnvironmentInfo,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        restored_files: Option<u64>,
    },
    /// amber extension: the link to the session's executor dropped (`state: lost`, amberd
    /// attaches again) or the executor is gone for good (`state: gone`: the running call
    /// failed, the turn was interrupted, and the next call starts a new executor).
    EnvironmentLost {
        environment: crate::EnvironmentInfo,
    },
    /// amber extension: amberd attached again to the same executor; the output produced
    /// meanwhile was read back (`replayedChunks`), nothing was lost.
    EnvironmentResumed {
        environment: crate::EnvironmentInfo,
        replayed_chunks: u64,
    },
    /// amber extension: a fleet session changed its place in the fleet: queued (again:
    /// `attempts` > 0, its runner gone or draining; `reason` says why), assigned to a
    /// runner, released by it (parked), or failed. `environment.fleet` has where it stands.
    FleetChanged {
        environment: crate::EnvironmentInfo,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// amber extension: a fleet session's setup command ran in its sandbox on a new
    /// runner (after the clone, before the session's work); `output` is its tail.
    FleetSetup {
        command: String,
        exit_code: Option<i32>,
        output: String,
    },
    /// amber extension: a fleet session that asked for a branch (`session/new {push}`)
    /// had its workspace committed and pushed by its runner at the end of a turn.
    /// `commit` is the branch's tip (absent: nothing changed and the branch does not
    /// exist); `changed` says whether a new commit was pushed; `error` says why the push
    /// failed (the work stays in the session's checkpoints: `amber-cli diff`).
    FleetPushed {
        branch: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        #[serde(default)]
        changed: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// amber extension: this session sent a message to another (`session/send`, the
    /// `session_send` tool, or an idle notice it asked for); durable before the
    /// receiver's prompt is queued.
    MessageSent {
        message_id: String,
        to: String,
        text: String,
    },
    /// amber extension: a message from another session (or from a client, `from` absent)
    /// arrived; its prompt (`prompt_queued`) follows.
    MessageReceived {
        message_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        text: String,
    },
    /// amber extension: the session's goal was set (`session/setGoal`, `/goal`), or
    /// cleared (`goal` absent).
    GoalSet {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        goal: Option<String>,
    },
    /// amber extension: the turn checked its goal before ending; `note` is what the model
    /// said remains (not met) or its summary (met).
    GoalCheck {
        met: bool,
        note: String,
    },
    /// amber extension: the goal is met; the turn ends with `summary`.
    GoalMet {
        summary: String,
    },
    /// amber extension: the turn a routine's fire prompted ended (`turn_completed` came
    /// first); `fireTime` is RFC 3339 with the daemon's local offset.
    RoutineFinished {
        name: String,
        fire_time: String,
        stop_reason: StopReason,
    },
    /// amber extension: this session's request took the daemon's spend past `[budget]
    /// warn_at` of a daemon-wide cap (once per cap and period).
    BudgetWarning {
        scope: LimitScope,
        /// The model or the pool of a `model` or `pool` cap.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        period: String,
        spent_usd: crate::CostUsd,
        cap_usd: crate::CostUsd,
    },
    /// amber extension: one connection a sandboxed command made through the session's
    /// egress proxy (its network is an allowlist), or a `fetch`: where to, whether it was
    /// let through and by which entry, and how many bytes went each way. Published when
    /// the connection ends (at once when refused).
    NetworkConnection(NetworkConnection),
    /// Replay is over: everything after this is live. Never durable itself.
    Synced {
        last_seq: u64,
        /// amber extension: replies streaming right now, with the text this subscriber
        /// missed; live deltas continue exactly where each `text` ends.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        in_progress: Vec<InProgressItem>,
    },
}

/// Which stream an in-progress item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamKind {
    /// `message_delta`.
    Message,
    /// `reasoning_delta`.
    Reasoning,
}

/// `network_connection`: one connection through the egress proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkConnection {
    /// The tool call whose command made it (a `bash` call, the `process` call that started
    /// a background command).
    pub call_id: String,
    /// The destination as the command named it: a host name or an IP address.
    pub host: String,
    pub port: u16,
    /// How it was asked: `connect` (an HTTP CONNECT tunnel), `http` (a plain HTTP request
    /// through the proxy) or `socks5`.
    pub protocol: String,
    pub verdict: ConnectionVerdict,
    /// The allowlist entry that decided it (`*.npmjs.org`, `preset:npm`), or how it was
    /// decided (`approved once`, `approved for the session`); absent when nothing named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Why it was refused or failed, as the command's client was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bytes from the command to the destination, and back.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub duration_ms: u64,
}

/// Whether a connection was let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionVerdict {
    /// Let through (and relayed until either side closed).
    Allowed,
    /// Refused by the policy: a deny entry, an unlisted host nobody allowed, a private
    /// address.
    Denied,
    /// Allowed, but the destination could not be reached.
    Failed,
}

impl ConnectionVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionVerdict::Allowed => "allowed",
            ConnectionVerdict::Denied => "denied",
            ConnectionVerdict::Failed => "failed",
        }
    }
}

/// A reply being streamed when a subscriber joined: the deltas published so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InProgressItem {
    pub item_id: String,
    pub kind: StreamKind,
    pub text: String,
}

impl EventKind {
    /// Durable events get a `seq`, are kept and replayed; the rest are live only.
    pub fn is_durable(&self) -> bool {
        !matches!(
            self,
            EventKind::MessageDelta { .. }
                | EventKind::ReasoningDelta { .. }
                | EventKind::ToolOutputDelta { .. }
                | EventKind::Retrying { .. }
                | EventKind::Synced { .. }
        )
    }

    /// A `usage` event: the last call's `usage` (also at the top level) and the total.
    pub fn usage(last: Usage, total: Usage) -> EventKind {
        EventKind::usage_of(last, total, None)
    }

    /// A `usage` event of a request that is not one of the turn's own (`purpose`).
    pub fn usage_of(last: Usage, total: Usage, purpose: Option<UsagePurpose>) -> EventKind {
        EventKind::Usage {
            usage: last,
            total,
            call: last,
            session_cost_usd: total.cost_usd,
            purpose,
        }
    }

    /// The wire name of this event's `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::PromptQueued { .. } => "prompt_queued",
            EventKind::TurnStarted { .. } => "turn_started",
            EventKind::MessageDelta { .. } => "message_delta",
            EventKind::ReasoningDelta { .. } => "reasoning_delta",
            EventKind::MessageCompleted { .. } => "message_completed",
            EventKind::ToolCallStarted { .. } => "tool_call_started",
            EventKind::ToolOutputDelta { .. } => "tool_output_delta",
            EventKind::Retrying { .. } => "retrying",
            EventKind::ToolCallCompleted { .. } => "tool_call_completed",
            EventKind::ApprovalRequested(_) => "approval_requested",
            EventKind::ApprovalResolved { .. } => "approval_resolved",
            EventKind::Steer { .. } => "steer",
            EventKind::CompactionStarted { .. } => "compaction_started",
            EventKind::CompactionCompleted { .. } => "compaction_completed",
            EventKind::CompactionFailed { .. } => "compaction_failed",
            EventKind::Usage { .. } => "usage",
            EventKind::TodoUpdated { .. } => "todo_updated",
            EventKind::SubagentStarted { .. } => "subagent_started",
            EventKind::SubagentCompleted { .. } => "subagent_completed",
            EventKind::McpStatus(_) => "mcp_status",
            EventKind::TurnCompleted { .. } => "turn_completed",
            EventKind::Error { .. } => "error",
            EventKind::Rewound { .. } => "rewound",
            EventKind::HookFailed { .. } => "hook_failed",
            EventKind::EnvironmentConnected { .. } => "environment_connected",
            EventKind::EnvironmentLost { .. } => "environment_lost",
            EventKind::EnvironmentResumed { .. } => "environment_resumed",
            EventKind::FleetChanged { .. } => "fleet_changed",
            EventKind::FleetSetup { .. } => "fleet_setup",
            EventKind::FleetPushed { .. } => "fleet_pushed",
            EventKind::MessageSent { .. } => "message_sent",
            EventKind::MessageReceived { .. } => "message_received",
            EventKind::GoalSet { .. } => "goal_set",
            EventKind::GoalCheck { .. } => "goal_check",
            EventKind::GoalMet { .. } => "goal_met",
            EventKind::SubagentQueued { .. } => "subagent_queued",
            EventKind::BudgetWarning { .. } => "budget_warning",
            EventKind::RoutineFinished { .. } => "routine_finished",
            EventKind::NetworkConnection(_) => "network_connection",
            EventKind::Synced { .. } => "synced",
        }
    }
}
