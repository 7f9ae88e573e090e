//! Wire types of scheduled routines (amber extension): prompts the daemon runs on a cron
//! schedule (`[[routines]]` of config.toml, or `routine/add`), each fire in a session of its
//! own or in a named one, and what `routine/list`, `routine/run` and `routine/tick` answer.

use serde::{Deserialize, Serialize};

use crate::{CostUsd, StopReason};

/// What a routine does with the fire times it missed (the daemon was down, or asleep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissedPolicy {
    /// Runs none of them: only a fire time that is due now runs.
    Skip,
    /// Runs the newest of them, once.
    #[default]
    Latest,
    /// Runs each of them, oldest first, at most [`MissedPolicy::MAX_RUNS`].
    All,
}

impl MissedPolicy {
    /// The most runs one tick makes of a routine's missed fire times under `all`.
    pub const MAX_RUNS: usize = 10;

    pub fn as_str(self) -> &'static str {
        match self {
            MissedPolicy::Skip => "skip",
            MissedPolicy::Latest => "latest",
            MissedPolicy::All => "all",
        }
    }
}

impl std::str::FromStr for MissedPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "skip" => Ok(MissedPolicy::Skip),
            "latest" => Ok(MissedPolicy::Latest),
            "all" => Ok(MissedPolicy::All),
            other => Err(format!(
                "unknown missed-run policy `{other}` (expected skip, latest or all)"
            )),
        }
    }
}

/// Where a routine is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutineSource {
    /// `[[routines]]` of config.toml: changed there, never by `routine/remove`.
    Config,
    /// Added by `routine/add`, kept in the daemon's data directory.
    Stored,
}

/// What a routine runs and when, apart from its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineDef {
    /// Five cron fields (minute hour day-of-month month day-of-week), in the daemon's
    /// local time, or `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`.
    pub cron: String,
    /// The workspace root of the sessions it makes (absolute).
    pub cwd: String,
    pub prompt: String,
    /// `new` (the default, written as absent): a new session per fire; any other value is
    /// a session name, the same session each time (made by the first fire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Each new session works in a git worktree of its own (`session/new {worktree: true}`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub worktree: bool,
    /// `session/new {environment}` of each new session (`fleet` needs `repo` and `ref`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    /// Each new session's own budget (`session/new {maxBudgetUsd}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<CostUsd>,
    #[serde(default)]
    pub missed: MissedPolicy,
}

/// `routine/add`: a routine kept in the daemon's data directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineAddParams {
    /// Letters, digits, `.`, `_` and `-`, at most 64, starting with a letter or digit,
    /// unique among the daemon's routines. Absent: made from the prompt's first words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(flatten)]
    pub routine: RoutineDef,
}

/// One row of `routine/list` (and `routine/add`'s answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineInfo {
    pub name: String,
    pub source: RoutineSource,
    #[serde(flatten)]
    pub routine: RoutineDef,
    /// RFC 3339, local offset: when it fires next (absent: never again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire: Option<String>,
    /// The newest fire time handled, run or skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fire: Option<String>,
    /// The session of its last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_session_id: Option<String>,
    /// How its last run's turn ended; absent while it runs (or before any run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stop_reason: Option<StopReason>,
    /// Why its last fire made no run (the session could not be made or prompted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The systemd `OnCalendar=` values that wake the daemon for it
    /// (`amber-routines.timer`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_calendar: Vec<String>,
}

/// `routine/list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineListResult {
    pub routines: Vec<RoutineInfo>,
}

/// One run a fire made (`routine/run`), or tried to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineFired {
    pub name: String,
    /// RFC 3339, local offset.
    pub fire_time: String,
    /// The session prompted; absent when it could not be (then `error` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `routine/tick`: the runs it made, oldest fire time first.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineTickResult {
    pub fired: Vec<RoutineFired>,
}

/// `SessionInfo.routine`: the routine fire that made the session (or, for a named
/// session, its latest fire).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineRun {
    pub name: String,
    /// RFC 3339, local offset.
    pub fire_time: String,
    /// The turn the fire prompted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// How that turn ended, once it did (`routine_finished`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
}
