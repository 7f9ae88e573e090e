//! `[fleet]`: the runner pools amberd accepts, where runners make workspaces, and how it
//! watches them. Read at start, except the pools' token files, read at each handshake (a
//! rotated token applies to the next dial).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// The default heartbeat period, in seconds.
pub const DEFAULT_HEARTBEAT_SECS: u64 = 5;
/// The default time an idle fleet session keeps its runner, in seconds.
pub const DEFAULT_IDLE_RELEASE_SECS: u64 = 120;

/// `[fleet]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FleetConfig {
    /// Where runners make each session's workspace (`<workspace_root>/<session id>`): a
    /// runner's `--workspaces` must be this directory.
    pub workspace_root: PathBuf,
    /// How often runners beat; one that misses three beats is gone and its sessions are
    /// queued again.
    pub heartbeat_secs: u64,
    /// How long an idle fleet session keeps its runner before it is released (parked);
    /// its next turn queues it again, on a fresh clone with its newest checkpoint.
    pub idle_release_secs: u64,
    /// Once the fleet sessions together have cost this many US dollars (their recorded
    /// usage, the model's price), no more work is assigned; what runs goes on. Absent: no
    /// budget.
    pub budget_usd: Option<f64>,
    /// `[fleet.pools.NAME]`: the pools whose runners may dial in.
    pub pools: BTreeMap<String, PoolConfig>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            workspace_root: PathBuf::from("/work"),
            heartbeat_secs: DEFAULT_HEARTBEAT_SECS,
            idle_release_secs: DEFAULT_IDLE_RELEASE_SECS,
            budget_usd: None,
            pools: BTreeMap::new(),
        }
    }
}

/// `[fleet.pools.NAME]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolConfig {
    /// The file holding the bearer token every runner of the pool presents.
    pub token_file: Option<PathBuf>,
    /// At most this many of the pool's runners' sessions at once (absent: their capacity).
    pub max_sessions: Option<u32>,
}

impl FleetConfig {
    /// Names and paths the fleet can use.
    pub fn check(&self) -> Result<(), String> {
        if !self.workspace_root.is_absolute() {
            return Err(format!(
                "[fleet] workspace_root `{}` is not an absolute path",
                self.workspace_root.display()
            ));
        }
        if self
            .budget_usd
            .is_some_and(|usd| amber_proto::CostUsd::from_usd(usd).is_none())
        {
            return Err("[fleet] budget_usd must be a number of dollars >= 0".to_owned());
        }
        if self.heartbeat_secs == 0 {
            return Err("[fleet] heartbeat_secs must be at least 1".to_owned());
        }
        for (name, pool) in &self.pools {
            if !is_word(name) {
                return Err(format!(
                    "[fleet.pools.{name}]: a pool's name is letters, digits, `-`, `_` and `.`"
                ));
            }
            if pool.token_file.is_none() {
                return Err(format!("[fleet.pools.{name}] names no token_file"));
            }
        }
        Ok(())
    }

    /// The token pool `name`'s runners present, read now; `None` when the pool is not
    /// configured or its file is missing or empty.
    pub fn token_of(&self, name: &str) -> Option<String> {
        let path = self.pools.get(name)?.token_file.as_ref()?;
        let token = std::fs::read_to_string(path).ok()?;
        Some(token.trim().to_owned()).filter(|t| !t.is_empty())
    }
}

pub use amber_executor::runner_wire::is_word;
