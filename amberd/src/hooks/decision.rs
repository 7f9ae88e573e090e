//! What a finished hook said, read from its exit and stdout: pure, no I/O.
//!
//! - Exit 0 with empty stdout: no opinion. Exit 0 with a JSON object on stdout: its
//!   `decision` (`allow` | `deny` | `ask`), `reason`, `arguments` (pre_tool_use) and
//!   `additionalContext` (user_prompt).
//! - Exit 2 (pre_tool_use, user_prompt): blocked; the reason is the hook's stderr.
//! - Anything else — another exit code, a signal, a timeout, stdout that is not one JSON
//!   object, a field of the wrong type — is a [`HookFailure`]; the caller fails closed
//!   (pre_tool_use) or open (everything else).

use serde_json::{Map, Value};

use super::process::{Exit, HookRun, MAX_STDOUT};

/// Why a hook's run counts as failed (the `reason` of `hook_failed`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookFailure {
    #[error("could not start: {0}")]
    Spawn(String),
    #[error("timed out after {0} ms and was killed")]
    TimedOut(u64),
    #[error("cancelled with its turn")]
    Cancelled,
    #[error("exited with code {code}{stderr}")]
    Exit { code: i32, stderr: String },
    #[error("killed by signal {0}")]
    Signal(i32),
    #[error("printed more than {MAX_STDOUT} bytes on stdout")]
    TooMuchOutput,
    #[error("printed something that is not a JSON object on stdout: {0}")]
    Garbage(String),
    #[error("answered {0}")]
    BadAnswer(String),
}

/// A `decision` a hook may give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
    Ask,
}

/// What a `pre_tool_use` hook said about one call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PreToolAnswer {
    pub decision: Option<Decision>,
    pub reason: Option<String>,
    /// The call's new arguments (not with `deny`).
    pub arguments: Option<Value>,
}

/// What a `user_prompt` hook said about one prompt.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PromptAnswer {
    /// `Some(reason)`: the prompt is blocked.
    pub blocked: Option<String>,
    pub additional_context: Option<String>,
}

/// A run's failure, if it failed before its output mattered: how it ended, exit 2 aside
/// when `exit2_blocks`.
fn ended_badly(run: &HookRun, timeout_ms: u64, exit2_blocks: bool) -> Result<bool, HookFailure> {
    match &run.exit {
        Exit::Code(0) => Ok(false),
        Exit::Code(2) if exit2_blocks => Ok(true),
        Exit::Code(code) => Err(HookFailure::Exit {
            code: *code,
            stderr: stderr_note(&run.stderr),
        }),
        Exit::Signal(signal) => Err(HookFailure::Signal(*signal)),
        Exit::TimedOut => Err(HookFailure::TimedOut(timeout_ms)),
        Exit::Cancelled => Err(HookFailure::Cancelled),
        Exit::SpawnFailed(why) => Err(HookFailure::Spawn(why.clone())),
    }
}

fn stderr_note(stderr: &str) -> String {
    let text = short(stderr.trim(), 300);
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

/// The first `max` bytes of `text` (on a char boundary), with `…` when cut.
fn short(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The reason of a block by exit 2: stderr, or a default naming the hook.
fn block_reason(run: &HookRun, default: &str) -> String {
    let text = short(run.stderr.trim(), 2000);
    if text.is_empty() {
        default.to_owned()
    } else {
        text
    }
}

/// Stdout as a JSON object; `None` when it is empty.
fn stdout_object(run: &HookRun) -> Result<Option<Map<String, Value>>, HookFailure> {
    if run.stdout_truncated {
        return Err(HookFailure::TooMuchOutput);
    }
    let text = run.stdout.trim();
    if text.is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        _ => Err(HookFailure::Garbage(short(text, 200))),
    }
}

fn string_field(map: &Map<String, Value>, field: &str) -> Result<Option<String>, HookFailure> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(HookFailure::BadAnswer(format!(
            "`{field}` that is not a string"
        ))),
    }
}

fn decision_field(map: &Map<String, Value>) -> Result<Option<Decision>, HookFailure> {
    match string_field(map, "decision")?.as_deref() {
        None => Ok(None),
        Some("allow") => Ok(Some(Decision::Allow)),
        Some("deny" | "block") => Ok(Some(Decision::Deny)),
        Some("ask") => Ok(Some(Decision::Ask)),
        Some(other) => Err(HookFailure::BadAnswer(format!(
            "decision `{other}` (expected allow, deny or ask)"
        ))),
    }
}

/// A `pre_tool_use` hook's answer. `Err` means the call must be denied (fail closed).
pub fn pre_tool_use(run: &HookRun, timeout_ms: u64) -> Result<PreToolAnswer, HookFailure> {
    if ended_badly(run, timeout_ms, true)? {
        return Ok(PreToolAnswer {
            decision: Some(Decision::Deny),
            reason: Some(block_reason(run, "blocked by a pre_tool_use hook")),
            arguments: None,
        });
    }
    let Some(map) = stdout_object(run)? else {
        return Ok(PreToolAnswer::default());
    };
    let decision = decision_field(&map)?;
    let reason = string_field(&map, "reason")?;
    let arguments = match map.get("arguments") {
        None | Some(Value::Null) => None,
        Some(_) if decision == Some(Decision::Deny) => None,
        Some(value @ Value::Object(_)) => Some(value.clone()),
        Some(_) => {
            return Err(HookFailure::BadAnswer(
                "`arguments` that is not a JSON object".into(),
            ));
        }
    };
    Ok(PreToolAnswer {
        decision,
        reason,
        arguments,
    })
}

/// A `user_prompt` hook's answer. `Err` is logged and ignored (fail open).
pub fn user_prompt(run: &HookRun, timeout_ms: u64) -> Result<PromptAnswer, HookFailure> {
    if ended_badly(run, timeout_ms, true)? {
        return Ok(PromptAnswer {
            blocked: Some(block_reason(run, "blocked by a user_prompt hook")),
            additional_context: None,
        });
    }
    let Some(map) = stdout_object(run)? else {
        return Ok(PromptAnswer::default());
    };
    let decision = decision_field(&map)?;
    let reason = string_field(&map, "reason")?;
    let additional_context = string_field(&map, "additionalContext")?;
    let blocked = (decision == Some(Decision::Deny))
        .then(|| reason.unwrap_or_else(|| "blocked by a user_prompt hook".to_owned()));
    Ok(PromptAnswer {
        blocked,
        additional_context,
    })
}

/// A fire-and-forget hook's run: only how it ended counts (its stdout is not read).
pub fn fire_and_forget(run: &HookRun, timeout_ms: u64) -> Result<(), HookFailure> {
    ended_badly(run, timeout_ms, false).map(|_| ())
}
