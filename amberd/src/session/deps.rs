//! What every session shares: configuration, the LLM client, the tool registry.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::compaction::CompactionSettings;
use crate::config::{Config, Endpoint};
use crate::llm::{LlmClient, LlmSettings};
use crate::policy::rules::{RuleError, RuleSet};
use crate::store::Store;
use crate::tools::skills::SkillsTool;
use crate::tools::{ToolLimits, ToolRegistry};

/// Shared, read-only dependencies of the session actors.
pub struct Deps {
    pub config: Config,
    pub endpoint: Endpoint,
    /// The client, or the message that tells the user how to configure one.
    pub llm: Result<LlmClient, String>,
    pub tools: ToolRegistry,
    /// The tools of sub-agents: the same minus `task` (no recursion).
    pub subagent_tools: ToolRegistry,
    pub limits: ToolLimits,
    /// `[[rules]]` of the config file, compiled.
    pub config_rules: RuleSet,
    pub compaction: CompactionSettings,
    /// The daemon's data directory (sessions, extracted skills).
    pub data_dir: PathBuf,
    /// The durable session store; `None` keeps sessions in memory only.
    pub store: Option<Store>,
}

impl Deps {
    pub fn new(
        config: Config,
        env: &impl Fn(&str) -> Option<OsString>,
        data_dir: PathBuf,
    ) -> Result<Deps, RuleError> {
        let endpoint = config.endpoint(env);
        let llm = make_client(&config, &endpoint);
        if let Err(message) = &llm {
            tracing::warn!("{message}");
        }
        let limits = ToolLimits {
            max_output_bytes: config.tools.max_output_bytes,
            bash_default_timeout: config.bash_timeout(),
        };
        let config_rules = RuleSet::new(&config.rules)?;
        let mut tools = ToolRegistry::builtin();
        // Skills extracted by compaction live under the data dir, per workspace.
        tools.register(Arc::new(SkillsTool::new().with_data_dir(data_dir.clone())));
        let mut subagent_tools = tools.clone();
        subagent_tools.remove("task");
        let compaction = CompactionSettings {
            threshold: config.compaction.threshold,
            headroom: config.compaction.headroom,
            context_window: config.provider.context_window,
        };
        Ok(Deps {
            compaction,
            config,
            endpoint,
            llm,
            tools,
            subagent_tools,
            limits,
            config_rules,
            data_dir,
            store: None,
        })
    }
}

fn make_client(config: &Config, endpoint: &Endpoint) -> Result<LlmClient, String> {
    if endpoint.base_url.is_none() {
        return Err(NOT_CONFIGURED.to_owned());
    }
    let p = &config.provider;
    let settings = LlmSettings {
        flavor: endpoint.flavor.clone(),
        base_url: endpoint.base_url.clone(),
        api_key: endpoint.api_key.clone(),
        model: endpoint.model.clone(),
        max_retries: p.max_retries,
        retry_base: Duration::from_millis(p.retry_base_ms),
        retry_max: Duration::from_millis(p.retry_max_ms),
        connect_timeout: Duration::from_millis(p.connect_timeout_ms),
        idle_timeout: Duration::from_millis(p.idle_timeout_ms),
        max_tokens: p.max_tokens,
    };
    LlmClient::new(settings).map_err(|e| e.to_string())
}

/// The turn error when no endpoint is configured.
pub const NOT_CONFIGURED: &str = "no LLM endpoint configured: set AMBER_BASE_URL (an \
OpenAI-compatible base such as http://127.0.0.1:8080/v1), AMBER_API_KEY and AMBER_MODEL in \
amberd's environment, or [provider] base_url / api_key_env / model in config.toml, or \
OPENAI_API_KEY for api.openai.com; then restart amberd";
