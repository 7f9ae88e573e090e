//! A fleet session's workspace on a runner: a fresh clone of its repository at its ref,
//! made by the runner's own git with the runner's own credentials (its environment, its
//! git config, a mounted Secret), never with anything amberd sends.
//!
//! Git here runs outside the sandbox, so nothing the repository holds may make it start a
//! program: hooks and fsmonitor are pinned off, and only the transports a repository URL
//! names (never `ext::`, which runs a command, or `fd::`) are allowed.

use std::path::Path;
use std::time::Duration;

use amber_exec::child::ChildSpec;
use amber_exec::containment::{SpawnSandbox, Unsandboxed};

/// How long a clone (with its checkout) may take.
const CLONE_TIMEOUT: Duration = Duration::from_secs(900);

/// `-c` settings of every git call here.
const PINNED: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "protocol.ext.allow=never",
    "protocol.fd.allow=never",
    "submodule.recurse=false",
    "core.editor=false",
];

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
    #[error("git {step} failed: {detail}")]
    Git { step: &'static str, detail: String },
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
    let io = |source| ProvisionError::Io {
        path: workspace.display().to_string(),
        source,
    };
    match tokio::fs::remove_dir_all(workspace).await {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(io(err)),
    }
    if let Some(parent) = workspace.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(io)?;
    }
    let made = tokio::time::timeout(CLONE_TIMEOUT, async {
        git(
            None,
            "clone",
            &["clone", "--no-checkout", "--quiet", "--", repo],
            Some(workspace),
        )
        .await?;
        checkout(workspace, git_ref).await
    })
    .await;
    match made {
        Ok(result) => result,
        Err(_) => Err(ProvisionError::Git {
            step: "clone",
            detail: format!("it took longer than {} s", CLONE_TIMEOUT.as_secs()),
        }),
    }
}

/// Checks out `git_ref`: a branch of the remote as a local branch of that name, else a tag
/// or commit detached, else fetched by name from the remote.
async fn checkout(workspace: &Path, git_ref: &str) -> Result<(), ProvisionError> {
    let remote_branch = format!("refs/remotes/origin/{git_ref}");
    if verify(workspace, &remote_branch).await {
        return git(
            Some(workspace),
            "checkout",
            &["checkout", "--quiet", "-B", git_ref, &remote_branch, "--"],
            None,
        )
        .await;
    }
    let commit = format!("{git_ref}^{{commit}}");
    if !verify(workspace, &commit).await {
        git(
            Some(workspace),
            "fetch",
            &["fetch", "--quiet", "origin", "--", git_ref],
            None,
        )
        .await?;
        return git(
            Some(workspace),
            "checkout",
            &["checkout", "--quiet", "--detach", "FETCH_HEAD", "--"],
            None,
        )
        .await;
    }
    git(
        Some(workspace),
        "checkout",
        &["checkout", "--quiet", "--detach", &commit, "--"],
        None,
    )
    .await
}

async fn verify(workspace: &Path, rev: &str) -> bool {
    git(
        Some(workspace),
        "rev-parse",
        &["rev-parse", "--verify", "--quiet", rev],
        None,
    )
    .await
    .is_ok()
}

/// Runs git with the pins, in `dir`, with `args` and then `last` (a path); its stderr's
/// tail is the error.
async fn git(
    dir: Option<&Path>,
    step: &'static str,
    args: &[&str],
    last: Option<&Path>,
) -> Result<(), ProvisionError> {
    let mut args_all: Vec<std::ffi::OsString> = Vec::new();
    for pin in PINNED {
        args_all.push("-c".into());
        args_all.push((*pin).into());
    }
    if let Some(dir) = dir {
        args_all.push("-C".into());
        args_all.push(dir.as_os_str().to_owned());
    }
    args_all.extend(args.iter().map(Into::into));
    if let Some(last) = last {
        args_all.push(last.as_os_str().to_owned());
    }
    // The runner's own git with the runner's own environment (its HOME, its credential
    // helper, its ssh agent): the operator configured this machine to clone.
    let mut cmd = ChildSpec::new(
        "git",
        SpawnSandbox::Unsandboxed(Unsandboxed::configured_by_user()),
    )
    .args(args_all)
    .envs(std::env::vars_os())
    .env("GIT_TERMINAL_PROMPT", "0")
    .tokio_command()
    .map_err(|e| ProvisionError::Git {
        step,
        detail: format!("cannot start git: {e}"),
    })?;
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let output = cmd.output().await.map_err(|e| ProvisionError::Git {
        step,
        detail: format!("cannot start git: {e}"),
    })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stderr = stderr.trim();
    // The tail: git says what went wrong last.
    let start = stderr.char_indices().rev().nth(400).map_or(0, |(at, _)| at);
    let detail = stderr[start..].to_owned();
    Err(ProvisionError::Git {
        step,
        detail: if detail.is_empty() {
            output.status.to_string()
        } else {
            detail
        },
    })
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
