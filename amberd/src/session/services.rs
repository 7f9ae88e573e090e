//! The daemon's services every session uses: the live configuration, the LLM client pool,
//! the tool registry, the store, the sandbox environment and the daemon-wide state of each
//! session feature.

use amber_proto::sync::{Locked, RwLocked};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use amber_llm::{Endpoint, LlmPool};
use amber_policy::{RuleError, RuleSet};
use amber_store::Store;

use crate::compaction::CompactionSettings;
use crate::config::Config;
use crate::plugins::Registries;
use amber_exec::probe::SandboxProbe;
use amber_exec::sandbox_env::SandboxEnv;
use amber_tools::{ToolLimits, ToolRegistry};

/// The settings a config file edit changes (`crate::reload`): each turn, session and
/// request reads one snapshot ([`Services::live`]), so none mixes old and new settings.
#[derive(Debug)]
pub struct LiveConfig {
    pub config: Config,
    /// The default provider's endpoint, as `config` and the daemon's environment resolve it.
    pub endpoint: Endpoint,
    /// `[[rules]]` of the config file, compiled.
    pub rules: RuleSet,
    pub compaction: CompactionSettings,
    pub limits: ToolLimits,
}

impl LiveConfig {
    /// Everything derived from `config`; Err when its rules do not compile.
    pub fn new(
        config: Config,
        env: &impl Fn(&str) -> Option<OsString>,
    ) -> Result<LiveConfig, RuleError> {
        let rules = RuleSet::new(&config.rules)?;
        Ok(LiveConfig {
            endpoint: Endpoint::resolve(&config.provider, env),
            limits: ToolLimits {
                max_output_bytes: config.tools.max_output_bytes,
                bash_default_timeout: config.bash_timeout(),
            },
            compaction: CompactionSettings {
                threshold: config.compaction.threshold,
                headroom: config.compaction.headroom,
                context_window: config.provider.context_window,
            },
            rules,
            config,
        })
    }
}

/// The daemon-level services of the session actors. Read-only but for [`LiveConfig`], which a
/// config file edit replaces whole.
pub struct Services {
    live: RwLock<Arc<LiveConfig>>,
    /// Why the config file on disk is not the one in force (`daemon/status.configError`).
    config_error: Mutex<Option<String>>,
    /// One client per provider; `llm.client(None)` is the default provider's, or the
    /// message that tells the user how to configure one.
    pub llm: LlmPool,
    /// What the plugins contributed: tools, providers, commands, status segments, panels.
    pub registries: Arc<Registries>,
    /// The daemon's data directory (sessions, extracted skills).
    pub data_dir: PathBuf,
    /// The durable session store; `None` keeps sessions in memory only.
    pub store: Option<Store>,
    /// The environment of tool processes, from `[tools.env]` and the daemon's own.
    pub tool_env: Arc<amber_exec::env_policy::ToolEnv>,
    /// The daemon-wide part of every sandbox: hidden directories (`main` adds the
    /// socket's), the test switch, the private temp directories.
    pub sandbox: Arc<SandboxEnv>,
    /// Whether the OS sandbox works here (probed once at start, in the background): a
    /// session's `ToolSandbox` is `Unavailable` when it does not.
    pub sandbox_probe: Arc<SandboxProbe>,
    /// Executors that dialled in, waiting for the sessions that run on them.
    pub(crate) dial_ins: Arc<crate::environment::dial_in::DialIns>,
    /// The runner fleet's control plane (`[fleet]`, read at start).
    pub fleet: Arc<crate::fleet::Fleet>,
    /// What the daemon counts for `[metrics] listen`.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Where traces go, once `[telemetry] otlp_endpoint` started the exporter.
    pub telemetry: std::sync::OnceLock<crate::telemetry::Exporter>,
    /// Every session of the daemon, for features that reach other sessions; installed
    /// once the daemon exists (`session::directory`).
    pub(crate) directory: std::sync::OnceLock<Arc<dyn super::directory::Directory>>,
    /// The MCP servers configured `lazy = true` that `tool_search` may start; installed
    /// once the daemon's MCP host exists.
    pub(crate) lazy_mcp: std::sync::OnceLock<Arc<dyn crate::agent::tool_search::LazyServers>>,
    /// Where the listener for executors that dial in listens, once it does.
    pub executor_listener: std::sync::OnceLock<std::net::SocketAddr>,
    /// `session/watch`: every session's changes to every watcher, and the approver watches
    /// every session's `Approvals` counts (`session/watch.rs`).
    pub watchers: Arc<super::watch::Watchers>,
    /// What the user decided about workspace configuration files (`crate::trust`).
    pub trust: crate::trust::TrustStore,
    /// Asks for freed memory to go back to the system after a burst (`service::memory`).
    pub memory: Arc<crate::service::memory::Trim>,
    /// The session features every session gets, in order (`session/features/`).
    pub(crate) features: Vec<Arc<dyn super::feature::Feature>>,
    /// How many sub-agents run at once in the daemon (`[agents] max_running`).
    pub(crate) subagent_slots: super::subagent_slots::SubagentSlots,
    /// What every session spent today and this month (`[budget]`).
    pub(crate) spend: Arc<super::features::daemon_budget::SpendBook>,
}

