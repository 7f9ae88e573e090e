//! `workspace/config`: the workspace's configuration files, read where the workspace is,
//! for amberd to keep a mirror of (a remote session's instructions, rules, agents and
//! skills are read there, as a local session's are read in its workspace).
//!
//! Only these paths, and only regular files inside the workspace (a symlink is followed
//! only while it stays inside; one that leads out is told as a link, its target unread),
//! bounded in size and number: the instruction files amberd
//! names at the workspace's top, `.amber/rules.toml`, `.amber/agents/*.md` and
//! `.amber/skills/*/SKILL.md`. [`is_config_path`] is the same rule for the receiving end.

use std::path::{Component, Path};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::wire::{ConfigFile, OmittedFile, WorkspaceConfigResult};

/// The rules file, workspace-relative.
pub const RULES: &str = ".amber/rules.toml";
/// The agents folder: `NAME.md` files.
pub const AGENTS: &str = ".amber/agents";
/// The skills folder: `NAME/SKILL.md`.
pub const SKILLS: &str = amber_tools::skills::WORKSPACE_SKILLS;
/// A configuration file larger than this is left out.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// All files of one answer together, at most.
pub const MAX_TOTAL_BYTES: u64 = 4 * 1024 * 1024;
/// Agents, and skills, looked at each, at most.
const MAX_PER_FOLDER: usize = 200;
/// Instruction file names looked for, at most.
pub const MAX_INSTRUCTION_NAMES: usize = 16;

/// Whether `path` is one a `workspace/config` answer may carry, given the instruction file
/// names asked for: a plain relative path, and one of the shapes above.
pub fn is_config_path(path: &str, instruction_files: &[String]) -> bool {
    if !is_plain(path) {
        return false;
    }
    if path == RULES || instruction_files.iter().any(|name| name == path) {
        return true;
    }
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        [".amber", "agents", name] => name.ends_with(".md"),
        [".amber", "skills", _, file] => *file == amber_tools::skills::SKILL_FILE,
        _ => false,
    }
}

/// A relative path of normal components only (no `..`, `.`, root or empty part).
fn is_plain(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\0')
        && !path.contains('\\')
        && Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        && path.split('/').all(|part| !part.is_empty())
}

/// Reads the configuration files of `workspace`.
pub fn read(workspace: &Path, instruction_files: &[String]) -> WorkspaceConfigResult {
    let mut wanted: Vec<String> = instruction_files
        .iter()
        .take(MAX_INSTRUCTION_NAMES)
        .filter(|name| is_plain(name))
        .cloned()
        .collect();
    wanted.push(RULES.to_owned());
    wanted.extend(listed(workspace, AGENTS, |entry| {
        entry.ends_with(".md").then(|| format!("{AGENTS}/{entry}"))
    }));
    wanted.extend(listed(workspace, SKILLS, |entry| {
        Some(format!(
            "{SKILLS}/{entry}/{}",
            amber_tools::skills::SKILL_FILE
        ))
    }));
    let mut answer = WorkspaceConfigResult::default();
    let mut total = 0u64;
    for path in wanted {
        if !is_config_path(&path, instruction_files) {
            continue;
        }
        let mut omit = |reason: String| {
            answer.omitted.push(OmittedFile {
                path: path.clone(),
                reason,
            });
        };
        let lexical = workspace.join(&path);
        let Ok(entry) = std::fs::symlink_metadata(&lexical) else {
            continue;
        };
        let resolved = match amber_policy::confine(workspace, &path) {
            Ok(resolved) => resolved,
            // A link out is told as a link (its target is not read), so the receiving end
            // says what it would say of it in a workspace of its own.
            Err(_) if entry.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(&lexical) {
                    answer.files.push(ConfigFile {
                        path: path.clone(),
                        data: String::new(),
                        link: Some(target.to_string_lossy().into_owned()),
                    });
                }
                continue;
            }
            Err(err) => {
                omit(format!("not inside the workspace: {err}"));
                continue;
            }
        };
        let room = MAX_TOTAL_BYTES.saturating_sub(total);
        match crate::checkpoints::read_regular(&resolved, MAX_FILE_BYTES.min(room)) {
            Ok(bytes) if bytes.len() as u64 <= MAX_FILE_BYTES.min(room) => {
                total += bytes.len() as u64;
                answer.files.push(ConfigFile {
                    path: path.clone(),
                    data: BASE64.encode(&bytes),
                    link: None,
                });
            }
            Ok(_) => omit(format!(
                "over the limit: {MAX_FILE_BYTES} bytes a file, {MAX_TOTAL_BYTES} in all"
            )),
            Err(err) => omit(format!("not read: {err}")),
        }
    }
    answer
}

/// Writes the workspace's rules file (amberd's rewrite of it): in a real `.amber` folder
/// (made if missing; a link there is refused), replacing the file whole (a link there is
/// replaced, never followed).
pub fn write_rules(workspace: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than the {MAX_FILE_BYTES} a configuration file may have",
            bytes.len()
        )));
    }
    let folder = workspace.join(".amber");
    match std::fs::symlink_metadata(&folder) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(std::io::Error::other(
                ".amber is not a folder of the workspace",
            ));
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&folder)?,
        Err(err) => return Err(err),
    }
    let staged = folder.join(format!(".rules.toml.amber-{}", std::process::id()));
    std::fs::write(&staged, bytes)?;
    std::fs::rename(&staged, workspace.join(RULES))
}

