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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Inherit {
    #[default]
    All,
    Core,
    None,
}

/// `[tools.env]` as written in the config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
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

    /// The exclude globs in force (defaults first), parsed; also checks `set`.
    fn excludes(&self) -> Result<Excludes, EnvPolicyError> {
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
        let mut globs = Vec::new();
        for glob in defaults.chain(self.exclude.iter().map(String::as_str)) {
            let parsed = globset::GlobBuilder::new(glob)
                .case_insensitive(true)
                .literal_separator(false)
                .build()
                .map_err(|err| EnvPolicyError::Glob {
                    glob: glob.to_owned(),
                    message: err.kind().to_string(),
                })?;
            globs.push(parsed);
        }
        Ok(Excludes::new(globs))
    }
}

/// The exclude globs. Most (the defaults among them) use no wildcard but `*`: those match
/// ASCII names by hand, so building a tool environment compiles no regex (a daemon's start
/// builds one, and the regex engine is a fifth of the code it would otherwise touch). The
/// rest, and any non-ASCII name, go through globset, compiled on first need.
struct Excludes {
    /// Each glob as its `*`-separated parts, ASCII-lowercased; `None` when one is not that
    /// simple.
    simple: Option<Vec<Vec<String>>>,
    globs: Vec<globset::Glob>,
    /// `None`: the parsed globs did not build into a set.
    compiled: std::sync::OnceLock<Option<GlobSet>>,
}

impl Excludes {
    fn new(globs: Vec<globset::Glob>) -> Excludes {
        let simple = globs
            .iter()
            .map(|g| star_parts(g.glob()))
            .collect::<Option<Vec<_>>>();
        Excludes {
            simple,
            globs,
            compiled: std::sync::OnceLock::new(),
        }
    }

    fn is_match(&self, name: &str) -> bool {
        match &self.simple {
            Some(patterns) if name.is_ascii() => {
                let name = name.to_ascii_lowercase();
                patterns.iter().any(|parts| star_match(parts, &name))
            }
            // Every glob parsed; a set that still fails to build excludes every name
            // (the safe side for a list of secrets).
            _ => self
                .compiled
                .get_or_init(|| {
                    let mut builder = GlobSetBuilder::new();
                    for glob in &self.globs {
                        builder.add(glob.clone());
                    }
                    builder.build().ok()
                })
                .as_ref()
                .is_none_or(|set| set.is_match(name)),
        }
    }
}

/// `glob` split at `*` and lowercased, when `*` is its only special character and it is ASCII.
fn star_parts(glob: &str) -> Option<Vec<String>> {
    let plain = glob.is_ascii() && !glob.contains(['?', '[', ']', '{', '}', '\\', '!']);
    plain.then(|| glob.split('*').map(str::to_ascii_lowercase).collect())
}

/// Whether `name` matches the glob whose `*`-separated parts are `parts` (a `*` matches any
/// run of characters, `/` included, as globset does without `literal_separator`).
fn star_match(parts: &[String], name: &str) -> bool {
    let (first, rest) = match parts.split_first() {
        Some(split) => split,
        None => return name.is_empty(),
    };
    let Some(mut tail) = name.strip_prefix(first.as_str()) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        // No `*` at all: the whole name.
        return tail.is_empty();
    };
    for part in middle {
        match tail.find(part.as_str()) {
            Some(at) => tail = &tail[at + part.len()..],
            None => return false,
        }
    }
    tail.len() >= last.len() && tail.ends_with(last.as_str())
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
