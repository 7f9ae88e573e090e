//! Daemon configuration: `config.toml` merged with `AMBER_*` environment overrides.
//!
//! Resolution order for every value: environment of amberd, then the config file, then
//! the defaults documented in docs/configuration.md.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use amber_llm::{NamedProviderSettings, ProviderSettings};
use serde::Deserialize;

use crate::dirs::env_str;

/// Errors while loading configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {source}")]
    Parse {
        path: PathBuf,
        source: ConfigInvalid,
    },
    #[error("invalid value for {key}: {message}")]
    Env { key: String, message: String },
}

/// Why a configuration text was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigInvalid {
    /// Not TOML, an unknown key or a value of the wrong type; the message says where.
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// Well-formed, but a value the rules refuse; the message names the key.
    #[error("{0}")]
    Value(String),
}

/// The whole configuration file. Unknown keys are rejected so typos are caught early.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[provider]`: the default OpenAI-compatible endpoint, and the retry and timeout
    /// knobs of every provider (`amber_llm::Endpoint::resolve` adds `AMBER_*`).
    pub provider: ProviderSettings,
    /// `[providers.NAME]`: further providers a session may pick by name (overriding a
    /// bundled preset of that name, or new ones built on a `flavor`).
    pub providers: BTreeMap<String, NamedProviderSettings>,
    pub agent: AgentConfig,
    /// `[agents]`: what sub-agents get unless their call or their agent says otherwise.
    pub agents: AgentsConfig,
    /// `[budget]`: what all sessions together may spend in a day and a month.
    pub budget: crate::session::features::daemon_budget::BudgetConfig,
    pub tools: ToolsConfig,
    pub server: ServerConfig,
    pub compaction: CompactionConfig,
    pub sessions: SessionsConfig,
    /// `[mcp]`: MCP host timeouts and `[mcp.servers.NAME]` (see docs/configuration.md).
    pub mcp: crate::mcp::McpConfig,
    /// `[plugins]`: disabled plugins and external plugins.
    pub plugins: crate::plugins::PluginsConfig,
    /// `[[rules]]`: stored policy rules (the workspace's `.amber/rules.toml` adds more).
    pub rules: Vec<amber_policy::Rule>,
    /// `[sandbox]`: the OS sandbox of the commands sessions run (`session::features::sandbox`).
    pub sandbox: SandboxConfig,
    /// `[checkpoints]`: the workspace snapshots taken before file-changing turns
    /// (`checkpoints/`).
    pub checkpoints: CheckpointsConfig,
    /// `[[hooks]]`: the user's commands around tool calls and turns (`hooks/`); the
    /// workspace's `.amber/hooks.toml` adds more once trusted.
    pub hooks: Vec<crate::hooks::HookSpec>,
    /// `[tui]`: read by the TUI (`amber`) from this same file; the daemon only checks it,
    /// so a config that sets it still starts the daemon.
    pub tui: TuiConfig,
    /// `[environments.NAME]`: executors a session may run its tools on
    /// (`session/new {environment: "executor:NAME"}`, docs/executors.md).
    pub environments: BTreeMap<String, crate::environment::EnvironmentConfig>,
    /// `[executors]`: the listener for executors that dial in (off by default).
    pub executors: crate::environment::spec::ExecutorsConfig,
    /// `[fleet]`: the runner pools that may dial in and how fleet sessions are placed
    /// (docs/fleet.md).
    pub fleet: crate::fleet::FleetConfig,
    /// `[metrics]`: the Prometheus listener (off by default).
    pub metrics: crate::metrics::MetricsConfig,
    /// `[telemetry]`: OpenTelemetry traces of turns and tool calls (off by default).
    pub telemetry: crate::telemetry::TelemetryConfig,
    /// `[[routines]]`: prompts run on a cron schedule (`routines/`; `routine/add` adds more).
    pub routines: Vec<crate::routines::RoutineConfig>,
}

/// `[tui]`: settings of the TUI. Unused by the daemon; parsed here so `deny_unknown_fields`
/// accepts the table and a bad value is reported like any other.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TuiConfig {
    /// How the TUI tells about an approval request or a finished turn the user is not
    /// looking at (docs/configuration.md "TUI").
    pub notify: TuiNotify,
}

