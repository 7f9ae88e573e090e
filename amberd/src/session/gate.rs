//! The session's gate: the policy engine decides; calls that need approval are asked over
//! the socket (SEED.md "approvals"), and answers become session grants or stored rules.

use amber_policy::{PersonOnly, Request, Rules, Scope, SessionSandbox, Verdict};
use amber_proto::{Approval, Decision, EventKind, Mode, ResolvedBy, SessionState};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::SessionShared;
use super::feature::{AdvisedVerdict, ToolRan, Turn};
use super::services::Services;
use super::trust::Level as TrustLevel;
use amber_tools::gate::{Gate, GateCall, GateVerdict};
use amber_tools::sandbox::{ToolSandbox, Unsandboxed};
use amber_tools::session::DeniedPaths;

/// The session's path deny rules (config and workspace), for `search` to filter what it
/// shows. Holds the session weakly: the session owns its tool state.
pub(crate) struct SessionDeniedPaths {
    pub shared: std::sync::Weak<SessionShared>,
    pub services: std::sync::Arc<Services>,
}

impl DeniedPaths for SessionDeniedPaths {
    fn denied(&self, tool: &str, relative: &str) -> bool {
        if self.services.live().rules.denies_path(&[tool], relative) {
            return true;
        }
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        let mut rules = shared.lock_rules();
        // A broken workspace file denies nothing here; the gate already asks for writes.
        // Deny rules count whether the file is trusted or not.
        rules
            .current()
            .is_ok_and(|loaded| loaded.in_force(false).denies_path(&[tool], relative))
    }
}

/// The gate of one running turn.
pub(crate) struct SessionGate<'a> {
    pub shared: &'a SessionShared,
    pub services: &'a Services,
    pub turn_id: &'a str,
    pub cancel: &'a CancellationToken,
    /// The most a sub-agent's calls may do (its agent's mode): the session's mode applies,
    /// narrowed to this.
    pub mode_ceiling: Option<Mode>,
}

impl Gate for SessionGate<'_> {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, GateVerdict> {
        Box::pin(self.check_call(call))
    }

    fn after_call(
        &self,
        call: &amber_proto::ToolCall,
        arguments: &serde_json::Value,
        status: amber_proto::ToolStatus,
        output: &str,
    ) {
        self.shared.features.after_tool(
            &self.turn(),
            &ToolRan {
                call,
                arguments,
                status,
                output,
            },
        );
    }
}

