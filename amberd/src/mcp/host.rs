//! [`McpHost`]: the daemon's registry of MCP servers. Adds and removes servers, lists
//! them, fetches prompts, and shuts everything down; each server's connection lives in
//! its own task (`supervisor.rs`), so nothing here waits for a server to connect.

use amber_proto::sync::Locked;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use amber_proto::{McpServerInfo, McpTransport};
use rmcp::model::GetPromptRequestParams;
use tokio::task::JoinHandle;

use super::client::chain;
use super::config::{OAuthSettings, name_problem, validate_transport};
use super::supervisor::{self, Server, Settings};
use super::{McpConfig, McpError, McpSink, render};
use amber_exec::sandbox_env::SandboxEnv;

/// The MCP host. Owned by the daemon (`Arc`), shared by every session.
pub struct McpHost {
    settings: Arc<Settings>,
    sink: Arc<dyn McpSink>,
    /// Configured servers first (file order), then added ones (in the order added).
    servers: Mutex<Vec<Entry>>,
    shutting_down: AtomicBool,
}

struct Entry {
    server: Arc<Server>,
    /// None until started (configured servers wait for `start_configured`, lazy ones for
    /// `tool_search`).
    task: Option<JoinHandle<()>>,
    /// Started by `tool_search`, not by `start_configured`.
    lazy: bool,
}

impl McpHost {
    /// A host knowing the configured servers; nothing connects before
    /// [`McpHost::start_configured`].
    /// `sandbox`: the daemon-wide part of the sandbox of configured stdio servers that
    /// ask for one (`sandbox = …` in their table).
    /// `auth_dir`: where remote servers' OAuth credentials are kept (`oauth.rs`); `None`:
    /// no OAuth.
    pub fn new(
        config: &McpConfig,
        sink: Arc<dyn McpSink>,
        sandbox: Arc<SandboxEnv>,
        auth_dir: Option<std::path::PathBuf>,
    ) -> Arc<Self> {
        let settings = Arc::new(Settings::new(config, sandbox, auth_dir));
        let servers: Vec<Entry> = config
            .servers
            .iter()
            .map(|entry| Entry {
                server: Server::new(
                    &entry.name,
                    entry.transport.clone(),
                    entry.sandbox,
                    entry.always_load,
                    entry.oauth.clone(),
                    settings.clone(),
                ),
                task: None,
                // Without tool_search nothing would ever start it.
                lazy: entry.lazy && config.tool_search != super::config::ToolSearchMode::Off,
            })
            .collect();
        // A lazy server that has not started is `closed` until a search starts it.
        for entry in servers.iter().filter(|e: &&Entry| e.lazy) {
            entry.server.mark_closed();
        }
        Arc::new(McpHost {
            settings,
            sink,
            servers: Mutex::new(servers),
            shutting_down: AtomicBool::new(false),
        })
    }

    /// Starts connecting every configured server in the background. Needs a tokio
    /// runtime; calling it again does nothing.
    pub fn start_configured(&self) {
        let mut servers = self.lock();
        for entry in servers.iter_mut().filter(|e| e.task.is_none() && !e.lazy) {
            entry.task = Some(self.spawn(&entry.server));
        }
    }

    /// Adds a server and starts connecting it in the background. Returns at once with
    /// status `connecting`; `ready` or `failed` follow through the sink.
    pub fn add(&self, name: &str, transport: McpTransport) -> Result<McpServerInfo, McpError> {
        self.add_with_sandbox(name, transport, None, false, OAuthSettings::default())
    }

