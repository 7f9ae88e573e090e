//! A remote session's configuration mirror: its workspace's instruction files, rules,
//! agents and skills, as its executor read them there (`workspace/config`), kept in
//! `<data_dir>/mirrors/<session id>/`. The session reads its configuration from here as a
//! local session reads it from its workspace (its *config root*), so a repository's
//! `AGENTS.md` and `.amber/` apply on whichever machine the files are.
//!
//! **Invariants:** the mirror holds exactly the files of the last answer — nothing else is
//! written there, a path the answer gives must be one of the shapes
//! `amber_executor::config_files` allows (so nothing lands outside the mirror or under
//! another name), a file whose bytes did not change is not written again (the
//! instructions are read again only when a file's stamp changes), and nothing there is
//! ever followed while the mirror is written. A symlink that leads out of the workspace
//! there is mirrored as the same link, which the readers here refuse as they would in a
//! workspace of their own. What the mirror holds is
//! data: rules, agents and hooks still need the user's trust as in a workspace (keyed by
//! the mirror's path, so per session), and workspace hooks are not mirrored (they would run
//! on amberd's machine, not next to the files).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use amber_executor::config_files::is_config_path;
use amber_executor::wire::{WorkspaceConfigParams, WorkspaceConfigResult, code, method};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::link::ExecutorLink;

/// Where session `id`'s mirror is.
pub(crate) fn dir_of(data_dir: &Path, id: &str) -> PathBuf {
    data_dir.join("mirrors").join(id)
}

/// Asks the session's executor for its configuration files and makes `mirror` hold
/// exactly those. Returns whether anything changed. An executor that does not know the
/// request (an older one) leaves the mirror as it is.
pub(crate) async fn sync(
    link: &Arc<ExecutorLink>,
    session: &str,
    mirror: &Path,
    instruction_files: &[String],
) -> Result<bool, String> {
    let params = WorkspaceConfigParams {
        session: session.to_owned(),
        instruction_files: instruction_files.to_vec(),
    };
    let answer = match link.call(method::WORKSPACE_CONFIG, &params).await {
        Ok(value) => serde_json::from_value::<WorkspaceConfigResult>(value)
            .map_err(|e| format!("the executor answered workspace/config oddly: {e}"))?,
        Err(err) if err.code == code::METHOD_NOT_FOUND => return Ok(false),
        Err(err) => return Err(err.message),
    };
    for omitted in &answer.omitted {
        tracing::warn!(%session, path = %omitted.path, reason = %omitted.reason, "a workspace configuration file was left out");
    }
    let mut files = BTreeMap::new();
    for file in answer.files {
        if !is_config_path(&file.path, instruction_files) {
            tracing::warn!(%session, path = %file.path, "ignoring a configuration path the executor should not give");
            continue;
        }
        let entry = match file.link {
            Some(target) => Entry::Link(PathBuf::from(target)),
            None => Entry::File(
                BASE64
                    .decode(file.data.as_bytes())
                    .map_err(|e| format!("{}: not base64: {e}", file.path))?,
            ),
        };
        files.insert(file.path, entry);
    }
    let mirror = mirror.to_path_buf();
    tokio::task::spawn_blocking(move || apply(&mirror, &files))
        .await
        .map_err(|e| format!("updating the configuration mirror: {e}"))?
        .map_err(|e| format!("updating the configuration mirror: {e}"))
}

/// What one mirrored path holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File(Vec<u8>),
    /// A symlink that leads out of the workspace there: mirrored as the same link, which
    /// the readers here refuse to follow as they would in a workspace.
    Link(PathBuf),
}

