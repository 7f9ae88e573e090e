//! Spawning a tool shell (`bash` calls and `process` background commands): `/bin/bash -c
//! command` in `cwd`, in a new process group led by the shell, stdin from /dev/null,
//! stdout and stderr into one pipe, with exactly the environment of [`ToolEnv`] plus what
//! every tool shell gets, and guarded by the daemon's lifeline (`tools::lifeline`).

use std::io;
use std::path::Path;
use std::process::Stdio;

use tokio::net::unix::pipe;
use tokio::process::{Child, Command};

use super::env_policy::ToolEnv;
use super::lifeline;
use super::sandbox::SpawnSandbox;

/// Set for every tool shell after the policy: nothing may wait on a pager or a prompt.
const FIXED_VARS: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// Spawns the shell; returns the read end of its output pipe and the child (the shell,
/// whose pid is the group id).
pub(crate) fn spawn_shell(
    command: &str,
    cwd: &Path,
    env: &ToolEnv,
    sandbox: SpawnSandbox<'_>,
) -> io::Result<(pipe::Receiver, Child)> {
    let (reader, writer) = io::pipe()?;
    let stderr = writer.try_clone()?;
    let mut std_cmd = match sandbox {
        SpawnSandbox::Sandboxed(spec) => lifeline::sandboxed_command("/bin/bash", spec)?,
        SpawnSandbox::Unsandboxed => lifeline::command("/bin/bash")?,
    };
    std_cmd
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(stderr))
        .env_clear()
        .envs(env.vars().iter().map(|(k, v)| (k, v)))
        .envs(FIXED_VARS.iter().copied())
        // The policy resolves `cd dir` from the working directory and treats `cd -` as
        // unknown: a CDPATH or an OLDPWD from elsewhere would send them elsewhere.
        .env_remove("CDPATH")
        .env("OLDPWD", cwd);
    if let SpawnSandbox::Sandboxed(spec) = sandbox {
        // The one temp directory a sandboxed command may write outside the workspace.
        std_cmd.env("TMPDIR", &spec.tmp_dir);
    }
    let mut cmd = Command::from(std_cmd);
    cmd.process_group(0).kill_on_drop(true);
    let child = cmd.spawn()?;
    // Close our copies of the write end so the pipe reaches EOF with the group.
    drop(cmd);
    let reader = pipe::Receiver::from_owned_fd(reader.into())?;
    Ok((reader, child))
}
