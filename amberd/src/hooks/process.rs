//! Running one hook: its program in its own process group, in the session's workspace and
//! OS sandbox, with the tool environment, the input JSON as stdin (a file the daemon writes
//! and removes), stdout and stderr read apart and capped. At its timeout, or when the
//! caller's token is cancelled, the whole group is killed; when the program exits, whatever
//! it left in its group is killed too. Nothing here waits longer than the timeout plus a
//! short drain.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use super::HookSpec;
use amber_exec::child::{ChildInput, ChildSpec, Unsandboxed};
use amber_exec::containment::SpawnSandbox;
use amber_exec::env_policy::ToolEnv;
use amber_exec::group::GroupGuard;
use amber_tools::sandbox::ToolSandbox;

/// At most this much of a hook's stdout is kept (a decision is small; the rest is read and
/// dropped so the hook never blocks on a full pipe).
pub const MAX_STDOUT: usize = 64 * 1024;
/// At most this much of its stderr (a deny reason, an error message).
pub const MAX_STDERR: usize = 8 * 1024;
/// How long to wait for the pipes to close once the group is gone.
const DRAIN_WAIT: Duration = Duration::from_millis(500);
/// How long to wait for a killed program to be reaped.
const REAP_WAIT: Duration = Duration::from_secs(2);

/// Where and how a session's hooks run.
#[derive(Debug, Clone)]
pub struct HookEnv {
    pub session_id: String,
    /// The working directory of every hook.
    pub workspace: PathBuf,
    /// The session's sandbox: hooks start in it when it is on. When the kernel cannot
    /// sandbox (`Unavailable`) they run without it, as the user's own commands.
    pub sandbox: ToolSandbox,
    pub env: Arc<ToolEnv>,
    /// A private directory of the daemon for the input files.
    pub scratch: PathBuf,
}

/// How a hook's process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Killed at its timeout.
    TimedOut,
    /// Killed because the turn was cancelled.
    Cancelled,
    /// It never ran.
    SpawnFailed(String),
}

/// What one run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRun {
    pub exit: Exit,
    pub stdout: String,
    /// Stdout was longer than [`MAX_STDOUT`]; `stdout` is its head.
    pub stdout_truncated: bool,
    pub stderr: String,
}

impl HookRun {
    fn failed(exit: Exit) -> HookRun {
        HookRun {
            exit,
            stdout: String::new(),
            stdout_truncated: false,
            stderr: String::new(),
        }
    }
}

/// Runs `hook` with `input` on its stdin.
pub async fn run(
    hook: &HookSpec,
    input: &str,
    env: &HookEnv,
    cancel: Option<&CancellationToken>,
) -> HookRun {
    let file = match write_input(&env.scratch, input).await {
        Ok(file) => file,
        Err(err) => {
            return HookRun::failed(Exit::SpawnFailed(format!(
                "cannot write its input under {}: {err}",
                env.scratch.display()
            )));
        }
    };
    let run = spawn_and_wait(hook, &file, env, cancel).await;
    if let Err(err) = tokio::fs::remove_file(&file).await
        && err.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(path = %file.display(), %err, "cannot remove a hook's input file");
    }
    run
}

async fn write_input(scratch: &Path, input: &str) -> io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let scratch = scratch.to_path_buf();
    let input = input.to_owned();
    tokio::task::spawn_blocking(move || {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&scratch)?;
        let path = scratch.join(format!("in-{}.json", uuid::Uuid::new_v4().simple()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        io::Write::write_all(&mut file, input.as_bytes())?;
        Ok(path)
    })
    .await
    .map_err(io::Error::other)?
}

