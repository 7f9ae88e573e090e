//! A fleet session's workspace on a runner: a fresh clone of its repository at its ref,
//! made by the runner's own git with the runner's own credentials (its environment, its
//! git config, a mounted Secret), never with anything amberd sends.
//!
//! Git here runs outside the sandbox, so nothing the repository holds may make it start a
//! program ([`crate::pinned_git`]), and only the transports a repository URL names (never
//! `ext::`, which runs a command, or `fd::`) are allowed.

use std::path::Path;
use std::time::Duration;

use crate::pinned_git::{Git, GitError};

/// How long a clone (with its checkout) may take.
const CLONE_TIMEOUT: Duration = Duration::from_secs(900);

/// Why a workspace could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("{0}")]
    Invalid(String),
    #[error("cannot prepare {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Git(#[from] GitError),
}

/// Checks a repository URL: `https`, `http`, `ssh`, `git` or `file` URLs and scp-like
/// `user@host:path`, with no credentials in it and nothing git could take for an option.
pub fn check_repo(repo: &str) -> Result<(), String> {
    let repo = repo.trim();
    if repo.is_empty() || repo.starts_with('-') || repo.chars().any(char::is_control) {
        return Err(format!("`{repo}` is not a repository URL"));
    }
    if repo.contains("::") {
        return Err(format!(
            "`{repo}`: git's remote helpers (`TRANSPORT::…`) are refused"
        ));
    }
    match url::Url::parse(repo) {
        Ok(url) => {
            if !["https", "http", "ssh", "git", "file"].contains(&url.scheme()) {
                return Err(format!(
                    "`{repo}`: use an https, ssh, git or file URL (not {})",
                    url.scheme()
                ));
            }
            if url.password().is_some()
                || (url.scheme().starts_with("http") && !url.username().is_empty())
            {
                return Err(format!(
                    "`{repo}` holds credentials: runners clone with their own (docs/fleet.md)"
                ));
            }
            Ok(())
        }
        // scp-like `git@host:team/app.git`.
        Err(_) => match repo.split_once(':') {
            Some((host, path))
                if !host.is_empty()
                    && !path.is_empty()
                    && !host.contains('/')
                    && host
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b)) =>
            {
                Ok(())
            }
            _ => Err(format!("`{repo}` is not a repository URL")),
        },
    }
}

/// Checks a ref: a commit id, or a name git's ref rules allow that cannot be an option.
pub fn check_ref(git_ref: &str) -> Result<(), String> {
    let bad = git_ref.is_empty()
        || git_ref.len() > 200
        || git_ref.starts_with(['-', '/', '.'])
        || git_ref.ends_with(['/', '.'])
        || git_ref.ends_with(".lock")
        || git_ref.contains("..")
        || git_ref.contains("@{")
        || git_ref.contains("//")
        || git_ref
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c));
    if bad {
        Err(format!("`{git_ref}` is not a branch, tag or commit id"))
    } else {
        Ok(())
    }
}

/// Makes `workspace` a fresh clone of `repo` at `git_ref`: whatever was there goes first.
pub async fn clone_into(repo: &str, git_ref: &str, workspace: &Path) -> Result<(), ProvisionError> {
    check_repo(repo).map_err(ProvisionError::Invalid)?;
    check_ref(git_ref).map_err(ProvisionError::Invalid)?;
    make_room(workspace)
        .await
        .map_err(|source| ProvisionError::Io {
            path: workspace.display().to_string(),
            source,
        })?;
    let made = tokio::time::timeout(CLONE_TIMEOUT, async {
        git("clone")
            .args(["clone", "--no-checkout", "--quiet", "--", repo])
            .arg(workspace)
            .run()
            .await?;
        checkout(workspace, git_ref).await
    })
    .await;
    match made {
        Ok(result) => result,
        Err(_) => Err(ProvisionError::Git(GitError {
            step: "clone",
            detail: format!("it took longer than {} s", CLONE_TIMEOUT.as_secs()),
        })),
    }
}

/// Removes whatever is at `path` and makes its parent: git makes `path` itself.
pub(crate) async fn make_room(path: &Path) -> std::io::Result<()> {
    match tokio::fs::remove_dir_all(path).await {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await?;
    }
    Ok(())
}

/// A pinned git call of the clone.
fn git(step: &'static str) -> Git {
    Git::new(step, CLONE_TIMEOUT)
}

/// Checks out `git_ref`: a branch of the remote as a local branch of that name, else a tag
/// or commit detached, else fetched by name from the remote.
async fn checkout(workspace: &Path, git_ref: &str) -> Result<(), ProvisionError> {
    let remote_branch = format!("refs/remotes/origin/{git_ref}");
    if verify(workspace, &remote_branch).await {
        git("checkout")
            .in_dir(workspace)
            .args(["checkout", "--quiet", "-B", git_ref, &remote_branch, "--"])
            .run()
            .await?;
        return Ok(());
    }
    let commit = format!("{git_ref}^{{commit}}");
    if !verify(workspace, &commit).await {
        git("fetch")
            .in_dir(workspace)
            .args(["fetch", "--quiet", "origin", "--", git_ref])
            .run()
            .await?;
        git("checkout")
            .in_dir(workspace)
            .args(["checkout", "--quiet", "--detach", "FETCH_HEAD", "--"])
            .run()
            .await?;
        return Ok(());
    }
    git("checkout")
        .in_dir(workspace)
        .args(["checkout", "--quiet", "--detach", &commit, "--"])
        .run()
        .await?;
    Ok(())
}

async fn verify(workspace: &Path, rev: &str) -> bool {
    git("rev-parse")
        .in_dir(workspace)
        .args(["rev-parse", "--verify", "--quiet", rev])
        .run()
        .await
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_urls_are_those_git_clones_without_running_anything() {
        for good in [
            "https://git.example.com/team/app.git",
            "ssh://git@git.example.com/team/app.git",
            "git://127.0.0.1/app.git",
            "file:///srv/git/app.git",
            "git@github.com:team/app.git",
        ] {
            assert_eq!(check_repo(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "-uhelp",
            "ext::sh -c touch% /tmp/x",
            "fd::3",
            "https://user:pass@git.example.com/app.git",
            "https://token@git.example.com/app.git",
            "ftp://git.example.com/app.git",
            "/srv/git/app.git",
            "https://example.com/a\nb",
        ] {
            assert!(check_repo(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refs_are_branches_tags_or_commits_never_options() {
        for good in [
            "main",
            "release/1.2",
            "v1.0.0",
            &"a".repeat(40),
            "feature_x-y",
        ] {
            assert_eq!(check_ref(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "-b",
            "--upload-pack=x",
            "a..b",
            "a b",
            "a~1",
            "HEAD^",
            "x:y",
            "x.lock",
            "/x",
            "x/",
            "@{-1}",
            "a\\b",
            "a*",
        ] {
            assert!(check_ref(bad).is_err(), "{bad}");
        }
    }
}
