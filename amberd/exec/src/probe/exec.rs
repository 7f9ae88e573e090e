//! One command run through the tool-exec helper inside a sandbox, bounded in time: the way
//! the start-up probe and the self-test run theirs. The command leads a process group of
//! its own (the helper's lifeline watcher joins it), which is killed when the run ends, as
//! a `bash` call's is; the run is recorded for the reaper meanwhile.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::sandbox::SandboxSpec;

use crate::child::ChildSpec;
use crate::containment::SpawnSandbox;
use crate::group::GroupGuard;
use crate::lifeline::{SANDBOX_FAILED, SANDBOX_FAILED_PREFIX};

/// `PATH` of the commands run here: nothing of the daemon's environment reaches them.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The program ran inside the sandbox and exited.
    Ran(Ran),
    /// The helper could not apply the sandbox (nothing ran): its reason.
    SetupFailed(String),
    /// Nothing was started (no helper, no process): why.
    NotStarted(String),
    /// Still running at the deadline; killed.
    TimedOut(Duration),
}

/// What a program that ran left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ran {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub(crate) fn succeeded(&self) -> bool {
        self.code == Some(0)
    }

    /// `exit 1`, or `killed by a signal`.
    pub(crate) fn status_text(&self) -> String {
        match self.code {
            Some(code) => format!("exit {code}"),
            None => "killed by a signal".to_owned(),
        }
    }

    /// The last non-empty line of stderr (where shells say what failed), or `""`.
    pub(crate) fn last_error_line(&self) -> &str {
        self.stderr
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
    }
}

/// Runs `program args…` in `spec`'s sandbox with `cwd` as its working directory and
/// `spec.tmp_dir` as `TMPDIR`, for at most `timeout`. `label` names the run in the reaper's
/// records.
pub(crate) async fn run_sandboxed(
    spec: &SandboxSpec,
    program: &str,
    args: &[&OsStr],
    cwd: &Path,
    timeout: Duration,
    label: &str,
) -> Outcome {
    // Its own group, so the group kill below (and the watcher's, should the daemon die)
    // reaches only what this run started.
    let made = ChildSpec::new(program, SpawnSandbox::Sandboxed(spec))
        .args(args)
        .cwd(cwd)
        .env("PATH", PATH)
        .tokio_command();
    let mut cmd = match made {
        Ok(cmd) => cmd,
        Err(err) => return Outcome::NotStarted(err.to_string()),
    };
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(err) => return Outcome::NotStarted(format!("cannot start {program}: {err}")),
    };
    let Some(pgid) = child.id().and_then(|id| libc::pid_t::try_from(id).ok()) else {
        return Outcome::NotStarted(format!("cannot start {program}: no process id"));
    };
    // Kills the group (the program's leftovers and the watcher) however the run ends.
    let _group = GroupGuard::new(pgid, label);
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(output)) => classify(
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ),
        Ok(Err(err)) => Outcome::NotStarted(format!("waiting for {program}: {err}")),
        Err(_) => Outcome::TimedOut(timeout),
    }
}

/// Tells the helper's own refusal (exit 125 with its message) from the program's exit.
pub(crate) fn classify(code: Option<i32>, stdout: String, stderr: String) -> Outcome {
    if code == Some(i32::from(SANDBOX_FAILED))
        && let Some(at) = stderr.find(SANDBOX_FAILED_PREFIX)
    {
        let reason = stderr[at + SANDBOX_FAILED_PREFIX.len()..]
            .lines()
            .next()
            .unwrap_or("")
            .trim();
        let reason = if reason.is_empty() {
            "no reason given".to_owned()
        } else {
            reason.to_owned()
        };
        return Outcome::SetupFailed(reason);
    }
    Outcome::Ran(Ran {
        code,
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helpers_refusal_is_a_setup_failure_with_its_reason() {
        let stderr = format!("{SANDBOX_FAILED_PREFIX} Landlock is not available in this kernel\n");
        assert_eq!(
            classify(Some(125), String::new(), stderr),
            Outcome::SetupFailed("Landlock is not available in this kernel".into())
        );
    }

    #[test]
    fn a_program_exiting_125_on_its_own_is_a_run() {
        let got = classify(Some(125), "x".into(), "bash: oops\n".into());
        assert!(
            matches!(
                got,
                Outcome::Ran(Ran {
                    code: Some(125),
                    ..
                })
            ),
            "{got:?}"
        );
        let got = classify(Some(1), String::new(), format!("{SANDBOX_FAILED_PREFIX} x"));
        assert!(
            matches!(got, Outcome::Ran(_)),
            "only exit 125 is the helper's"
        );
    }

    #[test]
    fn the_last_error_line_skips_blank_lines() {
        let ran = Ran {
            code: Some(1),
            stdout: String::new(),
            stderr: "first\nbash: /x: Read-only file system\n\n".into(),
        };
        assert_eq!(ran.last_error_line(), "bash: /x: Read-only file system");
        assert_eq!(ran.status_text(), "exit 1");
        assert!(!ran.succeeded());
    }
}