/// `[tui] notify`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TuiNotify {
    /// The bell and a desktop notification, where the terminal supports them.
    #[default]
    Auto,
    /// The terminal bell only.
    Bell,
    /// A desktop notification only (OSC 9, or OSC 777).
    Osc,
    /// Nothing.
    Off,
}

/// `[checkpoints]`: before the first file-changing tool call of a turn the session records
/// the workspace, so the turn can be diffed and rewound.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointsConfig {
    pub enabled: bool,
    /// Files larger than this are not recorded (a turn that changed one lists it `skipped`).
    pub max_file_bytes: u64,
    /// `[checkpoints.retention]`: which checkpoints are kept; older ones are forgotten and
    /// their content collected.
    pub retention: RetentionConfig,
}

impl Default for CheckpointsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_file_bytes: amber_store::DEFAULT_MAX_FILE_BYTES,
            retention: RetentionConfig::default(),
        }
    }
}

/// `[checkpoints.retention]`: a checkpoint is kept while it is among its session's last
/// `turns` checkpoints and younger than `days` (0 disables either limit).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    pub turns: u32,
    pub days: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            turns: 200,
            days: 14,
        }
    }
}

/// `[sandbox]`: the OS sandbox every `bash` call and `process` start runs in, unless a
/// session asks otherwise (`session/new {sandbox}`); a session in read mode is always
/// `read-only`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// `workspace-write` (default), `read-only` or `off`.
    pub mode: amber_proto::SandboxMode,
    /// What sandboxed commands may reach: `"off"` (the default: nothing), `"allowlist"`
    /// (the hosts `allow_domains` names, through amber's egress proxy; others are asked) or
    /// `"on"` (everything). `false` and `true` still mean off and on.
    pub network: amber_proto::NetworkMode,
    /// With `network = "allowlist"`: the hosts commands (and `fetch`) may reach — `host`,
    /// `*.domain` (its subdomains), `*`, an IP address, or `preset:NAME` (npm, pypi,
    /// crates, go, debian, github).
    pub allow_domains: Vec<String>,
    /// Hosts never reached, whatever allows them (same patterns; deny wins).
    pub deny_domains: Vec<String>,
    /// More directories `workspace-write` commands may write (a cache, say): absolute.
    pub writable_roots: Vec<PathBuf>,
    /// More secret locations (absolute, or `~/…` under the daemon's home): reading them asks
    /// in every mode, and sandboxed commands do not see them. Read at start.
    pub secret_paths: Vec<PathBuf>,
    /// With `network = true`: the Unix sockets commands may use. Empty (the default): no
    /// Unix socket at all, since the user's other sockets (an SSH agent, a Docker daemon,
    /// another amberd) are not the network. Read at start.
    pub allow_unix_sockets: Vec<PathBuf>,
    /// Where no namespace can be made (amberd in an unprivileged container), sandbox
    /// commands with Landlock and seccomp alone instead of refusing them, with the limits
    /// docs/security.md names ("Without namespaces"). Read at start.
    pub in_place: bool,
}

impl SandboxConfig {
    /// `secret_paths` with `~/` resolved under `home`.
    pub fn secret_paths_under(&self, home: Option<&std::path::Path>) -> Vec<PathBuf> {
        self.secret_paths
            .iter()
            .filter_map(|p| match p.strip_prefix("~") {
                Ok(rest) => home.map(|h| h.join(rest)),
                Err(_) => Some(p.clone()),
            })
            .collect()
    }

