//! The environment block of the prompt's head: today's date, OS and architecture, the
//! shell, the workspace root and, in a git repository, the branch, the number of changed
//! files and the last commit's subject.
//!
//! Computed once per session load (the head must stay byte-identical across turns, so the
//! block says "at session start"). Each `git` call has [`GIT_TIMEOUT`] and is killed after
//! it; `git` runs as all of amberd's own git does (`workspace_git`: in the read-only,
//! offline sandbox, with the repository's programs pinned off, without provider secrets),
//! and a missing `git`, a sandbox the kernel cannot give or a workspace outside a
//! repository is a line saying so, never an error.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::workspace_git::WorkspaceGit;

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

/// The block for `workspace`, its git facts asked of `git`.
pub(crate) async fn environment_block(workspace: &Path, git: &WorkspaceGit) -> String {
    let git = if super::discover::in_repository(workspace) {
        Some(git_facts(workspace, git).await)
    } else {
        None
    };
    let shell = std::env::var("SHELL")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "/bin/sh".to_owned());
    let here = Machine {
        os: std::env::consts::OS,
        arch: std::env::consts::ARCH,
        host: None,
    };
    render(
        &today(SystemTime::now()),
        &shell,
        &here,
        workspace,
        git.as_ref(),
    )
}

/// The machine the session's tools run on, as the block names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Machine<'a> {
    pub os: &'a str,
    pub arch: &'a str,
    /// Another machine's name (an executor's); `None` for amberd's own.
    pub host: Option<&'a str>,
}

/// The block's text (pure, for tests).
pub(crate) fn render(
    date: &str,
    shell: &str,
    machine: &Machine<'_>,
    workspace: &Path,
    git: Option<&GitFacts>,
) -> String {
    let host = machine
        .host
        .map(|h| format!(", on host {h}"))
        .unwrap_or_default();
    let mut out = format!(
        "# Environment (at session start)\n\n\
         - Date: {date} (UTC)\n\
         - OS: {os} ({arch}{host})\n\
         - Shell: {shell}\n\
         - Workspace root: {ws}",
        os = machine.os,
        arch = machine.arch,
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

async fn git_facts(workspace: &Path, git: &WorkspaceGit) -> GitFacts {
    // The filter drivers' names once, for the three queries side by side.
    let git = match git.unfiltered_async(workspace, GIT_TIMEOUT).await {
        Ok(git) => Some(git),
        Err(err) => {
            tracing::debug!(%err, "git for the environment block");
            None
        }
    };
    let query = |args: &'static [&'static str]| {
        let git = git.as_ref();
        async move {
            match git?.query(workspace, args, GIT_TIMEOUT).await {
                Ok(out) if out.ok => Some(out.stdout),
                Ok(_) => None,
                Err(err) => {
                    tracing::debug!(%err, ?args, "git for the environment block");
                    None
                }
            }
        }
    };
    let (branch, status, subject) = tokio::join!(
        query(&["branch", "--show-current"]),
        query(&["status", "--porcelain", "--ignore-submodules=dirty"]),
        query(&["log", "-1", "--format=%s"]),
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
