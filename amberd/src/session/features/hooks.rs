//! A session's hooks (`hooks/` does the running): which hooks apply to an event — the
//! config file's, then the workspace's `.amber/hooks.toml` once that version is trusted
//! (`session/trust.rs` asks at the start of a turn) —, running the deciding events in line
//! and the others in the background, and a durable `hook_failed` for every failure.

use std::sync::{Arc, Weak};

use amber_proto::{Approval, EventKind, StopReason, ToolStatus};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::hooks::trust;
use crate::hooks::{
    self, Failed, HookEnv, HookEvent, HookInput, HookSpec, Hooks, PreToolOutcome, PromptOutcome,
};
use amber_tools::gate::GateCall;
use futures::future::BoxFuture;

use crate::hooks::PreToolVerdict;
use crate::session::SessionShared;
use crate::session::feature::{
    Admission, AdvisedVerdict, Attach, Feature, SessionFeature, ToolAdvice, ToolRan, Turn,
    TurnStart,
};
use crate::session::services::Services;

/// The hooks side of one session.
pub(crate) struct SessionHooks {
    /// The session itself, for the background tasks of fire-and-forget hooks.
    me: Weak<SessionShared>,
    services: Arc<Services>,
    /// The config file's hooks and the scratch directory (the feature's).
    hooks: Arc<Hooks>,
}

impl SessionHooks {
    pub(crate) fn new(
        me: Weak<SessionShared>,
        services: Arc<Services>,
        hooks: Arc<Hooks>,
    ) -> SessionHooks {
        SessionHooks {
            me,
            services,
            hooks,
        }
    }

    fn env(&self, shared: &SessionShared) -> HookEnv {
        HookEnv {
            session_id: shared.id.clone(),
            workspace: shared.workspace.clone(),
            sandbox: shared.tools.sandbox(),
            env: shared.tools.tool_env(),
            scratch: self.hooks.scratch().to_path_buf(),
        }
    }

    /// The hooks that run for `event` on `tool`: the config file's, then the trusted
    /// workspace file's (read again now, so an edit applies to the next event — and, being
    /// a new version, is untrusted until a turn asks).
    fn applicable(
        &self,
        shared: &SessionShared,
        services: &Services,
        event: HookEvent,
        tool: Option<&str>,
    ) -> Vec<HookSpec> {
        let mut hooks: Vec<HookSpec> = self
            .hooks
            .config_hooks()
            .iter()
            .filter(|h| h.applies(event, tool))
            .cloned()
            .collect();
        match trust::read_workspace(&shared.workspace) {
            Ok(Some(file)) if file.hooks.iter().any(|h| h.applies(event, tool)) => {
                if shared.trust.is_trusted(services, &file.path, &file.hash) {
                    hooks.extend(file.hooks.into_iter().filter(|h| h.applies(event, tool)));
                } else {
                    tracing::debug!(session = %shared.id, event = event.as_str(), "skipping the untrusted workspace hooks");
                }
            }
            Ok(_) => {}
            // Reported when a turn starts (`report_unusable`).
            Err(err) => tracing::debug!(session = %shared.id, %err, "skipping the workspace hooks"),
        }
        hooks
    }

    /// At the start of a turn: a workspace hooks file that cannot be used is reported
    /// (whether a usable one is trusted is asked by `session/trust.rs`).
    pub(crate) fn report_unusable(&self, shared: &SessionShared, turn_id: &str) {
        if let Err(err) = trust::read_workspace(&shared.workspace) {
            report(
                shared,
                Some(turn_id),
                HookEvent::UserPrompt,
                &[],
                format!("the workspace hooks are skipped: {err}"),
                None,
            );
        }
    }

    /// Runs the `pre_tool_use` hooks of one call (in line; the gate waits).
    pub(crate) async fn pre_tool_use(
        &self,
        shared: &SessionShared,
        services: &Services,
        turn_id: &str,
        cancel: &CancellationToken,
        call: &GateCall<'_>,
    ) -> PreToolOutcome {
        let event = HookEvent::PreToolUse;
        let hooks = self.applicable(shared, services, event, Some(&call.call.name));
        if hooks.is_empty() {
            return PreToolOutcome::default();
        }
        let mut input = HookInput::new(event, &shared.id, Some(turn_id), &shared.workspace);
        input.tool = Some(call.call.name.clone());
        input.arguments = Some(call.args.clone());
        let env = self.env(shared);
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
        services: &Services,
        turn_id: &str,
        cancel: &CancellationToken,
        prompt: &str,
    ) -> PromptOutcome {
        let event = HookEvent::UserPrompt;
        let hooks = self.applicable(shared, services, event, None);
        if hooks.is_empty() {
            return PromptOutcome::default();
        }
        let mut input = HookInput::new(event, &shared.id, Some(turn_id), &shared.workspace);
        input.prompt = Some(prompt.to_owned());
        let env = self.env(shared);
        let outcome = hooks::user_prompt(&hooks, &input, &env, Some(cancel)).await;
        report_all(shared, Some(turn_id), event, &outcome.failures, None);
        outcome
    }

