//! The environment block of the prompt's head: today's date, OS and architecture, the
//! shell, the workspace root and, in a git repository, the branch, the number of changed
//! files and the last commit's subject.
//!
//! Computed once per session load (the head must stay byte-identical across turns, so the
//! block says "at session start"). Each `git` call has [`GIT_TIMEOUT`] and is killed after
//! it; `git` runs with the tool processes' environment (no provider secret), and a missing
//! `git` or a workspace outside a repository is a line saying so, never an error.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime};

/// Longest one `git` call may take.
pub(crate) const GIT_TIMEOUT: Duration = Duration::from_secs(2);

/// What the block reports about the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GitFacts {
    /// `None`: detached HEAD (or git could not tell).
    pub branch: Option<String>,
    pub changed_files: Option<usize>,
    /// `None`: no commit yet (or git could not tell).
    pub last_commit: Option<String>,
}

/// The block for `workspace`; `env` is the tool processes' environment `git` runs with.
pub(crate) async fn environment_block(workspace: &Path, env: &[(OsString, OsString)]) -> String {
    let git = if super::discover::in_repository(workspace) {
        Some(git_facts(workspace, env).await)
    } else {
        None
    };
    let shell = std::env::var("SHELL")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "/bin/sh".to_owned());
    render(&today(SystemTime::now()), &shell, workspace, git.as_ref())
}

/// The block's text (pure, for tests).
pub(crate) fn render(date: &str, shell: &str, workspace: &Path, git: Option<&GitFacts>) -> String {
    let mut out = format!(
        "# Environment (at session start)\n\n\
         - Date: {date} (UTC)\n\
         - OS: {os} ({arch})\n\
         - Shell: {shell}\n\
         - Workspace root: {ws}",
        os = std::env::consts::OS,
        arch = std::env::consts::ARCH,
        ws = workspace.display(),
    );
    match git {
        None => out.push_str("\n- Git: not a git repository"),
        Some(facts) => {
            let branch = facts
                .branch
                .as_deref()
                .unwrap_or("(detached HEAD or unknown)");
            out.push_str(&format!("\n- Git branch: {branch}"));
            match facts.changed_files {
                Some(n) => out.push_str(&format!("\n- Changed files (git status): {n}")),
                None => out.push_str("\n- Changed files (git status): unknown"),
            }
            let subject = facts.last_commit.as_deref().unwrap_or("(none)");
            out.push_str(&format!("\n- Last commit: {subject}"));
        }
    }
    out
}

/// `YYYY-MM-DD` of `now`, in UTC.
pub(crate) fn today(now: SystemTime) -> String {
    let stamp = humantime::format_rfc3339_seconds(now).to_string();
    stamp.get(..10).unwrap_or(&stamp).to_owned()
}

async fn git_facts(workspace: &Path, env: &[(OsString, OsString)]) -> GitFacts {
    let (branch, status, subject) = tokio::join!(
        git(workspace, env, &["branch", "--show-current"]),
        git(workspace, env, &["status", "--porcelain"]),
        git(workspace, env, &["log", "-1", "--format=%s"]),
    );
    GitFacts {
        branch: branch
            .map(|b| b.trim().to_owned())
            .filter(|b| !b.is_empty()),
        changed_files: status.map(|s| s.lines().filter(|l| !l.trim().is_empty()).count()),
        last_commit: subject
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty()),
    }
}

/// `git ARGS` in `workspace`: its stdout when it exits 0 within [`GIT_TIMEOUT`]; killed
/// (and `None`) when it takes longer.
async fn git(workspace: &Path, env: &[(OsString, OsString)], args: &[&str]) -> Option<String> {
    let mut command = tokio::process::Command::new("git");
    command
        .args(args)
        .current_dir(workspace)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        // Reading must not take the index lock a concurrent `git` in the workspace needs.
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            tracing::debug!(%err, "git unavailable for the environment block");
            return None;
        }
    };
    match tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(output)) if output.status.success() => {
            Some(String::from_utf8_lossy(&output.stdout).into_owned())
        }
        Ok(_) => None,
        Err(_) => {
            // Dropping the future kills the child (`kill_on_drop`).
            tracing::warn!(?args, "git took longer than {GIT_TIMEOUT:?}; killed");
            None
        }
    }
}
