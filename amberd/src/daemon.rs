//! The daemon's root state shared by every connection and method handler.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use amber_proto::{
    EventKind, ProviderStatus, SandboxInfo, SandboxMode, SandboxStatus, SessionCompactResult,
    SessionInfo, SessionNewParams,
};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::agent::delivery::Delivery;
use crate::mcp::McpHost;
use crate::plugins::bridge::McpBridge;
use crate::plugins::{Host, HostError, PluginRuntime, SessionView, bundled, external};
use crate::session::directory::Directory;
use crate::session::inbox::Offer;
use crate::session::services::Services;
use crate::session::{SessionError, SessionManager};
use amber_exec::probe::Availability;

/// How long `start` waits for plugins before serving anyway.
const STARTUP_PLUGIN_WAIT: Duration = Duration::from_secs(3);

/// Root of everything the daemon owns.
pub struct Daemon {
    pub sessions: SessionManager,
    /// Plugins and what they contributed (the registries live in `Services`).
    pub(crate) plugins: Arc<PluginRuntime>,
    /// MCP connections, shared by every session.
    pub(crate) mcp: Arc<McpHost>,
    pub(crate) started: Instant,
    connections: AtomicU64,
    subscriptions: Arc<AtomicU64>,
    /// Cancelled by `daemon/shutdown` or a signal.
    pub shutdown: CancellationToken,
    /// Started by a client's autostart (`--autostarted`), not by the user or systemd.
    autostarted: std::sync::atomic::AtomicBool,
    /// Scheduled routines: those added at runtime and every routine's fire state.
    pub routines: Arc<crate::routines::Routines>,
}

impl Daemon {
    /// Builds the daemon with every plugin Registered; [`Daemon::start`] enables them.
    pub fn new(services: Services) -> Arc<Daemon> {
        let services = Arc::new(services);
        let registries = services.registries.clone();
        Arc::new_cyclic(|weak: &Weak<Daemon>| {
            let pool = services.llm.clone();
            let plugins = PluginRuntime::new(registries.clone(), move || pool.invalidate());
            let fetch = services.live().config.tools.fetch_settings();
            for plugin in bundled::all(services.data_dir.clone(), fetch) {
                // Bundled names are distinct constants.
                let _ = plugins.register(plugin);
            }
            for spec in &services.live().config.plugins.external {
                // Loading the config rejects duplicate and bundled names; this catches
                // configs built in code.
                if let Err(err) = plugins.register(external::plugin(
                    spec,
                    &services.live().config.plugins,
                    services.sandbox.clone(),
                )) {
                    tracing::error!(%err, "external plugin not registered");
                }
            }
            let _ = services
                .directory
                .set(Arc::new(DaemonDirectory(weak.clone())));
            // The bridge reaches the daemon only as its plugin host.
            let host: Weak<dyn Host> = weak.clone();
            let bridge = Arc::new(McpBridge::new(host, registries));
            let mcp = McpHost::new(
                &services.live().config.mcp,
                bridge,
                services.sandbox.clone(),
                Some(services.data_dir.join(crate::mcp::oauth::AUTH_DIR)),
            );
            let _ = services.lazy_mcp.set(mcp.clone());
            Daemon {
                mcp,
                plugins,
                routines: Arc::new(crate::routines::Routines::open(&services.data_dir)),
                sessions: SessionManager::new(services),
                started: Instant::now(),
                connections: AtomicU64::new(0),
                subscriptions: Arc::new(AtomicU64::new(0)),
                shutdown: CancellationToken::new(),
                autostarted: std::sync::atomic::AtomicBool::new(false),
            }
        })
    }

    /// Enables the plugins the config starts (`PluginsConfig::starts`: not disabled, and
    /// enabled if opt-in) and connects the configured MCP
    /// servers (in the background). External plugins get a bounded wait so their tools
    /// are there for the first request, but a slow one never holds the daemon back.
    pub async fn start(self: &Arc<Self>) {
        let memory = self.sessions.services().memory.clone();
        tokio::spawn(memory.run(self.shutdown.clone()));
        let config = &self.sessions.services().live().config.plugins;
        let names: Vec<String> = self
            .plugins
            .names()
            .into_iter()
            .filter(|n| config.starts(n))
            .collect();
        // Bundled plugins in registration order, so the tool list is the same every start;
        // external ones (child processes) concurrently, with a bounded wait.
        let (bundled, external): (Vec<String>, Vec<String>) = names.into_iter().partition(|n| {
            self.plugins
                .info(n)
                .is_ok_and(|row| row.kind == amber_proto::PluginKind::Bundled)
        });
        for name in bundled {
            if let Err(err) = self.plugins.enable(&name).await {
                tracing::error!(%err, "plugin not enabled");
            }
        }
        let enables: Vec<_> = external
            .into_iter()
            .map(|name| {
                let plugins = self.plugins.clone();
                tokio::spawn(async move {
                    if let Err(err) = plugins.enable(&name).await {
                        tracing::error!(%err, "plugin not enabled");
                    }
                })
            })
            .collect();
        let all = futures::future::join_all(enables);
        if tokio::time::timeout(STARTUP_PLUGIN_WAIT, all)
            .await
            .is_err()
        {
            tracing::warn!("external plugins still starting; serving without waiting for them");
        }
        self.mcp.start_configured();
    }

