//! A session's hooks (`hooks/` does the running): which hooks apply to an event — the
//! config file's, then the workspace's `.amber/hooks.toml` once trusted —, asking the user
//! to trust that file at the start of a turn, running the deciding events in line and the
//! others in the background, and a durable `hook_failed` for every failure.
//!
//! Trust: the first turn that finds an untrusted (new or changed) workspace hooks file asks
//! through the approval flow (tool `hooks`). `allow_once` trusts it for that turn,
//! `allow_session` for the session, `allow_always` remembers its hash in the data dir. A
//! denial, or no approver, leaves it untrusted: the file's hooks are skipped (and the next
//! turn asks again). Outside a turn (`session_started`) only an already trusted file runs.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, Weak};

use amber_proto::{Approval, Decision, EventKind, StopReason, ToolStatus};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::SessionShared;
use super::deps::Deps;
use super::gate::{Answer, request_approval};
use crate::hooks::trust::{self, WorkspaceHooks};
use crate::hooks::{
    self, Failed, HookEnv, HookEvent, HookInput, HookSpec, PreToolOutcome, PromptOutcome,
};
use crate::tools::gate::GateCall;

/// The tool name of the approval that asks to trust a workspace's hooks file.
pub const TRUST_TOOL: &str = "hooks";

/// Which versions of the workspace hooks file this session trusts beyond the trust store.
#[derive(Debug, Default)]
struct Trusted {
    /// `allow_session` answers: hashes trusted until the session ends.
    session: HashSet<String>,
    /// An `allow_once` answer: the hash trusted for the running turn.
    turn: Option<String>,
}

/// The hooks side of one session.
pub(crate) struct SessionHooks {
    /// The session itself, for the background tasks of fire-and-forget hooks.
    me: Weak<SessionShared>,
    trusted: Mutex<Trusted>,
}

