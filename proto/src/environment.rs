//! Where a session's tools run (`session/new {environment}`): here (`local`, the default),
//! or on an executor (`ssh://host/path`, `executor:NAME`), and the state of its link.

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
