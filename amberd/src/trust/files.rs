//! The workspace files that need trust: where they are, and reading one as pinned bytes.
//!
//! **Invariant:** a file is read once; its hash and its parse come from the same bytes
//! (the caller parses [`WorkspaceFile::text`]). A path is confined to the workspace as the
//! file tools confine theirs (symlinks followed, never out of the workspace), and the file
//! must be a regular file of bounded size.

use std::path::{Path, PathBuf};

/// The workspace rules file (workspace-relative).
pub const RULES: &str = ".amber/rules.toml";
/// The workspace hooks file (workspace-relative).
pub const HOOKS: &str = ".amber/hooks.toml";
/// The workspace agents folder (workspace-relative).
pub const AGENTS: &str = ".amber/agents";
/// Larger configuration files are refused unread.
const MAX_BYTES: u64 = 1024 * 1024;

/// What a workspace configuration file configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigKind {
    Rules,
    Hooks,
    Agent,
}

impl ConfigKind {
    /// As `trust/list` and approval requests name it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigKind::Rules => "rules",
            ConfigKind::Hooks => "hooks",
            ConfigKind::Agent => "agent",
        }
    }
}

/// One version of a workspace configuration file, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceFile {
    pub kind: ConfigKind,
    /// Workspace-relative, as written (`.amber/agents/x.md`).
    pub relative: String,
    /// The absolute path in the workspace: the key trust is remembered under.
    pub path: PathBuf,
    /// blake3 of the bytes, hex.
    pub hash: String,
    bytes: Vec<u8>,
}

impl WorkspaceFile {
    /// The content that was hashed (lossy UTF-8; a parser of a non-UTF-8 file fails on it).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.bytes)
    }

    /// The content as strict UTF-8, when it is.
    pub fn utf8(&self) -> Option<&str> {
        std::str::from_utf8(&self.bytes).ok()
    }

    /// Builds one from bytes already read (tests, and callers holding the bytes).
    pub fn from_bytes(
        kind: ConfigKind,
        workspace: &Path,
        relative: &str,
        bytes: Vec<u8>,
    ) -> WorkspaceFile {
        WorkspaceFile {
            kind,
            relative: relative.to_owned(),
            path: workspace.join(relative),
            hash: blake3::hash(&bytes).to_hex().to_string(),
            bytes,
        }
    }
}

/// Why a workspace configuration file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TrustFileError {
    #[error("{relative} is not inside the workspace: {reason}")]
    Outside { relative: String, reason: String },
    #[error("{relative} is not a regular file")]
    NotAFile { relative: String },
    #[error("{relative} has {len} bytes, more than the {MAX_BYTES} a configuration file may have")]
    TooLarge { relative: String, len: u64 },
    #[error("cannot read {relative}: {source}")]
    Read {
        relative: String,
        source: std::io::Error,
    },
}

/// Reads `relative` (a path under `.amber/`) of `workspace`; `Ok(None)` when there is none.
pub fn read(
    workspace: &Path,
    kind: ConfigKind,
    relative: &str,
) -> Result<Option<WorkspaceFile>, TrustFileError> {
    let lexical = workspace.join(relative);
    match std::fs::symlink_metadata(&lexical) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(TrustFileError::Read {
                relative: relative.to_owned(),
                source,
            });
        }
        Ok(_) => {}
    }
    let resolved =
        amber_policy::confine(workspace, relative).map_err(|e| TrustFileError::Outside {
            relative: relative.to_owned(),
            reason: e.to_string(),
        })?;
    let read_err = |source| TrustFileError::Read {
        relative: relative.to_owned(),
        source,
    };
    let meta = std::fs::metadata(&resolved).map_err(read_err)?;
    if !meta.is_file() {
        return Err(TrustFileError::NotAFile {
            relative: relative.to_owned(),
        });
    }
    if meta.len() > MAX_BYTES {
        return Err(TrustFileError::TooLarge {
            relative: relative.to_owned(),
            len: meta.len(),
        });
    }
    let bytes = std::fs::read(&resolved).map_err(read_err)?;
    Ok(Some(WorkspaceFile::from_bytes(
        kind, workspace, relative, bytes,
    )))
}

/// Every configuration file `workspace` holds, in a stable order: the rules, the hooks,
/// then the agents by name. A file that cannot be read is reported, not skipped.
pub fn discover(workspace: &Path) -> Vec<Result<WorkspaceFile, TrustFileError>> {
    let mut found = Vec::new();
    for (kind, relative) in [(ConfigKind::Rules, RULES), (ConfigKind::Hooks, HOOKS)] {
        match read(workspace, kind, relative) {
            Ok(Some(file)) => found.push(Ok(file)),
            Ok(None) => {}
            Err(err) => found.push(Err(err)),
        }
    }
    for relative in agent_files(workspace) {
        match read(workspace, ConfigKind::Agent, &relative) {
            Ok(Some(file)) => found.push(Ok(file)),
            Ok(None) => {}
            Err(err) => found.push(Err(err)),
        }
    }
    found
}

/// The `.amber/agents/*.md` files, workspace-relative, sorted.
fn agent_files(workspace: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(workspace.join(AGENTS)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_owned();
            name.ends_with(".md").then(|| format!("{AGENTS}/{name}"))
        })
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pins_and_confines_workspace_files() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(ws.join(AGENTS)).unwrap();
        assert!(read(&ws, ConfigKind::Rules, RULES).unwrap().is_none());
        std::fs::write(ws.join(RULES), "[[rules]]\n").unwrap();
        let file = read(&ws, ConfigKind::Rules, RULES).unwrap().unwrap();
        assert_eq!(file.hash, blake3::hash(b"[[rules]]\n").to_hex().to_string());
        assert_eq!(file.path, ws.join(RULES));
        assert_eq!(file.text(), "[[rules]]\n");
        // A link out of the workspace is refused, a directory is no file.
        std::fs::write(root.path().join("outside.md"), "x").unwrap();
        std::os::unix::fs::symlink(root.path().join("outside.md"), ws.join(AGENTS).join("a.md"))
            .unwrap();
        std::fs::create_dir(ws.join(AGENTS).join("d.md")).unwrap();
        std::fs::write(ws.join(AGENTS).join("b.md"), "b").unwrap();
        std::fs::write(ws.join(AGENTS).join("notes.txt"), "n").unwrap();
        let found = discover(&ws);
        assert_eq!(found.len(), 4, "{found:?}");
        assert_eq!(found[0].as_ref().unwrap().kind, ConfigKind::Rules);
        assert!(
            matches!(found[1], Err(TrustFileError::Outside { .. })),
            "{found:?}"
        );
        assert_eq!(found[2].as_ref().unwrap().relative, ".amber/agents/b.md");
        assert!(
            matches!(found[3], Err(TrustFileError::NotAFile { .. })),
            "{found:?}"
        );
    }
}
