//! `process/spawn`: one of a session's commands as a job whose whole output streams to the
//! client, numbered like a tool call's (`job/output`), with its stdin open for `process/write`
//! when asked, and its exit in `job/done`. It starts like a `bash` call — the session's sandbox
//! (or the leave the client's gate gave), the session's environment, its own process group
//! guarded by the lifeline and the reaper — and `job/cancel` (or the session closing) kills
//! the group.

use std::sync::Arc;

use amber_exec::group::GroupGuard;
use amber_exec::spawn::spawn_shell_piped;
use amber_proto::ToolStatus;
use amber_tools::sandbox::{Unsandboxed, choose};
use tokio::io::AsyncReadExt;
use tokio::process::ChildStdin;

use crate::jobs::Job;
use crate::wire::{ProcessExit, ProcessSpawnParams, RpcError, code};

/// How much one read of the output takes at most (one `job/output` chunk).
const CHUNK_BYTES: usize = 256 << 10;

/// Starts `params.command` for the session whose tool state is `tools` over `workspace`;
/// `forward` hands each chunk on, `finished` gets the exit once the output is all read.
/// Returns its pid and, when asked for, its stdin.
pub(crate) fn spawn(
    tools: &amber_tools::SessionTools,
    workspace: &std::path::Path,
    job: Arc<Job>,
    params: &ProcessSpawnParams,
    forward: impl Fn(&Job, String) + Send + 'static,
    finished: impl FnOnce(&Job, ProcessExit) + Send + 'static,
) -> Result<(u32, Option<ChildStdin>), RpcError> {
    let cwd = match &params.cwd {
        Some(dir) => amber_policy::confine(workspace, dir)
            .map_err(|e| RpcError::new(code::INVALID_PARAMS, e.to_string()))?,
        None => workspace.to_path_buf(),
    };
    if !cwd.is_dir() {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            format!("cwd {} is not a directory", cwd.display()),
        ));
    }
    // The client's gate asked a person for this leave, as for a `bash` call.
    let leave = if params.unsandboxed {
        Some(Unsandboxed::approved_by_person())
    } else {
        None
    };
    let chosen = choose(&tools.sandbox(), params.unsandboxed, leave)
        .map_err(|why| RpcError::new(code::INVALID_PARAMS, why))?;
    let env = tools.tool_env();
    let (mut output, mut child) =
        spawn_shell_piped(&params.command, &cwd, &env, chosen.spawn(), None).map_err(|e| {
            RpcError::new(
                code::INVALID_PARAMS,
                format!("cannot start the command: {e}"),
            )
        })?;
    let pid = child.id().unwrap_or_default();
    let stdin = child.stdin.take().filter(|_| params.stdin);
    let group = GroupGuard::new(
        libc::pid_t::try_from(pid).unwrap_or_default(),
        tools.session_id(),
    );
    let cancel = job.cancel.clone();
    tokio::spawn(async move {
        let mut pending = Vec::new();
        let mut buf = vec![0u8; CHUNK_BYTES];
        let mut killed = false;
        loop {
            tokio::select! {
                read = output.read(&mut buf) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        pending.extend_from_slice(&buf[..n]);
                        let text = amber_tools::bash::decode(&mut pending, false);
                        if !text.is_empty() {
                            forward(&job, text);
                        }
                    }
                },
                () = cancel.cancelled(), if !killed => {
                    killed = true;
                    group.kill();
                }
            }
        }
        let rest = amber_tools::bash::decode(&mut pending, true);
        if !rest.is_empty() {
            forward(&job, rest);
        }
        let exit = match child.wait().await {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                ProcessExit {
                    code: status.code(),
                    signal: status.signal(),
                }
            }
            Err(_) => ProcessExit {
                code: None,
                signal: None,
            },
        };
        // Whatever it left in its group goes with it.
        group.kill();
        finished(&job, exit);
    });
    Ok((pid, stdin))
}

/// The job's outcome line for a process that exited so.
pub(crate) fn outcome(exit: ProcessExit) -> (ToolStatus, String) {
    match (exit.code, exit.signal) {
        (Some(0), _) => (ToolStatus::Ok, "[exit code: 0]".to_owned()),
        (Some(code), _) => (ToolStatus::Error, format!("[exit code: {code}]")),
        (None, Some(signal)) => (ToolStatus::Error, format!("[killed by signal {signal}]")),
        (None, None) => (ToolStatus::Error, "[exit status unknown]".to_owned()),
    }
}
