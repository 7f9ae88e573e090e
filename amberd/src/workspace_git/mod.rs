//! amberd's own `git` on workspace content: the environment block's facts and session
//! worktrees. A repository is content that a model or a downloaded tree controls, and git
//! runs what that content says (`core.fsmonitor`, filter drivers, hooks, signature checks).
//! amberd runs git with its own uid and the provider's key in its memory, so every such git:
//!
//! 1. runs **inside the OS sandbox**, offline: read-only for queries ([`Access::Read`]);
//!    for worktree creation and removal writable only where git must write
//!    ([`Access::Write`]: the worktree directory and the repository's git dir);
//! 2. has **every program git could start pinned off** on its command line (`-c` outranks
//!    every config file, and reaches the gits it starts through `GIT_CONFIG_PARAMETERS`):
//!    [`PINNED`] plus the `clean`, `smudge` and `process` commands of every filter driver
//!    the configuration defines (learned once per repository: [`Unfiltered`]); submodules
//!    are not entered;
//! 3. gets the tool processes' environment (no provider key) minus every `GIT_*` variable,
//!    so nothing from amberd's own environment redirects it.
//!
//! `safe.directory` is never relaxed: a repository another user owns stays refused. When the
//! kernel cannot sandbox, nothing runs ([`GitError::Unavailable`]): callers report the
//! facts as unknown or refuse the worktree.

pub(crate) mod pins;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use amber_exec::child::{ChildSpec, Unsandboxed};
use amber_exec::containment::SpawnSandbox;
use amber_exec::sandbox::{SandboxInfo, SandboxMode, SandboxSpec};

use amber_exec::env_policy::ToolEnv;
use amber_exec::sandbox_env::SandboxEnv;

pub(crate) use pins::PINNED;

/// The name of the shared temp directory amberd's own git calls get as `$TMPDIR`.
const TMP_NAME: &str = "git";

/// Where one git call may write.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Access<'a> {
    /// Nowhere but its temp directory.
    Read,
    /// These directories too (canonical, existing).
    Write(&'a [PathBuf]),
}

/// Why a git call did not run or did not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GitError {
    #[error("the OS sandbox is unavailable ({0}), so amberd does not run git on this workspace")]
    Unavailable(String),
    #[error("cannot run git: {0}")]
    Spawn(String),
    #[error("git took longer than {0:?} and was killed")]
    TimedOut(Duration),
}

/// What a finished git said.
#[derive(Debug, Clone)]
pub(crate) struct GitOutput {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// How git processes are started: sandboxed (the daemon), or directly (unit tests of the
/// callers' parsing, whose test runner has no sandbox helper).
#[derive(Debug, Clone)]
enum Launch {
    Sandboxed(Arc<SandboxEnv>),
    #[cfg(test)]
    Direct,
}

/// amberd's way to run git on a workspace.
#[derive(Debug, Clone)]
pub(crate) struct WorkspaceGit {
    launch: Launch,
    env: Vec<(OsString, OsString)>,
}

impl WorkspaceGit {
    /// Sandboxed by `sandbox`, with `env` (the tool processes' environment) minus `GIT_*`.
    pub(crate) fn new(sandbox: Arc<SandboxEnv>, env: &ToolEnv) -> Self {
        Self {
            launch: Launch::Sandboxed(sandbox),
            env: git_env(env.vars()),
        }
    }

    /// Unsandboxed, for unit tests of what callers make of git's answers.
    #[cfg(test)]
    pub(crate) fn direct_for_tests(env: &[(OsString, OsString)]) -> Self {
        Self {
            launch: Launch::Direct,
            env: git_env(env),
        }
    }

    /// `git ARGS` in `dir` with `access`, every program pinned off; stdin empty, stdout and
    /// stderr piped. The caller runs it (in its own process group, so the lifeline watcher
    /// kills only this git).
    pub(crate) fn command(
        &self,
        dir: &Path,
        access: Access<'_>,
        args: &[&str],
    ) -> Result<Command, GitError> {
        let spec = self.spec(dir, access)?;
        let contained = match &spec {
            Some(spec) => SpawnSandbox::Sandboxed(spec),
            None => SpawnSandbox::Unsandboxed(Unsandboxed::configured_by_user()),
        };
        let mut cmd = ChildSpec::new("git", contained)
            .arg("-C")
            .arg(dir)
            .args(PINNED.iter().flat_map(|pin| ["-c", pin]))
            .args(args)
            .cwd(dir)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(pins::FIXED_ENV.iter().copied())
            .std_command()
            .map_err(|e| GitError::Spawn(e.to_string()))?;
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        Ok(cmd)
    }

    /// Runs `git ARGS` to completion (blocking; for worktree work on a blocking thread).
    pub(crate) fn run(
        &self,
        dir: &Path,
        access: Access<'_>,
        args: &[&str],
    ) -> Result<GitOutput, GitError> {
        let mut cmd = self.command(dir, access, args)?;
        output(cmd.output().map_err(|e| GitError::Spawn(e.to_string()))?)
    }

