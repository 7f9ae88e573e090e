//! `sandbox/selftest`: three commands through the real helper, in the default sandbox
//! (`workspace-write`, no network) over a fresh scratch directory, run at once and each
//! bounded by [`CHECK_TIMEOUT`]:
//! - `write_outside_workspace`: a write to a sentinel in the scratch's `outside/` must fail,
//!   and the sentinel must not exist afterwards;
//! - `loopback_connect`: a TCP connect (bash's `/dev/tcp`) to a listener the daemon opened on
//!   127.0.0.1 must fail, and the listener must have accepted nothing;
//! - `write_inside_workspace`: a write inside the workspace must succeed.
//!
//! The verdicts are pure functions of what each run left behind.

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use crate::sandbox::SandboxSpec;
use amber_proto::{SandboxSelftestResult, SelftestCheck};

use super::ProbeSettings;
use super::exec::{Outcome, run_sandboxed};
use super::scratch::Scratch;

/// The bound of each check (they run concurrently).
pub(crate) const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The shell the checks run (bash: `/dev/tcp` is bash's).
const BASH: &str = "/bin/bash";
/// What the checks write.
const MARK: &str = "amber-selftest";

pub(crate) const WRITE_OUTSIDE: &str = "write_outside_workspace";
pub(crate) const LOOPBACK: &str = "loopback_connect";
pub(crate) const WRITE_INSIDE: &str = "write_inside_workspace";

/// Runs the three checks.
pub(crate) async fn run(settings: &ProbeSettings) -> SandboxSelftestResult {
    let scratch = match Scratch::new("selftest") {
        Ok(scratch) => scratch,
        Err(err) => return all_failed(&format!("cannot create the scratch directory: {err}")),
    };
    let listener = match TcpListener::bind("127.0.0.1:0").and_then(|l| {
        l.set_nonblocking(true)?;
        Ok(l)
    }) {
        Ok(listener) => listener,
        Err(err) => return all_failed(&format!("cannot open a loopback listener: {err}")),
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let spec = scratch.spec(settings);
    let sentinel = scratch.outside.join("sentinel");
    let inside = scratch.workspace.join("inside");
    let inside_args = [inside.as_os_str(), OsStr::new(MARK)];
    let (outside, connect, written) = tokio::join!(
        write_to(&spec, &scratch, &sentinel),
        connect_to(&spec, &scratch, port),
        bash(
            &spec,
            &scratch,
            r#"echo "$2" > "$1" && cat "$1""#,
            &inside_args
        ),
    );
    let checks = vec![
        write_outside_verdict(&outside, &sentinel, sentinel.exists()),
        loopback_verdict(&connect, port, accepted(&listener)),
        write_inside_verdict(&written, std::fs::read_to_string(&inside).ok().as_deref()),
    ];
    SandboxSelftestResult {
        ok: checks.iter().all(|c| c.ok),
        checks,
    }
}

async fn write_to(spec: &SandboxSpec, scratch: &Scratch, path: &Path) -> Outcome {
    bash(
        spec,
        scratch,
        r#"echo "$2" > "$1""#,
        &[path.as_os_str(), OsStr::new(MARK)],
    )
    .await
}

async fn connect_to(spec: &SandboxSpec, scratch: &Scratch, port: u16) -> Outcome {
    let port = port.to_string();
    bash(
        spec,
        scratch,
        r#"echo "$2" > "/dev/tcp/127.0.0.1/$1""#,
        &[OsStr::new(&port), OsStr::new(MARK)],
    )
    .await
}

/// `bash -c SCRIPT bash ARGS…` in the sandbox, from the workspace.
async fn bash(spec: &SandboxSpec, scratch: &Scratch, script: &str, args: &[&OsStr]) -> Outcome {
    let mut argv: Vec<&OsStr> = vec![OsStr::new("-c"), OsStr::new(script), OsStr::new("bash")];
    argv.extend_from_slice(args);
    run_sandboxed(
        spec,
        BASH,
        &argv,
        &scratch.workspace,
        CHECK_TIMEOUT,
        "sandbox-selftest",
    )
    .await
}

/// Whether anything reached the listener (a connection waits in its backlog until taken).
fn accepted(listener: &TcpListener) -> bool {
    listener.accept().is_ok()
}

/// Every check failed for the same reason (nothing could run).
fn all_failed(reason: &str) -> SandboxSelftestResult {
    SandboxSelftestResult {
        ok: false,
        checks: [WRITE_OUTSIDE, LOOPBACK, WRITE_INSIDE]
            .into_iter()
            .map(|name| check(name, false, reason.to_owned()))
            .collect(),
    }
}

fn check(name: &str, ok: bool, detail: String) -> SelftestCheck {
    SelftestCheck {
        name: name.to_owned(),
        ok,
        detail,
    }
}

/// The detail of a run that proves nothing either way, or `None` when the program ran.
fn no_run(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Ran(_) => None,
        Outcome::SetupFailed(reason) => Some(format!("the sandbox could not be set up: {reason}")),
        Outcome::NotStarted(reason) => Some(format!("the check could not run: {reason}")),
        Outcome::TimedOut(after) => Some(format!("timed out after {} s", after.as_secs())),
    }
}

/// `refused (exit 1): bash: …: Read-only file system`.
fn refused(ran: &super::exec::Ran) -> String {
    match ran.last_error_line() {
        "" => format!("refused ({})", ran.status_text()),
        line => format!("refused ({}): {line}", ran.status_text()),
    }
}

pub(crate) fn write_outside_verdict(
    outcome: &Outcome,
    sentinel: &Path,
    sentinel_exists: bool,
) -> SelftestCheck {
    if sentinel_exists {
        return check(
            WRITE_OUTSIDE,
            false,
            format!(
                "ESCAPE: {} was created outside the workspace",
                sentinel.display()
            ),
        );
    }
    let ran = match outcome {
        Outcome::Ran(ran) => ran,
        other => return check(WRITE_OUTSIDE, false, no_run(other).unwrap_or_default()),
    };
    if ran.succeeded() {
        return check(
            WRITE_OUTSIDE,
            false,
            format!(
                "the write to {} reported success outside the workspace",
                sentinel.display()
            ),
        );
    }
    check(WRITE_OUTSIDE, true, refused(ran))
}

pub(crate) fn loopback_verdict(outcome: &Outcome, port: u16, accepted: bool) -> SelftestCheck {
    if accepted {
        return check(
            LOOPBACK,
            false,
            format!("ESCAPE: a connection from inside the sandbox reached 127.0.0.1:{port}"),
        );
    }
    let ran = match outcome {
        Outcome::Ran(ran) => ran,
        other => return check(LOOPBACK, false, no_run(other).unwrap_or_default()),
    };
    if ran.succeeded() {
        return check(
            LOOPBACK,
            false,
            format!("the connect to 127.0.0.1:{port} reported success"),
        );
    }
    check(
        LOOPBACK,
        true,
        format!("{}; the listener accepted nothing", refused(ran)),
    )
}

pub(crate) fn write_inside_verdict(outcome: &Outcome, content: Option<&str>) -> SelftestCheck {
    let ran = match outcome {
        Outcome::Ran(ran) => ran,
        other => return check(WRITE_INSIDE, false, no_run(other).unwrap_or_default()),
    };
    let expected = format!("{MARK}\n");
    match (ran.succeeded(), content) {
        (true, Some(text)) if text == expected => check(WRITE_INSIDE, true, "written".to_owned()),
        (true, _) => check(
            WRITE_INSIDE,
            false,
            "the write reported success but the file does not hold what was written".to_owned(),
        ),
        (false, _) => {
            let line = ran.last_error_line();
            check(
                WRITE_INSIDE,
                false,
                format!("the write failed ({}): {line}", ran.status_text()),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::exec::Ran;

    fn ran(code: i32, stderr: &str) -> Outcome {
        Outcome::Ran(Ran {
            code: Some(code),
            stdout: String::new(),
            stderr: stderr.to_owned(),
        })
    }

    #[test]
    fn an_outside_write_passes_only_when_refused_and_absent() {
        let sentinel = Path::new("/tmp/x/outside/sentinel");
        let refused = ran(1, "bash: /tmp/x/outside/sentinel: Read-only file system\n");
        let ok = write_outside_verdict(&refused, sentinel, false);
        assert!(ok.ok, "{ok:?}");
        assert!(ok.detail.contains("Read-only file system"), "{ok:?}");
        // A failing command that still left the file behind is an escape.
        let escaped = write_outside_verdict(&refused, sentinel, true);
        assert!(
            !escaped.ok && escaped.detail.starts_with("ESCAPE"),
            "{escaped:?}"
        );
        assert!(!write_outside_verdict(&ran(0, ""), sentinel, false).ok);
    }

    #[test]
    fn a_check_that_could_not_run_fails_with_the_reason() {
        let setup = Outcome::SetupFailed("Landlock is not available in this kernel".into());
        for got in [
            write_outside_verdict(&setup, Path::new("/s"), false),
            loopback_verdict(&setup, 1, false),
            write_inside_verdict(&setup, None),
        ] {
            assert!(!got.ok);
            assert!(got.detail.contains("Landlock is not available"), "{got:?}");
        }
        let late = write_inside_verdict(&Outcome::TimedOut(CHECK_TIMEOUT), None);
        assert_eq!(late.detail, "timed out after 2 s");
    }

    #[test]
    fn a_loopback_connect_passes_only_when_refused_and_nothing_arrived() {
        let unreachable = ran(1, "bash: connect: Network is unreachable\n");
        assert!(loopback_verdict(&unreachable, 4000, false).ok);
        assert!(!loopback_verdict(&unreachable, 4000, true).ok);
        assert!(!loopback_verdict(&ran(0, ""), 4000, false).ok);
    }

    #[test]
    fn an_inside_write_needs_the_content_written() {
        assert!(write_inside_verdict(&ran(0, ""), Some("amber-selftest\n")).ok);
        assert!(!write_inside_verdict(&ran(0, ""), None).ok);
        let denied = write_inside_verdict(&ran(1, "bash: inside: Permission denied"), None);
        assert!(
            !denied.ok && denied.detail.contains("Permission denied"),
            "{denied:?}"
        );
    }

    #[test]
    fn nothing_runnable_fails_every_check() {
        let got = all_failed("no temp dir");
        assert!(!got.ok);
        assert_eq!(got.checks.len(), 3);
        assert!(
            got.checks
                .iter()
                .all(|c| !c.ok && c.detail == "no temp dir")
        );
    }
}
