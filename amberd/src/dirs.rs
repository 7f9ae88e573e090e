//! Where amber keeps the user's files, from the environment: the configuration folder
//! (`$XDG_CONFIG_HOME/amber`: `config.toml`, the global `AGENTS.md`, `agents/`, `skills/`) and
//! the data directory. A leaf: it imports nothing of the daemon.

use std::ffi::OsString;
use std::path::PathBuf;

pub(crate) fn env_str(env: &impl Fn(&str) -> Option<OsString>, key: &str) -> Option<String> {
    env(key)
        .and_then(|v| v.into_string().ok())
        .filter(|v| !v.trim().is_empty())
}

/// amber's folder of the user's configuration: `$XDG_CONFIG_HOME/amber`, else
/// `$HOME/.config/amber` (a relative `XDG_CONFIG_HOME` is ignored, as the XDG spec says).
/// Home of `config.toml`, the global `AGENTS.md`, `agents/` and `skills/`.
pub fn user_config_dir(env: &impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let absolute = |key: &str| {
        env_str(env, key)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_CONFIG_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".config")))
        .map(|config| config.join("amber"))
}

/// The user's skills folder: `skills/` in [`user_config_dir`] of this process.
pub fn user_skills_dir() -> Option<PathBuf> {
    user_config_dir(&process_env).map(|dir| dir.join("skills"))
}

/// The process environment, as [`user_config_dir`] and [`config_path`] take it.
pub fn process_env(key: &str) -> Option<OsString> {
    std::env::var_os(key)
}

/// `--config`, else `$AMBER_CONFIG`, else `$XDG_CONFIG_HOME/amber/config.toml`
/// (`~/.config` when unset). The bool says whether the path was asked for explicitly.
pub fn config_path(
    explicit: Option<PathBuf>,
    env: &impl Fn(&str) -> Option<OsString>,
) -> (Option<PathBuf>, bool) {
    if let Some(path) = explicit {
        return (Some(path), true);
    }
    if let Some(path) = env_str(env, "AMBER_CONFIG") {
        return (Some(path.into()), true);
    }
    (
        user_config_dir(env).map(|dir| dir.join("config.toml")),
        false,
    )
}

/// `--data-dir`, else `$AMBER_DATA_DIR`, else `$XDG_DATA_HOME/amber` (`~/.local/share`).
/// The rule is shared with the clients, which find the daemon of their data dir by it.
pub fn data_dir(explicit: Option<PathBuf>, env: &impl Fn(&str) -> Option<OsString>) -> PathBuf {
    amber_proto::paths::data_dir(explicit, env)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::env;

    #[test]
    fn paths_follow_the_protocol() {
        let (p, explicit) = config_path(None, &env(&[("XDG_CONFIG_HOME", "/c")]));
        assert_eq!(p.unwrap(), PathBuf::from("/c/amber/config.toml"));
        assert!(!explicit);
        let relative_xdg = env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")]);
        assert_eq!(
            user_config_dir(&relative_xdg),
            Some(PathBuf::from("/h/.config/amber"))
        );
        assert_eq!(user_config_dir(&env(&[])), None);
        assert_eq!(
            data_dir(None, &env(&[("AMBER_DATA_DIR", "/d")])),
            PathBuf::from("/d")
        );
        assert_eq!(
            data_dir(None, &env(&[("XDG_DATA_HOME", "/x")])),
            PathBuf::from("/x/amber")
        );
    }
}
