//! `[plugins]` of config.toml: which bundled plugins start disabled, and the external
//! plugins the daemon runs as child processes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// `[plugins]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginsConfig {
    /// Plugins (bundled or external) left Registered at start; `plugin/enable` starts them.
    pub disabled: Vec<String>,
    /// Longest an external plugin may take to answer `initialize`.
    pub init_timeout_ms: u64,
    /// Longest one external tool call may take (a plugin's own `timeout_ms` wins).
    pub call_timeout_ms: u64,
    /// `[[plugins.external]]`.
    pub external: Vec<ExternalPluginConfig>,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        Self {
            disabled: Vec::new(),
            init_timeout_ms: 10_000,
            call_timeout_ms: 60_000,
            external: Vec::new(),
        }
    }
}

impl PluginsConfig {
    pub fn init_timeout(&self) -> Duration {
        Duration::from_millis(self.init_timeout_ms)
    }
}

/// `[[plugins.external]]`: a tools-only plugin speaking JSON-RPC over stdio.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalPluginConfig {
    pub name: String,
    /// The program (found on PATH when not a path).
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to the daemon's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory (default: the daemon's).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Per-call timeout for this plugin's tools.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl ExternalPluginConfig {
    /// The per-call timeout: the plugin's own, else `[plugins] call_timeout_ms`.
    pub fn call_timeout(&self, plugins: &PluginsConfig) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(plugins.call_timeout_ms))
    }
}