    /// This git for the repository holding `dir`, with its filter drivers pinned off too:
    /// their names learned once, by one read-only call (blocking).
    pub(crate) fn unfiltered(&self, dir: &Path) -> Result<Unfiltered, GitError> {
        let listed = self.run(dir, Access::Read, pins::LIST_FILTERS)?;
        Ok(self.with_pins(&listed.stdout))
    }

    /// [`WorkspaceGit::unfiltered`], async, the listing killed after `timeout`.
    pub(crate) async fn unfiltered_async(
        &self,
        dir: &Path,
        timeout: Duration,
    ) -> Result<Unfiltered, GitError> {
        let listed = self.spawn_async(dir, pins::LIST_FILTERS, timeout).await?;
        Ok(self.with_pins(&listed.stdout))
    }

    fn with_pins(&self, listed: &str) -> Unfiltered {
        Unfiltered {
            git: self.clone(),
            pins: pins::filter_pins(&pins::filter_drivers(listed)),
        }
    }

    async fn spawn_async(
        &self,
        dir: &Path,
        args: &[&str],
        timeout: Duration,
    ) -> Result<GitOutput, GitError> {
        let mut cmd = tokio::process::Command::from(self.command(dir, Access::Read, args)?);
        cmd.kill_on_drop(true);
        let child = cmd.spawn().map_err(|e| GitError::Spawn(e.to_string()))?;
        match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Ok(Ok(out)) => output(out),
            Ok(Err(err)) => Err(GitError::Spawn(err.to_string())),
            // Dropping the future kills the child (`kill_on_drop`).
            Err(_) => Err(GitError::TimedOut(timeout)),
        }
    }

    /// The sandbox `git` runs in for `access` over `dir` (`None` only in unit tests, which
    /// run git directly).
    fn spec(&self, dir: &Path, access: Access<'_>) -> Result<Option<SandboxSpec>, GitError> {
        // Outside tests `Sandboxed` is the only variant.
        #[allow(clippy::infallible_destructuring_match)]
        let sandbox = match &self.launch {
            Launch::Sandboxed(sandbox) => sandbox,
            #[cfg(test)]
            Launch::Direct => return Ok(None),
        };
        if let Some(reason) = sandbox.unavailable() {
            return Err(GitError::Unavailable(reason.to_owned()));
        }
        let tmp = sandbox
            .tmp
            .ensure(TMP_NAME)
            .map_err(|e| GitError::Spawn(format!("its temp directory: {e}")))?;
        let (mode, workspace, writable): (SandboxMode, &Path, &[PathBuf]) = match access {
            Access::Read => (SandboxMode::ReadOnly, dir, &[]),
            // The first writable directory stands as the workspace; it holds no `.git` of
            // its own, so no protected path is laid over it.
            Access::Write(dirs) => (
                SandboxMode::WorkspaceWrite,
                dirs.first().map_or(dir, PathBuf::as_path),
                dirs.get(1..).unwrap_or(&[]),
            ),
        };
        let info = SandboxInfo::new(mode, amber_proto::NetworkMode::Off);
        Ok(Some(sandbox.spec(info, workspace, tmp, writable)))
    }
}

/// [`WorkspaceGit`] for one repository, every filter driver its configuration names pinned
/// off as well (`-c filter.NAME.{clean,smudge,process}=`).
#[derive(Debug, Clone)]
pub(crate) struct Unfiltered {
    git: WorkspaceGit,
    pins: Vec<String>,
}

impl Unfiltered {
    /// Runs `git ARGS` to completion (blocking; for worktree work on a blocking thread).
    pub(crate) fn run(
        &self,
        dir: &Path,
        access: Access<'_>,
        args: &[&str],
    ) -> Result<GitOutput, GitError> {
        self.git.run(dir, access, &self.with_pins(args))
    }

    /// A read-only query, killed after `timeout` (async).
    pub(crate) async fn query(
        &self,
        dir: &Path,
        args: &[&str],
        timeout: Duration,
    ) -> Result<GitOutput, GitError> {
        self.git
            .spawn_async(dir, &self.with_pins(args), timeout)
            .await
    }

    /// The pins, then `args`.
    fn with_pins<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        self.pins
            .iter()
            .map(String::as_str)
            .chain(args.iter().copied())
            .collect()
    }
}

/// `env` without any `GIT_*` variable (`GIT_DIR`, `GIT_CONFIG_*`, `GIT_EXEC_PATH`, …).
fn git_env(env: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    env.iter()
        .filter(|(k, _)| !k.to_string_lossy().starts_with("GIT_"))
        .cloned()
        .collect()
}

fn output(out: std::process::Output) -> Result<GitOutput, GitError> {
    Ok(GitOutput {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}

#[cfg(test)]
mod tests;
