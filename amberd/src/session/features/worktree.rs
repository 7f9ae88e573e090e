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
//! `force`; the branch is always kept (its commits are the session's work). Every git
//! here is amberd's own (`workspace_git`): sandboxed and offline — queries read-only, the
//! creation and removal writable only in the worktrees directory and the repository's git
//! dir — with the repository's hooks, fsmonitor and filter drivers pinned off: creating a
//! worktree is amber's act, not the user's checkout, and runs nothing the repository says.
//!
//! The main repository's `.git` is not among the sandbox's writable roots of a session in a
//! worktree: file edits work, a sandboxed `git commit` does not (docs/automation.md).

use std::path::{Path, PathBuf};

use amber_proto::{WorktreeInfo, WorktreeOptions};

use crate::session::feature::{Attach, Feature, NewSession, Placement, SessionFeature};
use crate::session::persist;
use crate::session::{SessionError, SessionManager};
use crate::workspace_git::{Access, GitOutput, Unfiltered, WorkspaceGit};

/// How many uncommitted paths a refusal names before "and N more".
const NAMED_PATHS: usize = 10;

/// A worktree made for a new session.
#[derive(Debug)]
pub(crate) struct Created {
    pub info: WorktreeInfo,
    /// The session's workspace root: the requested cwd's place in the worktree (canonical).
    pub cwd: PathBuf,
}

/// amberd's git for the repository holding `dir`, its filter drivers learned once.
fn for_repository(runner: &WorkspaceGit, dir: &Path) -> Result<Unfiltered, String> {
    runner.unfiltered(dir).map_err(|e| e.to_string())
}

/// `git ARGS` in `dir`, read-only.
fn git(runner: &Unfiltered, dir: &Path, args: &[&str]) -> Result<GitOutput, String> {
    runner
        .run(dir, Access::Read, args)
        .map_err(|e| e.to_string())
}

/// `git ARGS` in `dir`, writing only in `writable`.
fn git_writing(
    runner: &Unfiltered,
    dir: &Path,
    writable: &[PathBuf],
    args: &[&str],
) -> Result<GitOutput, String> {
    runner
        .run(dir, Access::Write(writable), args)
        .map_err(|e| e.to_string())
}

/// `git`'s first line of complaint, for an error message.
fn complaint(output: &GitOutput) -> &str {
    output.stderr.lines().next().unwrap_or("no message")
}

/// The branch a session's worktree gets by default: `amber/<first 8 chars of its id>`.
pub(crate) fn default_branch(session_id: &str) -> String {
    let short: String = session_id.chars().take(8).collect();
    format!("amber/{short}")
}

