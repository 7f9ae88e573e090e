//! Runs a `!` command for the user: `sh -c COMMAND` in the session's directory, as the user
//! and with the TUI's environment (it is what they typed, as in their own terminal). Not
//! interactive: stdin is empty, and it runs in a process group of its own, so it cannot
//! read the terminal the TUI draws on; the group is killed after [`TIMEOUT`].

use std::process::Stdio;
use std::time::Duration;

use crate::app::ShellOutcome;

/// How long a `!` command may run: long builds belong in another terminal, or to the model.
const TIMEOUT: Duration = Duration::from_secs(300);

/// Runs `command`; `Err` in words when it could not start or ran out of time.
pub(super) async fn run(command: &str, cwd: Option<&str>) -> Result<ShellOutcome, String> {
    // The user's own command, typed by them, run as them: no model output reaches it, so
    // it is not a child of the daemon's (`amber_exec::child::ChildSpec`) kind.
    #[allow(clippy::disallowed_methods)]
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let child = cmd.spawn().map_err(|e| match cwd {
        Some(cwd) => format!("sh in {cwd}: {e}"),
        None => format!("sh: {e}"),
    })?;
    let group = child.id();
    match tokio::time::timeout(TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(out)) => {
            let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
            output.push_str(&String::from_utf8_lossy(&out.stderr));
            Ok(ShellOutcome {
                output,
                code: out.status.code(),
            })
        }
        Ok(Err(e)) => Err(format!("waiting for it: {e}")),
        Err(_) => {
            if let Some(group) = group.and_then(|g| libc::pid_t::try_from(g).ok()) {
                // SAFETY: killpg only sends a signal; the group is the child's own (it
                // leads it), so nothing else is hit.
                unsafe {
                    libc::killpg(group, libc::SIGKILL);
                }
            }
            Err(format!(
                "it ran past {} s and was stopped; run long commands in a terminal of their own",
                TIMEOUT.as_secs()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_in_the_directory_and_reports_output_and_status() {
        let dir = std::env::temp_dir();
        let out = run("pwd; echo oops >&2; exit 3", dir.to_str())
            .await
            .unwrap();
        let real = std::fs::canonicalize(&dir).unwrap();
        assert!(
            out.output.starts_with(real.to_str().unwrap()),
            "{:?}",
            out.output
        );
        assert!(out.output.ends_with("oops\n"), "{:?}", out.output);
        assert_eq!(out.code, Some(3));
    }

    #[tokio::test]
    async fn a_missing_directory_is_said_in_words() {
        let err = run("true", Some("/nonexistent/amber-dir"))
            .await
            .unwrap_err();
        assert!(err.contains("/nonexistent/amber-dir"), "{err}");
    }

    #[tokio::test]
    async fn it_cannot_read_the_terminal() {
        let out = run("read line; echo \"got [$line]\"", None).await.unwrap();
        assert_eq!(out.output, "got []\n");
    }
}
