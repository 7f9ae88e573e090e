//! The `bash` tool: `/bin/bash -c command` in the workspace, in its own
//! process group with stdin from /dev/null. stdout and stderr share one pipe
//! (interleaved in arrival order), stream live as output chunks and are
//! capped. On timeout or cancel the whole group is SIGKILLed and the shell
//! reaped; when the shell exits, whatever it left in its group is killed too.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::Child;

use amber_exec::group::GroupGuard;

use super::args::Args;
use super::sandbox;
use super::truncate::CappedText;
use super::{Tool, ToolContext, ToolOutcome};
use amber_exec::spawn::spawn_shell;

/// How long to wait for the killed shell to be reaped.
const REAP_WAIT: Duration = Duration::from_millis(200);
/// How long to keep reading the pipe once the group is gone (a process that
/// left the group may still hold it open).
const DRAIN_WAIT: Duration = Duration::from_millis(100);
/// Room kept under the output cap for the closing `[exit code: N]` line.
const TRAILER_RESERVE: usize = 64;
/// Live streaming stops after this many times the output cap.
const STREAM_FACTOR: usize = 4;

pub struct BashTool;

impl Tool for BashTool {
    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        "Run a shell command with `/bin/bash -c` in the workspace (or `cwd` inside it). \
         stdin is /dev/null; stdout and stderr are captured together and capped. The command \
         is killed with its whole process group after `timeout_ms` (default 120000). \
         Background processes do not outlive the command; use the `process` tool for servers."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command line to run"},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Kill the command after this many milliseconds"},
                "cwd": {"type": "string", "description": "Working directory inside the workspace (default: the root)"},
                "sandbox": {"type": "boolean", "description": "false: run without the OS sandbox (only when a command failed because the sandbox refused a write or network access; always asks the user)"}
            },
            "required": ["command"]
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    fn runs_in_workspace(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            match run(&args, ctx).await {
                Ok(outcome) | Err(outcome) => outcome,
            }
        })
    }
}

/// How the command ended.
enum End {
    Exited(io::Result<ExitStatus>),
    Timeout,
    Cancelled,
}

async fn run(args: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolOutcome> {
    let args = Args::new("bash", args)?;
    let command = args.string("command")?;
    if command.trim().is_empty() {
        return Err(ToolOutcome::error(
            "invalid arguments for `bash`: `command` is empty",
        ));
    }
    let timeout = match args.opt_u64("timeout_ms")? {
        Some(0) => {
            return Err(ToolOutcome::error(
                "invalid arguments for `bash`: `timeout_ms` must be at least 1",
            ));
        }
        Some(ms) => Duration::from_millis(ms),
        None => ctx.limits.bash_default_timeout,
    };
    let cwd = match args.opt_string("cwd")? {
        Some(input) => {
            let dir = ctx.resolve(input)?;
            if !dir.is_dir() {
                return Err(ToolOutcome::error(format!(
                    "`cwd` `{}` is not a directory",
                    ctx.display(&dir)
                )));
            }
            dir
        }
        None => ctx.workspace.clone(),
    };

    let wants_unsandboxed = args.opt_bool("sandbox")? == Some(false);
    let session_sandbox = ctx.session.sandbox();
    let chosen = sandbox::choose(&session_sandbox, wants_unsandboxed, ctx.unsandboxed)
        .map_err(ToolOutcome::denied)?;
    let env = ctx.session.tool_env();
    // What the mounts cannot protect (names that do not exist yet) is checked around a
    // command that may write the workspace.
    let guarded = match chosen.spawn() {
        super::sandbox::SpawnSandbox::Sandboxed(spec) => super::git_guard::GitGuard::around(spec),
        super::sandbox::SpawnSandbox::Unsandboxed(_) => None,
    };
    let spawn = match &guarded {
        Some((_, spec)) => super::sandbox::SpawnSandbox::Sandboxed(spec),
        None => chosen.spawn(),
    };
    let origin = super::egress::EgressOrigin::of_call(ctx);
    let (egress, serving) = super::egress::link(&spawn, &ctx.session, origin)
        .map_err(ToolOutcome::error)?
        .map(|linked| (linked.child, linked.serving))
        .unzip();
    let (reader, mut child) = spawn_shell(command, &cwd, &env, spawn, egress)
        .map_err(|err| ToolOutcome::error(format!("failed to start /bin/bash: {err}")))?;
    let Some(pid) = child.id().and_then(|id| libc::pid_t::try_from(id).ok()) else {
        return Err(ToolOutcome::error(
            "failed to start /bin/bash: no process id",
        ));
    };
    // process_group(0): the shell leads a new group whose id is its pid.
    let group = GroupGuard::new(pid, ctx.session.session_id());
    let mut sink = Sink::new(ctx);
    let end = supervise(&mut child, reader, &group, &mut sink, ctx, timeout).await;
    let mut body = sink.finish();
    if let Some(check) = chosen.refusal_check() {
        check.append_note(command, &mut body);
    }
    if let Some(note) = guarded.and_then(|(guard, _)| guard.after()) {
        body.push_str(&note);
    }
    if let Some(note) = serving.as_ref().and_then(|serving| serving.note()) {
        body.push_str(&note);
    }
    Ok(finish(end, body, timeout))
}

/// Read the pipe until the shell has exited and the pipe is closed, or until
/// timeout or cancel; the group is killed in every case.
async fn supervise(
    child: &mut Child,
    mut reader: pipe::Receiver,
    group: &GroupGuard,
    sink: &mut Sink<'_>,
    ctx: &ToolContext,
    timeout: Duration,
) -> End {
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let drain = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(drain);
    let mut buf = vec![0u8; 16 * 1024];
    let mut status: Option<io::Result<ExitStatus>> = None;
    let mut eof = false;
    let end = loop {
        if eof && let Some(status) = status.take() {
            break End::Exited(status);
        }
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => break End::Cancelled,
            () = &mut deadline => break End::Timeout,
            read = reader.read(&mut buf), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => sink.push(&buf[..n]),
            },
            exited = child.wait(), if status.is_none() => {
                status = Some(exited);
                // Leftovers (`sleep 100 &`) must not hold the pipe or outlive the call.
                group.kill();
                drain.as_mut().reset(tokio::time::Instant::now() + DRAIN_WAIT);
            },
            () = &mut drain, if status.is_some() && !eof => eof = true,
        }
    };
    group.kill();
    if !matches!(end, End::Exited(_)) {
        if tokio::time::timeout(REAP_WAIT, child.wait()).await.is_err() {
            tracing::warn!(pid = group.pgid(), "bash: killed shell not reaped in time");
        }
        // Keep what was already written before the kill.
        let _ = tokio::time::timeout(DRAIN_WAIT, async {
            while let Ok(n) = reader.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.push(&buf[..n]);
            }
        })
        .await;
    }
    group.disarm();
    end
}