impl Services {
    /// The lazy MCP servers `tool_search` may start, once the daemon installed them.
    pub(crate) fn mcp_lazy(&self) -> Option<Arc<dyn crate::agent::tool_search::LazyServers>> {
        self.lazy_mcp.get().cloned()
    }

    pub fn new(
        config: Config,
        env: &impl Fn(&str) -> Option<OsString>,
        data_dir: PathBuf,
    ) -> Result<Services, RuleError> {
        let registries = Registries::new();
        // Providers come from the provider registry (plugins may add and remove them).
        let providers = registries.clone();
        let llm = LlmPool::new(
            &config.provider,
            &config.providers,
            env,
            // Aliases (`llama.cpp`) resolve to the preset's canonical name.
            Arc::new(move |name: &str| {
                providers
                    .provider(name)
                    .or_else(|| amber_llm::preset(name).and_then(|p| providers.provider(p.name)))
            }),
        );
        let catalog = registries.clone();
        llm.set_catalog(Arc::new(move || {
            catalog.providers().into_iter().map(|p| p.name).collect()
        }));
        if let Err(message) = llm.check(None) {
            tracing::warn!("{message}");
        }
        let tool_env = amber_exec::env_policy::ToolEnv::new(
            &config.tools.env,
            &provider_key_vars(&config),
            std::env::vars_os(),
        )
        .unwrap_or_else(|err| {
            // Config::parse checked it; a config built in code may still be wrong.
            tracing::error!("{err}; tool processes get nothing but PATH");
            amber_exec::env_policy::ToolEnv::minimal()
        });
        let tool_env = Arc::new(tool_env);
        let sandbox = Arc::new(SandboxEnv {
            masked: amber_policy::SecretLocations::installed()
                .locations()
                .to_vec(),
            allow_unix_sockets: config.sandbox.allow_unix_sockets.clone(),
            extension_env: Arc::clone(&tool_env),
            in_place: config.sandbox.in_place,
            ..SandboxEnv::from_env(env)
        });
        let watchers = Arc::new(super::watch::Watchers::new(
            config.server.subscriber_buffer,
            crate::elide::WireLimits::from_config(&config.server),
        ));
        let spend = Arc::new(super::features::daemon_budget::SpendBook::open(Some(
            &data_dir,
        )));
        let features = super::features::all(&config, &data_dir, &spend);
        let fleet = crate::fleet::Fleet::new(config.fleet.clone());
        Ok(Services {
            live: RwLock::new(Arc::new(LiveConfig::new(config, env)?)),
            config_error: Mutex::new(None),
            trust: crate::trust::TrustStore::new(&data_dir),
            memory: crate::service::memory::Trim::new(),
            subagent_slots: super::subagent_slots::SubagentSlots::default(),
            spend,
            features,
            watchers,
            llm,
            registries,
            data_dir,
            store: None,
            tool_env,
            sandbox_probe: SandboxProbe::new(sandbox.simulate_landlock_abi),
            dial_ins: Arc::default(),
            fleet,
            metrics: Arc::default(),
            telemetry: std::sync::OnceLock::new(),
            directory: std::sync::OnceLock::new(),
            lazy_mcp: std::sync::OnceLock::new(),
            executor_listener: std::sync::OnceLock::new(),
            sandbox,
        })
    }
}

