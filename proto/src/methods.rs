//! JSON-RPC methods and notifications of protocol v1, typed.
//!
//! Each method is a type implementing [`Method`]: its wire name and the types of its `params`
//! and `result`, so a server's handler and a client's call name the same three things and
//! cannot drift apart. The types are empty enums: they exist only to be named
//! (`client.request::<methods::SessionNew>(&params)`), never built. The `&str` constants are
//! their names, for code that needs only the string (middleware, logs, the raw bridge);
//! [`ALL`] and [`EXTENSIONS`] list them.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{
    AgentListParams, AgentListResult, ApprovalRespondParams, ApprovalRespondResult,
    CheckpointDiffParams, CheckpointDiffResult, CheckpointListParams, CheckpointListResult,
    CommandListResult, CommandRunParams, CommandRunResult, Empty, Event, InitializeParams,
    InitializeResult, McpAddParams, McpListResult, McpServerInfo, NameParams, PanelGetParams,
    PanelGetResult, PanelListResult, PluginInfo, PluginListResult, ProviderCheckParams,
    ProviderCheckResult, ProviderListResult, SandboxSelftestResult, SessionCancelResult,
    SessionCompactResult, SessionDeleteParams, SessionForkParams, SessionGetParams,
    SessionGetResult, SessionIdParams, SessionInfo, SessionListParams, SessionListResult,
    SessionNewParams, SessionNotifyWhenIdleParams, SessionPromptParams, SessionPromptResult,
    SessionRenameParams, SessionRewindParams, SessionRewindResult, SessionSendParams,
    SessionSendResult, SessionSetGoalParams, SessionSetModeParams, SessionSetModelParams,
    SessionSubscribeParams, SessionVerifyResult, StatusGetResult, SubscriptionId,
    SubscriptionParams, ToolListParams, ToolListResult, UnsubscribeParams,
};

/// A method a client calls: the request's `method`, what its `params` hold and what a
/// successful response's `result` holds.
pub trait Method {
    /// The name on the wire.
    const NAME: &'static str;
    /// Methods that take nothing take [`Empty`]; a server reads absent or `null` params as `{}`.
    type Params: Serialize + DeserializeOwned;
    type Result: Serialize + DeserializeOwned;
}

/// A notification the daemon sends without being asked.
pub trait Notification {
    /// The name on the wire.
    const NAME: &'static str;
    type Params: Serialize + DeserializeOwned;
}

/// A method whose result opens a subscription: the daemon then sends
/// [`Subscription::Notification`]s for it until the client calls
/// [`Subscription::Unsubscribe`] or the daemon ends it with an error notification.
pub trait Subscription: Method<Result = SubscriptionId> {
    type Notification: Notification;
    type Unsubscribe: Method<Params = UnsubscribeParams, Result = bool>;
}