/// Creates the worktree of session `id` for a session asked for in `cwd` (canonical).
pub(crate) fn create(
    runner: &WorkspaceGit,
    cwd: &Path,
    data_dir: &Path,
    id: &str,
    options: &WorktreeOptions,
) -> Result<Created, SessionError> {
    let not_a_repo = |reason: String| SessionError::InvalidWorkspace {
        path: cwd.display().to_string(),
        reason,
    };
    let runner = &for_repository(runner, cwd).map_err(|e| not_a_repo(format!("worktree: {e}")))?;
    let found = git(
        runner,
        cwd,
        &[
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-common-dir",
            "--show-prefix",
        ],
    )
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
    let common = PathBuf::from(lines.next().unwrap_or_default());
    let prefix = lines.next().unwrap_or_default().to_owned();

    let branch = options
        .branch
        .clone()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| default_branch(id));
    let format = git(runner, &repo, &["check-ref-format", "--branch", &branch])
        .map_err(|e| not_a_repo(format!("worktree: {e}")))?;
    if !format.ok {
        return Err(SessionError::InvalidParams(format!(
            "worktree.branch: `{branch}` is not a valid branch name"
        )));
    }
    let exists = git(
        runner,
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
        runner,
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
        .map_err(|e| SessionError::Internal(format!("cannot create {}: {e}", parent.display())))?;
    let path = parent.join(id);
    let path_text = path.display().to_string();
    let common = common.canonicalize().unwrap_or(common);
    let writable = [parent.clone(), common.clone()];
    let added = git_writing(
        runner,
        &repo,
        &writable,
        &[
            "worktree", "add", "--quiet", "-b", &branch, &path_text, &commit,
        ],
    )
    .map_err(|e| not_a_repo(format!("worktree: {e}")))?;
    if !added.ok {
        undo(runner, &common, &path, &branch);
        return Err(SessionError::Internal(format!(
            "git worktree add {path_text} failed: {}",
            complaint(&added)
        )));
    }
    let inside = path.join(prefix.trim_end_matches('/'));
    let cwd = std::fs::create_dir_all(&inside)
        .and_then(|()| inside.canonicalize())
        .map_err(|e| {
            undo(runner, &common, &path, &branch);
            SessionError::Internal(format!("cannot prepare {}: {e}", inside.display()))
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
/// it made (which did not exist before: `create` checked). `common`: the repository's git
/// dir.
fn undo(runner: &Unfiltered, common: &Path, path: &Path, branch: &str) {
    let path_text = path.display().to_string();
    let mut writable = vec![common.to_path_buf()];
    writable.extend(path.parent().map(Path::to_path_buf));
    writable.reverse();
    let _ = git_writing(
        runner,
        common,
        &writable,
        &["worktree", "remove", "--force", &path_text],
    );
    let _ = std::fs::remove_dir_all(path);
    let _ = git_writing(runner, common, &writable, &["worktree", "prune"]);
    let _ = git_writing(runner, common, &writable, &["branch", "-D", branch]);
}

/// The uncommitted paths of a worktree (modified, staged, untracked), as `git status`
/// names them; empty when it is clean or gone.
pub(crate) fn uncommitted(
    runner: &WorkspaceGit,
    worktree: &WorktreeInfo,
) -> Result<Vec<String>, SessionError> {
    let path = Path::new(&worktree.path);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let runner = &for_repository(runner, path).map_err(SessionError::Internal)?;
    let status = git(
        runner,
        path,
        &[
            "status",
            "--porcelain",
            "--untracked-files=all",
            "--ignore-submodules=dirty",
        ],
    )
    .map_err(SessionError::Internal)?;
    if !status.ok {
        return Err(SessionError::Internal(format!(
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
fn common_dir(runner: &Unfiltered, worktree: &WorktreeInfo) -> Result<PathBuf, SessionError> {
    let path = Path::new(&worktree.path);
    let common = git(
        runner,
        path,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .map_err(SessionError::Internal)?;
    if !common.ok {
        return Err(SessionError::Internal(format!(
            "{} is no longer a git worktree ({}); remove it by hand",
            worktree.path,
            complaint(&common)
        )));
    }
    let common = PathBuf::from(common.stdout.trim());
    Ok(common.canonicalize().unwrap_or(common))
}

/// Takes back a worktree made for a session that then failed to start: the worktree and
/// its branch, which nothing has used yet.
pub(crate) fn discard(runner: &WorkspaceGit, worktree: &WorktreeInfo) {
    let Ok(runner) = &for_repository(runner, Path::new(&worktree.path)) else {
        return;
    };
    let Ok(common) = common_dir(runner, worktree) else {
        return;
    };
    let path = PathBuf::from(&worktree.path);
    undo(runner, &common, &path, &worktree.branch);
}

/// Removes a session's worktree (`force`: even with uncommitted changes, which `git`
/// otherwise refuses). The branch stays. A worktree already gone is not an error.
pub(crate) fn remove(
    runner: &WorkspaceGit,
    worktree: &WorktreeInfo,
    force: bool,
) -> Result<(), SessionError> {
    let path = Path::new(&worktree.path);
    if !path.exists() {
        return Ok(());
    }
    let runner = &for_repository(runner, path).map_err(SessionError::Internal)?;
    let common = common_dir(runner, worktree)?;
    let mut writable: Vec<PathBuf> = path.parent().map(Path::to_path_buf).into_iter().collect();
    writable.push(common.clone());
    let mut args = vec!["worktree", "remove"];
    if force {
        args.push("--force");
    }
    args.push(&worktree.path);
    let removed = git_writing(runner, &common, &writable, &args).map_err(SessionError::Internal)?;
    if !removed.ok {
        return Err(SessionError::InvalidParams(format!(
            "removeWorktree: git would not remove {}: {}",
            worktree.path,
            complaint(&removed)
        )));
    }
    Ok(())
}

/// The feature: `session/new {worktree}` places the session in a worktree of its own.
pub(crate) struct WorktreeFeature;

impl Feature for WorktreeFeature {
    /// A worktree is the session's place, not state the session keeps.
    fn attach(&self, _session: &Attach<'_>) -> Option<std::sync::Arc<dyn SessionFeature>> {
        None
    }

    fn place(&self, new: &NewSession<'_>) -> Result<Option<Placement>, SessionError> {
        let Some(options) = new.params.worktree.as_ref().and_then(|w| w.options()) else {
            return Ok(None);
        };
        let services = new.services;
        let runner = services.workspace_git();
        let made = persist::blocking(|| {
            create(&runner, new.workspace, &services.data_dir, new.id, &options)
        })?;
        let info = made.info.clone();
        Ok(Some(Placement {
            cwd: made.cwd,
            worktree: Some(made.info),
            undo: Box::new(move || discard(&runner, &info)),
        }))
    }
}

/// `session/delete`: removes the session, and with `remove_worktree` its worktree —
/// refused, with the session left as it was, while the worktree has uncommitted changes,
/// unless `force`.
pub(crate) async fn delete(
    sessions: &SessionManager,
    id: &str,
    remove_worktree: bool,
    force: bool,
) -> Result<(), SessionError> {
    let tree = match remove_worktree {
        true => sessions.info_of(id)?.worktree,
        false => None,
    };
    let runner = sessions.services().workspace_git();
    if let Some(tree) = tree.clone().filter(|_| !force) {
        let runner = runner.clone();
        let dirty = blocking_git(move || {
            let paths = uncommitted(&runner, &tree)?;
            Ok((tree, paths))
        })
        .await?;
        if !dirty.1.is_empty() {
            return Err(dirty_refusal(&dirty.0, &dirty.1));
        }
    }
    sessions.delete(id).await?;
    if let Some(tree) = tree {
        // `git worktree remove` checks again without `force`: a change made since the
        // check above keeps the worktree.
        blocking_git(move || remove(&runner, &tree, force))
            .await
            .map_err(|e| {
                SessionError::InvalidParams(format!(
                    "the session was deleted but its worktree was kept: {e}"
                ))
            })?;
    }
    Ok(())
}

/// Runs git work off the runtime's threads.
async fn blocking_git<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SessionError> + Send + 'static,
) -> Result<T, SessionError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| SessionError::Internal(format!("the git task failed: {e}")))?
}

#[cfg(test)]
mod tests {

    use super::*;

    /// amberd's git, unsandboxed: the test runner has no sandbox helper (the sandboxed
    /// runs are the end-to-end tests').
    fn unfiltered(dir: &Path) -> Unfiltered {
        runner().unfiltered(dir).unwrap()
    }

    fn runner() -> WorkspaceGit {
        WorkspaceGit::direct_for_tests(&[(
            "PATH".into(),
            std::env::var_os("PATH").unwrap_or_default(),
        )])
    }

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
            assert!(git(&unfiltered(&repo), &repo, args).unwrap().ok);
        }
        (tmp, repo)
    }

    fn branches(repo: &Path) -> String {
        git(&unfiltered(repo), repo, &["branch", "--list"])
            .unwrap()
            .stdout
    }

    #[test]
    fn a_worktree_follows_the_cwd_into_its_subdirectory() {
        let (tmp, repo) = repo();
        let data = tmp.path().join("data");
        let made = create(
            &runner(),
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
        assert!(uncommitted(&runner(), &made.info).unwrap().is_empty());
        remove(&runner(), &made.info, false).unwrap();
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
        assert!(
            git(&unfiltered(&repo), &repo, &["branch", "master-copy"])
                .unwrap()
                .ok
        );
        let err = create(&runner(), &repo, &data, "id1", &options).unwrap_err();
        assert!(
            matches!(&err, SessionError::InvalidParams(m) if m.contains("already exists")),
            "{err}"
        );
        assert!(!data.join("worktrees/id1").exists());
        let bad_base = WorktreeOptions {
            branch: None,
            base: Some("no-such-ref".into()),
        };
        let err = create(&runner(), &repo, &data, "id2", &bad_base).unwrap_err();
        assert!(err.to_string().contains("worktree.base"), "{err}");
        assert!(!branches(&repo).contains("amber/id2"));
    }

    #[test]
    fn outside_a_repository_is_an_invalid_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let err = create(
            &runner(),
            &dir,
            &dir.join("data"),
            "id",
            &WorktreeOptions::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&err, SessionError::InvalidWorkspace { reason, .. } if reason.contains("not inside a git repository")),
            "{err}"
        );
    }

    #[test]
    fn a_dirty_worktree_is_named_and_removed_only_by_force() {
        let (tmp, repo) = repo();
        let made = create(
            &runner(),
            &repo,
            &tmp.path().join("data"),
            "id",
            &WorktreeOptions::default(),
        )
        .unwrap();
        std::fs::write(made.cwd.join("new.txt"), "x").unwrap();
        std::fs::write(made.cwd.join("sub/a.txt"), "changed").unwrap();
        let mut dirty = uncommitted(&runner(), &made.info).unwrap();
        dirty.sort();
        assert_eq!(dirty, ["new.txt", "sub/a.txt"].map(String::from).to_vec());
        let refusal = dirty_refusal(&made.info, &dirty).to_string();
        assert!(
            refusal.contains("new.txt") && refusal.contains("sub/a.txt"),
            "{refusal}"
        );
        assert!(remove(&runner(), &made.info, false).is_err());
        assert!(Path::new(&made.info.path).exists());
        remove(&runner(), &made.info, true).unwrap();
        assert!(!Path::new(&made.info.path).exists());
    }
}
