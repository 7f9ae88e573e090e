//! JSON-RPC method and notification names of protocol v1.

pub const INITIALIZE: &str = "initialize";
pub const DAEMON_STATUS: &str = "daemon/status";
pub const DAEMON_SHUTDOWN: &str = "daemon/shutdown";
pub const SESSION_NEW: &str = "session/new";
pub const SESSION_LIST: &str = "session/list";
pub const SESSION_GET: &str = "session/get";
pub const SESSION_DELETE: &str = "session/delete";
pub const SESSION_PROMPT: &str = "session/prompt";
pub const SESSION_CANCEL: &str = "session/cancel";
pub const SESSION_SET_MODE: &str = "session/setMode";
pub const SESSION_SUBSCRIBE: &str = "session/subscribe";
pub const SESSION_UNSUBSCRIBE: &str = "session/unsubscribe";
/// Notification carrying a subscribed session's events.
pub const SESSION_EVENT: &str = "session/event";
pub const APPROVAL_RESPOND: &str = "approval/respond";
pub const TOOL_LIST: &str = "tool/list";
pub const MCP_ADD: &str = "mcp/add";
pub const MCP_LIST: &str = "mcp/list";
pub const MCP_REMOVE: &str = "mcp/remove";
pub const PLUGIN_LIST: &str = "plugin/list";
pub const PLUGIN_ENABLE: &str = "plugin/enable";
pub const PLUGIN_DISABLE: &str = "plugin/disable";
pub const COMMAND_LIST: &str = "command/list";

/// amber extension: compact a session's context now.
pub const SESSION_COMPACT: &str = "session/compact";
/// amber extension: re-walk a session's persisted hash chain.
pub const SESSION_VERIFY: &str = "session/verify";

/// amber extension: run a slash command (`command/list` names them).
pub const COMMAND_RUN: &str = "command/run";
/// amber extension: a session's status-line segments.
pub const STATUS_GET: &str = "status/get";
/// amber extension: the panels clients can show.
pub const PANEL_LIST: &str = "panel/list";
/// amber extension: one panel's current content.
pub const PANEL_GET: &str = "panel/get";
/// amber extension: switch a session's model and/or provider.
pub const SESSION_SET_MODEL: &str = "session/setModel";
/// amber extension: the LLM providers a session can select.
pub const PROVIDER_LIST: &str = "provider/list";

/// Every method a v1 daemon may serve, in the order PROTOCOL.md lists them.
pub const ALL: &[&str] = &[
    INITIALIZE,
    DAEMON_STATUS,
    DAEMON_SHUTDOWN,
    SESSION_NEW,
    SESSION_LIST,
    SESSION_GET,
    SESSION_DELETE,
    SESSION_PROMPT,
    SESSION_CANCEL,
    SESSION_SET_MODE,
    SESSION_SUBSCRIBE,
    SESSION_UNSUBSCRIBE,
    APPROVAL_RESPOND,
    TOOL_LIST,
    MCP_ADD,
    MCP_LIST,
    MCP_REMOVE,
    PLUGIN_LIST,
    PLUGIN_ENABLE,
    PLUGIN_DISABLE,
    COMMAND_LIST,
];

/// Methods amber adds to protocol v1 (PROTOCOL.md allows additions).
pub const EXTENSIONS: &[&str] = &[
    SESSION_COMPACT,
    SESSION_VERIFY,
    SESSION_SET_MODEL,
    COMMAND_RUN,
    STATUS_GET,
    PANEL_LIST,
    PANEL_GET,
    PROVIDER_LIST,
];
