//! Config that follows the user: amberd polls its config file and puts a valid edit in
//! force for new turns, sessions and requests without a restart — providers, `[[rules]]`,
//! MCP servers added or removed, hooks, agent and tool limits. An edit that does not load
//! is logged and reported by `daemon/status.configError`; the last good config stays in
//! force until the file loads again.
//!
//! **Invariants:** a turn reads one snapshot of the settings (`Services::live`), so a reload
//! never changes a turn halfway; the daemon's `AMBER_*` environment is applied on top of
//! every reload exactly as at start; settings read only at start (`[server]`, `[plugins]`,
//! `[tools.env]`, `[checkpoints]`, the MCP timeouts) are named in a log line saying they
//! wait for a restart. Workspace files (`.amber/rules.toml`, instruction files,
//! `.amber/hooks.toml`) need no watcher: each is stat'ed when used.
//!
//! Polling, not inotify: editors save by rename, the file may not exist yet, and one
//! `stat` every half second costs nothing.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::daemon::Daemon;
use crate::dirs::process_env;
use crate::session::services::LiveConfig;

/// How often the config file is stat'ed.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// A second look this long after a change, so a file caught halfway through a write is
/// read once it is whole.
const SETTLE: Duration = Duration::from_millis(50);

/// The config file amberd was started with (`config_path`'s answer).
#[derive(Debug, Clone)]
pub struct ConfigSource {
    pub path: Option<PathBuf>,
    /// `--config` / `$AMBER_CONFIG`: a missing file is an error, not the defaults.
    pub explicit: bool,
}

/// What identifies one version of the file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    /// `None` when the file does not exist (or cannot be stat'ed).
    fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            inode: meta.ino(),
        })
    }
}

/// Starts the watcher; it stops with `shutdown`. Does nothing without a config path.
pub fn spawn(daemon: Arc<Daemon>, source: ConfigSource, shutdown: CancellationToken) {
    let Some(path) = source.path.clone() else {
        return;
    };
    tokio::spawn(async move {
        let mut last = Stamp::of(&path);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(POLL_INTERVAL) => {}
            }
            let now = Stamp::of(&path);
            if now == last {
                continue;
            }
            tokio::time::sleep(SETTLE).await;
            last = Stamp::of(&path);
            reload(&daemon, &source, &process_env).await;
        }
    });
}

/// Loads the config file again and puts it in force, or records why it cannot be.
/// Returns whether the new config is in force.
pub async fn reload(
    daemon: &Daemon,
    source: &ConfigSource,
    env: &(dyn Fn(&str) -> Option<OsString> + Sync),
) -> bool {
    let services = daemon.sessions.services();
    let shown = source.path.as_deref().map_or_else(
        || "(no config file)".to_owned(),
        |p| p.display().to_string(),
    );
    let loaded = Config::load(source.path.as_deref(), source.explicit)
        .map_err(|e| e.to_string())
        .and_then(|mut config| {
            config
                .apply_env(&env)
                .map_err(|e| format!("{shown}: {e}"))?;
            LiveConfig::new(config, &env).map_err(|e| format!("{shown}: {e}"))
        });
    let live = match loaded {
        Ok(live) => live,
        Err(error) => {
            tracing::warn!("config not reloaded, the last good one stays in force: {error}");
            services.set_config_error(Some(error));
            return false;
        }
    };
    let old = services.live();
    let waiting = needs_restart(&old.config, &live.config);
    if !waiting.is_empty() {
        tracing::warn!(
            sections = %waiting.join(", "),
            "config reloaded; these settings take effect when amberd restarts"
        );
    }
    daemon
        .mcp
        .reconcile(&old.config.mcp, &live.config.mcp)
        .await;
    services.replace_live(live, env);
    tracing::info!(config = %shown, "config reloaded");
    true
}

/// The sections that differ but are read only when amberd starts.
fn needs_restart(old: &Config, new: &Config) -> Vec<&'static str> {
    // Debug output as the comparison: these sections are plain data, and deriving
    // PartialEq through every nested settings type only for this would be noise.
    let differs =
        |a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| format!("{a:?}") != format!("{b:?}");
    let mut sections = Vec::new();
    if differs(&old.server, &new.server) {
        sections.push("[server]");
    }
    if differs(&old.plugins, &new.plugins) {
        sections.push("[plugins]");
    }
    if differs(&old.tools.env, &new.tools.env) {
        sections.push("[tools.env]");
    }
    if differs(&old.checkpoints, &new.checkpoints) {
        sections.push("[checkpoints]");
    }
    let timeouts = |m: &crate::mcp::McpConfig| {
        (
            m.call_timeout_ms,
            m.connect_timeout_ms,
            m.reconnect_base_ms,
            m.reconnect_max_ms,
            m.ping_interval_ms,
        )
    };
    if timeouts(&old.mcp) != timeouts(&new.mcp) {
        sections.push("[mcp] timeouts");
    }
    sections
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_read_at_start_are_named_when_they_change() {
        let old = Config::parse("").unwrap();
        let new = Config::parse(
            "[provider]\nmodel = \"m2\"\n[server]\nsubscriber_buffer = 7\n[mcp]\ncall_timeout_ms = 5\n",
        )
        .unwrap();
        assert_eq!(needs_restart(&old, &new), ["[server]", "[mcp] timeouts"]);
        let provider_only = Config::parse("[provider]\nmodel = \"m2\"\n").unwrap();
        assert!(needs_restart(&old, &provider_only).is_empty());
    }

    #[test]
    fn a_stamp_tells_a_rewrite_and_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        assert_eq!(Stamp::of(&path), None);
        std::fs::write(&path, "a = 1\n").unwrap();
        let first = Stamp::of(&path).unwrap();
        // Saved by rename, as editors do: a new inode even when size and time match.
        let tmp = dir.path().join("config.toml.new");
        std::fs::write(&tmp, "b = 2\n").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert_ne!(Stamp::of(&path), Some(first));
    }
}