impl SessionGate<'_> {
    fn turn(&self) -> Turn<'_> {
        Turn {
            shared: self.shared,
            services: self.services,
            turn_id: self.turn_id,
            cancel: self.cancel,
        }
    }

    /// The features' advice first (the `pre_tool_use` hooks may deny, rewrite the
    /// arguments, ask or pre-approve), then policy on the arguments the call will run with.
    /// An advised `allow` answers an ask policy would put to the approvers, never one only
    /// a person may answer ([`Verdict::AskPerson`]: secret reads, protected writes, runs
    /// without the sandbox), and never overrides a deny (rules, read mode); an advised
    /// `ask` asks where policy would allow.
    async fn check_call(&self, call: GateCall<'_>) -> GateVerdict {
        let hooked = self.shared.features.before_tool(&self.turn(), &call).await;
        let call = match &hooked.arguments {
            Some(arguments) => GateCall {
                call: call.call,
                tool: call.tool,
                args: arguments,
            },
            None => call,
        };
        let verdict = match hooked.verdict {
            AdvisedVerdict::Deny(reason) => return GateVerdict::Deny(reason),
            AdvisedVerdict::NoOpinion => self.policy(&call).await,
            AdvisedVerdict::Allow => match self.decide(&call) {
                Verdict::Allow | Verdict::Ask { .. } => GateVerdict::Allow,
                Verdict::AllowUnsandboxed => approved_unsandboxed(),
                Verdict::Deny { reason, .. } => GateVerdict::Deny(reason),
                Verdict::AskPerson(ask) => self.ask_person(&call, ask).await,
            },
            AdvisedVerdict::Ask(reason) => match self.decide(&call) {
                Verdict::Deny { reason, .. } => GateVerdict::Deny(reason),
                ask @ Verdict::Ask { .. } => self.policy_ask(&call, ask).await,
                Verdict::AskPerson(ask) => self.ask_person(&call, ask).await,
                allowed => {
                    let unsandboxed = allowed == Verdict::AllowUnsandboxed;
                    let verdict = self
                        .ask(&call, reason, Vec::new(), false, unsandboxed)
                        .await;
                    match verdict {
                        GateVerdict::Allow if unsandboxed => approved_unsandboxed(),
                        other => other,
                    }
                }
            },
        };
        match (verdict, hooked.arguments) {
            (GateVerdict::Allow, Some(arguments)) => GateVerdict::AllowWith {
                arguments,
                unsandboxed: None,
            },
            (GateVerdict::AllowUnsandboxed(leave), Some(arguments)) => GateVerdict::AllowWith {
                arguments,
                unsandboxed: Some(leave),
            },
            (verdict, _) => verdict,
        }
    }

    /// Policy alone: allow, deny, or ask the approvers.
    async fn policy(&self, call: &GateCall<'_>) -> GateVerdict {
        let verdict = self.decide(call);
        self.policy_ask(call, verdict).await
    }

    /// A policy verdict carried out (an ask asks).
    async fn policy_ask(&self, call: &GateCall<'_>, verdict: Verdict) -> GateVerdict {
        match verdict {
            Verdict::Allow => GateVerdict::Allow,
            Verdict::AllowUnsandboxed => approved_unsandboxed(),
            Verdict::Deny { reason, .. } => GateVerdict::Deny(reason),
            Verdict::Ask {
                reason,
                scopes,
                persist,
            } => self.ask(call, reason, scopes, persist, false).await,
            Verdict::AskPerson(ask) => self.ask_person(call, ask).await,
        }
    }

    /// Puts a person-only ask to the approvers (`personOnly` in the request, which
    /// automatic approvers such as `--yes` leave to a person). Whatever allowing answer
    /// comes back covers this call only: nothing is granted or stored.
    async fn ask_person(&self, call: &GateCall<'_>, ask: PersonOnly) -> GateVerdict {
        let unsandboxed = ask.unsandboxed();
        let scope = match call.args.get("command").and_then(serde_json::Value::as_str) {
            Some(command) if unsandboxed => {
                format!("{} unsandboxed: {command} (this call only)", call.call.name)
            }
            _ => "this call only".to_owned(),
        };
        let request_id = format!("apr_{}", uuid::Uuid::new_v4().simple());
        let approval = Approval {
            request_id: request_id.clone(),
            call_id: call.call.id.clone(),
            tool: call.call.name.clone(),
            arguments: call.args.clone(),
            reason: ask.reason().to_owned(),
            scope,
            unsandboxed,
            person_only: true,
            mcp: None,
        };
        let answer = request_approval(
            self.shared,
            self.services,
            self.turn_id,
            self.cancel,
            approval,
            false,
        )
        .await;
        match refusal(answer, ask.reason()) {
            Err(denied) => denied,
            Ok(Decision::Deny) => denied_by_user(self.shared.approvals.take_feedback(&request_id)),
            Ok(Decision::AllowOnce | Decision::AllowSession | Decision::AllowAlways)
                if unsandboxed =>
            {
                approved_unsandboxed()
            }
            Ok(Decision::AllowOnce | Decision::AllowSession | Decision::AllowAlways) => {
                GateVerdict::Allow
            }
        }
    }

    fn decide(&self, call: &GateCall<'_>) -> Verdict {
        let shared = self.shared;
        let tool_sandbox = shared.tools.sandbox();
        let request = Request {
            tool: &call.call.name,
            tool_read_only: call.tool.read_only(),
            tool_destructive: call.tool.destructive(),
            args: call.args,
            mode: self.mode(),
            workspace: &shared.workspace,
            sandbox: session_sandbox(&tool_sandbox),
        };
        let mut workspace_rules = shared.lock_rules();
        let path = workspace_rules.path().to_path_buf();
        // Its allow rules count only once that version of the file is trusted.
        let workspace = workspace_rules
            .current()
            .map(|loaded| {
                let trusted = loaded
                    .hash
                    .as_deref()
                    .is_some_and(|hash| shared.trust.is_trusted(self.services, &path, hash));
                loaded.in_force(trusted)
            })
            .map_err(|e| e.to_string());
        let rules = Rules {
            config: &self.services.live().rules,
            workspace,
        };
        amber_policy::decide(&request, &rules, &shared.lock_grants())
    }

    /// The mode calls are judged in: the session's, never above the ceiling.
    pub(crate) fn mode(&self) -> Mode {
        let mode = self.shared.mode();
        self.mode_ceiling
            .map_or(mode, |ceiling| amber_policy::narrower_mode(mode, ceiling))
    }

    /// Asks the approvers. `persist`: whether `allow_always` may store allow rules; when an
    /// ask rule asked it may not (the rule would still ask), so `allow_always` is taken as
    /// `allow_session` — the reason says so and `approval_resolved` reports it.
    /// `unsandboxed`: the call runs without the OS sandbox by a `sandbox = false` rule and a
    /// hook asked about it.
    async fn ask(
        &self,
        call: &GateCall<'_>,
        reason: String,
        scopes: Vec<Scope>,
        persist: bool,
        unsandboxed: bool,
    ) -> GateVerdict {
        let shared = self.shared;
        let request_id = format!("apr_{}", uuid::Uuid::new_v4().simple());
        let scope = if scopes.is_empty() {
            "this call only".to_owned()
        } else {
            scopes
                .iter()
                .map(Scope::describe)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let reason = if persist || scopes.is_empty() {
            reason
        } else {
            format!(
                "{reason} (allow_always counts for this session only: the rule would still ask)"
            )
        };
        let approval = Approval {
            request_id: request_id.clone(),
            call_id: call.call.id.clone(),
            tool: call.call.name.clone(),
            arguments: call.args.clone(),
            reason: reason.clone(),
            scope,
            unsandboxed,
            person_only: false,
            mcp: None,
        };
        let answer = request_approval(
            shared,
            self.services,
            self.turn_id,
            self.cancel,
            approval,
            persist,
        )
        .await;
        let decision = match refusal(answer, &reason) {
            Ok(decision) => decision,
            Err(denied) => return denied,
        };
        match decision {
            Decision::AllowOnce => GateVerdict::Allow,
            Decision::AllowSession => {
                shared.lock_grants().grant(&scopes);
                GateVerdict::Allow
            }
            Decision::AllowAlways => {
                shared.lock_grants().grant(&scopes);
                if self.persist(&scopes) {
                    shared.features.rules_rewritten(shared).await;
                }
                GateVerdict::Allow
            }
            Decision::Deny => denied_by_user(shared.approvals.take_feedback(&request_id)),
        }
    }

    /// `allow_always`: the scopes become allow rules in the workspace's rules file. The
    /// version amber extended keeps the trust it had (a new file, being amber's own, as
    /// trusted as `allow_always` is) and passes it to the version amber wrote, judged by the
    /// hashes of the very bytes `append` read and wrote: an untrusted file stays untrusted,
    /// appended rule and all, and a file swapped in meanwhile gets nothing.
    /// Whether it wrote the file.
    fn persist(&self, scopes: &[Scope]) -> bool {
        let shared = self.shared;
        let mut rules = shared.lock_rules();
        let path = rules.path().to_path_buf();
        let mut wrote = false;
        for rule in amber_policy::rules_for(scopes) {
            let appended = match rules.append(rule) {
                Ok(appended) => appended,
                Err(err) => {
                    tracing::warn!(%err, "could not persist an allow_always rule");
                    continue;
                }
            };
            wrote = true;
            let level = match appended.before.as_deref() {
                None => Some(TrustLevel::Always),
                Some(hash) => shared.trust.level(self.services, &path, hash),
            };
            if let Some(level) = level {
                shared
                    .trust
                    .trust(self.services, &path, &appended.after, level);
            }
        }
        wrote
    }
}

