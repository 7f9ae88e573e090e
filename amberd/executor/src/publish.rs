//! A fleet session's result pushed as a branch by its runner.
//!
//! The workspace's `.git` is the session's: its commands may have rewritten its config
//! (a remote's URL, `credential.helper`, `core.sshCommand`, filters), its `commondir`,
//! alternates, refs or index. So the runner never runs git on it. Right after the clone,
//! before any command of the session runs, the runner copies the clone's objects into a
//! **pristine** bare repository in its own state directory, which no command can see. A push
//! builds the commit there: a private index read from the parent's tree, the workspace's
//! files added (data only: git never reads the workspace's `.git`), a commit on top of the
//! parent, pushed to the session's repository URL with the runner's own credentials.
//!
//! The parent is the branch's tip on the remote when it is the clone's commit or the commit
//! this session pushed last, else the clone's commit when the branch does not exist yet.
//! A branch that moved otherwise is left alone: the push is refused, never forced.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::pinned_git::{Git, GitError};

/// How long each git call of a push (listing, fetching, adding, pushing) may take.
const PUSH_TIMEOUT: Duration = Duration::from_secs(600);
/// The ref in the pristine repository that names the clone's commit.
const BASE_REF: &str = "refs/amber/base";
/// The pristine repository's private index.
const INDEX_FILE: &str = "amber-index";
/// Who commits when the runner's git config names nobody.
const DEFAULT_NAME: &str = "amber";
const DEFAULT_EMAIL: &str = "amber@localhost";

/// Where a session's result may be pushed from: its runner sets this when the session
/// asked for a push.
#[derive(Debug, Clone)]
pub struct Publisher {
    /// The session's repository URL (checked when it was cloned).
    pub repo: String,
    /// The session's workspace.
    pub workspace: PathBuf,
    /// The pristine bare repository (in the runner's state directory).
    pub pristine: PathBuf,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The branch's tip now: the new commit, or the tip it had when nothing changed
    /// (`None`: nothing changed and the branch does not exist).
    pub commit: Option<String>,
    /// Whether a new commit was pushed.
    pub changed: bool,
}

