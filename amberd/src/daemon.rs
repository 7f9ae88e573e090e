//! The daemon's root state shared by every connection and method handler.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use amber_proto::SessionInfo;
use tokio_util::sync::CancellationToken;

use crate::mcp::McpHost;
use crate::plugins::bridge::McpBridge;
use crate::plugins::{PluginRuntime, bundled, external};
use crate::session::deps::Deps;
use crate::session::{SessionManager, SessionShared};

/// How long `start` waits for plugins before serving anyway.
const STARTUP_PLUGIN_WAIT: Duration = Duration::from_secs(3);

/// Name reported in `initialize` and `daemon/status`.
pub const NAME: &str = "amberd";
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Root of everything the daemon owns.
pub struct Daemon {
    pub sessions: SessionManager,
    /// Plugins and what they contributed (the registries live in `Deps`).
    pub plugins: Arc<PluginRuntime>,
    /// MCP connections, shared by every session.
    pub mcp: Arc<McpHost>,
    pub started: Instant,
    connections: AtomicU64,
    subscriptions: Arc<AtomicU64>,
    /// Cancelled by `daemon/shutdown` or a signal.
    pub shutdown: CancellationToken,
}

impl Daemon {
    /// Builds the daemon with every plugin Registered; [`Daemon::start`] enables them.
    pub fn new(deps: Deps) -> Arc<Daemon> {
        let deps = Arc::new(deps);
        let registries = deps.registries.clone();
        Arc::new_cyclic(|weak| {
            let pool = deps.llm.clone();
            let plugins = PluginRuntime::new(registries.clone(), move || pool.invalidate());
            for plugin in bundled::all(deps.data_dir.clone()) {
                // Bundled names are distinct constants.
                let _ = plugins.register(plugin);
            }
            for spec in &deps.config.plugins.external {
                // Loading the config rejects duplicate and bundled names; this catches
                // configs built in code.
                if let Err(err) = plugins.register(external::plugin(spec, &deps.config.plugins)) {
                    tracing::error!(%err, "external plugin not registered");
                }
            }
            let bridge = Arc::new(McpBridge::new(weak.clone(), registries));
            Daemon {
                mcp: McpHost::new(&deps.config.mcp, bridge),
                plugins,
                sessions: SessionManager::new(deps),
                started: Instant::now(),
                connections: AtomicU64::new(0),
                subscriptions: Arc::new(AtomicU64::new(0)),
                shutdown: CancellationToken::new(),
            }
        })
    }

    /// Enables the plugins the config does not disable and connects the configured MCP
    /// servers (in the background). External plugins get a bounded wait so their tools
    /// are there for the first request, but a slow one never holds the daemon back.
    pub async fn start(self: &Arc<Self>) {
        let disabled = &self.sessions.deps().config.plugins.disabled;
        let names: Vec<String> = self
            .plugins
            .names()
            .into_iter()
            .filter(|n| !disabled.contains(n))
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
    pub async fn stop_extensions(&self) {
        self.plugins.shutdown().await;
        self.mcp.shutdown().await;
    }

    /// Estimated tokens of a session's next request (messages and tool schemas).
    pub fn context_tokens(&self, session: &SessionShared) -> u64 {
        let specs = crate::agent::tool_specs(&self.sessions.deps().tools());
        crate::compaction::estimate_tokens(&session.messages(), &specs)
    }

    /// The context window of a session's provider.
    pub fn context_window(&self, session: &SessionShared) -> u64 {
        self.sessions
            .deps()
            .llm
            .context_window(session.provider().as_deref())
    }

    /// Every provider a session may select.
    pub fn provider_names(&self) -> Vec<String> {
        self.sessions.deps().llm.names()
    }

    /// Switches a session's model and/or provider. A new provider without a model
    /// brings its default model. Err: an unknown provider.
    pub fn set_session_model(
        &self,
        session: &SessionShared,
        model: Option<String>,
        provider: Option<String>,
    ) -> Result<SessionInfo, String> {
        let pool = &self.sessions.deps().llm;
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

    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Counts a connection for as long as the guard lives.
    pub fn connection_guard(self: &Arc<Self>) -> ConnectionCount {
        self.connections.fetch_add(1, Ordering::Relaxed);
        ConnectionCount(self.clone())
    }
}

impl Daemon {
    /// Subscriptions whose forwarder is still running.
    pub fn subscriptions(&self) -> u64 {
        self.subscriptions.load(Ordering::SeqCst)
    }

    /// Counts a running subscription forwarder for as long as the guard lives.
    pub fn subscription_guard(&self) -> SubscriptionCount {
        self.subscriptions.fetch_add(1, Ordering::SeqCst);
        SubscriptionCount(self.subscriptions.clone())
    }
}

/// Decrements the subscription count on drop.
pub struct SubscriptionCount(Arc<AtomicU64>);

impl Drop for SubscriptionCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Decrements the connection count on drop.
pub struct ConnectionCount(Arc<Daemon>);

impl Drop for ConnectionCount {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}
