//! The workspace's hooks file, `.amber/hooks.toml`, read as a pinned version
//! (`crate::trust`): its hooks run only once the user trusted that exact content.

use std::path::{Path, PathBuf};

use super::spec::{HookSpec, HooksFile};
use crate::trust::{ConfigKind, TrustFileError};

/// Where a workspace keeps its hooks.
pub const WORKSPACE_FILE: &str = crate::trust::files::HOOKS;

/// A workspace's hooks file as read now.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceHooks {
    pub path: PathBuf,
    /// blake3 of the file's bytes, hex: the version trust is about.
    pub hash: String,
    pub hooks: Vec<HookSpec>,
}

/// Why a workspace's hooks file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceHooksError {
    #[error(transparent)]
    Read(#[from] TrustFileError),
    #[error("invalid {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// Reads `<workspace>/.amber/hooks.toml`; `Ok(None)` when there is none. The hooks are
/// parsed from the bytes the hash was taken of.
pub fn read_workspace(workspace: &Path) -> Result<Option<WorkspaceHooks>, WorkspaceHooksError> {
    let Some(file) = crate::trust::read(workspace, ConfigKind::Hooks, WORKSPACE_FILE)? else {
        return Ok(None);
    };
    let parsed =
        HooksFile::parse(&file.text()).map_err(|message| WorkspaceHooksError::Invalid {
            path: file.path.clone(),
            message,
        })?;
    Ok(Some(WorkspaceHooks {
        path: file.path,
        hash: file.hash,
        hooks: parsed.hooks,
    }))
}
