//! Where instruction files may be: the user's global file, then every directory from the
//! workspace's git root (or the workspace itself outside a repository) down to the
//! workspace, nearest last — and what each one's `stat` says right now.

use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

/// One place an instruction file may be, in prompt order (most general first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub path: PathBuf,
    /// How the prompt names it: relative to the workspace (`../AGENTS.md` above it), or
    /// `~/…` for the global file.
    pub shown: String,
    /// Symlinks are followed only when they resolve inside this directory (`None`: the
    /// user's own global file, which is never confined).
    pub confine_to: Option<PathBuf>,
}

/// What `stat` says about a candidate; a change of any field (or of whether the file
/// exists) means the instructions are read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
    device: u64,
}

impl Stamp {
    /// The stamp of the file `path` names (through symlinks); `None` when there is no
    /// regular file there.
    pub(super) fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        meta.is_file().then(|| Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode: meta.ino(),
            device: meta.dev(),
        })
    }
}

/// The nearest directory from `workspace` up that holds `.git` (a repository or a
/// worktree's `.git` file); `workspace` itself when there is none.
pub(crate) fn discovery_root(workspace: &Path) -> PathBuf {
    workspace
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(workspace)
        .to_path_buf()
}

/// Whether `workspace` is inside a git repository (by the same `.git` rule).
pub(crate) fn in_repository(workspace: &Path) -> bool {
    workspace.ancestors().any(|dir| dir.join(".git").exists())
}

/// The user's global instruction file, `AGENTS.md` in amber's user config folder
/// (`dirs::user_config_dir`), shown by its `~/…` path under `home`; `None` without
/// that folder.
pub(crate) fn global_file(config_dir: Option<&Path>, home: Option<&Path>) -> Option<Candidate> {
    let path = config_dir?.join("AGENTS.md");
    let shown = match home.and_then(|h| path.strip_prefix(h).ok()) {
        Some(rest) => format!("~/{}", rest.display()),
        None => path.display().to_string(),
    };
    Some(Candidate {
        path,
        shown,
        confine_to: None,
    })
}

/// Every candidate in prompt order: `global`, then for each directory from the discovery
/// root down to `workspace`, each of `names` in their order.
pub(crate) fn candidates(
    workspace: &Path,
    names: &[String],
    global: Option<Candidate>,
) -> Vec<Candidate> {
    let root = discovery_root(workspace);
    let mut dirs: Vec<&Path> = workspace
        .ancestors()
        .take_while(|dir| dir.starts_with(&root))
        .collect();
    dirs.reverse();
    let mut out: Vec<Candidate> = global.into_iter().collect();
    for dir in dirs {
        for name in names {
            let path = dir.join(name);
            out.push(Candidate {
                shown: relative_to(workspace, &path),
                path,
                confine_to: Some(root.clone()),
            });
        }
    }
    out
}

/// `path` relative to `base` (both absolute, lexically clean): `..` for each component
/// of `base` not shared.
pub(crate) fn relative_to(base: &Path, path: &Path) -> String {
    let base: Vec<Component> = base.components().collect();
    let target: Vec<Component> = path.components().collect();
    let shared = base.iter().zip(&target).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in shared..base.len() {
        out.push("..");
    }
    for component in &target[shared..] {
        out.push(component.as_os_str());
    }
    out.display().to_string()
}

/// A configured file name is a relative path that stays in its directory.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let path = Path::new(name);
    let plain = path
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if name.trim().is_empty() || name.contains('\0') || !plain || path.file_name().is_none() {
        return Err(format!(
            "agent.instruction_files: `{name}` must be a relative file path without `..`"
        ));
    }
    Ok(())
}
