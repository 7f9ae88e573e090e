//! What the sandbox's mounts cannot protect in a workspace's git administration, checked
//! around each sandboxed command that may write the workspace: names that do not exist
//! yet, and so have no mount to be protected by.
//!
//! - `.git/commondir` in the workspace's own git dir sends git to another git dir's
//!   configuration. git writes one only in a linked worktree's admin directory, never in a
//!   repository's own `.git`: one that appears there is removed.
//! - A repository the command created where there was none (`git init`, a copied `.git`):
//!   its configuration did not exist to be protected while the command ran. A config
//!   that holds anything but the keys `git init` and an ordinary checkout write
//!   ([`BENIGN`]) is set aside as `config.refused-by-amber` and replaced by a minimal one;
//!   executable hooks lose their execute bits; a `.git` *file* (`gitdir: …`, sending git
//!   elsewhere) is set aside as `.git.refused-by-amber`.
//!
//! The result of the command says what was done (a `bash` call's result, a background
//! process's output, the daemon's log for a hook). From the next command on, the new
//! repository's config and hooks exist and are protected by the sandbox's mounts.

use std::path::{Path, PathBuf};

/// `section.key` names a new repository's config may hold (lower case; `*` stands for any
/// subsection): what `git init`, `git config user.*` and a branch's upstream write.
const BENIGN: &[&str] = &[
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "extensions.objectformat",
    "extensions.refstorage",
    "init.defaultbranch",
    "user.name",
    "user.email",
    "branch.*.remote",
    "branch.*.merge",
];

/// The workspace's git administration as a command found it.
#[derive(Debug)]
pub(crate) struct GitGuard {
    workspace: PathBuf,
    had_git: bool,
}

impl GitGuard {
    /// The guard of a command spawned with `sandbox`: only one that may write the workspace
    /// (the default sandbox) needs one.
    pub(crate) fn for_spec(spec: &amber_policy::sandbox::SandboxSpec) -> Option<Self> {
        (spec.mode == amber_policy::sandbox::SandboxMode::WorkspaceWrite)
            .then(|| Self::before(&spec.workspace))
    }

    /// Before the command: remembers whether the workspace had a `.git`.
    pub(crate) fn before(workspace: &Path) -> Self {
        Self {
            workspace: workspace.to_owned(),
            had_git: std::fs::symlink_metadata(workspace.join(".git")).is_ok(),
        }
    }

    /// After the command: undoes what would make the user's own git run the command's
    /// programs; the note for the tool result, when something was undone.
    pub(crate) fn after(&self) -> Option<String> {
        let git = self.workspace.join(".git");
        let meta = std::fs::symlink_metadata(&git).ok()?;
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
            if !self.had_git {
                done.extend(sanitize_new_repository(&git));
            }
        } else if !self.had_git && meta.is_file() {
            let aside = self.workspace.join(".git.refused-by-amber");
            if std::fs::rename(&git, &aside).is_ok() {
                done.push(
                    "set the new .git file aside as .git.refused-by-amber (it would send git \
                     to a git dir of the command's making)"
                        .to_owned(),
                );
            }
        }
        (!done.is_empty()).then(|| {
            format!(
                "\n[sandbox: {}. amber protects what git reads to decide what it runs.]",
                done.join("; ")
            )
        })
    }
}