/// The entries of `folder` (workspace-relative) mapped by `shape`, sorted, at most
/// [`MAX_PER_FOLDER`].
fn listed(workspace: &Path, folder: &str, shape: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(workspace.join(folder)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| shape(entry.file_name().to_str()?))
        .collect();
    names.sort();
    names.truncate(MAX_PER_FOLDER);
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["AGENTS.md".to_owned(), "docs/CLAUDE.md".to_owned()]
    }

    #[test]
    fn only_configuration_shapes_are_config_paths() {
        for good in [
            "AGENTS.md",
            "docs/CLAUDE.md",
            ".amber/rules.toml",
            ".amber/agents/reviewer.md",
            ".amber/skills/deploy/SKILL.md",
        ] {
            assert!(is_config_path(good, &names()), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../AGENTS.md",
            "./AGENTS.md",
            "README.md",
            ".amber/hooks.toml",
            ".amber/agents/x.txt",
            ".amber/agents/../rules.toml",
            ".amber/skills/deploy/run.sh",
            ".amber/skills/SKILL.md",
            ".amber//rules.toml",
            ".git/config",
        ] {
            assert!(!is_config_path(bad, &names()), "{bad}");
        }
    }

    #[test]
    fn the_rules_file_is_written_in_a_real_folder_never_through_a_link() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        write_rules(&ws, b"one").unwrap();
        assert_eq!(std::fs::read(ws.join(RULES)).unwrap(), b"one");
        // A link in the file's place is replaced, its target untouched.
        let outside = root.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        std::fs::remove_file(ws.join(RULES)).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join(RULES)).unwrap();
        write_rules(&ws, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert_eq!(std::fs::read(ws.join(RULES)).unwrap(), b"two");
        // `.amber` as a link out is refused.
        let other = root.path().join("other");
        std::fs::create_dir_all(other.join(".amber")).unwrap();
        let linked = root.path().join("linked");
        std::fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(other.join(".amber"), linked.join(".amber")).unwrap();
        assert!(write_rules(&linked, b"x").is_err());
        assert!(!other.join(RULES).exists());
    }

    #[test]
    fn the_files_are_read_confined_bounded_and_only_those() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        for dir in [".amber/agents", ".amber/skills/deploy", "docs"] {
            std::fs::create_dir_all(ws.join(dir)).unwrap();
        }
        std::fs::write(ws.join("AGENTS.md"), "be brief").unwrap();
        std::fs::write(ws.join(RULES), "[[rules]]\n").unwrap();
        std::fs::write(ws.join(".amber/hooks.toml"), "hooks").unwrap();
        std::fs::write(ws.join(".amber/agents/reviewer.md"), "agent").unwrap();
        std::fs::write(ws.join(".amber/skills/deploy/SKILL.md"), "skill").unwrap();
        std::fs::write(ws.join(".amber/skills/deploy/run.sh"), "script").unwrap();
        // Out of the workspace through a link; too large; a directory.
        std::fs::write(root.path().join("secret"), "secret").unwrap();
        std::os::unix::fs::symlink(root.path().join("secret"), ws.join("docs/CLAUDE.md")).unwrap();
        let big = vec![b'x'; usize::try_from(MAX_FILE_BYTES).unwrap() + 1];
        std::fs::write(ws.join(".amber/agents/huge.md"), big).unwrap();
        std::fs::create_dir(ws.join(".amber/agents/dir.md")).unwrap();
        // A FIFO would hold a reader forever.
        let fifo = std::ffi::CString::new(
            ws.join(".amber/agents/pipe.md")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);

        let answer = read(&ws, &names());
        let given: Vec<(&str, Vec<u8>)> = answer
            .files
            .iter()
            .filter(|f| f.link.is_none())
            .map(|f| (f.path.as_str(), BASE64.decode(&f.data).unwrap()))
            .collect();
        assert_eq!(
            given,
            [
                ("AGENTS.md", b"be brief".to_vec()),
                (RULES, b"[[rules]]\n".to_vec()),
                (".amber/agents/reviewer.md", b"agent".to_vec()),
                (".amber/skills/deploy/SKILL.md", b"skill".to_vec()),
            ]
        );
        // The link out is told as a link, its target unread.
        let links: Vec<(&str, &str)> = answer
            .files
            .iter()
            .filter_map(|f| Some((f.path.as_str(), f.link.as_deref()?)))
            .collect();
        let secret = root.path().join("secret").display().to_string();
        assert_eq!(links, [("docs/CLAUDE.md", secret.as_str())]);
        assert!(answer.files.iter().all(|f| !f.data.contains("c2VjcmV0")));
        let omitted: Vec<&str> = answer.omitted.iter().map(|o| o.path.as_str()).collect();
        assert_eq!(
            omitted,
            [
                ".amber/agents/dir.md",
                ".amber/agents/huge.md",
                ".amber/agents/pipe.md"
            ]
        );
    }
}
