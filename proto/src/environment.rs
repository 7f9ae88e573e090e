//! Where a session's tools run (`session/new {environment}`): here (`local`, the default),
//! on an executor (`ssh://host/path`, `executor:NAME`), or on whichever runner of a fleet
//! takes it (`fleet`), and the state of its link.

use serde::{Deserialize, Serialize};

/// `SessionInfo.environment` (absent: local), and the payload of the environment events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentInfo {
    /// As `session/new` named it: `ssh://build1/src/app`, `executor:gpu`.
    pub spec: String,
    pub state: EnvironmentState,
    /// The executor serving it, once one answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<ExecutorInfo>,
    /// Why it is `lost` or `gone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A fleet session's place in the fleet (`environment: "fleet"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetInfo>,
}

/// A fleet session: what its runner clones and where it stands in the fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetInfo {
    pub repo: String,
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// Commands run in the session's sandbox after each fresh clone, before the session's
    /// work.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<String>,
    /// What a runner's labels must include (`pool`, `os`, `arch`, any of its `--label`s).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Higher is taken first; equal ones in the order they were queued.
    #[serde(default)]
    pub priority: i32,
    pub state: FleetState,
    /// The runner holding it (`assigned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// The runner's pool (`assigned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// How many times it was given to a runner.
    #[serde(default)]
    pub attempts: u32,
    /// Where its result is pushed, if it asked (`session/new {push}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<FleetPush>,
}

/// One line for a person on a `fleet_pushed` event.
pub fn describe_push(
    branch: &str,
    commit: Option<&str>,
    changed: bool,
    error: Option<&str>,
) -> String {
    let short = |commit: &str| commit.chars().take(12).collect::<String>();
    match (error, changed, commit) {
        (Some(error), _, _) => format!("push to `{branch}` failed: {error}"),
        (None, true, Some(commit)) => format!("pushed {} to `{branch}`", short(commit)),
        (None, _, Some(commit)) => {
            format!("nothing new to push: `{branch}` is at {}", short(commit))
        }
        (None, _, None) => format!("nothing changed: `{branch}` not pushed"),
    }
}

/// A fleet session's branch: its runner commits the workspace and pushes it there at the
/// end of each turn that completes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetPush {
    pub branch: String,
    /// The commit pushed last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl FleetInfo {
    /// One line for a person: where it stands, on which runner, and why.
    pub fn describe(&self, reason: Option<&str>) -> String {
        let mut line = match self.state {
            FleetState::Queued if self.attempts > 0 => {
                format!("queued again for a runner (attempt {})", self.attempts + 1)
            }
            FleetState::Queued => "queued for a runner".to_owned(),
            FleetState::Assigned => format!(
                "on runner {}{}",
                self.runner.as_deref().unwrap_or("?"),
                self.pool
                    .as_deref()
                    .map(|p| format!(" (pool {p})"))
                    .unwrap_or_default()
            ),
            FleetState::Parked => "released by its runner; the next turn queues it".to_owned(),
            FleetState::Failed => "failed: its workspace could not be made".to_owned(),
        };
        if let Some(reason) = reason.filter(|r| !r.is_empty()) {
            line.push_str(": ");
            line.push_str(reason);
        }
        line
    }
}

/// Where a fleet session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FleetState {
    /// Waiting for a runner with room and matching labels.
    Queued,
    /// A runner holds it: its workspace is there.
    Assigned,
    /// No runner holds it and nothing waits (idle; its next turn queues it again).
    Parked,
    /// Its workspace could not be made (the clone or its setup failed).
    Failed,
}

/// The state of a session's link to its executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvironmentState {
    /// Not connected yet (a session loaded from the store connects at its next tool call).
    Connecting,
    Connected,
    /// The link dropped; amberd is attaching again to the same executor.
    Lost,
    /// The executor is gone for good; the next tool call starts a new one.
    Gone,
    /// A fleet session waiting for a runner (or parked): no executor yet.
    Queued,
}

/// An executor as it introduced itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorInfo {
    pub id: String,
    pub hostname: String,
    pub os: String,
    pub arch: String,
    pub version: String,
    pub pid: u32,
}