/// The config and hooks of a repository that did not exist before the command.
fn sanitize_new_repository(git: &Path) -> Vec<String> {
    let mut done = Vec::new();
    let config = git.join("config");
    if let Ok(text) = std::fs::read_to_string(&config) {
        if let Some(refused) = first_refused_key(&text) {
            let aside = git.join("config.refused-by-amber");
            let minimal = minimal_config(&text);
            if std::fs::rename(&config, &aside).is_ok() && std::fs::write(&config, minimal).is_ok()
            {
                done.push(format!(
                    "replaced the new repository's .git/config, which set `{refused}`, by a \
                     minimal one (the old one is .git/config.refused-by-amber)"
                ));
            }
        }
    } else if std::fs::symlink_metadata(&config).is_ok() {
        // Not a readable file (a link, a directory): nothing git should read.
        let aside = git.join("config.refused-by-amber");
        if std::fs::rename(&config, &aside).is_ok() {
            done.push("set the new repository's unreadable .git/config aside".to_owned());
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
                        "made the new hook .git/hooks/{} not executable",
                        entry.file_name().to_string_lossy()
                    ));
                }
            } else if meta.file_type().is_symlink() && std::fs::remove_file(entry.path()).is_ok() {
                done.push(format!(
                    "removed the linked hook .git/hooks/{}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    done
}

/// The first key of `text` (a git config file) that is not [`BENIGN`], or a line that is
/// not plainly a section, a key or a comment (anything unusual counts as refused).
pub(crate) fn first_refused_key(text: &str) -> Option<String> {
    let mut section = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if raw.trim_end().ends_with('\\') {
            return Some(format!("a continued line ({line})"));
        }
        if let Some(header) = line.strip_prefix('[') {
            let Some((inside, rest)) = header.split_once(']') else {
                return Some(format!("an unreadable line ({line})"));
            };
            if !rest.trim().is_empty() && !rest.trim().starts_with(['#', ';']) {
                return Some(format!("an unreadable line ({line})"));
            }
            section = section_name(inside);
            continue;
        }
        let name = line
            .split(['=', ' ', '\t'])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let key = format!("{section}.{name}");
        if !BENIGN.iter().any(|benign| matches(benign, &key)) {
            return Some(key);
        }
    }
    None
}

/// `core` → `core`; `branch "main"` → `branch.*`; `branch.main` (old syntax) → `branch.*`.
fn section_name(inside: &str) -> String {
    let inside = inside.trim();
    let (name, sub) = match inside.split_once([' ', '\t', '.']) {
        Some((name, sub)) => (name, !sub.trim().is_empty()),
        None => (inside, false),
    };
    let name = name.to_ascii_lowercase();
    if sub { format!("{name}.*") } else { name }
}

fn matches(pattern: &str, key: &str) -> bool {
    pattern == key
        || pattern.split('.').count() == key.split('.').count()
            && pattern
                .split('.')
                .zip(key.split('.'))
                .all(|(p, k)| p == "*" || p == k)
}

/// A config with only what the repository needs to be read: its format version and object
/// format, as the refused one said.
fn minimal_config(refused: &str) -> String {
    let value_of = |key: &str| {
        refused.lines().find_map(|l| {
            let (name, value) = l.trim().split_once('=')?;
            (name.trim().eq_ignore_ascii_case(key)).then(|| value.trim().to_owned())
        })
    };
    let version = value_of("repositoryformatversion")
        .filter(|v| v == "0" || v == "1")
        .unwrap_or_else(|| "0".to_owned());
    let mut out = format!(
        "[core]\n\trepositoryformatversion = {version}\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
    );
    let formats: Vec<(&str, String)> = ["objectformat", "refstorage"]
        .into_iter()
        .filter_map(|key| {
            value_of(key)
                .filter(|v| v.chars().all(|c| c.is_ascii_alphanumeric()))
                .map(|v| (key, v))
        })
        .collect();
    if !formats.is_empty() {
        out.push_str("[extensions]\n");
        for (key, value) in formats {
            out.push_str(&format!("\t{key} = {value}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn only_the_keys_git_init_and_a_checkout_write_are_benign() {
        let plain = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                     \tlogallrefupdates = true\n[user]\n\tname = A\n\temail = a@b\n\
                     [branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";
        assert_eq!(first_refused_key(plain), None);
        let cases: &[(&str, &str)] = &[
            ("[core]\n\tfsmonitor = touch x\n", "core.fsmonitor"),
            ("[core]\n\thooksPath = /tmp\n", "core.hookspath"),
            ("[filter \"x\"]\n\tsmudge = sh\n", "filter.*.smudge"),
            ("[include]\n\tpath = ../evil\n", "include.path"),
            ("[includeIf \"gitdir:/\"]\n\tpath = x\n", "includeif.*.path"),
            ("[remote \"o\"]\n\turl = ext::sh\n", "remote.*.url"),
            ("[alias]\n\tst = !sh\n", "alias.st"),
            ("[core] fsmonitor = x\n", "an unreadable line"),
            ("[core]\n\teditor = vi \\\n x\n", "a continued line"),
            (
                "[branch.main]\n\tremote = o\n[diff \"x\"]\n\ttextconv = sh\n",
                "diff.*.textconv",
            ),
        ];
        for (text, refused) in cases {
            let found = first_refused_key(text).unwrap_or_default();
            assert!(found.starts_with(refused), "{text:?}: {found}");
        }
    }

    #[test]
    fn the_minimal_config_keeps_the_format_and_nothing_else() {
        let refused = "[core]\n\trepositoryformatversion = 1\n\tfsmonitor = x\n\
                       [extensions]\n\tobjectformat = sha256\n";
        let minimal = minimal_config(refused);
        assert!(minimal.contains("repositoryformatversion = 1"), "{minimal}");
        assert!(minimal.contains("objectformat = sha256"), "{minimal}");
        assert_eq!(first_refused_key(&minimal), None, "{minimal}");
        assert!(!minimal.contains("fsmonitor"));
    }

    #[test]
    fn a_planted_commondir_and_a_new_repository_s_programs_are_undone() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path();
        let guard = GitGuard::before(ws);
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n\tfsmonitor = evil\n").unwrap();
        std::fs::write(ws.join(".git/commondir"), "../evil\n").unwrap();
        let hook = ws.join(".git/hooks/pre-commit");
        std::fs::write(&hook, "#!/bin/sh\nevil\n").unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        let note = guard.after().unwrap();
        assert!(
            note.contains("commondir") && note.contains("core.fsmonitor"),
            "{note}"
        );
        assert!(!ws.join(".git/commondir").exists());
        let config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
        assert_eq!(first_refused_key(&config), None, "{config}");
        assert!(ws.join(".git/config.refused-by-amber").is_file());
        let mode = std::fs::metadata(&hook).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0, "{mode:o}");
        // An existing repository's config is the sandbox's to protect, not changed here.
        let again = GitGuard::before(ws);
        std::fs::write(ws.join(".git/config"), "[core]\n\teditor = vi\n").unwrap();
        assert_eq!(again.after(), None);
        // A `.git` file planted where there was no repository is set aside.
        let other = tempfile::tempdir().unwrap();
        let guard = GitGuard::before(other.path());
        std::fs::write(other.path().join(".git"), "gitdir: evil\n").unwrap();
        assert!(guard.after().is_some());
        assert!(!other.path().join(".git").exists());
    }
}