/// Why a push failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{0}")]
    Invalid(String),
    #[error(
        "branch `{branch}` moved on the remote (it is at {tip}, neither the session's clone nor its last push): amber does not overwrite it"
    )]
    Moved { branch: String, tip: String },
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("cannot prepare {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

fn git(step: &'static str, pristine: &Path) -> Git {
    Git::new(step, PUSH_TIMEOUT).arg("--git-dir").arg(pristine)
}

/// Copies a fresh clone's objects into `pristine` (replacing what was there) and names
/// its checked-out commit there. Call it before any command of the session runs.
pub async fn keep_pristine(workspace: &Path, pristine: &Path) -> Result<String, PublishError> {
    crate::provision::make_room(pristine)
        .await
        .map_err(|source| PublishError::Io {
            path: pristine.display().to_string(),
            source,
        })?;
    let base = Git::new("rev-parse", PUSH_TIMEOUT)
        .in_dir(workspace)
        .args(["rev-parse", "--verify", "HEAD^{commit}"])
        .line()
        .await?;
    // Copied, not hard-linked: the workspace's object files are the session's to change.
    Git::new("clone", PUSH_TIMEOUT)
        .args(["clone", "--bare", "--no-hardlinks", "--quiet", "--"])
        .arg(workspace)
        .arg(pristine)
        .run()
        .await?;
    git("update-ref", pristine)
        .args(["update-ref", BASE_REF, &base])
        .run()
        .await?;
    Ok(base)
}

impl Publisher {
    /// Commits the workspace as it is and pushes it to `branch`. `last`: the commit this
    /// session pushed last, if any.
    pub async fn push(
        &self,
        branch: &str,
        message: &str,
        last: Option<&str>,
    ) -> Result<Pushed, PublishError> {
        check_branch(branch).map_err(PublishError::Invalid)?;
        if let Some(last) = last
            && !is_commit_id(last)
        {
            return Err(PublishError::Invalid(format!(
                "`{last}` is not a commit id"
            )));
        }
        let remote_ref = format!("refs/heads/{branch}");
        let pristine = &self.pristine;
        let base = git("rev-parse", pristine)
            .args(["rev-parse", "--verify", &format!("{BASE_REF}^{{commit}}")])
            .line()
            .await?;
        let tip = self.remote_tip(&remote_ref).await?;
        let branch_exists = tip.is_some();
        let parent = match tip {
            None => base,
            Some(tip) if tip == base || Some(tip.as_str()) == last => {
                if !self.has_commit(&tip).await {
                    git("fetch", pristine)
                        .args(["fetch", "--quiet", "--no-tags", "--", &self.repo])
                        .arg(format!("+{remote_ref}:refs/amber/tip"))
                        .run()
                        .await?;
                }
                tip
            }
            Some(tip) => {
                return Err(PublishError::Moved {
                    branch: branch.to_owned(),
                    tip,
                });
            }
        };
        let tree = self.tree_of_workspace(&parent).await?;
        let parent_tree = git("rev-parse", pristine)
            .args(["rev-parse", "--verify", &format!("{parent}^{{tree}}")])
            .line()
            .await?;
        if tree == parent_tree {
            return Ok(Pushed {
                commit: branch_exists.then_some(parent),
                changed: false,
            });
        }
        let (name, email) = self.identity().await;
        let commit = git("commit-tree", pristine)
            .args([
                "commit-tree",
                "--no-gpg-sign",
                &tree,
                "-p",
                &parent,
                "-m",
                message,
            ])
            .env("GIT_AUTHOR_NAME", &name)
            .env("GIT_AUTHOR_EMAIL", &email)
            .env("GIT_COMMITTER_NAME", &name)
            .env("GIT_COMMITTER_EMAIL", &email)
            .line()
            .await?;
        // Never forced: the remote takes it only as a fast-forward of the tip seen above.
        git("push", pristine)
            .args(["push", "--quiet", "--no-verify", "--", &self.repo])
            .arg(format!("{commit}:{remote_ref}"))
            .run()
            .await?;
        Ok(Pushed {
            commit: Some(commit),
            changed: true,
        })
    }

    /// The remote branch's commit, if the branch exists.
    async fn remote_tip(&self, remote_ref: &str) -> Result<Option<String>, PublishError> {
        let listed = git("ls-remote", &self.pristine)
            .args(["ls-remote", "--", &self.repo, remote_ref])
            .line()
            .await?;
        Ok(listed.lines().find_map(|line| {
            let (commit, name) = line.split_once('\t')?;
            (name == remote_ref && is_commit_id(commit)).then(|| commit.to_owned())
        }))
    }

    async fn has_commit(&self, commit: &str) -> bool {
        git("cat-file", &self.pristine)
            .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .run()
            .await
            .is_ok()
    }

    /// The workspace's files as a tree of the pristine repository, by a private index that
    /// starts from `parent`'s tree (so `.gitignore`d files it tracks stay, as in a commit).
    async fn tree_of_workspace(&self, parent: &str) -> Result<String, PublishError> {
        let pristine = &self.pristine;
        let index = pristine.join(INDEX_FILE);
        match tokio::fs::remove_file(&index).await {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(PublishError::Io {
                    path: index.display().to_string(),
                    source,
                });
            }
        }
        let with_tree = |step| {
            // In the workspace, so that `.` names it; the repository is still the pristine.
            git(step, pristine)
                .arg("-C")
                .arg(&self.workspace)
                .arg("--work-tree")
                .arg(&self.workspace)
                .env("GIT_INDEX_FILE", &index)
        };
        with_tree("read-tree")
            .args(["read-tree", parent])
            .run()
            .await?;
        // A path git cannot take (a nested repository with no commit) is left out, not the
        // whole push.
        with_tree("add")
            .args(["add", "--all", "--ignore-errors", "--", "."])
            .also_ok(&[1])
            .run()
            .await?;
        let tree = with_tree("write-tree").arg("write-tree").line().await?;
        let _ = tokio::fs::remove_file(&index).await;
        Ok(tree)
    }

    /// Who commits: the runner's git identity, else amber's.
    async fn identity(&self) -> (String, String) {
        let get = |key: &'static str| async move {
            git("config", &self.pristine)
                .args(["config", "--get", key])
                .line()
                .await
                .ok()
                .filter(|v| !v.is_empty())
        };
        (
            get("user.name")
                .await
                .unwrap_or_else(|| DEFAULT_NAME.to_owned()),
            get("user.email")
                .await
                .unwrap_or_else(|| DEFAULT_EMAIL.to_owned()),
        )
    }
}

/// Checks a branch to push to: a name git's ref rules allow, not a full ref, `HEAD` nor
/// anything a commit id could be taken for. amberd checks `session/new {push}` with it too.
pub fn check_branch(branch: &str) -> Result<(), String> {
    crate::provision::check_ref(branch)?;
    let commit_like = branch.len() >= 40 && branch.bytes().all(|b| b.is_ascii_hexdigit());
    if branch.starts_with("refs/") || branch == "HEAD" || commit_like {
        return Err(format!("`{branch}` is not a branch name to push to"));
    }
    Ok(())
}

/// Whether `text` is a full commit id (SHA-1 or SHA-256, lowercase hex).
fn is_commit_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64)
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
#[path = "publish_tests.rs"]
mod tests;
