//! The runner's own git, run outside the sandbox with the runner's own environment (its
//! HOME, its credential helper, its ssh agent) and with settings pinned so that nothing a
//! repository or a session holds can make it start a program: no hooks, no fsmonitor, no
//! `ext::` or `fd::` transports, no submodules, no signing, no background maintenance.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use amber_exec::child::ChildSpec;
use amber_exec::containment::{SpawnSandbox, Unsandboxed};

/// `-c` settings of every git call here.
const PINNED: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "protocol.ext.allow=never",
    "protocol.fd.allow=never",
    "submodule.recurse=false",
    "push.recurseSubmodules=no",
    "fetch.recurseSubmodules=false",
    "core.editor=false",
    "commit.gpgSign=false",
    "push.gpgSign=false",
    "gc.auto=0",
    "maintenance.auto=false",
];

/// Variables that would point git at another repository, index or object store.
const REPOSITORY_VARS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_ATTR_SOURCE",
];

/// How the longest stderr tail an error carries ends.
const ERROR_TAIL_CHARS: usize = 400;

/// A git call that failed: which step, and what git said last.
#[derive(Debug, thiserror::Error)]
#[error("git {step} failed: {detail}")]
pub struct GitError {
    pub step: &'static str,
    pub detail: String,
}

/// One git call: the pins, then its arguments; its environment is the runner's, plus
/// what [`Git::env`] adds.
pub struct Git {
    step: &'static str,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    timeout: Duration,
    /// Exit codes besides 0 that still mean it did its work.
    also_ok: &'static [i32],
}

impl Git {
    /// `git -c PIN… ARGS`, named `step` in its error.
    pub fn new(step: &'static str, timeout: Duration) -> Self {
        let mut args = Vec::new();
        for pin in PINNED {
            args.push("-c".into());
            args.push((*pin).into());
        }
        Self {
            step,
            args,
            env: Vec::new(),
            timeout,
            also_ok: &[],
        }
    }

    /// Takes these exit codes as success too (`git add --ignore-errors` exits 1 when it
    /// left a path out).
    pub fn also_ok(mut self, codes: &'static [i32]) -> Self {
        self.also_ok = codes;
        self
    }

    /// Runs in the repository at `dir` (`-C`).
    pub fn in_dir(self, dir: &Path) -> Self {
        self.arg("-C").arg(dir)
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Runs it: its stdout when it succeeds, else the tail of its stderr.
    pub async fn output(self) -> Result<Vec<u8>, GitError> {
        let step = self.step;
        let failed = |detail: String| GitError { step, detail };
        let mut cmd = ChildSpec::new(
            "git",
            SpawnSandbox::Unsandboxed(Unsandboxed::configured_by_user()),
        )
        .args(self.args)
        .envs(
            std::env::vars_os()
                // The repository is always named here: none the environment names.
                .filter(|(key, _)| !REPOSITORY_VARS.iter().any(|var| key == var))
                .chain(self.env),
        )
        .env("GIT_TERMINAL_PROMPT", "0")
        .tokio_command()
        .map_err(|e| failed(format!("cannot start git: {e}")))?;
        // stdin stays as ChildSpec made it (nothing to read; the lifeline where there is one).
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let output = match tokio::time::timeout(self.timeout, cmd.output()).await {
            Ok(output) => output.map_err(|e| failed(format!("cannot start git: {e}")))?,
            Err(_) => {
                return Err(failed(format!(
                    "it took longer than {} s",
                    self.timeout.as_secs()
                )));
            }
        };
        let also_ok = output
            .status
            .code()
            .is_some_and(|code| self.also_ok.contains(&code));
        if output.status.success() || also_ok {
            return Ok(output.stdout);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stderr = stderr.trim();
        // The tail: git says what went wrong last.
        let start = stderr
            .char_indices()
            .rev()
            .nth(ERROR_TAIL_CHARS)
            .map_or(0, |(at, _)| at);
        let detail = stderr[start..].to_owned();
        Err(failed(if detail.is_empty() {
            output.status.to_string()
        } else {
            detail
        }))
    }

    /// Runs it and reads its stdout as one trimmed line.
    pub async fn line(self) -> Result<String, GitError> {
        let out = self.output().await?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// Runs it, discarding its stdout.
    pub async fn run(self) -> Result<(), GitError> {
        self.output().await.map(drop)
    }
}
