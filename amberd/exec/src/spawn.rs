//! Spawning a tool shell (`bash` calls, `process` background commands, an executor's
//! processes): `/bin/bash -c command` in `cwd`, in a new process group led by the shell, stdin
//! from /dev/null (or a pipe, [`spawn_shell_piped`]),
//! stdout and stderr into one pipe, with exactly the environment of [`ToolEnv`] plus what
//! every tool shell gets, and guarded by the daemon's lifeline (`lifeline`).

use std::io;
use std::path::Path;
use std::process::Stdio;

use tokio::net::unix::pipe;
use tokio::process::Child;

use crate::child::{ChildInput, ChildSpec};
use crate::containment::SpawnSandbox;
use crate::egress::ChildEnd;
use crate::env_policy::ToolEnv;

/// Set for every tool shell after the policy: nothing may wait on a pager or a prompt.
const FIXED_VARS: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// Spawns the shell; returns the read end of its output pipe and the child (the shell,
/// whose pid is the group id).
/// `egress`: the helper's end of the egress link when the sandbox's network is an allowlist.
pub fn spawn_shell(
    command: &str,
    cwd: &Path,
    env: &ToolEnv,
    sandbox: SpawnSandbox<'_>,
    egress: Option<ChildEnd>,
) -> io::Result<(pipe::Receiver, Child)> {
    spawn_shell_with(command, cwd, env, sandbox, ChildInput::Null, egress)
}

/// [`spawn_shell`] with a pipe for the shell's stdin (`Child::stdin`): an executor's client
/// writes to it.
pub fn spawn_shell_piped(
    command: &str,
    cwd: &Path,
    env: &ToolEnv,
    sandbox: SpawnSandbox<'_>,
    egress: Option<ChildEnd>,
) -> io::Result<(pipe::Receiver, Child)> {
    spawn_shell_with(command, cwd, env, sandbox, ChildInput::Piped, egress)
}

fn spawn_shell_with(
    command: &str,
    cwd: &Path,
    env: &ToolEnv,
    sandbox: SpawnSandbox<'_>,
    stdin: ChildInput,
    egress: Option<ChildEnd>,
) -> io::Result<(pipe::Receiver, Child)> {
    let (reader, writer) = io::pipe()?;
    let stderr = writer.try_clone()?;
    // The policy resolves `cd dir` from the working directory and treats `cd -` as
    // unknown: a CDPATH or an OLDPWD from elsewhere would send them elsewhere.
    let vars = env.vars().iter().filter(|(k, _)| k != "CDPATH");
    let mut shell = ChildSpec::new("/bin/bash", sandbox);
    if let Some(end) = egress {
        shell = shell.egress(end);
    }
    let mut cmd = shell
        .arg("-c")
        .arg(command)
        .cwd(cwd)
        .envs(vars.map(|(k, v)| (k, v)))
        .envs(FIXED_VARS.iter().copied())
        .env("OLDPWD", cwd)
        .stdin(stdin)
        .tokio_command()?;
    cmd.stdout(Stdio::from(writer)).stderr(Stdio::from(stderr));
    let child = cmd.spawn()?;
    // Close our copies of the write end so the pipe reaches EOF with the group.
    drop(cmd);
    let reader = pipe::Receiver::from_owned_fd(reader.into())?;
    Ok((reader, child))
}
