//! amber extension: workspace configuration trust (`trust/list`, `trust/respond`).
//!
//! A workspace's `.amber/rules.toml`, `.amber/hooks.toml` and `.amber/agents/*.md` count
//! only once the user trusted that version (its blake3 hash). These methods list what a
//! workspace would load and answer for one version, outside any session.

use serde::{Deserialize, Serialize};

/// `trust/list`: the configuration files of the workspace `cwd`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustListParams {
    /// The workspace root (absolute), validated as `session/new`'s `cwd`.
    pub cwd: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustListResult {
    /// The workspace as resolved.
    pub cwd: String,
    /// Rules, hooks, then agents by name.
    pub files: Vec<TrustFile>,
}

/// One workspace configuration file as it is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustFile {
    /// Workspace-relative (`.amber/rules.toml`).
    pub path: String,
    pub kind: TrustKind,
    /// blake3 of the content, hex (absent when it cannot be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    pub state: TrustState,
    /// What it does now, and what it would do once trusted, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<String>,
    /// Why it cannot be used (`invalid`, `refused`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustKind {
    Rules,
    Hooks,
    Agent,
}

impl TrustKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TrustKind::Rules => "rules",
            TrustKind::Hooks => "hooks",
            TrustKind::Agent => "agent",
        }
    }
}

/// Where one version stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustState {
    /// Trusted (remembered): it applies in full.
    Trusted,
    /// Pending: it would change something once trusted, and nobody decided on this version.
    Untrusted,
    /// Denied (remembered): ignored, and turns do not ask about this version.
    Denied,
    /// Needs no trust: it only narrows what runs (a rules file of deny and ask rules), or
    /// holds nothing.
    Inert,
    /// Cannot be read or parsed.
    Invalid,
    /// Never used, whatever the trust (a workspace agent taking a bundled agent's name).
    Refused,
}

impl TrustState {
    pub fn as_str(self) -> &'static str {
        match self {
            TrustState::Trusted => "trusted",
            TrustState::Untrusted => "untrusted",
            TrustState::Denied => "denied",
            TrustState::Inert => "inert",
            TrustState::Invalid => "invalid",
            TrustState::Refused => "refused",
        }
    }
}

/// `trust/respond`: a person's decision on one version of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustRespondParams {
    pub cwd: String,
    /// Workspace-relative, as `trust/list` names it.
    pub path: String,
    /// The version decided on: refused when the file's content changed since (-32602).
    pub hash: String,
    pub decision: TrustDecision,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustDecision {
    Trust,
    Deny,
}
