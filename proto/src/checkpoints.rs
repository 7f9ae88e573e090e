//! Checkpoints, rewind and fork (PROTOCOL.md second wave):
//! `checkpoint/list`, `checkpoint/diff`, `session/rewind`, `session/fork` and their types.
//! Names are exact; fields marked "amber extension" are additions a client may ignore.

use serde::{Deserialize, Serialize};

/// How a turn changed one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeStatus {
    Added,
    Modified,
    Deleted,
}

/// One path a turn changed, relative to the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedPath {
    pub path: String,
    pub status: ChangeStatus,
}

/// Why a turn listed by `checkpoint/list {all: true}` has no checkpoint (amber extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoCheckpoint {
    /// It called no file-changing tool: it changed nothing a files rewind would put back.
    None,
    /// Retention (`[checkpoints.retention]`) dropped it: what it changed cannot be restored.
    Expired,
    /// It ran with `[checkpoints] enabled = false`: what it changed is unknown.
    Disabled,
}

impl NoCheckpoint {
    /// Whether a files rewind to this turn (or an earlier one) is refused because of it.
    pub fn blocks_files(self) -> bool {
        !matches!(self, NoCheckpoint::None)
    }
}

/// `checkpoint/list`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointListParams {
    pub session_id: String,
    /// amber extension: list every turn of the session's history, those without a
    /// checkpoint too (they carry `checkpoint`), not only the turns that had one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
}

/// One turn that had a checkpoint: the workspace as it was before the turn's first
/// file-changing tool call (with `all`, any turn of the history).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointInfo {
    pub turn_id: String,
    /// The seq of the turn's `turn_started` event.
    pub seq: u64,
    /// When the checkpoint was taken (RFC 3339); for a turn without one, when it began.
    pub time: String,
    pub prompt: String,
    /// What the turn changed (by any tool, commands included), sorted by path.
    pub changed: Vec<ChangedPath>,
    /// Paths the turn changed that are not recorded (ignored, larger than
    /// `[checkpoints] max_file_bytes`, not a regular file): a rewind leaves them as they are.
    pub skipped: Vec<String>,
    /// amber extension: the 1-based number of the turn in the session's history, as
    /// `amber-cli checkpoints` prints it.
    #[serde(default)]
    pub turn: u32,
    /// amber extension: why a rewind to this checkpoint would be refused (a file could not
    /// be recorded); absent when it is complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// amber extension, only in `all` lists: why this turn has no checkpoint; absent when
    /// it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<NoCheckpoint>,
}

/// Result of `checkpoint/list`: oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointListResult {
    pub checkpoints: Vec<CheckpointInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointDiffParams {
    pub session_id: String,
    pub turn_id: String,
    /// Only this path (relative to the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Result of `checkpoint/diff`: the unified diff of what the turn changed (binary files
/// named, not dumped) and the changed paths.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointDiffResult {
    pub diff: String,
    pub changed: Vec<ChangedPath>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRewindParams {
    pub session_id: String,
    pub turn_id: String,
    /// Restore the workspace to its state before the turn (default true).
    #[serde(default = "yes")]
    pub files: bool,
    /// Drop the turn and every later one from the context (default true).
    #[serde(default = "yes")]
    pub conversation: bool,
    /// Overwrite files changed outside amber since the turns touched them.
    #[serde(default)]
    pub force: bool,
}

/// Result of `session/rewind`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRewindResult {
    /// Paths written back, removed or recreated.
    pub restored: Vec<String>,
    /// Paths changed outside amber after a turn touched them: left alone (unless `force`).
    pub conflicts: Vec<String>,
    /// Turns dropped from the conversation.
    pub removed_turns: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionForkParams {
    pub session_id: String,
    /// The fork's conversation is the history before this turn; absent: the whole history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}