impl Services {
    /// The settings in force now: read once per turn, session or request.
    pub fn live(&self) -> Arc<LiveConfig> {
        self.live.read_locked().clone()
    }

    /// Puts `live` in force for new turns, sessions and requests (a config file edit), the
    /// providers' pool included; clears the config error.
    pub fn replace_live(&self, live: LiveConfig, env: &dyn Fn(&str) -> Option<OsString>) {
        self.llm
            .reconfigure(&live.config.provider, &live.config.providers, env);
        for feature in &self.features {
            feature.config_replaced(&live.config);
        }
        *self.live.write_locked() = Arc::new(live);
        self.set_config_error(None);
    }

    /// Why the config file's last edit is not in force, if it is not.
    pub fn config_error(&self) -> Option<String> {
        self.config_error.locked().clone()
    }

    pub fn set_config_error(&self, error: Option<String>) {
        *self.config_error.locked() = error;
    }

    /// amberd's own git on a workspace: sandboxed, offline, its programs pinned off.
    pub(crate) fn workspace_git(&self) -> crate::workspace_git::WorkspaceGit {
        crate::workspace_git::WorkspaceGit::new(Arc::clone(&self.sandbox), &self.tool_env)
    }

    /// Starts the daemon's sandbox probe if it has not started (idempotent; needs a tokio
    /// runtime). Lazy, so an idle daemon that never runs a command never spawns one: at the
    /// first session, turn or `sandbox/selftest`. Its failed verdict is
    /// published into `SandboxEnv::unavailable`.
    pub fn start_sandbox_probe(&self) {
        self.sandbox_probe.start(
            self.sandbox.hidden.clone(),
            self.sandbox.in_place,
            Arc::clone(&self.sandbox.unavailable),
        );
    }

    /// The tools in force right now (plugins may change them between turns).
    pub fn tools(&self) -> ToolRegistry {
        self.registries.tools()
    }

    /// Compaction settings for a session's provider (its context window).
    pub fn compaction_for(&self, provider: Option<&str>) -> CompactionSettings {
        CompactionSettings {
            context_window: self.llm.context_window(provider),
            ..self.live().compaction
        }
    }

    /// The tools of sub-agents: the same minus `task` (no recursion).
    /// The daemon's spend against `[budget]`, for `daemon/status`.
    pub fn budget_use(&self) -> Vec<amber_proto::BudgetUse> {
        self.spend.uses(&self.live().config.budget)
    }

    pub fn subagent_tools(&self) -> ToolRegistry {
        let mut tools = self.registries.tools();
        for name in amber_tools::session::PARENT_ONLY_TOOLS {
            tools.remove(name);
        }
        tools
    }
}

/// The turn error when no endpoint is configured.
pub use amber_llm::NOT_CONFIGURED;

/// The variables a provider may read its key from — `AMBER_API_KEY`, each preset's
/// `api_key_env` and those `[provider]` and `[providers.*]` name: removed from every tool
/// process's environment whatever `[tools.env]` says.
pub(crate) fn provider_key_vars(config: &Config) -> BTreeSet<String> {
    let presets = amber_llm::all_presets().iter().map(|p| p.api_key_env);
    let configured = config.provider.api_key_env.as_deref().into_iter().chain(
        config
            .providers
            .values()
            .filter_map(|p| p.api_key_env.as_deref()),
    );
    amber_exec::env_policy::provider_key_vars(presets.chain(configured))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_key_the_amber_key_and_configured_keys_are_provider_keys() {
        let config = Config::parse(
            "[provider]\napi_key_env = \"MY_PROVIDER_KEY\"\n[providers.other]\napi_key_env = \"OTHER_KEY\"\n",
        )
        .unwrap();
        let keys = provider_key_vars(&config);
        for name in [
            "AMBER_API_KEY",
            "OPENAI_API_KEY",
            "GROQ_API_KEY",
            "MY_PROVIDER_KEY",
            "OTHER_KEY",
        ] {
            assert!(keys.contains(name), "{name} missing from {keys:?}");
        }
    }
}
