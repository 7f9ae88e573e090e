//! Wire types of the automation additions (PROTOCOL.md's second wave): a git
//! worktree per session, deleting one, and how a prompt's structured output is asked for.

use serde::{Deserialize, Serialize};

/// `session/new {worktree}`: `true` for a worktree with the default branch
/// (`amber/<short id>` from `HEAD`), or the branch and base to use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WorktreeRequest {
    /// `true` asks for a worktree with the defaults; `false` is the same as leaving it out.
    Enabled(bool),
    Options(WorktreeOptions),
}

impl WorktreeRequest {
    /// The options a worktree is created with, or `None` when none was asked for.
    pub fn options(&self) -> Option<WorktreeOptions> {
        match self {
            WorktreeRequest::Enabled(false) => None,
            WorktreeRequest::Enabled(true) => Some(WorktreeOptions::default()),
            WorktreeRequest::Options(options) => Some(options.clone()),
        }
    }
}

/// The branch and base of a session's worktree.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeOptions {
    /// The new branch (default: `amber/<short session id>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// What the branch starts from (default: `HEAD` of the cwd's repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
}

/// `SessionInfo.worktree`: the git worktree the session works in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeInfo {
    /// Absolute path of the worktree (the session's cwd is in it).
    pub path: String,
    pub branch: String,
}

/// `session/delete`: the session, and what happens to its worktree if it has one.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionDeleteParams {
    pub session_id: String,
    /// amber extension: `true` removes the session's worktree (refused, -32602, while it has
    /// uncommitted changes, unless `force`); `false` or absent keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove_worktree: Option<bool>,
    /// With `removeWorktree`: remove it even with uncommitted changes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}
