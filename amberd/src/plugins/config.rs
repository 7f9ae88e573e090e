//! `[plugins]` of config.toml: which bundled plugins start disabled, which opt-in ones
//! start enabled, and the external plugins the daemon runs as child processes.

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
    /// Opt-in plugins (`bundled::OPT_IN`, the `hello` example) to start; the others start
    /// unless `disabled`.
    pub enabled: Vec<String>,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        Self {
            disabled: Vec::new(),
            init_timeout_ms: 10_000,
            call_timeout_ms: 60_000,
            external: Vec::new(),
            enabled: Vec::new(),
        }
    }
}

impl PluginsConfig {
    /// Whether plugin `name` starts with the daemon: not `disabled`, and `enabled` if it
    /// is opt-in.
    pub fn starts(&self, name: &str) -> bool {
        let opt_in = super::bundled::OPT_IN.contains(&name);
        !self.disabled.iter().any(|n| n == name)
            && (!opt_in || self.enabled.iter().any(|n| n == name))
    }

    pub fn init_timeout(&self) -> Duration {
        Duration::from_millis(self.init_timeout_ms)
    }

    /// Rejects what the runtime could only drop or ignore, the way unknown keys are
    /// rejected: an external plugin named like a bundled one or an earlier entry, and a
    /// `disabled` name no plugin has (a typo would otherwise leave the plugin running).
    pub fn validate(&self) -> Result<(), String> {
        let mut known: Vec<&str> = super::bundled::NAMES.to_vec();
        for (index, spec) in self.external.iter().enumerate() {
            let entry = format!("[[plugins.external]] entry {} (`{}`)", index + 1, spec.name);
            if spec.name.trim().is_empty() {
                return Err(format!("{entry}: the name is empty"));
            }
            if super::bundled::NAMES.contains(&spec.name.as_str()) {
                return Err(format!(
                    "{entry}: the name is taken by a bundled plugin; choose another name"
                ));
            }
            if known.contains(&spec.name.as_str()) {
                return Err(format!(
                    "{entry}: an earlier [[plugins.external]] entry has the same name"
                ));
            }
            spec.sandbox()
                .map_err(|message| format!("{entry}: {message}"))?;
            known.push(&spec.name);
        }
        for (key, names) in [("disabled", &self.disabled), ("enabled", &self.enabled)] {
            let unknown: Vec<&str> = names
                .iter()
                .map(String::as_str)
                .filter(|name| !known.contains(name))
                .collect();
            if !unknown.is_empty() {
                return Err(format!(
                    "[plugins] {key}: no plugin named {} (known: {})",
                    quoted(&unknown),
                    known.join(", ")
                ));
            }
        }
        let both: Vec<&str> = self
            .enabled
            .iter()
            .map(String::as_str)
            .filter(|name| self.disabled.iter().any(|d| d == name))
            .collect();
        if !both.is_empty() {
            return Err(format!(
                "[plugins] {} both enabled and disabled; keep one",
                quoted(&both)
            ));
        }
        Ok(())
    }
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
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
    /// `workspace-write` or `read-only`: the plugin runs in the OS sandbox, with its `cwd`
    /// as the workspace (default: unsandboxed, as `off`).
    #[serde(default)]
    pub sandbox: Option<amber_proto::SandboxMode>,
    /// With `sandbox`: `false` takes the network away (default: on).
    #[serde(default)]
    pub network: Option<bool>,
}

impl ExternalPluginConfig {
    /// Its sandbox (`sandbox` and `network`); `None`: unsandboxed.
    pub fn sandbox(&self) -> Result<Option<amber_proto::SandboxInfo>, String> {
        amber_exec::sandbox_env::extension_sandbox(self.sandbox, self.network)
    }
    /// The per-call timeout: the plugin's own, else `[plugins] call_timeout_ms`.
    pub fn call_timeout(&self, plugins: &PluginsConfig) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(plugins.call_timeout_ms))
    }
}

#[cfg(test)]
mod tests {

    use crate::config::Config;

    const EXTERNAL: &str = "command = \"python3\"\n";

    #[test]
    fn external_names_must_not_repeat_or_shadow_bundled_plugins() {
        let bundled = format!("[[plugins.external]]\nname = \"hello\"\n{EXTERNAL}");
        let err = Config::parse(&bundled).unwrap_err().to_string();
        assert!(
            err.contains("[[plugins.external]] entry 1 (`hello`)") && err.contains("bundled"),
            "{err}"
        );
        let twice = format!(
            "[[plugins.external]]\nname = \"wc\"\n{EXTERNAL}\
             [[plugins.external]]\nname = \"wc\"\n{EXTERNAL}"
        );
        let err = Config::parse(&twice).unwrap_err().to_string();
        assert!(
            err.contains("entry 2 (`wc`)") && err.contains("same name"),
            "{err}"
        );
        let fine = format!("[[plugins.external]]\nname = \"wc\"\n{EXTERNAL}");
        assert_eq!(Config::parse(&fine).unwrap().plugins.external.len(), 1);
    }

    #[test]
    fn an_external_plugin_may_be_sandboxed_and_network_needs_sandbox() {
        let sandboxed =
            format!("[[plugins.external]]\nname = \"wc\"\n{EXTERNAL}sandbox = \"read-only\"\n");
        let config = Config::parse(&sandboxed).unwrap();
        assert_eq!(
            config.plugins.external[0].sandbox(),
            Ok(Some(amber_proto::SandboxInfo::new(
                amber_proto::SandboxMode::ReadOnly,
                amber_proto::NetworkMode::from_bool(true)
            )))
        );
        let fine = format!("[[plugins.external]]\nname = \"wc\"\n{EXTERNAL}");
        assert_eq!(
            Config::parse(&fine).unwrap().plugins.external[0].sandbox(),
            Ok(None)
        );
        let loose = format!("[[plugins.external]]\nname = \"wc\"\n{EXTERNAL}network = false\n");
        let err = Config::parse(&loose).unwrap_err().to_string();
        assert!(
            err.contains("entry 1 (`wc`)") && err.contains("`network` only"),
            "{err}"
        );
    }

    #[test]
    fn hello_is_opt_in_and_enabled_names_must_be_plugins() {
        let default = Config::parse("").unwrap().plugins;
        assert!(!default.starts("hello"));
        assert!(default.starts("core-tools"));
        let enabled = Config::parse("[plugins]\nenabled = [\"hello\"]")
            .unwrap()
            .plugins;
        assert!(enabled.starts("hello"));
        let err = Config::parse("[plugins]\nenabled = [\"helo\"]")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("[plugins] enabled: no plugin named `helo`"),
            "{err}"
        );
        let err = Config::parse("[plugins]\nenabled = [\"hello\"]\ndisabled = [\"hello\"]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`hello` both enabled and disabled"), "{err}");
        let off = Config::parse("[plugins]\ndisabled = [\"status\"]")
            .unwrap()
            .plugins;
        assert!(!off.starts("status"));
    }

    #[test]
    fn disabled_names_must_be_plugins() {
        let err = Config::parse("[plugins]\ndisabled = [\"hello\", \"no-such-plugin\"]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no plugin named `no-such-plugin`"), "{err}");
        assert!(err.contains("known: core-tools, providers"), "{err}");
        assert!(!err.contains("`hello`"), "{err}");
        let external = format!(
            "[plugins]\ndisabled = [\"hello\", \"wc\"]\n\
             [[plugins.external]]\nname = \"wc\"\n{EXTERNAL}"
        );
        assert_eq!(
            Config::parse(&external).unwrap().plugins.disabled,
            ["hello", "wc"]
        );
    }
}