fn finish(end: End, body: String, timeout: Duration) -> ToolOutcome {
    let (ok, trailer) = match end {
        End::Exited(Ok(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => (code == 0, format!("[exit code: {code}]")),
            (None, Some(signal)) => (false, format!("[killed by signal {signal}]")),
            (None, None) => (false, "[exited]".to_owned()),
        },
        End::Exited(Err(err)) => (false, format!("[could not wait for the shell: {err}]")),
        End::Timeout => (
            false,
            format!("[killed: timeout after {} ms]", timeout.as_millis()),
        ),
        End::Cancelled => (false, "[cancelled]".to_owned()),
    };
    let mut output = body;
    if !output.is_empty() && !output.ends_with('\n') {
        output.push('\n');
    }
    output.push_str(&trailer);
    if ok {
        ToolOutcome::ok(output)
    } else {
        ToolOutcome::error(output)
    }
}

/// Decodes the byte stream as UTF-8 (across chunk boundaries), keeps a capped
/// copy for the model and streams it live.
struct Sink<'a> {
    ctx: &'a ToolContext,
    pending: Vec<u8>,
    captured: CappedText,
    streamed: usize,
    stream_cap: usize,
}

impl<'a> Sink<'a> {
    fn new(ctx: &'a ToolContext) -> Self {
        let max = ctx.limits.max_output_bytes;
        Self {
            ctx,
            pending: Vec::new(),
            captured: CappedText::new(max.saturating_sub(TRAILER_RESERVE)),
            streamed: 0,
            stream_cap: max.saturating_mul(STREAM_FACTOR),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        let text = decode(&mut self.pending, false);
        self.accept(text);
    }

    fn accept(&mut self, text: String) {
        if text.is_empty() {
            return;
        }
        self.captured.push(&text);
        if self.streamed < self.stream_cap {
            self.streamed += text.len();
            if self.streamed >= self.stream_cap {
                self.ctx.emit(format!(
                    "{text}\n… [live output stopped; the result keeps the tail]\n"
                ));
            } else {
                self.ctx.emit(text);
            }
        }
    }

    fn finish(mut self) -> String {
        let text = decode(&mut self.pending, true);
        self.accept(text);
        self.captured.finish()
    }
}

/// Take the decodable prefix of `pending` as text; invalid sequences become
/// U+FFFD, an incomplete sequence at the end waits for more bytes unless `eof`.
pub fn decode(pending: &mut Vec<u8>, eof: bool) -> String {
    let mut out = String::new();
    let mut consumed = 0;
    loop {
        match std::str::from_utf8(&pending[consumed..]) {
            Ok(text) => {
                out.push_str(text);
                consumed = pending.len();
                break;
            }
            Err(err) => {
                let valid = consumed + err.valid_up_to();
                out.push_str(&String::from_utf8_lossy(&pending[consumed..valid]));
                match err.error_len() {
                    Some(len) => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        consumed = valid + len;
                    }
                    None if eof => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        consumed = pending.len();
                        break;
                    }
                    None => {
                        consumed = valid;
                        break;
                    }
                }
            }
        }
    }
    pending.drain(..consumed);
    out
}
