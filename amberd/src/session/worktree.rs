//! A session's own git worktree (`session/new {worktree}`, `session/delete
//! {removeWorktree, force}`), made and removed with the real `git`.
//!
//! ```text
//! <data_dir>/worktrees/<session id>   the worktree, on branch `amber/<short id>` (or the
//!                                     one asked for), from `HEAD` (or the base asked for)
//! ```
//!
//! The session's cwd is the same relative directory inside the worktree as the requested
//! cwd is inside its repository (`repo/sub` → `<worktree>/sub`, created if the base commit
//! does not have it).
//!
//! **Invariants:** a failed creation leaves nothing behind (no worktree, no directory, no
//! branch it made); an existing branch is never reused or moved; a worktree with
//! uncommitted changes (modified, staged or untracked files) is never removed without
//! `force`; the branch is always kept (its commits are the session's work). Repository
//! hooks do not run (`core.hooksPath=/dev/null`): creating a worktree is amber's act, not
//! the user's checkout.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use amber_proto::{WorktreeInfo, WorktreeOptions};

use super::SessionError;

/// How many uncommitted paths a refusal names before "and N more".
const NAMED_PATHS: usize = 10;

/// A worktree made for a new session.
#[derive(Debug)]
pub(crate) struct Created {
    pub info: WorktreeInfo,
    /// The session's workspace root: the requested cwd's place in the worktree (canonical).
    pub cwd: PathBuf,
}

/// What a `git` run said.
struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn git(dir: &Path, args: &[&str]) -> Result<Output, String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    Ok(Output {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    })
}

/// `git`'s first line of complaint, for an error message.
fn complaint(output: &Output) -> &str {
    output.stderr.lines().next().unwrap_or("no message")
}

/// The branch a session's worktree gets by default: `amber/<first 8 chars of its id>`.
pub(crate) fn default_branch(session_id: &str) -> String {
    let short: String = session_id.chars().take(8).collect();
    format!("amber/{short}")
}

/// Creates the worktree of session `id` for a session asked for in `cwd` (canonical).
pub(crate) fn create(
    cwd: &Path,
    data_dir: &Path,
    id: &str,
    options: &WorktreeOptions,
) -> Result<Created, SessionError> {
    let not_a_repo = |reason: String| SessionError::InvalidWorkspace {
        path: cwd.display().to_string(),
        reason,
    };
    let found = git(cwd, &["rev-parse", "--show-toplevel", "--show-prefix"])
        .map_err(|e| not_a_repo(format!("worktree: {e}")))?;
    if !found.ok {
        return Err(not_a_repo(format!(
            "worktree: not inside a git repository, so no worktree can be made for it \
             (git: {})",
            complaint(&found)
        )));
    }
    let mut lines = found.stdout.lines();
    let repo = PathBuf::from(lines.next().unwrap_or_default());
    let prefix = lines.next().unwrap_or_default().to_owned();

    let branch = options
        .branch
        .clone()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| default_branch(id));
    let format = git(&repo, &["check-ref-format", "--branch", &branch])
        .map_err(|e| not_a_repo(format!("worktree: {e}")))?;
    if !format.ok {
        return Err(SessionError::InvalidParams(format!(
            "worktree.branch: `{branch}` is not a valid branch name"
        )));
    }
    let exists = git(
        &repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .map_err(|e| not_a_repo(format!("worktree: {e}")))?;
    if exists.ok {
        return Err(SessionError::InvalidParams(format!(
            "worktree.branch: branch `{branch}` already exists in {}; name a new branch",
            repo.display()
        )));
    }
    let base = options.base.clone().unwrap_or_else(|| "HEAD".to_owned());
    let commit = git(
        &repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{base}^{{commit}}"),
        ],
    )
    .map_err(|e| not_a_repo(format!("worktree: {e}")))?;
    if !commit.ok {
        return Err(match options.base {
            Some(_) => SessionError::InvalidParams(format!(
                "worktree.base: `{base}` is not a commit of {}",
                repo.display()
            )),
            None => not_a_repo(
                "worktree: the repository has no commit yet, so there is nothing to make a \
                 worktree from"
                    .to_owned(),
            ),
        });
    }
    let commit = commit.stdout.trim().to_owned();

    let parent = data_dir.join("worktrees");
    // Absolute: git reads a relative path from the repository, not from here.
    let parent = std::fs::create_dir_all(&parent)
        .and_then(|()| parent.canonicalize())
        .map_err(|e| SessionError::Store(format!("cannot create {}: {e}", parent.display())))?;
    let path = parent.join(id);
    let path_text = path.display().to_string();
    let added = git(
        &repo,
        &[
            "worktree", "add", "--quiet", "-b", &branch, &path_text, &commit,
        ],
    )
    .map_err(|e| not_a_repo(format!("worktree: {e}")))?;
    if !added.ok {
        undo(&repo, &path, &branch);
        return Err(SessionError::Store(format!(
            "git worktree add {path_text} failed: {}",
            complaint(&added)
        )));
    }
    let inside = path.join(prefix.trim_end_matches('/'));
    let cwd = std::fs::create_dir_all(&inside)
        .and_then(|()| inside.canonicalize())
        .map_err(|e| {
            undo(&repo, &path, &branch);
            SessionError::Store(format!("cannot prepare {}: {e}", inside.display()))
        })?;
    let path = path.canonicalize().unwrap_or(path);
    Ok(Created {
        info: WorktreeInfo {
            path: path.display().to_string(),
            branch,
        },
        cwd,
    })
}

