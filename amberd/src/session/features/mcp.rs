//! A session's own MCP servers (`session/new {mcpServers}`, `mcp/add {sessionId}`): the
//! servers an editor hands its session through the ACP bridge.
//!
//! Each session has a private [`McpHost`] whose sink keeps the servers' tools here rather
//! than in the daemon's registries: they are offered to this session's turns alone (over a
//! daemon-wide tool of the same name), their status goes out as `mcp_status` on this
//! session's stream only, and they stop when the session stops (deleted, unloaded, the
//! daemon shutting down). The list is kept in the session's metadata, so a session loaded
//! again reconnects them. Prompts of session servers are not offered as commands (commands
//! are daemon-wide).

use amber_proto::sync::Locked;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use amber_proto::{EventKind, McpServerInfo, McpStatus, SessionMcpServer};
use tokio::sync::Notify;

use crate::mcp::{McpConfig, McpError, McpHost, McpPrompt, McpSink};
use amber_exec::sandbox_env::SandboxEnv;
use amber_tools::{Tool, ToolRegistry};
use futures::future::BoxFuture;

use crate::session::SessionShared;
use crate::session::feature::{Admission, Attach, Draft, Feature, SessionFeature, TurnStart};

/// The session's servers and what they contribute.
pub(crate) struct SessionMcp {
    host: Arc<McpHost>,
    sink: Arc<SessionSink>,
    /// As asked for, in the order added: what the metadata keeps.
    servers: Mutex<Vec<SessionMcpServer>>,
    /// How long a turn waits for servers still making their first connection.
    connect_timeout: Duration,
    /// The servers to connect once the session runs (`SessionFeature::started`).
    pending: Mutex<Vec<SessionMcpServer>>,
}

struct SessionSink {
    session: Weak<SessionShared>,
    /// Each ready server's tools, by server name.
    tools: Mutex<BTreeMap<String, Vec<Arc<dyn Tool>>>>,
    /// Servers whose first connection has ended (ready or failed), and its waiters.
    settled: Mutex<BTreeSet<String>>,
    settled_changed: Notify,
}

impl SessionMcp {
    /// Nothing connects before [`SessionMcp::add`]. `config`: the daemon's `[mcp]`, for its
    /// timeouts (its servers are the daemon's, not this session's).
    pub(crate) fn new(
        session: Weak<SessionShared>,
        config: &McpConfig,
        sandbox: Arc<SandboxEnv>,
    ) -> Self {
        let sink = Arc::new(SessionSink {
            session,
            tools: Mutex::new(BTreeMap::new()),
            settled: Mutex::new(BTreeSet::new()),
            settled_changed: Notify::new(),
        });
        let timeouts = McpConfig {
            servers: Vec::new(),
            ..config.clone()
        };
        Self {
            // An editor's servers for one session: no OAuth (their client holds the login).
            host: McpHost::new(&timeouts, sink.clone(), sandbox, None),
            sink,
            servers: Mutex::new(Vec::new()),
            connect_timeout: config.connect_timeout(),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// Waits (at most the connect timeout) until every server has made its first connection
    /// or failed it: a turn starting right after `session/new` is offered the editor's
    /// tools rather than racing their start.
    pub(crate) async fn first_connections(&self) {
        let deadline = tokio::time::Instant::now() + self.connect_timeout;
        loop {
            let notified = self.sink.settled_changed.notified();
            let pending = {
                let settled = self.sink.settled.locked();
                self.lock().iter().any(|s| !settled.contains(&s.name))
            };
            if !pending {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                tracing::warn!(
                    "session MCP servers still connecting; the turn goes on without them"
                );
                return;
            }
        }
    }

    /// Starts connecting `server` in the background. The same server again (same name and
    /// transport) is left as it is; a different one under a taken name replaces it.
    /// Returns whether the session's list changed (its metadata is then saved again).
    pub(crate) async fn add(
        &self,
        server: SessionMcpServer,
    ) -> Result<(McpServerInfo, bool), McpError> {
        let known = self.lock().iter().find(|s| s.name == server.name).cloned();
        match known {
            Some(same) if same == server => {
                let info = self.host.list().into_iter().find(|i| i.name == server.name);
                if let Some(info) = info {
                    return Ok((info, false));
                }
            }
            Some(_) => {
                self.host.remove(&server.name).await?;
                self.lock().retain(|s| s.name != server.name);
                self.sink.unsettle(&server.name);
            }
            None => {}
        }
        let info = self.host.add(&server.name, server.transport.clone())?;
        self.lock().push(server);
        Ok((info, true))
    }

    /// Starts connecting each of `servers` (names already checked unique), in the
    /// background.
    pub(crate) fn start(&self, servers: Vec<SessionMcpServer>) {
        for server in servers {
            match self.host.add(&server.name, server.transport.clone()) {
                Ok(_) => self.lock().push(server),
                Err(err) => {
                    tracing::warn!(server = %server.name, %err, "session MCP server not started")
                }
            }
        }
    }

    /// Checks a server as `add` would, without starting it (before a session exists).
    pub(crate) fn validate(server: &SessionMcpServer) -> Result<(), String> {
        if let Some(problem) = crate::mcp::config::name_problem(&server.name) {
            return Err(format!(
                "invalid MCP server name `{}`: {problem}",
                server.name
            ));
        }
        crate::mcp::config::validate_transport(&server.transport)
            .map_err(|e| format!("invalid transport for MCP server `{}`: {e}", server.name))
    }

    /// The servers as asked for (for the metadata).
    pub(crate) fn servers(&self) -> Vec<SessionMcpServer> {
        self.lock().clone()
    }

    /// Adds the session servers' tools to `tools` (replacing daemon-wide ones of the same
    /// name), each with its source.
    pub(crate) fn offer(&self, tools: &mut ToolRegistry) {
        for tool in self.sink.lock().values().flatten() {
            tools.register(tool.clone());
        }
    }

    /// `(server, tool)` for each tool of the session's servers.
    pub(crate) fn tools(&self) -> Vec<(String, Arc<dyn Tool>)> {
        self.sink
            .lock()
            .iter()
            .flat_map(|(server, tools)| tools.iter().map(|t| (server.clone(), t.clone())))
            .collect()
    }

    /// Closes every connection and waits until each stdio child is gone.
    pub(crate) async fn shutdown(&self) {
        self.host.shutdown().await;
        self.sink.lock().clear();
    }

    fn lock(&self) -> MutexGuard<'_, Vec<SessionMcpServer>> {
        self.servers.locked()
    }
}

impl SessionSink {
    fn unsettle(&self, name: &str) {
        self.settled.locked().remove(name);
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Vec<Arc<dyn Tool>>>> {
        self.tools.locked()
    }
}

impl McpSink for SessionSink {
    fn status(&self, info: &McpServerInfo) {
        tracing::info!(server = %info.name, status = ?info.status, error = ?info.error, "session MCP server status");
        if matches!(info.status, McpStatus::Ready | McpStatus::Failed) {
            let first = self.settled.locked().insert(info.name.clone());
            if first {
                self.settled_changed.notify_waiters();
            }
        }
        if let Some(session) = self.session.upgrade() {
            session
                .hub
                .publish(None, EventKind::McpStatus(info.clone()));
        }
    }

