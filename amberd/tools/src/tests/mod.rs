//! Tests that run real processes (bash, process) and whole dispatches, and the
//! session tools (todowrite, skills).

mod bash;
mod dispatch;
mod escalation;
mod process;
mod skills;
mod todowrite;

use std::path::PathBuf;

use super::ToolContext;

/// A temp workspace (kept alive by the returned guard) and a context on it.
pub(super) fn workspace() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ToolContext::new(root, "call_1"))
}