/// Takes back a creation that failed half-way: the worktree, its directory and the branch
/// it made (which did not exist before: `create` checked).
fn undo(repo: &Path, path: &Path, branch: &str) {
    let path_text = path.display().to_string();
    let _ = git(repo, &["worktree", "remove", "--force", &path_text]);
    let _ = std::fs::remove_dir_all(path);
    let _ = git(repo, &["worktree", "prune"]);
    let _ = git(repo, &["branch", "-D", branch]);
}

/// The uncommitted paths of a worktree (modified, staged, untracked), as `git status`
/// names them; empty when it is clean or gone.
pub(crate) fn uncommitted(worktree: &WorktreeInfo) -> Result<Vec<String>, SessionError> {
    let path = Path::new(&worktree.path);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let status = git(path, &["status", "--porcelain", "--untracked-files=all"])
        .map_err(SessionError::Store)?;
    if !status.ok {
        return Err(SessionError::Store(format!(
            "git status in {} failed: {}",
            worktree.path,
            complaint(&status)
        )));
    }
    Ok(status
        .stdout
        .lines()
        .filter_map(|l| l.get(3..))
        .map(str::to_owned)
        .collect())
}

/// The refusal to remove a worktree with uncommitted `paths`.
pub(crate) fn dirty_refusal(worktree: &WorktreeInfo, paths: &[String]) -> SessionError {
    let mut named = paths
        .iter()
        .take(NAMED_PATHS)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > NAMED_PATHS {
        named.push_str(&format!(" and {} more", paths.len() - NAMED_PATHS));
    }
    SessionError::InvalidParams(format!(
        "removeWorktree: the worktree {} has uncommitted changes ({named}); commit or stash \
         them, keep the worktree, or pass force to remove it anyway",
        worktree.path
    ))
}