    /// `post_tool_use`, in the background. `result`: the status and the output as the model
    /// saw it (copied only when a hook applies).
    pub(crate) fn post_tool_use(
        &self,
        shared: &SessionShared,
        services: &Services,
        turn_id: &str,
        call: &amber_proto::ToolCall,
        arguments: &Value,
        (status, output): (ToolStatus, &str),
    ) {
        self.fire(
            shared,
            services,
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
        services: &Services,
        turn_id: &str,
        stop: StopReason,
    ) {
        let event = HookEvent::TurnCompleted;
        self.fire(shared, services, event, None, None, || {
            let mut input = HookInput::new(event, &shared.id, Some(turn_id), &shared.workspace);
            input.stop_reason = Some(stop);
            input
        });
    }

    /// `approval_requested`, in the background.
    pub(crate) fn on_approval_requested(
        &self,
        shared: &SessionShared,
        services: &Services,
        turn_id: &str,
        approval: &Approval,
    ) {
        let event = HookEvent::ApprovalRequested;
        let call_id = (!approval.call_id.is_empty()).then_some(approval.call_id.as_str());
        self.fire(
            shared,
            services,
            event,
            Some(&approval.tool),
            call_id,
            || {
                let mut input = HookInput::new(event, &shared.id, Some(turn_id), &shared.workspace);
                input.tool = Some(approval.tool.clone());
                input.arguments = Some(approval.arguments.clone());
                input
            },
        );
    }

    /// `session_started`, in the background (a new session; a restored one is not new).
    pub(crate) fn session_started(&self, shared: &SessionShared, services: &Services) {
        let event = HookEvent::SessionStarted;
        self.fire(shared, services, event, None, None, || {
            HookInput::new(event, &shared.id, None, &shared.workspace)
        });
    }

    /// Runs the hooks of a fire-and-forget event in a background task: the caller only
    /// pays for reading the hooks files.
    fn fire(
        &self,
        shared: &SessionShared,
        services: &Services,
        event: HookEvent,
        tool: Option<&str>,
        call_id: Option<&str>,
        input: impl FnOnce() -> HookInput,
    ) {
        let hooks = self.applicable(shared, services, event, tool);
        if hooks.is_empty() {
            return;
        }
        let Some(me) = self.me.upgrade() else {
            return;
        };
        let input = input();
        let env = self.env(shared);
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

/// The error code of a prompt a `user_prompt` hook blocked.
pub(crate) const HOOK_DENIED: &str = "hook_denied";

/// The feature: the config file's `[[hooks]]` and the workspace's trusted hooks file, run
/// at a session's fixed points.
pub(crate) struct HooksFeature {
    /// `[[hooks]]` of the config file (replaced whole by a config reload) and the hooks'
    /// scratch directory.
    hooks: Arc<Hooks>,
}

impl HooksFeature {
    pub(crate) fn new(config: &crate::config::Config, data_dir: &std::path::Path) -> HooksFeature {
        HooksFeature {
            hooks: Arc::new(Hooks::new(config.hooks.clone(), data_dir)),
        }
    }
}

impl Feature for HooksFeature {
    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        Some(Arc::new(SessionHooks::new(
            session.session.clone(),
            session.services.clone(),
            self.hooks.clone(),
        )))
    }

    /// A reloaded config's `[[hooks]]`: events from now on use these.
    fn config_replaced(&self, config: &crate::config::Config) {
        self.hooks.replace_config_hooks(config.hooks.clone());
    }
}

impl SessionFeature for SessionHooks {
    /// `session_started` fires for a new session; a restored one is not new.
    fn started(&self, shared: &Arc<SessionShared>, restored: bool) {
        if !restored {
            self.session_started(shared, &self.services);
        }
    }

    /// A workspace hooks file that cannot be used is reported, then the `user_prompt`
    /// hooks run: they may block the prompt or add to the turn's input.
    fn before_turn<'a>(&'a self, start: &'a TurnStart<'a>) -> BoxFuture<'a, Admission> {
        Box::pin(async move {
            let turn = &start.turn;
            self.report_unusable(turn.shared, turn.turn_id);
            let prompted = self
                .user_prompt(
                    turn.shared,
                    turn.services,
                    turn.turn_id,
                    turn.cancel,
                    start.prompt,
                )
                .await;
            if let Some(reason) = prompted.blocked {
                return Admission::Blocked {
                    code: HOOK_DENIED,
                    reason: format!("a user_prompt hook blocked this prompt: {reason}"),
                };
            }
            if prompted.context.is_empty() {
                Admission::Proceed
            } else {
                Admission::ProceedWith {
                    context: prompted.context.join("\n\n"),
                }
            }
        })
    }

    fn before_tool<'a>(
        &'a self,
        turn: &'a Turn<'a>,
        call: &'a GateCall<'a>,
    ) -> BoxFuture<'a, ToolAdvice> {
        Box::pin(async move {
            let outcome = self
                .pre_tool_use(turn.shared, turn.services, turn.turn_id, turn.cancel, call)
                .await;
            ToolAdvice {
                verdict: match outcome.verdict {
                    PreToolVerdict::NoOpinion => AdvisedVerdict::NoOpinion,
                    PreToolVerdict::Allow => AdvisedVerdict::Allow,
                    PreToolVerdict::Ask(reason) => {
                        AdvisedVerdict::Ask(format!("a pre_tool_use hook asks: {reason}"))
                    }
                    PreToolVerdict::Deny(reason) => AdvisedVerdict::Deny(reason),
                },
                arguments: outcome.arguments,
            }
        })
    }

    fn after_tool(&self, turn: &Turn<'_>, ran: &ToolRan<'_>) {
        self.post_tool_use(
            turn.shared,
            turn.services,
            turn.turn_id,
            ran.call,
            ran.arguments,
            (ran.status, ran.output),
        );
    }

    fn approval_requested(&self, turn: &Turn<'_>, approval: &Approval) {
        self.on_approval_requested(turn.shared, turn.services, turn.turn_id, approval);
    }

    fn turn_ended(&self, turn: &Turn<'_>, stop: StopReason) {
        self.turn_completed(turn.shared, turn.services, turn.turn_id, stop);
    }
}
