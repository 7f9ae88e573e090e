//! Protected paths: the files inside the workspace that decide what the agent may do or
//! what runs later outside the policy — amber's own `.amber/` (rules, skills), and git's
//! hooks and config (`.git/hooks/**`, `.git/config`, also of nested repositories, and a
//! `.git` replaced as a whole). In `write` mode a write to them always asks, and neither a
//! session grant nor an allow rule covers it; `read` mode denies them like any write;
//! `yolo` lets them through (nothing asks in yolo, by definition).

use std::path::{Component, Path};

/// The workspace rules file (workspace-relative): besides being protected, a write to it
/// asks in every mode while the session has an OS sandbox (`engine`).
pub(crate) const RULES_FILE: &str = ".amber/rules.toml";

/// Whether a workspace-relative path is protected.
pub(crate) fn is_protected(relative: &Path) -> bool {
    let names: Vec<&str> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect();
    if names.first() == Some(&".amber") {
        return true;
    }
    names.iter().enumerate().any(|(i, name)| {
        *name == ".git" && matches!(names.get(i + 1).copied(), None | Some("hooks" | "config"))
    })
}

/// Whether an absolute path is a protected path of `workspace` (both lexical or both
/// resolved).
pub(crate) fn is_protected_in(path: &Path, workspace: &Path) -> bool {
    path.strip_prefix(workspace).is_ok_and(is_protected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_paths() {
        for p in [
            ".amber",
            ".amber/rules.toml",
            ".amber/skills/x/SKILL.md",
            ".git",
            ".git/hooks",
            ".git/hooks/pre-commit",
            ".git/config",
            "sub/.git/hooks/post-checkout",
            "./.amber/rules.toml",
        ] {
            assert!(is_protected(Path::new(p)), "{p}");
        }
        for p in [
            "src/.amber",
            ".amberx/a",
            ".git/HEAD",
            ".git/objects/ab",
            ".github/workflows/ci.yml",
            "hooks/pre-commit",
            "",
        ] {
            assert!(!is_protected(Path::new(p)), "{p}");
        }
        assert!(is_protected_in(
            Path::new("/ws/.git/config"),
            Path::new("/ws")
        ));
        assert!(!is_protected_in(Path::new("/ws2/.amber"), Path::new("/ws")));
    }
}