/// The repository's git directory (`.git` of the main checkout) a worktree belongs to.
fn common_dir(worktree: &WorktreeInfo) -> Result<PathBuf, SessionError> {
    let path = Path::new(&worktree.path);
    let common = git(
        path,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .map_err(SessionError::Store)?;
    if !common.ok {
        return Err(SessionError::Store(format!(
            "{} is no longer a git worktree ({}); remove it by hand",
            worktree.path,
            complaint(&common)
        )));
    }
    Ok(PathBuf::from(common.stdout.trim()))
}

/// Takes back a worktree made for a session that then failed to start: the worktree and
/// its branch, which nothing has used yet.
pub(crate) fn discard(worktree: &WorktreeInfo) {
    let Ok(common) = common_dir(worktree) else {
        return;
    };
    let path = PathBuf::from(&worktree.path);
    undo(&common, &path, &worktree.branch);
}

/// Removes a session's worktree (`force`: even with uncommitted changes, which `git`
/// otherwise refuses). The branch stays. A worktree already gone is not an error.
pub(crate) fn remove(worktree: &WorktreeInfo, force: bool) -> Result<(), SessionError> {
    let path = Path::new(&worktree.path);
    if !path.exists() {
        return Ok(());
    }
    let common = common_dir(worktree)?;
    let mut args = vec!["worktree", "remove"];
    if force {
        args.push("--force");
    }
    args.push(&worktree.path);
    let removed = git(&common, &args).map_err(SessionError::Store)?;
    if !removed.ok {
        return Err(SessionError::InvalidParams(format!(
            "removeWorktree: git would not remove {}: {}",
            worktree.path,
            complaint(&removed)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn repo() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().canonicalize().unwrap().join("repo");
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        std::fs::write(repo.join("sub/a.txt"), "a\n").unwrap();
        for args in [
            &["init", "-q"][..],
            &["add", "."],
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                "init",
            ],
        ] {
            assert!(git(&repo, args).unwrap().ok);
        }
        (tmp, repo)
    }

    fn branches(repo: &Path) -> String {
        git(repo, &["branch", "--list"]).unwrap().stdout
    }

    #[test]
    fn a_worktree_follows_the_cwd_into_its_subdirectory() {
        let (tmp, repo) = repo();
        let data = tmp.path().join("data");
        let made = create(
            &repo.join("sub"),
            &data,
            "0123456789abcdef",
            &WorktreeOptions::default(),
        )
        .unwrap();
        assert_eq!(made.info.branch, "amber/01234567");
        assert!(made.cwd.ends_with("worktrees/0123456789abcdef/sub"));
        assert!(made.cwd.join("a.txt").is_file());
        assert!(branches(&repo).contains("amber/01234567"));
        assert!(uncommitted(&made.info).unwrap().is_empty());
        remove(&made.info, false).unwrap();
        assert!(!Path::new(&made.info.path).exists());
        // The branch is the session's work: it stays.
        assert!(branches(&repo).contains("amber/01234567"));
    }

    #[test]
    fn an_existing_branch_is_refused_and_nothing_is_left_behind() {
        let (tmp, repo) = repo();
        let data = tmp.path().join("data");
        let options = WorktreeOptions {
            branch: Some("master-copy".into()),
            base: None,
        };
        assert!(git(&repo, &["branch", "master-copy"]).unwrap().ok);
        let err = create(&repo, &data, "id1", &options).unwrap_err();
        assert!(
            matches!(&err, SessionError::InvalidParams(m) if m.contains("already exists")),
            "{err}"
        );
        assert!(!data.join("worktrees/id1").exists());
        let bad_base = WorktreeOptions {
            branch: None,
            base: Some("no-such-ref".into()),
        };
        let err = create(&repo, &data, "id2", &bad_base).unwrap_err();
        assert!(err.to_string().contains("worktree.base"), "{err}");
        assert!(!branches(&repo).contains("amber/id2"));
    }

    #[test]
    fn outside_a_repository_is_an_invalid_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let err = create(&dir, &dir.join("data"), "id", &WorktreeOptions::default()).unwrap_err();
        assert!(
            matches!(&err, SessionError::InvalidWorkspace { reason, .. } if reason.contains("not inside a git repository")),
            "{err}"
        );
    }

    #[test]
    fn a_dirty_worktree_is_named_and_removed_only_by_force() {
        let (tmp, repo) = repo();
        let made = create(
            &repo,
            &tmp.path().join("data"),
            "id",
            &WorktreeOptions::default(),
        )
        .unwrap();
        std::fs::write(made.cwd.join("new.txt"), "x").unwrap();
        std::fs::write(made.cwd.join("sub/a.txt"), "changed").unwrap();
        let mut dirty = uncommitted(&made.info).unwrap();
        dirty.sort();
        assert_eq!(dirty, ["new.txt", "sub/a.txt"].map(String::from).to_vec());
        let refusal = dirty_refusal(&made.info, &dirty).to_string();
        assert!(
            refusal.contains("new.txt") && refusal.contains("sub/a.txt"),
            "{refusal}"
        );
        assert!(remove(&made.info, false).is_err());
        assert!(Path::new(&made.info.path).exists());
        remove(&made.info, true).unwrap();
        assert!(!Path::new(&made.info.path).exists());
    }
}