/// Makes `mirror` hold exactly `files` (relative path → entry); whether anything changed.
fn apply(mirror: &Path, files: &BTreeMap<String, Entry>) -> std::io::Result<bool> {
    std::fs::create_dir_all(mirror)?;
    let mut changed = false;
    for (relative, entry) in files {
        let path = mirror.join(relative);
        // What is there now, never followed (a mirrored link may lead anywhere).
        let there = std::fs::symlink_metadata(&path).ok();
        let same = match (entry, &there) {
            (Entry::File(bytes), Some(meta)) if meta.is_file() => {
                std::fs::read(&path).ok().as_deref() == Some(bytes.as_slice())
            }
            (Entry::Link(target), Some(meta)) if meta.file_type().is_symlink() => {
                std::fs::read_link(&path).ok().as_deref() == Some(target.as_path())
            }
            _ => false,
        };
        if same {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let staged = path.with_file_name(format!(
            ".{}.amber-mirror-{}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
            uuid::Uuid::new_v4().simple()
        ));
        match entry {
            Entry::File(bytes) => std::fs::write(&staged, bytes)?,
            Entry::Link(target) => std::os::unix::fs::symlink(target, &staged)?,
        }
        std::fs::rename(&staged, &path)?;
        changed = true;
    }
    changed |= remove_others(mirror, mirror, files)?;
    Ok(changed)
}

/// Removes what under `dir` is not in `files`, and directories left empty; whether it
/// removed anything.
fn remove_others(
    mirror: &Path,
    dir: &Path,
    files: &BTreeMap<String, Entry>,
) -> std::io::Result<bool> {
    let mut removed = false;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            removed |= remove_others(mirror, &path, files)?;
            if std::fs::read_dir(&path)?.next().is_none() {
                std::fs::remove_dir(&path)?;
            }
            continue;
        }
        let relative = path
            .strip_prefix(mirror)
            .ok()
            .and_then(Path::to_str)
            .unwrap_or_default();
        if !files.contains_key(relative) {
            std::fs::remove_file(&path)?;
            removed = true;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, Entry> {
        pairs
            .iter()
            .map(|(p, c)| ((*p).to_owned(), Entry::File(c.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn the_mirror_holds_exactly_the_last_answer_and_rewrites_only_changes() {
        let root = tempfile::tempdir().unwrap();
        let mirror = root.path().join("m");
        let first = files(&[
            ("AGENTS.md", "one"),
            (".amber/agents/a.md", "a"),
            (".amber/skills/s/SKILL.md", "s"),
        ]);
        assert!(apply(&mirror, &first).unwrap());
        let inode = |p: &str| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(mirror.join(p)).unwrap().ino()
        };
        let agents_inode = inode("AGENTS.md");
        assert!(!apply(&mirror, &first).unwrap(), "nothing changed");
        assert_eq!(inode("AGENTS.md"), agents_inode, "not written again");

        let second = files(&[("AGENTS.md", "two"), (".amber/rules.toml", "r")]);
        assert!(apply(&mirror, &second).unwrap());
        assert_eq!(
            std::fs::read_to_string(mirror.join("AGENTS.md")).unwrap(),
            "two"
        );
        assert!(!mirror.join(".amber/agents").exists(), "emptied folders go");
        assert!(!mirror.join(".amber/skills").exists());
        let mut left: Vec<String> = walk(&mirror);
        left.sort();
        assert_eq!(left, [".amber/rules.toml", "AGENTS.md"]);

        // A link out is mirrored as that link, never followed, and replaced by a file
        // without writing through it.
        let outside = root.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let mut linked = files(&[]);
        linked.insert("AGENTS.md".to_owned(), Entry::Link(outside.clone()));
        assert!(apply(&mirror, &linked).unwrap());
        assert_eq!(
            std::fs::read_link(mirror.join("AGENTS.md")).unwrap(),
            outside
        );
        assert!(!apply(&mirror, &linked).unwrap());
        assert!(apply(&mirror, &files(&[("AGENTS.md", "three")])).unwrap());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(mirror.join("AGENTS.md")).unwrap(),
            "three"
        );
    }

    fn walk(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(next) = stack.pop() {
            for entry in std::fs::read_dir(next).unwrap().flatten() {
                if entry.file_type().unwrap().is_dir() {
                    stack.push(entry.path());
                } else {
                    out.push(
                        entry
                            .path()
                            .strip_prefix(dir)
                            .unwrap()
                            .display()
                            .to_string(),
                    );
                }
            }
        }
        out
    }
}