/// A person's denial as the model reads it: with what they said about it, when they did
/// (`approval/respond {feedback}`), so the model can do it another way.
fn denied_by_user(feedback: Option<String>) -> GateVerdict {
    /// The most of a person's words the model gets back.
    const MAX_FEEDBACK_CHARS: usize = 2000;
    match feedback.map(|f| {
        f.trim()
            .chars()
            .take(MAX_FEEDBACK_CHARS)
            .collect::<String>()
    }) {
        Some(feedback) if !feedback.is_empty() => {
            GateVerdict::Deny(format!("the user denied this call and said: {feedback}"))
        }
        _ => GateVerdict::Deny("the user denied this call".into()),
    }
}

/// The decision of an answered request, or the denial of one nobody answered.
/// The one place a leave to run without the OS sandbox is minted from a person's decision:
/// their answer to this call's approval, or a `sandbox = false` rule they stored.
fn approved_unsandboxed() -> GateVerdict {
    GateVerdict::AllowUnsandboxed(Unsandboxed::approved_by_person())
}

fn refusal(answer: Answer, reason: &str) -> Result<Decision, GateVerdict> {
    match answer {
        Answer::Decided(decision) => Ok(decision),
        Answer::NoApprover => Err(GateVerdict::Deny(format!(
            "needs approval ({reason}), and no approver is connected to this session"
        ))),
        Answer::ApproverLeft => Err(GateVerdict::Deny(format!(
            "needs approval ({reason}), and the last approver disconnected"
        ))),
        Answer::Cancelled => Err(GateVerdict::Deny(
            "the turn was cancelled while waiting for approval".into(),
        )),
    }
}

