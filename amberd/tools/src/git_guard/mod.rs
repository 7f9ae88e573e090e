//! What the sandbox's mounts cannot protect in a workspace's git administration, checked
//! around each sandboxed command that may write the workspace: names that do not exist
//! yet, and so have no mount to be protected by.
//!
//! - `.git/commondir` in the workspace's own git dir sends git to another git dir's
//!   configuration. git writes one only in a linked worktree's admin directory, never in a
//!   repository's own `.git`: one that appears there is removed. A `.git/config.worktree`
//!   that appears (read once `extensions.worktreeConfig` is on) is set aside.
//! - A repository the command created where there was none (`git init`, a copied `.git`):
//!   its configuration did not exist to be protected while the command ran. A config
//!   that holds anything but the keys `git init` and an ordinary checkout write
//!   (`config::BENIGN`) is set aside as `config.refused-by-amber` and replaced by a minimal
//!   one; executable hooks lose their execute bits; a `.git` *file* (`gitdir: …`, sending
//!   git elsewhere) is set aside as `.git.refused-by-amber`.
//! - The same for every nested checkout a user's `git status` at the workspace root
//!   descends into ([`checkouts::nested`]: submodules and gitlinks, which a command can add
//!   to the index in one line) whose `.git` the command made or changed: a `.git` file
//!   may name only a submodule repository under the workspace's `.git/modules` that
//!   existed before (or one the command made, which is then checked as a new repository);
//!   a `.git` directory is checked as a new repository.
//!
//! The result of the command says what was done (a `bash` call's result, a background
//! process's output, the daemon's log for a hook). From the next command on, what exists
//! is protected by the sandbox's mounts.

mod checkouts;
mod config;
mod git_admin;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use amber_exec::sandbox::{SandboxMode, SandboxSpec};

use checkouts::{CheckoutStamp, Kind};
use config::{first_refused_key, minimal_config};

/// The workspace's git administration as a command found it.
#[derive(Debug)]
pub struct GitGuard {
    workspace: PathBuf,
    had_git: bool,
    had_worktree_config: bool,
    /// Each nested checkout (relative) and what its `.git` was.
    nested: HashMap<PathBuf, CheckoutStamp>,
    /// The submodule repositories under the workspace's `.git/modules`.
    modules: Vec<PathBuf>,
}

impl GitGuard {
    /// The guard of a command about to be spawned with `spec`, and the spec to spawn it
    /// with: `spec` naming the nested checkouts whose `.git` the mounts protect as the
    /// workspace's own. Only a command that may write the workspace (the default sandbox)
    /// needs either.
    pub fn around(spec: &SandboxSpec) -> Option<(Self, SandboxSpec)> {
        if spec.mode != SandboxMode::WorkspaceWrite {
            return None;
        }
        let guard = Self::before(&spec.workspace);
        let mut protecting = spec.clone();
        protecting.nested_checkouts = guard
            .nested
            .iter()
            .filter(|(_, stamp)| stamp.git.is_some())
            .map(|(rel, _)| rel.clone())
            .collect();
        protecting.nested_checkouts.sort();
        Some((guard, protecting))
    }

    /// Before the command: remembers the workspace's `.git` and its nested checkouts.
    pub(crate) fn before(workspace: &Path) -> Self {
        let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
        let git_dir = checkouts::git_dir_of(&workspace);
        let nested = checkouts::nested(&workspace)
            .into_iter()
            .map(|rel| {
                let stamp = CheckoutStamp::of(&workspace.join(&rel));
                (rel, stamp)
            })
            .collect();
        Self {
            had_git: std::fs::symlink_metadata(workspace.join(".git")).is_ok(),
            had_worktree_config: std::fs::symlink_metadata(workspace.join(".git/config.worktree"))
                .is_ok(),
            modules: git_dir
                .as_deref()
                .map(checkouts::module_dirs)
                .unwrap_or_default(),
            nested,
            workspace,
        }
    }

    /// After the command: undoes what would make the user's own git run the command's
    /// programs; the note for the tool result, when something was undone.
    pub fn after(&self) -> Option<String> {
        let mut done = self.own_repository();
        done.extend(self.nested_checkouts());
        (!done.is_empty()).then(|| {
            format!(
                "\n[sandbox: {}. amber protects what git reads to decide what it runs.]",
                done.join("; ")
            )
        })
    }