impl SessionHooks {
    pub(crate) fn new(me: Weak<SessionShared>) -> SessionHooks {
        SessionHooks {
            me,
            trusted: Mutex::new(Trusted::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Trusted> {
        self.trusted.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn env(shared: &SessionShared, deps: &Deps) -> HookEnv {
        HookEnv {
            session_id: shared.id.clone(),
            workspace: shared.workspace.clone(),
            sandbox: shared.tools.sandbox(),
            env: shared.tools.tool_env(),
            scratch: deps.hooks.scratch().to_path_buf(),
        }
    }

    fn is_trusted(&self, deps: &Deps, file: &WorkspaceHooks) -> bool {
        {
            let trusted = self.lock();
            if trusted.turn.as_deref() == Some(file.hash.as_str())
                || trusted.session.contains(&file.hash)
            {
                return true;
            }
        }
        deps.hooks.trust.is_trusted(&file.path, &file.hash)
    }

    /// The hooks that run for `event` on `tool`: the config file's, then the trusted
    /// workspace file's (read again now, so an edit applies to the next event — and, being
    /// a new version, is untrusted until a turn asks).
    fn applicable(
        &self,
        shared: &SessionShared,
        deps: &Deps,
        event: HookEvent,
        tool: Option<&str>,
    ) -> Vec<HookSpec> {
        let mut hooks: Vec<HookSpec> = deps
            .hooks
            .config_hooks()
            .iter()
            .filter(|h| h.applies(event, tool))
            .cloned()
            .collect();
        match trust::read_workspace(&shared.workspace) {
            Ok(Some(file)) if file.hooks.iter().any(|h| h.applies(event, tool)) => {
                if self.is_trusted(deps, &file) {
                    hooks.extend(file.hooks.into_iter().filter(|h| h.applies(event, tool)));
                } else {
                    tracing::debug!(session = %shared.id, event = event.as_str(), "skipping the untrusted workspace hooks");
                }
            }
            Ok(_) => {}
            // Reported when a turn starts (`trust_for_turn`).
            Err(err) => tracing::debug!(session = %shared.id, %err, "skipping the workspace hooks"),
        }
        hooks
    }

    /// At the start of a turn: an untrusted workspace hooks file is put to the user.
    pub(crate) async fn trust_for_turn(
        &self,
        shared: &SessionShared,
        deps: &Deps,
        turn_id: &str,
        cancel: &CancellationToken,
    ) {
        self.lock().turn = None;
        let file = match trust::read_workspace(&shared.workspace) {
            Ok(Some(file)) if !file.hooks.is_empty() => file,
            Ok(_) => return,
            Err(err) => {
                report(
                    shared,
                    Some(turn_id),
                    HookEvent::UserPrompt,
                    &[],
                    format!("the workspace hooks are skipped: {err}"),
                    None,
                );
                return;
            }
        };
        if self.is_trusted(deps, &file) {
            return;
        }
        let commands: Vec<Value> = file
            .hooks
            .iter()
            .map(|h| json!({"event": h.event, "command": h.command, "matcher": h.matcher}))
            .collect();
        let approval = Approval {
            request_id: format!("apr_{}", uuid::Uuid::new_v4().simple()),
            call_id: format!("hooks_{}", &file.hash[..12.min(file.hash.len())]),
            tool: TRUST_TOOL.to_owned(),
            arguments: json!({
                "trust": file.path.display().to_string(),
                "hash": file.hash,
                "hooks": commands,
            }),
            reason: format!(
                "trust the workspace's hooks file {}? Its commands would run around this session's tool calls and turns",
                trust::WORKSPACE_FILE
            ),
            scope: format!("this version of {}", trust::WORKSPACE_FILE),
            unsandboxed: false,
            person_only: false,
        };
        let answer = request_approval(shared, deps, turn_id, cancel, approval, true).await;
        match answer {
            Answer::Decided(Decision::AllowOnce) => self.lock().turn = Some(file.hash),
            Answer::Decided(Decision::AllowSession) => {
                self.lock().session.insert(file.hash);
            }
            Answer::Decided(Decision::AllowAlways) => {
                if let Err(err) = deps.hooks.trust.remember(&file.path, &file.hash) {
                    tracing::warn!(%err, "cannot remember the trusted workspace hooks; trusted for this session");
                }
                self.lock().session.insert(file.hash);
            }
            Answer::Decided(Decision::Deny) => {
                tracing::info!(session = %shared.id, path = %file.path.display(), "workspace hooks not trusted (denied); skipped");
            }
            Answer::NoApprover | Answer::ApproverLeft | Answer::Cancelled => {
                tracing::info!(session = %shared.id, path = %file.path.display(), ?answer, "workspace hooks not trusted (nobody answered); skipped this turn");
            }
        }
    }

    /// Runs the `pre_tool_use` hooks of one call (in line; the gate waits).
    pub(crate) async fn pre_tool_use(
        &self,
        shared: &SessionShared,
        deps: &Deps,
        turn_id: &str,
        cancel: &CancellationToken,
        call: &GateCall<'_>,
    ) -> PreToolOutcome {
        let event = HookEvent::PreToolUse;
        let hooks = self.applicable(shared, deps, event, Some(&call.call.name));
        if hooks.is_empty() {
            return PreToolOutcome::default();
        }
        let mut input = HookInput::new(event, &shared.id, Some(turn_id), &shared.workspace);
        input.tool = Some(call.call.name.clone());
        input.arguments = Some(call.args.clone());
        let env = Self::env(shared, deps);
        let schema = call.tool.input_schema();
        let outcome = hooks::pre_tool_use(&hooks, input, &schema, &env, Some(cancel)).await;
        report_all(
            shared,
            Some(turn_id),
            event,
            &outcome.failures,
            Some(&call.call.id),
        );
        outcome
    }

    /// Runs the `user_prompt` hooks of a prompt (in line; the turn waits).
    pub(crate) async fn user_prompt(
        &self,
        shared: &SessionShared,
        deps: &Deps,
        turn_id: &str,
        cancel: &CancellationToken,
        prompt: &str,
    ) -> PromptOutcome {
        let event = HookEvent::UserPrompt;
        let hooks = self.applicable(shared, deps, event, None);
        if hooks.is_empty() {
            return PromptOutcome::default();
        }
        let mut input = HookInput::new(event, &shared.id, Some(turn_id), &shared.workspace);
        input.prompt = Some(prompt.to_owned());
        let env = Self::env(shared, deps);
        let outcome = hooks::user_prompt(&hooks, &input, &env, Some(cancel)).await;
        report_all(shared, Some(turn_id), event, &outcome.failures, None);
        outcome
    }

    /// `post_tool_use`, in the background. `result`: the status and the output as the model
    /// saw it (copied only when a hook applies).
    pub(crate) fn post_tool_use(
        &self,
        shared: &SessionShared,
        deps: &Deps,
        turn_id: &str,
        call: &amber_proto::ToolCall,
        arguments: &Value,
        (status, output): (ToolStatus, &str),
    ) {
        self.fire(
            shared,
            deps,
            HookEvent::PostToolUse,
            Some(&call.name),
            Some(&call.id),
            || {
                let mut input = HookInput::new(
                    HookEvent::PostToolUse,
                    &shared.id,
                    Some(turn_id),
                    &shared.workspace,
                );
                input.tool = Some(call.name.clone());
                input.arguments = Some(arguments.clone());
                input.result = Some(json!({"status": status, "output": output}));
                input
            },
        );
    }

    /// `turn_completed`, in the background.
    pub(crate) fn turn_completed(
        &self,
        shared: &SessionShared,
        deps: &Deps,
        turn_id: &str,
        stop: StopReason,
    ) {
        let event = HookEvent::TurnCompleted;
        self.fire(shared, deps, event, None, None, || {
            let mut input = HookInput::new(event, &shared.id, Some(turn_id), &shared.workspace);
            input.stop_reason = Some(stop);
            input
        });
    }

    /// `approval_requested`, in the background.
    pub(crate) fn approval_requested(
        &self,
        shared: &SessionShared,
        deps: &Deps,
        turn_id: &str,
        approval: &Approval,
    ) {
        let event = HookEvent::ApprovalRequested;
        let call_id = (!approval.call_id.is_empty()).then_some(approval.call_id.as_str());
        self.fire(shared, deps, event, Some(&approval.tool), call_id, || {
            let mut input = HookInput::new(event, &shared.id, Some(turn_id), &shared.workspace);
            input.tool = Some(approval.tool.clone());
            input.arguments = Some(approval.arguments.clone());
            input
        });
    }

    /// `session_started`, in the background (a new session; a restored one is not new).
    pub(crate) fn session_started(&self, shared: &SessionShared, deps: &Deps) {
        let event = HookEvent::SessionStarted;
        self.fire(shared, deps, event, None, None, || {
            HookInput::new(event, &shared.id, None, &shared.workspace)
        });
    }

    /// Runs the hooks of a fire-and-forget event in a background task: the caller only
    /// pays for reading the hooks files.
    fn fire(
        &self,
        shared: &SessionShared,
        deps: &Deps,
        event: HookEvent,
        tool: Option<&str>,
        call_id: Option<&str>,
        input: impl FnOnce() -> HookInput,
    ) {
        let hooks = self.applicable(shared, deps, event, tool);
        if hooks.is_empty() {
            return;
        }
        let Some(me) = self.me.upgrade() else {
            return;
        };
        let input = input();
        let env = Self::env(shared, deps);
        let call_id = call_id.map(str::to_owned);
        tokio::spawn(async move {
            let failures = hooks::fire_and_forget(&hooks, &input, &env).await;
            report_all(
                &me,
                input.turn_id.as_deref(),
                event,
                &failures,
                call_id.as_deref(),
            );
        });
    }
}

fn report_all(
    shared: &SessionShared,
    turn_id: Option<&str>,
    event: HookEvent,
    failures: &[Failed],
    call_id: Option<&str>,
) {
    for failed in failures {
        report(
            shared,
            turn_id,
            event,
            &failed.hook.command,
            failed.reason.clone(),
            call_id,
        );
    }
}

/// Logs a hook's failure and records it as a durable `hook_failed`.
fn report(
    shared: &SessionShared,
    turn_id: Option<&str>,
    event: HookEvent,
    command: &[String],
    reason: String,
    call_id: Option<&str>,
) {
    tracing::warn!(session = %shared.id, event = event.as_str(), ?command, %reason, "hook failed");
    shared.hub.publish(
        turn_id.filter(|t| !t.is_empty()),
        EventKind::HookFailed {
            hook_event: event.as_str().to_owned(),
            command: command.to_vec(),
            reason,
            tool_call_id: call_id.map(str::to_owned),
        },
    );
}