/// The session's sandbox as the policy weighs commands.
fn session_sandbox(sandbox: &ToolSandbox) -> SessionSandbox<'_> {
    match sandbox {
        ToolSandbox::Off => SessionSandbox::Off,
        ToolSandbox::On(_) => SessionSandbox::On,
        ToolSandbox::Unavailable { reason, .. } => SessionSandbox::Unavailable(reason),
    }
}

/// How an approval request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// An approver answered (`allow_always` already narrowed to `allow_session` when it
    /// may not persist).
    Decided(Decision),
    /// Nobody could answer: no approver was connected.
    NoApprover,
    /// The last approver left before answering.
    ApproverLeft,
    /// The turn was cancelled while waiting.
    Cancelled,
}

/// Asks the session's approvers: registers the request, announces it
/// (`approval_requested`, and the `approval_requested` hooks), waits for the first answer,
/// the turn's cancel or the last approver leaving, and announces how it was resolved. With
/// no approver connected it is resolved at once (`by: no_approver`). `persist`: whether
/// `allow_always` may stand (else it counts as `allow_session`).
pub(crate) async fn request_approval(
    shared: &SessionShared,
    services: &Services,
    turn_id: &str,
    cancel: &CancellationToken,
    approval: Approval,
    persist: bool,
) -> Answer {
    let request_id = approval.request_id.clone();
    let emit = |kind: EventKind| {
        shared.hub.publish(Some(turn_id), kind);
    };
    let resolved = |decision: Decision, by: ResolvedBy| {
        emit(EventKind::ApprovalResolved {
            request_id: request_id.clone(),
            decision,
            by,
        });
    };
    // Register (and show as waiting) before announcing: an approver may answer the
    // moment it sees the event.
    let answer = shared
        .approvals
        .has_approver()
        .then(|| shared.approvals.open(approval.clone()));
    if answer.is_some() {
        shared.set_state(SessionState::WaitingApproval);
    }
    emit(EventKind::ApprovalRequested(approval.clone()));
    shared.features.approval_requested(
        &Turn {
            shared,
            services,
            turn_id,
            cancel,
        },
        &approval,
    );
    let Some(answer) = answer else {
        shared.approvals.close(&request_id);
        resolved(Decision::Deny, ResolvedBy::NoApprover);
        return Answer::NoApprover;
    };
    let decision = tokio::select! {
        answer = answer => answer.ok(),
        () = cancel.cancelled() => None,
        () = shared.approvals.no_approver_left() => {
            shared.approvals.close(&request_id);
            shared.set_state(SessionState::Running);
            resolved(Decision::Deny, ResolvedBy::NoApprover);
            return Answer::ApproverLeft;
        }
    };
    shared.set_state(SessionState::Running);
    let Some(decision) = decision else {
        shared.approvals.close(&request_id);
        resolved(Decision::Deny, ResolvedBy::Policy);
        return Answer::Cancelled;
    };
    let decision = match decision {
        Decision::AllowAlways if !persist => Decision::AllowSession,
        other => other,
    };
    resolved(decision, ResolvedBy::Client);
    Answer::Decided(decision)
}