    fn check(&self) -> Result<(), String> {
        if let Some(relative) = self.writable_roots.iter().find(|p| !p.is_absolute()) {
            return Err(format!(
                "sandbox.writable_roots: `{}` is not an absolute path (write the whole path, \
                 e.g. `/home/me/.cache/pip`)",
                relative.display()
            ));
        }
        if let Some(relative) = self
            .secret_paths
            .iter()
            .find(|p| !p.is_absolute() && !p.starts_with("~"))
        {
            return Err(format!(
                "sandbox.secret_paths: `{}` is neither absolute nor `~/…`",
                relative.display()
            ));
        }
        amber_policy::net::DomainRules::new(&self.allow_domains, &self.deny_domains)
            .map_err(|err| format!("sandbox.allow_domains / deny_domains: {err}"))?;
        if let Some(relative) = self.allow_unix_sockets.iter().find(|p| !p.is_absolute()) {
            return Err(format!(
                "sandbox.allow_unix_sockets: `{}` is not an absolute path",
                relative.display()
            ));
        }
        Ok(())
    }
}

/// `[agents]`: defaults of the sub-agents a session starts (`task`).
///
/// Each `subagent_max_*` is both the default of every sub-agent and the most a `task`
/// call may ask for: a call may cap a sub-agent lower, never higher.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentsConfig {
    /// The model of a sub-agent whose agent names none (on the session's provider); unset
    /// or empty: the session's model.
    pub subagent_model: Option<String>,
    /// Tokens (prompt and reply, every request summed) one sub-agent may use.
    pub subagent_max_tokens: Option<u64>,
    /// Model requests one sub-agent may make.
    pub subagent_max_requests: Option<u64>,
    /// Seconds one sub-agent may run.
    pub subagent_max_seconds: Option<u64>,
    /// US dollars one sub-agent may spend (its model needs a price).
    pub subagent_max_usd: Option<amber_proto::CostUsd>,
    /// Sub-agents running at once in the whole daemon, foreground and background
    /// together (more wait, queued); unset: 16.
    pub max_running: Option<usize>,
    /// Background sub-agents of one session running at once; unset: 4.
    pub max_running_per_parent: Option<usize>,
    /// Directories whose sessions any session may message (`session_send`), besides the
    /// sessions of its own workspace or git repository.
    pub message_allow: Vec<std::path::PathBuf>,
    /// Turns that go on with an unmet goal after one hit its iteration cap, in a row;
    /// unset: 3.
    pub goal_max_turns: Option<u32>,
    /// A `task` call whose sub-agents may spend more than this (or whose spend cannot be
    /// estimated) asks a person first, in every mode; unset: never asks.
    pub approve_fanout_usd: Option<amber_proto::CostUsd>,
    /// External agents speaking ACP on stdio, by name (`[agents.acp.NAME]`): `task
    /// {agent: NAME}` runs a task on one.
    pub acp: std::collections::BTreeMap<String, crate::acp::AcpAgentConfig>,
}

/// The caps one sub-agent runs under: `[agents] subagent_max_*`, or lower where its
/// `task` call asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubagentCaps {
    pub tokens: Option<u64>,
    pub requests: Option<u64>,
    pub seconds: Option<u64>,
    pub usd: Option<amber_proto::CostUsd>,
}

impl AgentsConfig {
    /// The caps of a sub-agent whose `task` call asked for `asked`: each asked cap, else
    /// the configured one. A cap above the configured one is refused, naming both.
    pub fn subagent_caps(
        &self,
        asked: &amber_tools::session::TaskCaps,
    ) -> Result<SubagentCaps, String> {
        fn bound<T: PartialOrd + Copy + std::fmt::Display>(
            arg: &str,
            key: &str,
            asked: Option<T>,
            ceiling: Option<T>,
        ) -> Result<Option<T>, String> {
            match (asked, ceiling) {
                (Some(asked), Some(ceiling)) if asked > ceiling => Err(format!(
                    "`{arg}` {asked} is above the most a sub-agent may have ([agents] {key} = \
                     {ceiling})"
                )),
                (Some(asked), _) => Ok(Some(asked)),
                (None, ceiling) => Ok(ceiling),
            }
        }
        let usd = asked
            .max_usd
            .map(|usd| {
                amber_proto::CostUsd::from_usd(usd)
                    .ok_or_else(|| format!("`max_usd` must be a number of dollars ≥ 0, got {usd}"))
            })
            .transpose()?;
        Ok(SubagentCaps {
            tokens: bound(
                "max_tokens",
                "subagent_max_tokens",
                asked.max_tokens,
                self.subagent_max_tokens,
            )?,
            requests: bound(
                "max_requests",
                "subagent_max_requests",
                asked.max_requests,
                self.subagent_max_requests,
            )?,
            seconds: bound(
                "max_seconds",
                "subagent_max_seconds",
                asked.max_seconds,
                self.subagent_max_seconds,
            )?,
            usd: bound("max_usd", "subagent_max_usd", usd, self.subagent_max_usd)?,
        })
    }