    fn contributions(&self, server: &str, tools: Vec<Arc<dyn Tool>>, _prompts: Vec<McpPrompt>) {
        let mut all = self.lock();
        if tools.is_empty() {
            all.remove(server);
        } else {
            all.insert(server.to_owned(), tools);
        }
    }
}

/// The feature: every session gets its own MCP host, the servers its metadata lists.
pub(crate) struct McpFeature;

impl Feature for McpFeature {
    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        let mcp = SessionMcp::new(
            session.session.clone(),
            &session.services.live().config.mcp,
            session.services.sandbox.clone(),
        );
        *mcp.pending.locked() = session.meta.mcp_servers.clone();
        Some(Arc::new(mcp))
    }

    /// The servers asked for are the session's, kept in its metadata.
    fn prepare(&self, draft: &mut Draft<'_>) -> Result<(), crate::session::SessionError> {
        draft.meta.mcp_servers = draft.params.mcp_servers.clone();
        Ok(())
    }

    /// Valid names and transports, each name once.
    fn check_new(&self, params: &amber_proto::SessionNewParams) -> Result<(), String> {
        let servers = &params.mcp_servers;
        for (i, server) in servers.iter().enumerate() {
            SessionMcp::validate(server).map_err(|e| format!("mcpServers: {e}"))?;
            if servers[..i].iter().any(|s| s.name == server.name) {
                return Err(format!(
                    "mcpServers: the name `{}` is given twice",
                    server.name
                ));
            }
        }
        Ok(())
    }
}

impl SessionFeature for SessionMcp {
    fn started(&self, _shared: &Arc<SessionShared>, _restored: bool) {
        let servers = std::mem::take(&mut *self.pending.locked());
        self.start(servers);
    }

    /// Servers just given by `session/new` may still be starting.
    fn before_turn<'a>(&'a self, _start: &'a TurnStart<'a>) -> BoxFuture<'a, Admission> {
        Box::pin(async move {
            self.first_connections().await;
            Admission::Proceed
        })
    }

    fn offer_tools(&self, tools: &mut ToolRegistry) {
        self.offer(tools);
    }

    fn save(&self, meta: &mut amber_store::SessionMeta) {
        meta.mcp_servers = self.servers();
    }

    /// The conversation used the session's MCP servers: the fork keeps them.
    fn fork(&self, params: &mut amber_proto::SessionNewParams) {
        params.mcp_servers = self.servers();
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shutdown())
    }
}
