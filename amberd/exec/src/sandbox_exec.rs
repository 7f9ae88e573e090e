//! `amberd sandbox-exec SPEC PROGRAM ARGS…`: the sandbox without the tool lifeline, for
//! programs that keep their standard streams — MCP stdio servers and external plugins with
//! `sandbox = "…"` in their table speak JSON-RPC on stdin, which the tool-exec helper
//! (`lifeline`) reserves for its lifeline. It applies the spec in the fresh,
//! single-threaded helper process and `exec`s the program, its pid, streams and exit status
//! the program's own. Such a program is the daemon's child and ends with its pipes.

// The helper itself: `ChildSpec` builds on this command, and the helper `exec`s the program
// after the sandbox applies.
#![allow(clippy::disallowed_methods)]

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use crate::sandbox::SandboxSpec;

use crate::lifeline;

/// The first argument that makes `amberd` this helper.
pub const SANDBOX_EXEC_ARG: &str = "sandbox-exec";

/// The command that runs `program` inside `spec` with its standard streams untouched.
/// Fails when this process is not amberd (no helper to run).
pub(crate) fn command(program: &str, spec: &SandboxSpec) -> Result<Command, String> {
    let helper = lifeline::helper_path()
        .ok_or("cannot sandbox: amberd's helper is not installed (not the amberd binary)")?;
    let mut cmd = Command::new(helper);
    cmd.arg0("amberd")
        .arg(SANDBOX_EXEC_ARG)
        .arg(spec.to_arg())
        .arg(program);
    Ok(cmd)
}

/// In `main`, before anything else: runs the helper when the arguments ask for it (it only
/// returns on failure). `None`: carry on as the daemon.
pub fn run_if_requested() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(SANDBOX_EXEC_ARG)) {
        return None;
    }
    let rest: Vec<OsString> = args.collect();
    Some(run(rest))
}

fn run(args: Vec<OsString>) -> ExitCode {
    let [spec, program, program_args @ ..] = args.as_slice() else {
        eprintln!("usage: amberd {SANDBOX_EXEC_ARG} SPEC PROGRAM [ARGS…]");
        return ExitCode::from(lifeline::SANDBOX_FAILED);
    };
    let spec = match spec.to_str().map(SandboxSpec::from_arg) {
        Some(Ok(spec)) => spec,
        Some(Err(err)) => {
            eprintln!("{} {err}", lifeline::SANDBOX_FAILED_PREFIX);
            return ExitCode::from(lifeline::SANDBOX_FAILED);
        }
        None => {
            eprintln!("{} the spec is not UTF-8", lifeline::SANDBOX_FAILED_PREFIX);
            return ExitCode::from(lifeline::SANDBOX_FAILED);
        }
    };
    if let Err(err) = crate::sandbox::enforce(&spec) {
        eprintln!("{} {err}", lifeline::SANDBOX_FAILED_PREFIX);
        return ExitCode::from(lifeline::SANDBOX_FAILED);
    }
    let err = Command::new(program).args(program_args).exec();
    eprintln!("amberd: cannot run {}: {err}", program.to_string_lossy());
    ExitCode::from(127)
}