    /// `goal_max_turns`.
    pub fn goal_max_turns(&self) -> u32 {
        self.goal_max_turns.unwrap_or(3)
    }

    /// `max_running`, at least 1.
    pub fn max_running(&self) -> usize {
        self.max_running.unwrap_or(16).max(1)
    }

    /// `max_running_per_parent`, at least 1.
    pub fn max_running_per_parent(&self) -> usize {
        self.max_running_per_parent.unwrap_or(4).max(1)
    }

    /// `subagent_model`, when it names one.
    pub fn subagent_model(&self) -> Option<&str> {
        self.subagent_model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
    }
}

/// `[agent]`: the loop's limits and prompts.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    pub max_tool_iterations: u32,
    /// Replaces the built-in system prompt (a session's own `systemPrompt` wins).
    pub system_prompt: Option<String>,
    /// Ask "are you finished?" after a reply without tool calls.
    pub confirm_finish: bool,
    /// The most tokens the confirm exchange's reply may take (its answer is DONE); a reply
    /// the cap cuts short is asked again without it. 0: no cap.
    pub confirm_max_tokens: u32,
    /// Iteration cap of each sub-agent (`task` tool).
    pub subagent_max_iterations: u32,
    /// Sub-agents running at once in a parallel `task` call.
    pub subagent_parallel: usize,
    /// Instruction files read into the head of the prompt, in each directory from the
    /// git root down to the workspace (`crate::instructions`).
    pub instruction_files: Vec<String>,
    /// Most bytes of instruction file text in the prompt (nearest files kept first).
    pub instructions_max_bytes: usize,
    /// Every new session's spending cap in US dollars (`session/new {maxBudgetUsd}`
    /// replaces it); sessions whose model has no known price are refused while it is set.
    pub max_budget_usd: Option<amber_proto::CostUsd>,
    /// Every new session's cap on its total tokens (`session/new {maxTokensTotal}`
    /// replaces it).
    pub max_tokens_total: Option<u64>,
}

/// Room for DONE, dressed up or not; the Responses API takes no cap below 16.
const DEFAULT_CONFIRM_MAX_TOKENS: u32 = 32;

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_tool_iterations: 50,
            system_prompt: None,
            confirm_finish: true,
            confirm_max_tokens: DEFAULT_CONFIRM_MAX_TOKENS,
            subagent_max_iterations: 20,
            subagent_parallel: 4,
            instruction_files: crate::instructions::DEFAULT_FILE_NAMES
                .map(String::from)
                .to_vec(),
            instructions_max_bytes: crate::instructions::DEFAULT_MAX_BYTES,
            max_budget_usd: None,
            max_tokens_total: None,
        }
    }
}

/// `[sessions]`: keeping sessions in memory.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionsConfig {
    /// An idle session with no subscriber, approval or background process is unloaded from
    /// memory after this many seconds (it stays in the store and loads on next use); 0
    /// keeps sessions in memory.
    pub idle_unload_secs: u64,
    /// Durable events kept in memory per loaded session; replays reaching further back read
    /// the session's log.
    pub memory_events: usize,
    /// Accept `/`, `$HOME` itself, an ancestor of it or a top-level system directory as a
    /// session's workspace root (`session::workspace_root`); refused by default.
    pub allow_broad_workspace: bool,
    /// After a restart, prompts that were queued but had not started run in order (true),
    /// or each ends `turn_completed {stopReason: "cancelled"}` (false).
    pub resume_queued: bool,
    /// Idle sessions not updated for this many days are deleted (checked at start and
    /// hourly; a session with a worktree is kept); 0 keeps every session.
    pub retention_days: u64,
}