    /// Stops plugins and MCP servers (after the sessions stopped).
    pub(crate) async fn stop_extensions(&self) {
        self.plugins.shutdown().await;
        self.mcp.shutdown().await;
    }

    /// Switches a session's model and/or provider. A new provider without a model
    /// brings its default model. Err: an unknown provider.
    pub(crate) fn set_session_model(
        &self,
        session: &dyn SessionView,
        model: Option<String>,
        provider: Option<String>,
    ) -> Result<SessionInfo, String> {
        let pool = &self.sessions.services().llm;
        let model = model.map(|m| m.trim().to_owned()).filter(|m| !m.is_empty());
        // Some("") goes back to the configured provider.
        let provider = match provider {
            Some(p) => Some(pool.selection(&p)?.unwrap_or_default()),
            None => None,
        };
        let model = match (&model, &provider) {
            (None, Some(p)) => Some(pool.default_model(Some(p.as_str()).filter(|p| !p.is_empty()))),
            _ => model,
        };
        Ok(session.set_model(model, provider))
    }

    /// Whether the OS sandbox works here: `None` while the start-up probe runs, else
    /// `Ok(())` or why not. Never waits.
    pub fn sandbox_availability(&self) -> Option<Availability> {
        self.sessions.services().sandbox_probe.availability()
    }

    /// [`Daemon::sandbox_availability`], waiting for the probe at most `max`.
    pub async fn sandbox_availability_wait(&self, max: Duration) -> Option<Availability> {
        self.sessions.services().sandbox_probe.wait(max).await
    }

    /// `daemon/status.sandbox`.
    pub(crate) fn sandbox_status(&self) -> SandboxStatus {
        // Reports; never starts the probe (`available: null` until a session, a turn or
        // `sandbox/selftest` needed it), so a status query spawns nothing.
        let services = self.sessions.services();
        services
            .sandbox_probe
            .status(default_sandbox(&services.live().config))
    }

    /// `daemon/status.provider`: the default endpoint, without its key.
    pub(crate) fn provider_status(&self) -> ProviderStatus {
        let endpoint = &self.sessions.services().live().endpoint;
        ProviderStatus {
            base_url: endpoint.base_url.clone(),
            model: endpoint.model.clone(),
            key_set: endpoint.api_key.is_some(),
            flavor: Some(endpoint.flavor.clone()),
        }
    }

    pub(crate) fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Counts a connection for as long as the guard lives.
    pub(crate) fn connection_guard(self: &Arc<Self>) -> ConnectionCount {
        self.connections.fetch_add(1, Ordering::Relaxed);
        ConnectionCount(self.clone())
    }
}

/// The daemon as plugins see it.
impl Host for Daemon {
    fn publish_all(&self, event: EventKind) {
        self.sessions.publish_all(event);
    }

    fn plugins(&self) -> &PluginRuntime {
        &self.plugins
    }

    fn mcp(&self) -> &McpHost {
        &self.mcp
    }

    fn list_sessions(
        &self,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> Result<(Vec<SessionInfo>, Option<String>), HostError> {
        self.sessions.list(cursor, limit).map_err(session_error)
    }

    fn create_session(&self, params: SessionNewParams) -> Result<SessionInfo, HostError> {
        self.sessions.create(params).map_err(session_error)
    }

    fn prompt(&self, session_id: &str, text: String) -> Result<String, HostError> {
        self.sessions
            .prompt(session_id, text)
            .map_err(session_error)
    }

    fn compact<'a>(
        &'a self,
        session_id: &'a str,
    ) -> BoxFuture<'a, Result<SessionCompactResult, HostError>> {
        Box::pin(async move {
            match self.sessions.compact(session_id).await {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(message)) => Err(HostError::Compaction(message)),
                Err(err) => Err(session_error(err)),
            }
        })
    }

    fn clear<'a>(&'a self, session_id: &'a str) -> BoxFuture<'a, Result<usize, HostError>> {
        Box::pin(async move { self.sessions.clear(session_id).await.map_err(session_error) })
    }

    fn provider_names(&self) -> Vec<String> {
        self.sessions.services().llm.names()
    }

    fn set_model(
        &self,
        session: &dyn SessionView,
        model: Option<String>,
        provider: Option<String>,
    ) -> Result<SessionInfo, String> {
        self.set_session_model(session, model, provider)
    }

    fn budget_use(&self) -> Vec<amber_proto::BudgetUse> {
        self.sessions.services().budget_use()
    }

    fn set_goal(&self, session_id: &str, goal: Option<String>) -> Result<SessionInfo, String> {
        let handle = self.sessions.get(session_id).map_err(|e| e.to_string())?;
        crate::session::features::goals::set(&handle.shared, goal).map_err(|e| e.to_string())
    }

    fn context_tokens(&self, session: &dyn SessionView) -> u64 {
        let specs = crate::agent::tool_specs(&self.sessions.services().tools());
        crate::compaction::estimate_tokens(&session.messages(), &specs)
    }

    fn context_window(&self, session: &dyn SessionView) -> u64 {
        self.sessions
            .services()
            .llm
            .context_window(session.provider().as_deref())
    }
}