    /// [`McpHost::add`] with a configured server's sandbox.
    fn add_with_sandbox(
        &self,
        name: &str,
        transport: McpTransport,
        sandbox: Option<amber_proto::SandboxInfo>,
        always_load: bool,
        oauth: OAuthSettings,
    ) -> Result<McpServerInfo, McpError> {
        if let Some(problem) = name_problem(name) {
            return Err(McpError::InvalidName {
                name: name.to_owned(),
                problem,
            });
        }
        validate_transport(&transport).map_err(|message| McpError::InvalidTransport {
            name: name.to_owned(),
            message,
        })?;
        let mut servers = self.lock();
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(McpError::ShuttingDown);
        }
        if servers.iter().any(|e| e.server.name == name) {
            return Err(McpError::NameTaken(name.to_owned()));
        }
        let server = Server::new(
            name,
            transport,
            sandbox,
            always_load,
            oauth,
            self.settings.clone(),
        );
        let info = server.info();
        let task = Some(self.spawn(&server));
        servers.push(Entry {
            server,
            task,
            lazy: false,
        });
        Ok(info)
    }

    /// Removes a server: its connection is closed (a stdio child is killed), then the
    /// sink gets empty contributions and a `closed` status.
    pub async fn remove(&self, name: &str) -> Result<(), McpError> {
        let entry = {
            let mut servers = self.lock();
            let index = servers
                .iter()
                .position(|e| e.server.name == name)
                .ok_or_else(|| unknown(name, &servers))?;
            servers.remove(index)
        };
        let info = close(entry).await;
        self.sink.contributions(name, Vec::new(), Vec::new());
        self.sink.status(&info);
        Ok(())
    }

    /// Follows a config file edit: servers the old `[mcp.servers]` had and the new one
    /// lacks (or changed) are removed, new (or changed) ones are added and start
    /// connecting. Servers added with `mcp/add` are left alone, even when the new file
    /// names one of theirs (that name stays taken, and the file's entry is skipped with a
    /// warning). The call timeouts and backoff are read at start only.
    pub async fn reconcile(&self, old: &McpConfig, new: &McpConfig) {
        let unchanged = |entry: &super::config::McpServerEntry, other: &McpConfig| {
            other.servers.iter().any(|e| e == entry)
        };
        for gone in old.servers.iter().filter(|e| !unchanged(e, new)) {
            match self.remove(&gone.name).await {
                Ok(()) => tracing::info!(server = %gone.name, "MCP server removed (config edit)"),
                Err(err) => tracing::debug!(server = %gone.name, %err, "MCP server not removed"),
            }
        }
        for added in new.servers.iter().filter(|e| !unchanged(e, old)) {
            match self.add_with_sandbox(
                &added.name,
                added.transport.clone(),
                added.sandbox,
                added.always_load,
                added.oauth.clone(),
            ) {
                Ok(_) => tracing::info!(server = %added.name, "MCP server added (config edit)"),
                Err(err) => {
                    tracing::warn!(server = %added.name, %err, "MCP server from the edited config not added")
                }
            }
        }
    }

    /// Every server's current state: configured ones in file order, then added ones.
    pub fn list(&self) -> Vec<McpServerInfo> {
        self.lock().iter().map(|e| e.server.info()).collect()
    }

    /// Runs `prompts/get` and renders the prompt's messages as one text (what the
    /// "prompts as commands" adapter sends as the user's prompt).
    pub async fn get_prompt(
        &self,
        server: &str,
        prompt: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, McpError> {
        let server = self
            .find(server)
            .ok_or_else(|| unknown(server, &self.lock()))?;
        let peer = server.peer().map_err(McpError::NotReady)?;
        if !server.has_prompt(prompt) {
            return Err(McpError::UnknownPrompt {
                server: server.name.clone(),
                prompt: prompt.to_owned(),
            });
        }
        let mut params = GetPromptRequestParams::new(prompt);
        if !arguments.is_empty() {
            params = params.with_arguments(arguments);
        }
        let timeout = self.settings.call_timeout;
        match tokio::time::timeout(timeout, peer.get_prompt(params)).await {
            Ok(Ok(result)) => Ok(render::prompt(&result)),
            Ok(Err(err)) => {
                server.report(&err);
                Err(McpError::Server {
                    server: server.name.clone(),
                    method: "prompts/get",
                    message: chain(&err),
                })
            }
            Err(_) => Err(McpError::Timeout {
                server: server.name.clone(),
                method: "prompts/get",
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// Closes every connection and waits until each stdio child is gone. Later `add`s
    /// are refused. The sink is not told: the daemon is going away with it.
    pub async fn shutdown(&self) {
        let entries = {
            let mut servers = self.lock();
            self.shutting_down.store(true, Ordering::SeqCst);
            std::mem::take(&mut *servers)
        };
        futures::future::join_all(entries.into_iter().map(close)).await;
    }

    /// The server's state, for tests that poke at its connection.
    #[cfg(test)]
    pub(super) fn server(&self, name: &str) -> Option<Arc<Server>> {
        self.find(name)
    }

    /// Starts an OAuth login for the HTTP server `name` (`mcp/login`): the authorization URL
    /// for the person's browser. Once the redirect comes back the tokens are stored and the
    /// server reconnects with them at once; a login that fails leaves the server as it was
    /// and logs why.
    pub async fn login(
        &self,
        name: &str,
        client_id: Option<String>,
        client_secret: Option<String>,
    ) -> Result<String, McpError> {
        let server = self.find(name).ok_or_else(|| unknown(name, &self.lock()))?;
        let McpTransport::Http { url, .. } = &server.transport else {
            return Err(McpError::InvalidTransport {
                name: name.to_owned(),
                message: "OAuth applies to `url` servers only".into(),
            });
        };
        let credentials = server.credentials().ok_or_else(|| {
            McpError::NotReady(format!(
                "MCP server `{name}`: this host keeps no OAuth credentials"
            ))
        })?;
        let request = super::oauth::LoginRequest {
            url: url.clone(),
            credentials,
            client_id: client_id.or_else(|| server.oauth.client_id.clone()),
            client_secret,
            scopes: server.oauth.scopes.clone(),
            challenge: server.challenge(),
        };
        let (authorization_url, done) =
            super::oauth::start_login(request)
                .await
                .map_err(|message| McpError::Server {
                    server: name.to_owned(),
                    method: "OAuth login",
                    message,
                })?;
        let waiting = server.clone();
        let sink = self.sink.clone();
        sink.status(&server.login_started());
        tokio::spawn(async move {
            let failed = match done.await {
                Ok(Ok(())) => {
                    tracing::info!(server = %waiting.name, "MCP OAuth login completed");
                    sink.status(&waiting.login_completed());
                    return;
                }
                Ok(Err(err)) => err,
                Err(err) => err.to_string(),
            };
            tracing::warn!(server = %waiting.name, err = %failed, "MCP OAuth login failed");
            // Said where `mcp login` (and `mcp/list`) looks.
            sink.status(&waiting.login_failed(&failed));
        });
        Ok(authorization_url)
    }

    /// Calls the tool `tool` of the server `name` for the user (`/mcp call`), outside any
    /// session: the result as text, and whether the server said it failed. A server's
    /// question during such a call has nobody to ask: declined, or with `form_defaults`
    /// (`--defaults`) a form is accepted with its schema's defaults.
    pub async fn call(
        &self,
        name: &str,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        form_defaults: bool,
    ) -> Result<(String, bool), McpError> {
        let server = self.find(name).ok_or_else(|| unknown(name, &self.lock()))?;
        let peer = server.peer().map_err(McpError::NotReady)?;
        // `--defaults`: the person who made the call takes the forms' defaults.
        let _asker = form_defaults.then(|| {
            server
                .callers
                .enter("mcp-call", Arc::new(super::asks::FormDefaults))
        });
        let mut params = rmcp::model::CallToolRequestParams::new(tool.to_owned());
        if !arguments.is_empty() {
            params = params.with_arguments(arguments);
        }
        let timeout = self.settings.call_timeout;
        let call = super::adapters::call_answering(&server, &peer, params);
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(result)) => Ok((render::call_result(&result), result.is_error == Some(true))),
            Ok(Err(err)) => {
                server.report(&err);
                Err(McpError::Server {
                    server: name.to_owned(),
                    method: "tools/call",
                    message: chain(&err),
                })
            }
            Err(_) => Err(McpError::Timeout {
                server: name.to_owned(),
                method: "tools/call",
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// Forgets the HTTP server `name`'s OAuth credentials (`mcp/logout`); its next connect
    /// goes without them. True when there were any.
    pub fn logout(&self, name: &str) -> Result<bool, McpError> {
        let server = self.find(name).ok_or_else(|| unknown(name, &self.lock()))?;
        let Some(path) = server.credentials() else {
            return Ok(false);
        };
        super::oauth::forget(&path).map_err(|e| McpError::Server {
            server: name.to_owned(),
            method: "OAuth logout",
            message: format!("cannot remove {}: {e}", path.display()),
        })
    }

    /// Starts the lazy server `name` unless it runs, and waits until it is ready or has
    /// failed (within its connect and listing time): its tools.
    pub async fn start_lazy(
        &self,
        name: &str,
    ) -> Result<Vec<Arc<dyn amber_tools::Tool>>, McpError> {
        let server = {
            let mut servers = self.lock();
            if self.shutting_down.load(Ordering::SeqCst) {
                return Err(McpError::ShuttingDown);
            }
            let index = servers
                .iter()
                .position(|e| e.server.name == name)
                .ok_or_else(|| unknown(name, &servers))?;
            if servers[index].task.is_none() {
                servers[index].server.mark_connecting();
                let task = self.spawn(&servers[index].server);
                servers[index].task = Some(task);
            }
            servers[index].server.clone()
        };
        let deadline = tokio::time::Instant::now() + self.settings.connect_timeout * 2;
        loop {
            let info = server.info();
            match info.status {
                amber_proto::McpStatus::Ready => return Ok(server.tools()),
                amber_proto::McpStatus::Failed => {
                    return Err(McpError::NotReady(format!(
                        "MCP server `{name}` failed: {}",
                        info.error.unwrap_or_default()
                    )));
                }
                _ if tokio::time::Instant::now() > deadline => {
                    return Err(McpError::NotReady(format!(
                        "MCP server `{name}` is not ready after {} ms",
                        (self.settings.connect_timeout * 2).as_millis()
                    )));
                }
                _ => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
    }

    fn find(&self, name: &str) -> Option<Arc<Server>> {
        self.lock()
            .iter()
            .find(|e| e.server.name == name)
            .map(|e| e.server.clone())
    }

    fn spawn(&self, server: &Arc<Server>) -> JoinHandle<()> {
        tokio::spawn(supervisor::run(server.clone(), self.sink.clone()))
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.servers.locked()
    }
}

fn unknown(name: &str, servers: &[Entry]) -> McpError {
    McpError::UnknownServer {
        name: name.to_owned(),
        known: servers.iter().map(|e| e.server.name.clone()).collect(),
    }
}

/// Stops a server's task (which closes its connection) and waits for it.
async fn close(entry: Entry) -> McpServerInfo {
    entry.server.closed.cancel();
    if let Some(task) = entry.task
        && let Err(err) = task.await
    {
        tracing::warn!(server = %entry.server.name, %err, "MCP server task failed");
    }
    entry.server.mark_closed()
}

impl Drop for McpHost {
    /// A host dropped without `shutdown` still stops its tasks; they close their
    /// connections in the background.
    fn drop(&mut self) {
        for entry in self.lock().iter() {
            entry.server.closed.cancel();
        }
    }
}

impl std::fmt::Debug for McpHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.list()).finish()
    }
}

impl crate::agent::tool_search::LazyServers for McpHost {
    fn waiting(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|e| e.lazy && e.task.is_none())
            .map(|e| e.server.name.clone())
            .collect()
    }

    fn start<'a>(
        &'a self,
        name: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Vec<Arc<dyn amber_tools::Tool>>, String>> {
        Box::pin(async move { self.start_lazy(name).await.map_err(|e| e.to_string()) })
    }
}