impl SessionsConfig {
    /// `memory_events` when the config file does not set it.
    pub const DEFAULT_MEMORY_EVENTS: usize = 4096;
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            idle_unload_secs: 600,
            memory_events: Self::DEFAULT_MEMORY_EVENTS,
            allow_broad_workspace: false,
            resume_queued: true,
            retention_days: 0,
        }
    }
}

/// `[compaction]`: when the context is compacted and how much room it leaves.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionConfig {
    /// Compact when the context uses more than this fraction of `provider.context_window`.
    pub threshold: f64,
    /// Fraction of the window left free after compaction.
    pub headroom: f64,
}

impl CompactionConfig {
    /// Both are shares of the window: in (0, 1].
    fn check(&self) -> Result<(), String> {
        for (key, v) in [("threshold", self.threshold), ("headroom", self.headroom)] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(format!(
                    "compaction.{key} must be a share of the context window, above 0 and at \
                     most 1 (got {v})"
                ));
            }
        }
        Ok(())
    }
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            threshold: 0.8,
            headroom: 0.4,
        }
    }
}

/// `[tools]`: output caps and timeouts.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    pub max_output_bytes: usize,
    pub bash_timeout_ms: u64,
    /// `[tools.env]`: the environment of tool processes (`amber_exec::env_policy`).
    pub env: amber_exec::env_policy::ToolEnvConfig,
    /// Offer the `fetch` tool (off by default).
    pub fetch: bool,
    /// Let `fetch` reach loopback, private, link-local … addresses.
    pub fetch_allow_private: bool,
    /// Most body bytes one `fetch` reads: its default and the ceiling of `max_bytes`.
    pub fetch_max_bytes: usize,
    /// One `fetch`, every redirect and the body included, must finish within this.
    pub fetch_timeout_ms: u64,
}

impl ToolsConfig {
    /// The `fetch` tool's settings, when it is on.
    pub(crate) fn fetch_settings(&self) -> Option<amber_tools::fetch::FetchSettings> {
        self.fetch.then(|| amber_tools::fetch::FetchSettings {
            allow_private: self.fetch_allow_private,
            max_bytes: self.fetch_max_bytes,
            timeout: Duration::from_millis(self.fetch_timeout_ms),
        })
    }

    fn check(&self) -> Result<(), String> {
        if self.fetch_max_bytes == 0 || self.fetch_timeout_ms == 0 {
            return Err("tools.fetch_max_bytes and tools.fetch_timeout_ms must be above 0".into());
        }
        Ok(())
    }
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            max_output_bytes: 30_000,
            bash_timeout_ms: 120_000,
            env: amber_exec::env_policy::ToolEnvConfig::default(),
            fetch: false,
            fetch_allow_private: false,
            fetch_max_bytes: 1024 * 1024,
            fetch_timeout_ms: 30_000,
        }
    }
}

/// `[server]`: socket limits and service behaviour.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub max_connections: u32,
    pub max_message_bytes: u32,
    pub max_subscriptions_per_connection: u32,
    /// Events buffered per subscriber before a slow one is dropped.
    pub subscriber_buffer: usize,
    /// Exit (as on SIGTERM) after this many seconds without connections, running turns,
    /// pending approvals or live processes; 0 = never. Honoured only when systemd handed
    /// over the socket: it keeps listening and starts amberd on the next connection. A
    /// daemon that bound its socket itself would leave nothing behind to wake it.
    pub idle_exit_secs: u64,
    /// Longest string field a response or event carries whole; longer ones are elided to
    /// their head and a marker with their full length (`elide.rs`). At least 256.
    pub max_field_bytes: usize,
    /// A WebSocket that has not sent `initialize` this long after its upgrade is closed (1008).
    pub initialize_timeout_ms: u64,
    /// A started request head, HTTP body or WebSocket message must be complete within this.
    pub frame_timeout_ms: u64,
    /// Connection slots WebSocket upgrades may not take, so plain HTTP (`daemon/status`)
    /// still answers when every WebSocket slot is held.
    pub reserved_http_connections: u32,
    /// Calls a WebSocket may have unanswered before the daemon stops reading it.
    pub max_unanswered_calls: u32,
    /// Request bytes being read or parsed, over all connections; past it -32003.
    pub max_bytes_in_flight: u64,
    /// Reply and notification bytes queued for one WebSocket and not yet written; a reply
    /// past it is -32003 (one always goes when nothing is queued), a notification waits.
    pub max_unread_bytes_per_connection: u64,
    /// The same over every connection, HTTP response bodies included.
    pub max_unread_bytes: u64,
    /// Calls of one WebSocket that run at once; later ones wait their turn (what a burst of
    /// large results costs before any is queued is this many of them).
    pub max_concurrent_calls_per_connection: u32,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_connections: 128,
            max_message_bytes: 16 * 1024 * 1024,
            max_subscriptions_per_connection: 64,
            subscriber_buffer: 8192,
            idle_exit_secs: 0,
            max_field_bytes: 256 * 1024,
            initialize_timeout_ms: 10_000,
            frame_timeout_ms: 30_000,
            reserved_http_connections: 4,
            max_unanswered_calls: 1024,
            max_bytes_in_flight: 64 * 1024 * 1024,
            max_unread_bytes_per_connection: 16 * 1024 * 1024,
            max_unread_bytes: 64 * 1024 * 1024,
            max_concurrent_calls_per_connection: 16,
        }
    }
}

