//! The environment of tool processes (`bash`, `process`, later hooks): `[tools.env]`.
//!
//! Invariant: **a tool process never inherits a provider's secret.** Its environment is
//! computed once from the config and the daemon's own environment ([`ToolEnv::new`]) and
//! spawned with `env_clear()` plus exactly that, so nothing reaches it by accident:
//!
//! 1. `inherit` picks the base: `"all"` of the daemon's variables (the default), `"core"`
//!    ([`CORE_VARS`] and `LC_*`), or `"none"`.
//! 2. Removed, whatever `inherit` says: `AMBER_API_KEY` and every variable a provider
//!    names as its key (`api_key_env` of `[provider]`, `[providers.*]` and every preset);
//!    unless `ignore_default_excludes`, every name matching [`DEFAULT_EXCLUDES`]; and every
//!    name matching an `exclude` glob. Globs match the whole name, case-insensitively.
//! 3. `set` adds or replaces variables. It is explicit, so it wins over the excludes.
//! 4. With `"none"` and no `PATH` in `set`, `PATH` is [`DEFAULT_PATH`]: without one, bash
//!    would fall back to a built-in search path that ends in `.` (the workspace).
//!
//! The spawner then sets what every tool shell gets (`PAGER=cat`, no `CDPATH`, …); see
//! `spawn`.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::sync::{Arc, LazyLock};

use globset::{GlobSet, GlobSetBuilder};
use serde::Deserialize;

/// Names matched case-insensitively and removed unless `ignore_default_excludes`.
pub const DEFAULT_EXCLUDES: &[&str] = &["*_API_KEY", "*_TOKEN", "*SECRET*", "*PASSWORD*"];

/// What `inherit = "core"` keeps (plus every `LC_*`): who and where the user is, how to find
/// programs, and the locale.
pub const CORE_VARS: &[&str] = &[
    "HOME", "LOGNAME", "USER", "USERNAME", "PATH", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ",
    "TMPDIR", "TEMP", "TMP",
];

/// `PATH` of a tool process when `inherit = "none"` and `set` gives none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The daemon's own key variable: always removed (`set` may still name it explicitly).
pub const AMBER_KEY_VAR: &str = "AMBER_API_KEY";

/// Which of the daemon's variables a tool process starts from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Inherit {
    #[default]
    All,
    Core,
    None,
}

/// `[tools.env]` as written in the config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolEnvConfig {
    pub inherit: Inherit,
    /// Further names to remove (globs: `*`, `?`, `[…]`; whole name, any case).
    pub exclude: Vec<String>,
    /// Variables to add or replace, after the excludes.
    pub set: BTreeMap<String, String>,
    /// Keep names matching [`DEFAULT_EXCLUDES`] (the provider keys are removed anyway).
    pub ignore_default_excludes: bool,
}

/// A `[tools.env]` the daemon cannot apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvPolicyError {
    #[error("tools.env.exclude: `{glob}` is not a valid glob: {message}")]
    Glob { glob: String, message: String },
    #[error("tools.env.set: `{name}` is not a valid variable name (empty, or has `=` or NUL)")]
    Name { name: String },
    #[error("tools.env.set.{name}: the value holds a NUL byte")]
    Value { name: String },
}

impl ToolEnvConfig {
    /// Checks the globs and the `set` entries (config load calls it).
    pub fn validate(&self) -> Result<(), EnvPolicyError> {
        self.excludes().map(drop)
    }

    /// The exclude globs in force (defaults first), compiled; also checks `set`.
    fn excludes(&self) -> Result<GlobSet, EnvPolicyError> {
        for (name, value) in &self.set {
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(EnvPolicyError::Name { name: name.clone() });
            }
            if value.contains('\0') {
                return Err(EnvPolicyError::Value { name: name.clone() });
            }
        }
        let defaults = DEFAULT_EXCLUDES
            .iter()
            .copied()
            .filter(|_| !self.ignore_default_excludes);
        let mut builder = GlobSetBuilder::new();
        for glob in defaults.chain(self.exclude.iter().map(String::as_str)) {
            let compiled = globset::GlobBuilder::new(glob)
                .case_insensitive(true)
                .literal_separator(false)
                .build()
                .map_err(|err| EnvPolicyError::Glob {
                    glob: glob.to_owned(),
                    message: err.kind().to_string(),
                })?;
            builder.add(compiled);
        }
        builder.build().map_err(|err| EnvPolicyError::Glob {
            glob: self.exclude.join(", "),
            message: err.to_string(),
        })
    }
}

/// The variables every provider may read its key from: [`AMBER_KEY_VAR`] and `named` (each
/// preset's `api_key_env`, and those `[provider]` and `[providers.*]` name).
pub fn provider_key_vars<'a>(named: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    std::iter::once(AMBER_KEY_VAR)
        .chain(named)
        .map(str::to_owned)
        .collect()
}

/// The computed environment of a tool process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolEnv {
    vars: Vec<(OsString, OsString)>,
}

/// The policy of a daemon that configured nothing, over this process's environment: what
/// tool processes get when no session installed one (tests, in-process use).
static PROCESS_DEFAULT: LazyLock<Arc<ToolEnv>> = LazyLock::new(|| {
    let secrets = provider_key_vars([]);
    let env = ToolEnv::new(&ToolEnvConfig::default(), &secrets, std::env::vars_os())
        .unwrap_or_else(|_| ToolEnv::minimal());
    Arc::new(env)
});

impl ToolEnv {
    /// Applies `config` to `daemon_env`; `secrets` are removed by exact name whatever the
    /// config says (unless `set` names them).
    pub fn new(
        config: &ToolEnvConfig,
        secrets: &BTreeSet<String>,
        daemon_env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<ToolEnv, EnvPolicyError> {
        let excludes = config.excludes()?;
        let mut vars: Vec<(OsString, OsString)> = daemon_env
            .into_iter()
            .filter(|(name, _)| inherited(config.inherit, name))
            .filter(|(name, _)| !name.to_str().is_some_and(|n| secrets.contains(n)))
            .filter(|(name, _)| !excludes.is_match(name.to_string_lossy().as_ref()))
            .collect();
        for (name, value) in &config.set {
            vars.retain(|(existing, _)| existing != name.as_str());
            vars.push((name.into(), value.into()));
        }
        if config.inherit == Inherit::None && !config.set.contains_key("PATH") {
            vars.push(("PATH".into(), DEFAULT_PATH.into()));
        }
        Ok(ToolEnv { vars })
    }

    /// Nothing but [`DEFAULT_PATH`]: what a policy that cannot be applied falls back to.
    pub fn minimal() -> ToolEnv {
        ToolEnv {
            vars: vec![("PATH".into(), DEFAULT_PATH.into())],
        }
    }

    /// [`PROCESS_DEFAULT`]: the default policy over this process's environment.
    pub fn process_default() -> Arc<ToolEnv> {
        Arc::clone(&PROCESS_DEFAULT)
    }

    /// The variables, daemon order first, then `set`'s.
    pub fn vars(&self) -> &[(OsString, OsString)] {
        &self.vars
    }

    /// The value of `name`, if the tool process gets it.
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_os_str())
    }
}

fn inherited(inherit: Inherit, name: &OsStr) -> bool {
    match inherit {
        Inherit::All => true,
        Inherit::None => false,
        Inherit::Core => name
            .to_str()
            .is_some_and(|n| CORE_VARS.contains(&n) || n.starts_with("LC_")),
    }
}

#[cfg(test)]
#[path = "env_policy_tests.rs"]
mod tests;