    /// The workspace's own `.git`.
    fn own_repository(&self) -> Vec<String> {
        let git = self.workspace.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&git) else {
            return Vec::new();
        };
        let mut done = Vec::new();
        if meta.is_dir() {
            let commondir = git.join("commondir");
            if std::fs::symlink_metadata(&commondir).is_ok()
                && std::fs::remove_file(&commondir).is_ok()
            {
                done.push(
                    "removed .git/commondir (it would send git to another configuration)"
                        .to_owned(),
                );
            }
            let worktree_config = git.join("config.worktree");
            if !self.had_worktree_config
                && std::fs::symlink_metadata(&worktree_config).is_ok()
                && std::fs::rename(
                    &worktree_config,
                    git.join("config.worktree.refused-by-amber"),
                )
                .is_ok()
            {
                done.push(
                    "set the new .git/config.worktree aside as config.worktree.refused-by-amber"
                        .to_owned(),
                );
            }
            if !self.had_git {
                done.extend(sanitize_repository(&git, ".git"));
            }
        } else if !self.had_git && meta.is_file() {
            done.extend(set_aside(&git, ".git"));
        }
        done
    }

    /// Every nested checkout whose `.git` the command made or changed.
    fn nested_checkouts(&self) -> Vec<String> {
        let mut roots: Vec<PathBuf> = checkouts::nested(&self.workspace);
        roots.extend(self.nested.keys().cloned());
        roots.sort();
        roots.dedup();
        let git_dir = checkouts::git_dir_of(&self.workspace);
        let mut done = Vec::new();
        for rel in roots {
            let root = self.workspace.join(&rel);
            let now = CheckoutStamp::of(&root);
            if self.nested.get(&rel) == Some(&now) {
                continue;
            }
            let Some(git) = now.git else {
                continue;
            };
            let shown = format!("{}/.git", rel.display());
            let dot_git = root.join(".git");
            match git.kind() {
                Kind::Dir => done.extend(sanitize_repository(&dot_git, &shown)),
                Kind::File => {
                    let named = checkouts::gitdir_named_by(&dot_git);
                    let modules = git_dir.as_ref().map(|dir| dir.join("modules"));
                    match (named, modules) {
                        (Some(named), Some(modules)) if named.starts_with(&modules) => {
                            if !self.modules.contains(&named) {
                                let shown = named.strip_prefix(&self.workspace).map_or_else(
                                    |_| named.display().to_string(),
                                    |p| p.display().to_string(),
                                );
                                done.extend(sanitize_repository(&named, &shown));
                            }
                        }
                        _ => done.extend(set_aside(&dot_git, &shown)),
                    }
                }
                Kind::Other => done.extend(set_aside(&dot_git, &shown)),
            }
        }
        done
    }
}

/// Sets a `.git` file (or link) of the command's making aside as `.git.refused-by-amber`.
fn set_aside(git: &Path, shown: &str) -> Option<String> {
    let aside = git.with_file_name(".git.refused-by-amber");
    std::fs::rename(git, &aside).ok().map(|()| {
        format!(
            "set the new {shown} aside as .git.refused-by-amber (it would send git to a git \
             dir of the command's making)"
        )
    })
}

/// The config and hooks of a repository the command made (`shown` names its git dir).
fn sanitize_repository(git: &Path, shown: &str) -> Vec<String> {
    let mut done = Vec::new();
    let config = git.join("config");
    if let Ok(text) = std::fs::read_to_string(&config) {
        if let Some(refused) = first_refused_key(&text) {
            let aside = git.join("config.refused-by-amber");
            let minimal = minimal_config(&text);
            if std::fs::rename(&config, &aside).is_ok() && std::fs::write(&config, minimal).is_ok()
            {
                done.push(format!(
                    "replaced the new repository's {shown}/config, which set `{refused}`, by a \
                     minimal one (the old one is {shown}/config.refused-by-amber)"
                ));
            }
        }
    } else if std::fs::symlink_metadata(&config).is_ok() {
        // Not a readable file (a link, a directory): nothing git should read.
        let aside = git.join("config.refused-by-amber");
        if std::fs::rename(&config, &aside).is_ok() {
            done.push(format!(
                "set the new repository's unreadable {shown}/config aside"
            ));
        }
    }
    let hooks = git.join("hooks");
    if let Ok(entries) = std::fs::read_dir(&hooks) {
        use std::os::unix::fs::PermissionsExt;
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            let executable = meta.permissions().mode() & 0o111 != 0;
            if meta.is_file() && executable {
                let mode = meta.permissions().mode() & !0o111;
                if std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(mode))
                    .is_ok()
                {
                    done.push(format!(
                        "made the new hook {shown}/hooks/{} not executable",
                        entry.file_name().to_string_lossy()
                    ));
                }
            } else if meta.file_type().is_symlink() && std::fs::remove_file(entry.path()).is_ok() {
                done.push(format!(
                    "removed the linked hook {shown}/hooks/{}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    done
}

#[cfg(test)]
mod tests;
