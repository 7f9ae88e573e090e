//! Hooks: the user's own commands around tool calls and turns, from `[[hooks]]`
//! of `config.toml` and the workspace's `.amber/hooks.toml`.
//!
//! This module knows no session: it reads hook specs, runs hook processes (`process`),
//! reads their answers (`decision`), checks rewritten arguments (`schema`) and reads the
//! workspace's hooks file as a pinned version (`trust`; whether it is trusted is
//! `crate::trust`'s business). `session/hooks.rs` attaches it to a session: which hooks
//! apply, publishing `hook_failed`.
//!
//! **Invariants:** a `pre_tool_use` hook that fails in any way (crash, timeout, garbage,
//! invalid rewrite) denies the call — fail closed; every other event fails open. No hook
//! stalls a session: each is killed with its process group at its timeout, its output is
//! capped, and fire-and-forget events run in a background task.

pub mod decision;
pub mod input;
pub mod process;
pub mod schema;
pub mod spec;
pub mod trust;

#[cfg(test)]
mod tests;

use amber_proto::sync::RwLocked;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use decision::HookFailure;
pub use input::HookInput;
pub use process::HookEnv;
pub use spec::{HookEvent, HookOrigin, HookSpec, HooksFile};

/// The daemon's hooks state, shared by every session (`Services::hooks`): the config file's
/// hooks behind one cell a config reload replaces, and where hook inputs are written.
#[derive(Debug)]
pub struct Hooks {
    config: RwLock<Arc<[HookSpec]>>,
    scratch: PathBuf,
}

/// The config file's hooks, marked as the user's own.
fn users(mut hooks: Vec<HookSpec>) -> Vec<HookSpec> {
    for hook in &mut hooks {
        hook.origin = HookOrigin::UserConfig;
    }
    hooks
}

impl Hooks {
    /// `config`: `[[hooks]]` of config.toml (already checked by `Config::parse`).
    pub fn new(config: Vec<HookSpec>, data_dir: &Path) -> Hooks {
        Hooks {
            config: RwLock::new(users(config).into()),
            scratch: data_dir.join("hooks"),
        }
    }

    /// The config file's hooks in force now.
    pub fn config_hooks(&self) -> Arc<[HookSpec]> {
        Arc::clone(&self.config.read_locked())
    }

    /// A reloaded config's hooks: events from now on use these.
    pub fn replace_config_hooks(&self, hooks: Vec<HookSpec>) {
        *self.config.write_locked() = users(hooks).into();
    }

    /// The directory of hook input files.
    pub fn scratch(&self) -> &Path {
        &self.scratch
    }
}

/// One hook that failed, for `hook_failed` and the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    pub hook: HookSpec,
    pub reason: String,
}

/// The combined say of the `pre_tool_use` hooks about one call.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum PreToolVerdict {
    /// No hook decided: policy alone decides.
    #[default]
    NoOpinion,
    /// Skip the approval prompt policy would show (never a deny rule or read mode).
    Allow,
    /// Ask the user even where policy would allow.
    Ask(String),
    /// Deny the call; the reason is what the model sees.
    Deny(String),
}

/// What running the `pre_tool_use` hooks of one call came to.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PreToolOutcome {
    pub verdict: PreToolVerdict,
    /// The rewritten arguments, valid against the tool's schema.
    pub arguments: Option<Value>,
    pub failures: Vec<Failed>,
}