async fn spawn_and_wait(
    hook: &HookSpec,
    stdin_file: &Path,
    env: &HookEnv,
    cancel: Option<&CancellationToken>,
) -> HookRun {
    let Some((program, args)) = hook.command.split_first() else {
        return HookRun::failed(Exit::SpawnFailed("its command is empty".into()));
    };
    // The user's own hook runs as the user's command; a workspace's, in the session's sandbox.
    let sandbox = match hook.runs_as_user() {
        true => &ToolSandbox::Off,
        false => &env.sandbox,
    };
    // Taken before it starts: what the hook plants that the mounts cannot protect.
    let (git_guard, guarded_spec) = match sandbox {
        ToolSandbox::On(spec) => amber_tools::git_guard::GitGuard::around(spec)
            .map_or((None, None), |(guard, spec)| (Some(guard), Some(spec))),
        ToolSandbox::Off | ToolSandbox::Unavailable { .. } => (None, None),
    };
    let contained = match sandbox {
        ToolSandbox::On(spec) => SpawnSandbox::Sandboxed(guarded_spec.as_ref().unwrap_or(spec)),
        // The user's own configuration (or, without a kernel sandbox, a trusted
        // repository's, which was trusted knowing that).
        ToolSandbox::Off | ToolSandbox::Unavailable { .. } => {
            SpawnSandbox::Unsandboxed(Unsandboxed::configured_by_user())
        }
    };
    let made = ChildSpec::new(program, contained)
        .args(args)
        .cwd(&env.workspace)
        .envs(env.env.vars().iter().map(|(k, v)| (k, v)))
        .env("AMBER_SESSION_ID", &env.session_id)
        .stdin(ChildInput::File(stdin_file.to_owned()))
        .tokio_command();
    let mut cmd = match made {
        Ok(cmd) => cmd,
        Err(err) => return HookRun::failed(Exit::SpawnFailed(err.to_string())),
    };
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(err) => return HookRun::failed(Exit::SpawnFailed(format!("{program}: {err}"))),
    };
    drop(cmd);
    let Some(pid) = child.id().and_then(|id| libc::pid_t::try_from(id).ok()) else {
        return HookRun::failed(Exit::SpawnFailed(format!("{program}: no process id")));
    };
    let group = GroupGuard::new(pid, &env.session_id);
    let stdout = child
        .stdout
        .take()
        .map(|out| tokio::spawn(read_capped(out, MAX_STDOUT)));
    let stderr = child
        .stderr
        .take()
        .map(|err| tokio::spawn(read_capped(err, MAX_STDERR)));
    let never = CancellationToken::new();
    let cancel = cancel.unwrap_or(&never);
    let exit = tokio::select! {
        biased;
        () = cancel.cancelled() => Exit::Cancelled,
        () = tokio::time::sleep(Duration::from_millis(hook.timeout_ms)) => Exit::TimedOut,
        status = child.wait() => match status {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                match (status.code(), status.signal()) {
                    (Some(code), _) => Exit::Code(code),
                    (None, Some(signal)) => Exit::Signal(signal),
                    (None, None) => Exit::Signal(0),
                }
            }
            Err(err) => Exit::SpawnFailed(format!("cannot wait for it: {err}")),
        },
    };
    // Leftovers (`sleep 100 &`) must not outlive the hook or hold its pipes.
    group.kill();
    if let Some(note) = git_guard.and_then(|guard| guard.after()) {
        tracing::warn!(hook = %program, "a hook planted what git would run:{note}");
    }
    if matches!(exit, Exit::TimedOut | Exit::Cancelled)
        && tokio::time::timeout(REAP_WAIT, child.wait()).await.is_err()
    {
        tracing::warn!(pid, "hook: killed program not reaped in time");
    }
    group.disarm();
    let (stdout, stdout_truncated) = drained(stdout).await;
    let (stderr, _) = drained(stderr).await;
    HookRun {
        exit,
        stdout,
        stdout_truncated,
        stderr,
    }
}

type Reader = tokio::task::JoinHandle<(Vec<u8>, bool)>;

/// What a reader task read, waiting at most [`DRAIN_WAIT`] for the pipe to close.
async fn drained(reader: Option<Reader>) -> (String, bool) {
    let Some(mut reader) = reader else {
        return (String::new(), false);
    };
    match tokio::time::timeout(DRAIN_WAIT, &mut reader).await {
        Ok(Ok((bytes, truncated))) => (String::from_utf8_lossy(&bytes).into_owned(), truncated),
        Ok(Err(_)) => (String::new(), false),
        Err(_) => {
            reader.abort();
            (String::new(), false)
        }
    }
}

/// Reads to EOF, keeping the first `cap` bytes; the bool says whether more came.
async fn read_capped(mut pipe: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, truncated)
}
