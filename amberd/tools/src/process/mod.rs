//! The `process` tool: background processes owned by the session — `start`
//! a command, `list` them, read new `output`, `kill` one. The processes live
//! in the session's [`ProcessTable`] and outlive the turn that started them.

mod ring;
mod table;

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};

pub use table::{
    KILL_GRACE, MAX_ENTRIES, MAX_RUNNING, OutputRead, ProcessError, ProcessInfo, ProcessState,
    ProcessTable, RING_BYTES,
};

use super::args::Args;
use super::sandbox::append_line;
use super::truncate::truncate_middle;
use super::{Tool, ToolContext, ToolOutcome};

/// Room kept under the output cap for the header lines.
const HEADER_RESERVE: usize = 512;

pub struct ProcessTool;

impl Tool for ProcessTool {
    fn name(&self) -> &str {
        "process"
    }

    fn description(&self) -> &str {
        "Manage background processes of this session (servers, watchers, long builds). \
         `start` runs `command` with `/bin/bash -c` in the workspace (or `cwd` inside it) and \
         returns its id; `list` shows every process with its state; `output` returns what \
         process `id` printed since the last `output` call (stdout and stderr together; only \
         the newest 256 KiB are kept); `kill` terminates process `id` with its whole process \
         group. Processes keep running across turns until killed or the session ends."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["start", "list", "output", "kill"], "description": "What to do"},
                "command": {"type": "string", "description": "start: the bash command line to run"},
                "cwd": {"type": "string", "description": "start: working directory inside the workspace (default: the root)"},
                "sandbox": {"type": "boolean", "description": "start: false runs the command without the OS sandbox (always asks the user)"},
                "id": {"type": "string", "description": "output, kill: the process id returned by start (p1, p2, …)"}
            },
            "required": ["action"]
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    fn runs_in_workspace(&self) -> bool {
        true
    }

    /// Only starting a process runs anything; list, output and kill change no file.
    fn may_change_files(&self, args: &Value) -> bool {
        args.get("action").and_then(Value::as_str) == Some("start")
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            match run(&args, ctx).await {
                Ok(outcome) | Err(outcome) => outcome,
            }
        })
    }
}

fn invalid(message: &str) -> ToolOutcome {
    ToolOutcome::error(format!("invalid arguments for `process`: {message}"))
}

fn failed(err: ProcessError) -> ToolOutcome {
    ToolOutcome::error(err.to_string())
}

async fn run(args: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolOutcome> {
    let args = Args::new("process", args)?;
    let table = &ctx.session.processes;
    match args.string("action")? {
        "start" => start(&args, ctx),
        "list" => Ok(ToolOutcome::ok(render_list(&table.list()))),
        "output" => {
            let id = id_arg(&args)?;
            let read = table.output(id).map_err(failed)?;
            Ok(ToolOutcome::ok(render_output(&read, ctx)))
        }
        "kill" => {
            let id = id_arg(&args)?;
            let was_running = table
                .list()
                .iter()
                .any(|p| p.id == id && p.state.is_running());
            let info = table.kill(id).await.map_err(failed)?;
            let verb = if was_running {
                "killed"
            } else {
                "was not running"
            };
            Ok(ToolOutcome::ok(format!(
                "{} {verb}: {} (pid {}, ran {})",
                info.id,
                info.state,
                info.pid,
                human(info.uptime)
            )))
        }
        other => Err(invalid(&format!(
            "`action` must be one of start, list, output, kill; got `{other}`"
        ))),
    }
}

fn id_arg<'a>(args: &Args<'a>) -> Result<&'a str, ToolOutcome> {
    let id = args.string("id")?.trim();
    if id.is_empty() {
        return Err(invalid("`id` is empty"));
    }
    Ok(id)
}

fn start(args: &Args<'_>, ctx: &ToolContext) -> Result<ToolOutcome, ToolOutcome> {
    let command = args.string("command")?;
    if command.trim().is_empty() {
        return Err(invalid("`command` is empty"));
    }
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
    let chosen = super::sandbox::choose(&ctx.session.sandbox(), wants_unsandboxed, ctx.unsandboxed)
        .map_err(ToolOutcome::denied)?;
    let origin = super::egress::EgressOrigin::of_call(ctx);
    let info = ctx
        .session
        .processes
        .start(
            command,
            &cwd,
            &ctx.session.tool_env(),
            ctx.session.session_id(),
            chosen.spawn(),
            |spawn| super::egress::link(spawn, &ctx.session, origin),
        )
        .map_err(failed)?;
    Ok(ToolOutcome::ok(format!(
        "started {id} (pid {pid}): {command}\nRead its output with action `output`, id `{id}`; \
         stop it with action `kill`.",
        id = info.id,
        pid = info.pid,
        command = one_line(&info.command),
    )))
}

fn render_list(processes: &[ProcessInfo]) -> String {
    if processes.is_empty() {
        return "no background processes".to_owned();
    }
    let mut out = String::new();
    for p in processes {
        let time = if p.state.is_running() {
            format!("up {}", human(p.uptime))
        } else {
            format!("ran {}", human(p.uptime))
        };
        let refused = if p.sandbox_refused {
            "  [sandbox refused an access: see its output]"
        } else {
            ""
        };
        out.push_str(&format!(
            "{}  pid {}  {}  {}  {}{refused}\n",
            p.id,
            p.pid,
            p.state,
            time,
            one_line(&p.command)
        ));
    }
    out.pop();
    out
}

fn render_output(read: &OutputRead, ctx: &ToolContext) -> String {
    let info = &read.info;
    let mut out = format!("{} (pid {}): {}", info.id, info.pid, info.state);
    if info.state.is_running() {
        out.push_str(&format!(", up {}", human(info.uptime)));
    }
    out.push('\n');
    if read.dropped > 0 {
        out.push_str(&format!(
            "[{} bytes of older output were dropped: only the newest {} KiB are kept]\n",
            read.dropped,
            RING_BYTES / 1024
        ));
    }
    if read.text.is_empty() {
        out.push_str("(no new output)");
    } else {
        // The note, like the header, is kept whole: the text makes room for it.
        let note = read.note.as_ref().map_or(0, |n| n.len() + 1);
        let max = ctx
            .limits
            .max_output_bytes
            .saturating_sub(HEADER_RESERVE + note);
        out.push_str(&truncate_middle(&read.text, max));
    }
    if let Some(note) = &read.note {
        append_line(&mut out, note);
    }
    out
}

/// A command shown on one line.
fn one_line(command: &str) -> String {
    let mut line = command.replace('\n', "⏎");
    if line.len() > 200 {
        let cut = line.floor_char_boundary(200);
        line.truncate(cut);
        line.push('…');
    }
    line
}

/// Whole seconds, humanly (`1h 2m 3s`).
fn human(duration: Duration) -> String {
    humantime::format_duration(Duration::from_secs(duration.as_secs())).to_string()
}