/// Declares one method type and its [`Method`] impl; its doc starts with its wire name.
macro_rules! method {
    ($(#[$doc:meta])* $method:ident = $name:literal, $params:ty => $result:ty) => {
        #[doc = concat!("`", $name, "`")]
        #[doc = ""]
        $(#[$doc])*
        #[derive(Debug)]
        pub enum $method {}

        impl Method for $method {
            const NAME: &'static str = $name;
            type Params = $params;
            type Result = $result;
        }
    };
}

method!(
    /// The handshake; on a WebSocket every other method waits for it.
    Initialize = "initialize", InitializeParams => InitializeResult
);
method!(DaemonStatus = "daemon/status", Empty => crate::DaemonStatus);
method!(
    /// Persists everything, then the daemon exits 0.
    DaemonShutdown = "daemon/shutdown", Empty => Empty
);
method!(SessionNew = "session/new", SessionNewParams => SessionInfo);
method!(SessionList = "session/list", SessionListParams => SessionListResult);
method!(
    /// A session's snapshot and one page of its messages.
    SessionGet = "session/get", SessionGetParams => SessionGetResult
);
method!(SessionDelete = "session/delete", SessionDeleteParams => Empty);
method!(
    /// Answers at once; prompts queue while a turn runs.
    SessionPrompt = "session/prompt", SessionPromptParams => SessionPromptResult
);
method!(SessionCancel = "session/cancel", SessionIdParams => SessionCancelResult);
method!(SessionSetMode = "session/setMode", SessionSetModeParams => SessionInfo);
method!(
    /// Replay after `afterSeq`, then `synced`, then live events, as [`SessionEvent`]s.
    SessionSubscribe = "session/subscribe", SessionSubscribeParams => SubscriptionId
);
method!(
    /// `false` when the connection holds no such subscription.
    SessionUnsubscribe = "session/unsubscribe", UnsubscribeParams => bool
);
method!(ApprovalRespond = "approval/respond", ApprovalRespondParams => ApprovalRespondResult);
method!(ToolList = "tool/list", ToolListParams => ToolListResult);
method!(
    /// Answers at once with status `connecting`; the outcome arrives as `mcp_status` events.
    McpAdd = "mcp/add", McpAddParams => McpServerInfo
);
method!(McpList = "mcp/list", Empty => McpListResult);
method!(McpRemove = "mcp/remove", NameParams => Empty);
method!(McpLogin = "mcp/login", crate::McpLoginParams => crate::McpLoginResult);
method!(McpLogout = "mcp/logout", NameParams => crate::McpLogoutResult);
method!(PluginList = "plugin/list", Empty => PluginListResult);
method!(
    /// The plugin's row after enabling it.
    PluginEnable = "plugin/enable", NameParams => PluginInfo
);
method!(
    /// The plugin's row after disabling it.
    PluginDisable = "plugin/disable", NameParams => PluginInfo
);
method!(CommandList = "command/list", Empty => CommandListResult);
method!(
    /// PROTOCOL.md's second wave: the custom agents `session/new {agent}` can name.
    AgentList = "agent/list", AgentListParams => AgentListResult
);
method!(
    /// amber extension: a workspace's configuration files and where their trust stands.
    TrustList = "trust/list", crate::TrustListParams => crate::TrustListResult
);
method!(
    /// amber extension: trust or deny one version of a workspace configuration file.
    TrustRespond = "trust/respond", crate::TrustRespondParams => crate::TrustFile
);
method!(
    /// amber extension: compact a session's context now.
    SessionCompact = "session/compact", SessionIdParams => SessionCompactResult
);
method!(
    /// amber extension: re-walk a session's persisted hash chain.
    SessionVerify = "session/verify", SessionIdParams => SessionVerifyResult
);
method!(
    /// amber extension: run a slash command (`command/list` names them).
    CommandRun = "command/run", CommandRunParams => CommandRunResult
);
method!(
    /// amber extension: a session's status-line segments.
    StatusGet = "status/get", SessionIdParams => StatusGetResult
);
method!(
    /// amber extension: the panels clients can show.
    PanelList = "panel/list", Empty => PanelListResult
);
method!(
    /// amber extension: one panel's current content.
    PanelGet = "panel/get", PanelGetParams => PanelGetResult
);
method!(
    /// amber extension: switch a session's model and/or provider.
    SessionSetModel = "session/setModel", SessionSetModelParams => SessionInfo
);
method!(
    /// amber extension: give a session a name (unique among the daemon's sessions) that
    /// stands for its id wherever params carry a `sessionId`, or clear it.
    SessionRename = "session/rename", SessionRenameParams => SessionInfo
);
method!(
    /// amber extension: a message into another session, as its prompt.
    SessionSend = "session/send", SessionSendParams => SessionSendResult
);
method!(
    /// amber extension: a message to one session when another next goes idle.
    SessionNotifyWhenIdle = "session/notifyWhenIdle", SessionNotifyWhenIdleParams => Empty
);
method!(
    /// amber extension: set or clear a session's goal.
    SessionSetGoal = "session/setGoal", SessionSetGoalParams => SessionInfo
);
method!(
    /// amber extension: the LLM providers a session can select.
    ProviderList = "provider/list", Empty => ProviderListResult
);
method!(
    /// amber extension: whether a provider is usable (reachable, key accepted, model served).
    ProviderCheck = "provider/check", ProviderCheckParams => ProviderCheckResult
);
method!(
    /// amber extension: a two-second check, through the real sandbox, that a write outside a
    /// workspace and a loopback connect are refused and a write inside it is not.
    SandboxSelftest = "sandbox/selftest", Empty => SandboxSelftestResult
);

method!(
    /// PROTOCOL.md's second wave: one row per turn that had a checkpoint, oldest first
    /// (amber extension: with `all`, one per turn of the history).
    CheckpointList = "checkpoint/list", CheckpointListParams => CheckpointListResult
);
method!(
    /// PROTOCOL.md's second wave: the unified diff of what one turn changed.
    CheckpointDiff = "checkpoint/diff", CheckpointDiffParams => CheckpointDiffResult
);
method!(
    /// PROTOCOL.md's second wave: restore the workspace and/or the conversation to before a
    /// turn (idle sessions only).
    SessionRewind = "session/rewind", SessionRewindParams => SessionRewindResult
);
method!(
    /// PROTOCOL.md's second wave: a new session with the history before a turn.
    SessionFork = "session/fork", SessionForkParams => SessionInfo
);

method!(
    /// amber extension: keep a routine (a prompt on a cron schedule) in the data directory.
    RoutineAdd = "routine/add", crate::RoutineAddParams => crate::RoutineInfo
);
method!(
    /// amber extension: every routine, from config.toml and added, with its next and last fire.
    RoutineList = "routine/list", Empty => crate::RoutineListResult
);
method!(
    /// amber extension: forget a routine added by `routine/add`.
    RoutineRemove = "routine/remove", NameParams => Empty
);
method!(
    /// amber extension: fire a routine now, whatever its schedule.
    RoutineRun = "routine/run", NameParams => crate::RoutineFired
);
method!(
    /// amber extension: fire every routine that is due now (systemd's timer, tests).
    RoutineTick = "routine/tick", Empty => crate::RoutineTickResult
);

/// Carries a subscribed session's events: one per notification, or the error that ended
/// the subscription.
#[derive(Debug)]
pub enum SessionEvent {}

impl Notification for SessionEvent {
    const NAME: &'static str = "session/event";
    type Params = SubscriptionParams<Event>;
}

impl Subscription for SessionSubscribe {
    type Notification = SessionEvent;
    type Unsubscribe = SessionUnsubscribe;
}

method!(
    /// amber extension: every session's changes, as [`SessionChanged`] notifications.
    SessionWatch = "session/watch", crate::SessionWatchParams => SubscriptionId
);
method!(
    /// `false` when the connection holds no such watch.
    SessionUnwatch = "session/unwatch", UnsubscribeParams => bool
);

/// Carries one session's change of a `session/watch`.
#[derive(Debug)]
pub enum SessionChanged {}

impl Notification for SessionChanged {
    const NAME: &'static str = "session/changed";
    type Params = SubscriptionParams<crate::SessionChange>;
}

impl Subscription for SessionWatch {
    type Notification = SessionChanged;
    type Unsubscribe = SessionUnwatch;
}

pub const INITIALIZE: &str = Initialize::NAME;
pub const DAEMON_STATUS: &str = DaemonStatus::NAME;
pub const DAEMON_SHUTDOWN: &str = DaemonShutdown::NAME;
pub const SESSION_NEW: &str = SessionNew::NAME;
pub const SESSION_LIST: &str = SessionList::NAME;
pub const SESSION_GET: &str = SessionGet::NAME;
pub const SESSION_DELETE: &str = SessionDelete::NAME;
pub const SESSION_PROMPT: &str = SessionPrompt::NAME;
pub const SESSION_CANCEL: &str = SessionCancel::NAME;
pub const SESSION_SET_MODE: &str = SessionSetMode::NAME;
pub const SESSION_SUBSCRIBE: &str = SessionSubscribe::NAME;
pub const SESSION_UNSUBSCRIBE: &str = SessionUnsubscribe::NAME;
/// Notification carrying a subscribed session's events.
pub const SESSION_EVENT: &str = SessionEvent::NAME;
pub const APPROVAL_RESPOND: &str = ApprovalRespond::NAME;
pub const TOOL_LIST: &str = ToolList::NAME;
pub const MCP_ADD: &str = McpAdd::NAME;
pub const MCP_LIST: &str = McpList::NAME;
pub const MCP_REMOVE: &str = McpRemove::NAME;
pub const MCP_LOGIN: &str = McpLogin::NAME;
pub const MCP_LOGOUT: &str = McpLogout::NAME;
pub const PLUGIN_LIST: &str = PluginList::NAME;
pub const PLUGIN_ENABLE: &str = PluginEnable::NAME;
pub const PLUGIN_DISABLE: &str = PluginDisable::NAME;
pub const COMMAND_LIST: &str = CommandList::NAME;
/// PROTOCOL.md's second wave: the custom agents `session/new {agent}` can name.
pub const AGENT_LIST: &str = AgentList::NAME;

/// amber extension: compact a session's context now.
pub const SESSION_COMPACT: &str = SessionCompact::NAME;
/// amber extension: a workspace's configuration files and their trust.
pub const TRUST_LIST: &str = TrustList::NAME;
/// amber extension: trust or deny one version of a workspace configuration file.
pub const TRUST_RESPOND: &str = TrustRespond::NAME;
/// amber extension: re-walk a session's persisted hash chain.
pub const SESSION_VERIFY: &str = SessionVerify::NAME;

/// amber extension: run a slash command (`command/list` names them).
pub const COMMAND_RUN: &str = CommandRun::NAME;
/// amber extension: a session's status-line segments.
pub const STATUS_GET: &str = StatusGet::NAME;
/// amber extension: the panels clients can show.
pub const PANEL_LIST: &str = PanelList::NAME;
/// amber extension: one panel's current content.
pub const PANEL_GET: &str = PanelGet::NAME;
/// amber extension: switch a session's model and/or provider.
pub const SESSION_SET_MODEL: &str = SessionSetModel::NAME;
/// amber extension: name a session, or clear its name.
pub const SESSION_RENAME: &str = SessionRename::NAME;
/// amber extension: a message into another session.
pub const SESSION_SEND: &str = SessionSend::NAME;
/// amber extension: a message when a session next goes idle.
pub const SESSION_NOTIFY_WHEN_IDLE: &str = SessionNotifyWhenIdle::NAME;
/// amber extension: a session's goal.
pub const SESSION_SET_GOAL: &str = SessionSetGoal::NAME;
/// amber extension: the LLM providers a session can select.
pub const PROVIDER_LIST: &str = ProviderList::NAME;
/// amber extension: whether a provider is usable.
pub const PROVIDER_CHECK: &str = ProviderCheck::NAME;
/// amber extension: check the OS sandbox's enforcement through the real helper.
pub const SANDBOX_SELFTEST: &str = SandboxSelftest::NAME;
/// amber extension: every session's changes (the TUI's switcher and notifications).
pub const SESSION_WATCH: &str = SessionWatch::NAME;
pub const SESSION_UNWATCH: &str = SessionUnwatch::NAME;
/// Notification carrying a watched session's change.
pub const SESSION_CHANGED: &str = SessionChanged::NAME;
/// PROTOCOL.md's second wave: checkpoints.
pub const CHECKPOINT_LIST: &str = CheckpointList::NAME;
pub const CHECKPOINT_DIFF: &str = CheckpointDiff::NAME;
pub const SESSION_REWIND: &str = SessionRewind::NAME;
pub const SESSION_FORK: &str = SessionFork::NAME;
/// amber extension: scheduled routines.
pub const ROUTINE_ADD: &str = RoutineAdd::NAME;
pub const ROUTINE_LIST: &str = RoutineList::NAME;
pub const ROUTINE_REMOVE: &str = RoutineRemove::NAME;
pub const ROUTINE_RUN: &str = RoutineRun::NAME;
pub const ROUTINE_TICK: &str = RoutineTick::NAME;
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
    AGENT_LIST,
    CHECKPOINT_LIST,
    CHECKPOINT_DIFF,
    SESSION_REWIND,
    SESSION_FORK,
];

/// Methods amber adds to protocol v1 (PROTOCOL.md allows additions).
pub const EXTENSIONS: &[&str] = &[
    TRUST_LIST,
    TRUST_RESPOND,
    SESSION_COMPACT,
    SESSION_VERIFY,
    SESSION_SET_MODEL,
    SESSION_RENAME,
    SESSION_SEND,
    SESSION_NOTIFY_WHEN_IDLE,
    SESSION_SET_GOAL,
    COMMAND_RUN,
    STATUS_GET,
    PANEL_LIST,
    PANEL_GET,
    PROVIDER_LIST,
    PROVIDER_CHECK,
    SANDBOX_SELFTEST,
    SESSION_WATCH,
    SESSION_UNWATCH,
    ROUTINE_ADD,
    ROUTINE_LIST,
    ROUTINE_REMOVE,
    ROUTINE_RUN,
    ROUTINE_TICK,
    MCP_LOGIN,
    MCP_LOGOUT,
];
