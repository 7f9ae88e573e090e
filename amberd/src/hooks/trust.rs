//! Trust of workspace hooks: `.amber/hooks.toml` runs only once the user trusted that exact
//! file. The daemon remembers trusted files as path → blake3 hash in
//! `<data_dir>/trusted-hooks.json` (replaced atomically); a file whose hash changed is
//! untrusted again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::spec::{HookSpec, HooksFile};

/// Where a workspace keeps its hooks.
pub const WORKSPACE_FILE: &str = ".amber/hooks.toml";

/// A workspace's hooks file as read now.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceHooks {
    pub path: PathBuf,
    /// blake3 of the file's bytes, hex.
    pub hash: String,
    pub hooks: Vec<HookSpec>,
}

/// Why a workspace's hooks file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceHooksError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// Reads `<workspace>/.amber/hooks.toml`; `Ok(None)` when there is none.
pub fn read_workspace(workspace: &Path) -> Result<Option<WorkspaceHooks>, WorkspaceHooksError> {
    let path = workspace.join(WORKSPACE_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(WorkspaceHooksError::Read { path, source }),
    };
    let hash = blake3::hash(&bytes).to_hex().to_string();
    let text = String::from_utf8_lossy(&bytes);
    let file = HooksFile::parse(&text).map_err(|message| WorkspaceHooksError::Invalid {
        path: path.clone(),
        message,
    })?;
    Ok(Some(WorkspaceHooks {
        path,
        hash,
        hooks: file.hooks,
    }))
}

/// The remembered trust: path → hash, in one JSON file of the data dir.
#[derive(Debug)]
pub struct TrustStore {
    file: PathBuf,
    /// Serializes read-modify-write of the file.
    lock: Mutex<()>,
}

impl TrustStore {
    pub fn new(data_dir: &Path) -> TrustStore {
        TrustStore {
            file: data_dir.join("trusted-hooks.json"),
            lock: Mutex::new(()),
        }
    }

    fn load(&self) -> BTreeMap<String, String> {
        match std::fs::read(&self.file) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|err| {
                tracing::warn!(path = %self.file.display(), %err, "ignoring an unreadable trusted-hooks file");
                BTreeMap::new()
            }),
            Err(_) => BTreeMap::new(),
        }
    }

    /// Whether the file at `path` with content hash `hash` was trusted.
    pub fn is_trusted(&self, path: &Path, hash: &str) -> bool {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.load()
            .get(&path.to_string_lossy().into_owned())
            .is_some_and(|h| h == hash)
    }

    /// Remembers `path` at `hash` (replacing what was trusted there before).
    pub fn remember(&self, path: &Path, hash: &str) -> std::io::Result<()> {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut map = self.load();
        map.insert(path.to_string_lossy().into_owned(), hash.to_owned());
        let bytes = serde_json::to_vec_pretty(&map).map_err(std::io::Error::other)?;
        if let Some(dir) = self.file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        crate::tools::atomic_write::replace_file_sync(&self.file, &bytes)
    }
}
