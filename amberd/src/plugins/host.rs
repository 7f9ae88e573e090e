//! The daemon as plugins see it: [`Host`], and one session as they see it: [`SessionView`].
//!
//! Plugins (commands, status segments, panels, the MCP bridge) never hold the daemon
//! itself. The daemon implements [`Host`] and `SessionShared` implements [`SessionView`],
//! so `plugins/` depends on neither `daemon` nor `session`: the edges point from them to
//! here, never back.

use std::path::Path;
use std::sync::Arc;

use amber_proto::{
    EventKind, Message, Mode, SessionCompactResult, SessionInfo, SessionNewParams, SessionState,
};
use futures::future::BoxFuture;

use super::runtime::PluginRuntime;
use crate::mcp::McpHost;
use amber_tools::SessionTools;

/// What the daemon offers plugins.
pub trait Host: Send + Sync {
    /// Publishes a daemon-wide event (an MCP server's status) in every loaded session.
    fn publish_all(&self, event: EventKind);

    /// The plugin runtime: lifecycle requests and, through it, the registries.
    fn plugins(&self) -> &PluginRuntime;

    /// The MCP servers shared by every session.
    fn mcp(&self) -> &McpHost;

    /// Sessions, newest first, at most `limit` after `cursor`, and the next page's cursor.
    fn list_sessions(
        &self,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> Result<(Vec<SessionInfo>, Option<String>), HostError>;

    /// Creates a session, as `session/new` does.
    fn create_session(&self, params: SessionNewParams) -> Result<SessionInfo, HostError>;

    /// Queues a prompt in a session; returns its turn id once the prompt is durable.
    fn prompt(&self, session_id: &str, text: String) -> Result<String, HostError>;

    /// Compacts a session's context between turns.
    fn compact<'a>(
        &'a self,
        session_id: &'a str,
    ) -> BoxFuture<'a, Result<SessionCompactResult, HostError>>;

    /// Clears a session's conversation between turns; returns the messages dropped.
    fn clear<'a>(&'a self, session_id: &'a str) -> BoxFuture<'a, Result<usize, HostError>>;

    /// Every provider a session may select.
    fn provider_names(&self) -> Vec<String>;

    /// Switches a session's model and/or provider (a new provider without a model brings
    /// its default model). Err: an unknown provider, as a message.
    fn set_model(
        &self,
        session: &dyn SessionView,
        model: Option<String>,
        provider: Option<String>,
    ) -> Result<SessionInfo, String>;

    /// The daemon's spend against `[budget]` (`daemon/status.budget`). None by default.
    fn budget_use(&self) -> Vec<amber_proto::BudgetUse> {
        Vec::new()
    }

    /// Sets or clears (`None`) a session's goal (`session/setGoal`). Err: why, as a message.
    fn set_goal(&self, _session_id: &str, _goal: Option<String>) -> Result<SessionInfo, String> {
        Err("goals are not available here".to_owned())
    }

    /// Estimated tokens of a session's next request (messages and tool schemas).
    fn context_tokens(&self, session: &dyn SessionView) -> u64;

    /// The context window of a session's provider.
    fn context_window(&self, session: &dyn SessionView) -> u64;
}

/// One session as commands, segments and panels see it.
pub trait SessionView: Send + Sync {
    fn id(&self) -> &str;
    fn info(&self) -> SessionInfo;
    fn mode(&self) -> Mode;
    /// Sets the mode of later calls; returns the updated info.
    fn set_mode(&self, mode: Mode) -> SessionInfo;
    /// Switches the model and/or provider of later requests (`None` keeps the current);
    /// the caller has resolved them ([`Host::set_model`]).
    fn set_model(&self, model: Option<String>, provider: Option<String>) -> SessionInfo;
    fn state(&self) -> SessionState;
    fn workspace(&self) -> &Path;
    /// The provider of the session's requests (`None`: the configured default).
    fn provider(&self) -> Option<String>;
    /// The session's context as last published (system prompt first).
    fn messages(&self) -> Arc<Vec<Message>>;
    /// The session's tool state: todos and background processes.
    fn tools(&self) -> &SessionTools;
}

/// A host operation that failed; the text is what the user is shown.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The session operation failed (no such session, the store, shutting down, …).
    #[error("{0}")]
    Session(String),
    /// Compaction ran and failed; the context is as it was.
    #[error("compaction failed: {0}")]
    Compaction(String),
}