/// The sandbox sessions get unless they ask for another (`[sandbox]`), as `daemon/status`
/// reports it; `off` reports the network on, as `SessionInfo.sandbox` does.
fn default_sandbox(config: &crate::config::Config) -> SandboxInfo {
    let network = if config.sandbox.mode == SandboxMode::Off {
        amber_proto::NetworkMode::On
    } else {
        config.sandbox.network
    };
    SandboxInfo::new(config.sandbox.mode, network)
}

fn session_error(err: crate::session::SessionError) -> HostError {
    HostError::Session(err.to_string())
}

impl Daemon {
    /// Records that a client's autostart started this daemon (`daemon/status.autostarted`).
    pub fn mark_autostarted(&self) {
        self.autostarted.store(true, Ordering::SeqCst);
    }

    pub(crate) fn autostarted(&self) -> bool {
        self.autostarted.load(Ordering::SeqCst)
    }

    /// Subscriptions whose forwarder is still running.
    pub(crate) fn subscriptions(&self) -> u64 {
        self.subscriptions.load(Ordering::SeqCst)
    }

    /// Counts a running subscription forwarder for as long as the guard lives.
    pub(crate) fn subscription_guard(&self) -> SubscriptionCount {
        self.subscriptions.fetch_add(1, Ordering::SeqCst);
        SubscriptionCount(self.subscriptions.clone())
    }
}

/// Decrements the subscription count on drop.
pub(crate) struct SubscriptionCount(Arc<AtomicU64>);

impl Drop for SubscriptionCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Decrements the connection count on drop.
pub(crate) struct ConnectionCount(Arc<Daemon>);

impl Drop for ConnectionCount {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
        // What the connection held (queued replies, buffers) is freed by now.
        self.0.sessions.services().memory.soon();
    }
}

/// The daemon's sessions as features reach them (`session::directory`).
struct DaemonDirectory(Weak<Daemon>);

impl DaemonDirectory {
    fn daemon(&self) -> Result<Arc<Daemon>, SessionError> {
        self.0
            .upgrade()
            .ok_or_else(|| SessionError::Internal("the daemon is stopping".into()))
    }
}

impl Directory for DaemonDirectory {
    fn create(&self, params: SessionNewParams) -> Result<SessionInfo, SessionError> {
        self.daemon()?.sessions.create(params)
    }

    fn prompt(&self, id: &str, text: String) -> Result<String, SessionError> {
        self.daemon()?.sessions.prompt(id, text)
    }

    fn info(&self, id: &str) -> Result<SessionInfo, SessionError> {
        self.daemon()?.sessions.info_of(id)
    }

    fn all(&self) -> Vec<SessionInfo> {
        self.0
            .upgrade()
            .map(|daemon| daemon.sessions.all_infos())
            .unwrap_or_default()
    }

    fn children(&self, parent: Option<&str>) -> Vec<SessionInfo> {
        self.0
            .upgrade()
            .map(|daemon| daemon.sessions.children(parent))
            .unwrap_or_default()
    }

    fn children_usage(&self, parent: &str) -> amber_proto::Usage {
        self.0
            .upgrade()
            .map(|daemon| daemon.sessions.children_usage(parent))
            .unwrap_or_default()
    }

    fn resolve(&self, id: &str) -> Result<String, SessionError> {
        let daemon = self.daemon()?;
        let resolved = daemon
            .sessions
            .resolve_id(id)?
            .unwrap_or_else(|| id.to_owned());
        daemon.sessions.info_of(&resolved)?;
        Ok(resolved)
    }

    fn publish(&self, id: &str, kind: EventKind) -> Result<(), SessionError> {
        let handle = self.daemon()?.sessions.get(id)?;
        handle
            .shared
            .hub
            .publish_stored(None, kind)
            .map(|_| ())
            .map_err(SessionError::Store)
    }

    fn notify_when_idle(&self, id: &str, watcher: &str) -> Result<(), SessionError> {
        let handle = self.daemon()?.sessions.get(id)?;
        let messages = handle
            .shared
            .feature::<crate::session::features::messages::SessionMessages>()
            .ok_or_else(|| SessionError::Internal("messages are not composed".into()))?;
        messages.notify_when_idle(watcher);
        Ok(())
    }

    fn cancel(&self, id: &str) -> Result<bool, SessionError> {
        Ok(self.daemon()?.sessions.get(id)?.shared.cancel())
    }

    fn offer(&self, id: &str, delivery: Delivery) -> Result<Offer, SessionError> {
        Ok(self.daemon()?.sessions.get(id)?.shared.offer(delivery))
    }

    fn edit_info(
        &self,
        id: &str,
        edit: &mut dyn FnMut(&mut SessionInfo),
    ) -> Result<SessionInfo, SessionError> {
        self.daemon()?.sessions.edit_info(id, edit)
    }
}
