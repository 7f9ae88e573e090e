//! What every session shares: configuration, the LLM client pool, the tool registry.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use amber_llm::{Endpoint, LlmPool};
use amber_policy::{RuleError, RuleSet};
use amber_store::Store;

use crate::compaction::CompactionSettings;
use crate::config::Config;
use crate::plugins::Registries;
use crate::sandbox_probe::SandboxProbe;
use crate::tools::sandbox_env::SandboxEnv;
use crate::tools::{ToolLimits, ToolRegistry};

/// Shared, read-only dependencies of the session actors.
pub struct Deps {
    pub config: Config,
    pub endpoint: Endpoint,
    /// One client per provider; `llm.client(None)` is the default provider's, or the
    /// message that tells the user how to configure one.
    pub llm: LlmPool,
    /// What the plugins contributed: tools, providers, commands, status segments, panels.
    pub registries: Arc<Registries>,
    pub limits: ToolLimits,
    /// `[[rules]]` of the config file, compiled.
    pub config_rules: RuleSet,
    pub compaction: CompactionSettings,
    /// The daemon's data directory (sessions, extracted skills).
    pub data_dir: PathBuf,
    /// The durable session store; `None` keeps sessions in memory only.
    pub store: Option<Store>,
    /// The environment of tool processes, from `[tools.env]` and the daemon's own.
    pub tool_env: Arc<crate::tools::env_policy::ToolEnv>,
    /// The daemon-wide part of every sandbox: hidden directories (`main` adds the
    /// socket's), the test switch, the private temp directories.
    pub sandbox: Arc<SandboxEnv>,
    /// Whether the OS sandbox works here (probed once at start, in the background): a
    /// session's `ToolSandbox` is `Unavailable` when it does not.
    pub sandbox_probe: Arc<SandboxProbe>,
    /// The checkpoint store every session shares (`checkpoints/`).
    pub checkpoints: Arc<crate::checkpoints::Checkpoints>,
    /// `session/watch`: every session's changes to every watcher, and the approver watches
    /// every session's `Approvals` counts (`session/watch.rs`).
    pub watchers: Arc<super::watch::Watchers>,
    /// `[[hooks]]` of the config file (one cell a config reload replaces:
    /// `hooks.replace_config_hooks`), the trust of workspace hooks files, the hooks'
    /// scratch directory (`hooks/`).
    pub hooks: crate::hooks::Hooks,
}

impl Deps {
    pub fn new(
        config: Config,
        env: &impl Fn(&str) -> Option<OsString>,
        data_dir: PathBuf,
    ) -> Result<Deps, RuleError> {
        let endpoint = Endpoint::resolve(&config.provider, env);
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
        if let Err(message) = llm.client(None) {
            tracing::warn!("{message}");
        }
        let limits = ToolLimits {
            max_output_bytes: config.tools.max_output_bytes,
            bash_default_timeout: config.bash_timeout(),
        };
        let config_rules = RuleSet::new(&config.rules)?;
        let compaction = CompactionSettings {
            threshold: config.compaction.threshold,
            headroom: config.compaction.headroom,
            context_window: config.provider.context_window,
        };
        let configured_keys = config.provider.api_key_env.as_deref().into_iter().chain(
            config
                .providers
                .values()
                .filter_map(|p| p.api_key_env.as_deref()),
        );
        let tool_env = crate::tools::env_policy::ToolEnv::new(
            &config.tools.env,
            &crate::tools::env_policy::provider_key_vars(configured_keys),
            std::env::vars_os(),
        )
        .unwrap_or_else(|err| {
            // Config::parse checked it; a config built in code may still be wrong.
            tracing::error!("{err}; tool processes get nothing but PATH");
            crate::tools::env_policy::ToolEnv::minimal()
        });
        let tool_env = Arc::new(tool_env);
        let sandbox = Arc::new(SandboxEnv::from_env(env));
        let checkpoints =
            crate::checkpoints::Checkpoints::new(config.checkpoints.clone(), &data_dir);
        let watchers = Arc::new(super::watch::Watchers::new(
            config.server.subscriber_buffer,
            crate::elide::WireLimits::from_config(&config.server),
        ));
        let hooks = crate::hooks::Hooks::new(config.hooks.clone(), &data_dir);
        Ok(Deps {
            hooks,
            watchers,
            checkpoints,
            compaction,
            config,
            endpoint,
            llm,
            registries,
            limits,
            config_rules,
            data_dir,
            store: None,
            tool_env,
            sandbox_probe: SandboxProbe::new(sandbox.simulate_no_landlock),
            sandbox,
        })
    }
}

impl Deps {
    /// Starts the daemon's sandbox probe if it has not started (idempotent; needs a tokio
    /// runtime). Lazy, so an idle daemon that never runs a command never spawns one: at the
    /// first session, turn or `sandbox/selftest`. Its failed verdict is
    /// published into `SandboxEnv::unavailable`.
    pub fn start_sandbox_probe(&self) {
        self.sandbox_probe.start(
            self.sandbox.hidden.clone(),
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
            ..self.compaction
        }
    }

    /// The tools of sub-agents: the same minus `task` (no recursion).
    pub fn subagent_tools(&self) -> ToolRegistry {
        let mut tools = self.registries.tools();
        tools.remove("task");
        tools
    }
}

/// The turn error when no endpoint is configured.
pub use amber_llm::NOT_CONFIGURED;
