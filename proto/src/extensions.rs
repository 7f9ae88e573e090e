//! Params and results of the `mcp/*`, `plugin/*` and `command/*` methods and of amber's
//! extensions (`status/get`, `panel/*`, `provider/list`, `session/setModel`,
//! `session/rename`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How the daemon reaches an MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum McpTransport {
    Stdio {
        command: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpAddParams {
    pub name: String,
    pub transport: McpTransport,
    /// amber extension: connect the server for this session only (its tools are offered to
    /// its turns alone, and it goes when the session does). Absent: daemon-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpStatus {
    Connecting,
    Ready,
    Failed,
    Closed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerInfo {
    pub name: String,
    pub status: McpStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    #[serde(default)]
    pub tools: u32,
    #[serde(default)]
    pub resources: u32,
    #[serde(default)]
    pub prompts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// An OAuth login (`mcp/login`) is under way: from its start until its redirect has
    /// been taken and its tokens stored, or it failed. Absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub signing_in: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpListResult {
    pub servers: Vec<McpServerInfo>,
}

/// `mcp/login`: the server, and optionally a client registered with its authorization
/// server beforehand (else the server's `oauth_client_id`, else dynamic registration).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpLoginParams {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The secret of `clientId` (a confidential client); used for this login only, never
    /// stored or shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
}

/// Result of `mcp/login` (amber extension): where the person signs in. The login completes
/// when the browser comes back to amberd's loopback redirect; the server then reconnects
/// (`mcp_status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpLoginResult {
    pub authorization_url: String,
}

/// Result of `mcp/logout` (amber extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpLogoutResult {
    /// Whether there were stored credentials to forget.
    pub removed: bool,
}

/// Params of methods that name only a server or plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NameParams {
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PluginState {
    Registered,
    Active,
    Deactivated,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PluginKind {
    Bundled,
    External,
}

/// One contribution a plugin made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capability {
    /// `tool`, `provider`, `command`, `status` or `panel`.
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginInfo {
    pub name: String,
    pub state: PluginState,
    pub kind: PluginKind,
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginListResult {
    pub plugins: Vec<PluginInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandInfo {
    pub name: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandListResult {
    pub commands: Vec<CommandInfo>,
}

/// `command/run` params. `args` is the text after the command name; an array is joined
/// with spaces and an object (named prompt arguments) is passed as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandRunParams {
    /// The session the command acts on; some commands (`help`, `sessions`) need none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// With or without the leading `/`.
    pub name: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub args: serde_json::Value,
}

/// What a client should do after a command ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum CommandAction {
    /// Leave the session running and exit the client.
    Detach,
    /// Switch to this session (`/new`).
    OpenSession { session_id: String },
    /// The command queued a prompt (an MCP prompt); its turn has this id.
    Prompted { turn_id: String },
    /// The session's conversation was cleared; re-read it.
    Cleared,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandRunResult {
    /// Human-readable result, possibly several lines.
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<CommandAction>,
}

/// One status-line segment, rendered by the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusSegmentInfo {
    pub name: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusGetResult {
    /// In registration order; segments with nothing to show are left out.
    pub segments: Vec<StatusSegmentInfo>,
    /// The session's context use in numbers (the `context` segment's percentage comes
    /// from them): a client estimates it live while a reply streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextUse>,
}

/// How full a session's context is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextUse {
    /// Tokens the context holds now (the last request's prompt and reply, plus an estimate
    /// of what was added since).
    pub tokens: u64,
    /// The provider's context window.
    pub window: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PanelInfo {
    pub name: String,
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PanelListResult {
    pub panels: Vec<PanelInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PanelGetParams {
    /// Session panels (todos, processes) need one; daemon panels (MCP servers) do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PanelGetResult {
    pub name: String,
    pub title: String,
    /// Plain text lines, one per row.
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSetModelParams {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// Params of `session/send`: a message into session `to` (an id, a name or an id
/// prefix), from session `from` or, without it, from the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSendParams {
    pub to: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// Result of `session/send`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSendResult {
    pub message_id: String,
    /// The receiver's turn the message runs as.
    pub turn_id: String,
}

/// Params of `session/notifyWhenIdle`: session `notify` gets a message with session
/// `sessionId`'s last reply when it next goes idle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNotifyWhenIdleParams {
    pub session_id: String,
    pub notify: String,
}

/// Params of `session/setGoal`: the session's goal, or `null` to clear it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSetGoalParams {
    pub session_id: String,
    #[serde(default)]
    pub goal: Option<String>,
}

/// A session's goal: a completion condition its turns check before they end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoalInfo {
    pub text: String,
    pub state: GoalState,
    /// How many times turns checked it.
    #[serde(default)]
    pub checks: u32,
    /// The summary the model gave when it was met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// Where a goal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalState {
    Active,
    Met,
}

/// Params of `session/rename`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRenameParams {
    pub session_id: String,
    /// The new name; `null` (or absent) and `""` clear it. Written as `null` when clearing,
    /// so the request says what it does.
    #[serde(default)]
    pub name: Option<String>,
}

/// One selectable LLM provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderInfo {
    pub name: String,
    pub flavor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    pub default_model: String,
    pub context_window: u64,
    /// The session default (`[provider]`).
    #[serde(default)]
    pub default: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderListResult {
    pub providers: Vec<ProviderInfo>,
}

/// Params of `provider/check`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderCheckParams {
    /// A name from `provider/list`; absent: the configured default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// Result of `provider/check`: whether the provider is usable, as the daemon reaches it
/// (with its key, which is never returned). `None`: the check could not tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderCheckResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The model a new session would use (empty: the server's default).
    pub model: String,
    pub key_set: bool,
    /// An HTTP answer came back.
    pub reachable: bool,
    /// The status of `GET {baseUrl}/models`, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_accepted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_known: Option<bool>,
    /// What the provider lists (at most 50).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// What is wrong, in words; absent when the provider is usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