impl Config {
    /// Reads `path` if given and present; a missing default file is not an error.
    pub fn load(path: Option<&Path>, explicit: bool) -> Result<Config, ConfigError> {
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound && !explicit => {
                return Ok(Config::default());
            }
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        Config::parse(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })
    }

    pub fn parse(text: &str) -> Result<Config, ConfigInvalid> {
        let config: Config = toml::from_str(text)?;
        config.check().map_err(ConfigInvalid::Value)?;
        Ok(config)
    }

    /// The rules a well-formed file must still keep, each naming its key.
    fn check(&self) -> Result<(), String> {
        self.plugins.validate()?;
        self.compaction.check()?;
        self.tools.env.validate().map_err(|e| e.to_string())?;
        for name in &self.agent.instruction_files {
            crate::instructions::check_name(name)?;
        }
        self.tools.check()?;
        self.sandbox.check()?;
        self.executors.check()?;
        self.fleet.check()?;
        self.budget.check()?;
        crate::acp::config::check_all(&self.agents.acp)?;
        self.telemetry.check()?;
        crate::hooks::spec::check_all(&self.hooks)?;
        crate::routines::config::check_all(&self.routines)?;
        self.check_prices()
    }

    /// A price that cannot be used (no model, a negative number) is a config error, not a
    /// model silently left without a price.
    fn check_prices(&self) -> Result<(), String> {
        let named = self
            .providers
            .iter()
            .map(|(name, p)| (format!("providers.{name}"), &p.prices));
        for (table, prices) in
            std::iter::once(("provider".to_owned(), &self.provider.prices)).chain(named)
        {
            if let Some(why) = prices.iter().find_map(amber_llm::PriceSetting::invalid) {
                return Err(format!("[[{table}.prices]]: {why}"));
            }
        }
        Ok(())
    }

    /// Applies the `AMBER_*` overrides that are not about the endpoint.
    pub fn apply_env(
        &mut self,
        env: &impl Fn(&str) -> Option<OsString>,
    ) -> Result<(), ConfigError> {
        if let Some(v) = env_str(env, "AMBER_MAX_TOOL_ITERATIONS") {
            self.agent.max_tool_iterations = v.parse().map_err(|_| ConfigError::Env {
                key: "AMBER_MAX_TOOL_ITERATIONS".into(),
                message: format!("`{v}` is not a number"),
            })?;
        }
        if let Some(v) = env_str(env, "AMBER_CONTEXT_WINDOW") {
            self.provider.context_window = v.parse().map_err(|_| ConfigError::Env {
                key: "AMBER_CONTEXT_WINDOW".into(),
                message: format!("`{v}` is not a number"),
            })?;
        }
        Ok(())
    }

    pub fn bash_timeout(&self) -> Duration {
        Duration::from_millis(self.tools.bash_timeout_ms)
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
pub(crate) mod tests;