/// Runs `hooks` (the `pre_tool_use` hooks that apply) in order; each sees the arguments as
/// the ones before it left them. The first deny or failure ends it.
pub async fn pre_tool_use(
    hooks: &[HookSpec],
    mut input: HookInput,
    schema: &Value,
    env: &HookEnv,
    cancel: Option<&CancellationToken>,
) -> PreToolOutcome {
    let mut outcome = PreToolOutcome::default();
    let mut ask: Option<String> = None;
    let mut allow = false;
    for hook in hooks {
        if cancel.is_some_and(CancellationToken::is_cancelled) {
            outcome.verdict = PreToolVerdict::Deny(
                "the turn was cancelled before its pre_tool_use hooks finished".to_owned(),
            );
            return outcome;
        }
        let run = process::run(hook, &input.to_json(), env, cancel).await;
        let answer = match decision::pre_tool_use(&run, hook.timeout_ms) {
            Ok(answer) => answer,
            Err(failure) => {
                let reason = format!(
                    "a pre_tool_use hook ({}) failed, so the call is denied: {failure}",
                    describe(hook)
                );
                outcome.failures.push(Failed {
                    hook: hook.clone(),
                    reason: failure.to_string(),
                });
                outcome.verdict = PreToolVerdict::Deny(reason);
                return outcome;
            }
        };
        if answer.decision == Some(decision::Decision::Deny) {
            let reason = answer
                .reason
                .unwrap_or_else(|| "denied by a pre_tool_use hook".to_owned());
            outcome.verdict = PreToolVerdict::Deny(reason);
            return outcome;
        }
        if let Some(arguments) = answer.arguments {
            if let Err(err) = schema::check(&arguments, schema) {
                let why = format!("rewrote the arguments into an invalid shape ({err})");
                outcome.failures.push(Failed {
                    hook: hook.clone(),
                    reason: why.clone(),
                });
                outcome.verdict = PreToolVerdict::Deny(format!(
                    "a pre_tool_use hook ({}) {why}, so the call is denied",
                    describe(hook)
                ));
                return outcome;
            }
            input.arguments = Some(arguments.clone());
            outcome.arguments = Some(arguments);
        }
        match answer.decision {
            Some(decision::Decision::Ask) => {
                ask.get_or_insert_with(|| {
                    answer
                        .reason
                        .unwrap_or_else(|| "a pre_tool_use hook asks".to_owned())
                });
            }
            Some(decision::Decision::Allow) => allow = true,
            _ => {}
        }
    }
    outcome.verdict = match (ask, allow) {
        (Some(reason), _) => PreToolVerdict::Ask(reason),
        (None, true) => PreToolVerdict::Allow,
        (None, false) => PreToolVerdict::NoOpinion,
    };
    outcome
}

/// What the `user_prompt` hooks said about a prompt.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PromptOutcome {
    /// `Some(reason)`: the prompt does not start its turn.
    pub blocked: Option<String>,
    /// What the hooks add to the turn's model input, in hook order.
    pub context: Vec<String>,
    pub failures: Vec<Failed>,
}

/// Runs `hooks` (the `user_prompt` hooks) in order; the first block ends it. Failures are
/// collected and otherwise ignored (fail open).
pub async fn user_prompt(
    hooks: &[HookSpec],
    input: &HookInput,
    env: &HookEnv,
    cancel: Option<&CancellationToken>,
) -> PromptOutcome {
    let mut outcome = PromptOutcome::default();
    let json = input.to_json();
    for hook in hooks {
        // A cancelled turn does not start; its remaining hooks need not run.
        if cancel.is_some_and(CancellationToken::is_cancelled) {
            break;
        }
        let run = process::run(hook, &json, env, cancel).await;
        match decision::user_prompt(&run, hook.timeout_ms) {
            Ok(answer) => {
                if let Some(context) = answer.additional_context.filter(|c| !c.trim().is_empty()) {
                    outcome.context.push(context);
                }
                if answer.blocked.is_some() {
                    outcome.blocked = answer.blocked;
                    return outcome;
                }
            }
            Err(failure) => outcome.failures.push(Failed {
                hook: hook.clone(),
                reason: failure.to_string(),
            }),
        }
    }
    outcome
}

/// Runs fire-and-forget `hooks` one after another; returns the ones that failed.
pub async fn fire_and_forget(hooks: &[HookSpec], input: &HookInput, env: &HookEnv) -> Vec<Failed> {
    let json = input.to_json();
    let mut failures = Vec::new();
    for hook in hooks {
        let run = process::run(hook, &json, env, None).await;
        if let Err(failure) = decision::fire_and_forget(&run, hook.timeout_ms) {
            failures.push(Failed {
                hook: hook.clone(),
                reason: failure.to_string(),
            });
        }
    }
    failures
}

/// A hook as messages name it: its command line, shortened.
pub fn describe(hook: &HookSpec) -> String {
    let line = hook.command.join(" ");
    if line.chars().count() <= 80 {
        return line;
    }
    let head: String = line.chars().take(77).collect();
    format!("{head}…")
}
