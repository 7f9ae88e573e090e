//! The session's gate: the policy engine decides; calls that need approval are asked over
//! the socket (SEED.md "approvals"), and answers become session grants or stored rules.

use amber_policy::{Request, Rules, Scope, SessionSandbox, Verdict};
use amber_proto::{Approval, Decision, EventKind, Mode, ResolvedBy, SessionState};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::SessionShared;
use super::deps::Deps;
use crate::tools::gate::{Gate, GateCall, GateVerdict};
use crate::tools::sandbox::ToolSandbox;
use crate::tools::session::DeniedPaths;

/// The session's path deny rules (config and workspace), for `search` to filter what it
/// shows. Holds the session weakly: the session owns its tool state.
pub struct SessionDeniedPaths {
    pub shared: std::sync::Weak<SessionShared>,
    pub deps: std::sync::Arc<Deps>,
}

impl DeniedPaths for SessionDeniedPaths {
    fn denied(&self, tool: &str, relative: &str) -> bool {
        if self.deps.live().rules.denies_path(&[tool], relative) {
            return true;
        }
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        let mut rules = shared.lock_rules();
        // A broken workspace file denies nothing here; the gate already asks for writes.
        rules
            .current()
            .is_ok_and(|set| set.denies_path(&[tool], relative))
    }
}

/// The gate of one running turn.
pub struct SessionGate<'a> {
    pub shared: &'a SessionShared,
    pub deps: &'a Deps,
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
}

impl SessionGate<'_> {
    async fn check_call(&self, call: GateCall<'_>) -> GateVerdict {
        match self.decide(&call) {
            Verdict::Allow => GateVerdict::Allow,
            Verdict::AllowUnsandboxed => GateVerdict::AllowUnsandboxed,
            Verdict::Deny { reason, .. } => GateVerdict::Deny(reason),
            Verdict::Ask {
                reason,
                scopes,
                persist,
                unsandboxed,
            } => {
                let verdict = self.ask(&call, reason, scopes, persist, unsandboxed).await;
                // Approving a call that runs unsandboxed approves exactly that.
                match verdict {
                    GateVerdict::Allow if unsandboxed => GateVerdict::AllowUnsandboxed,
                    other => other,
                }
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
        let workspace = workspace_rules.current().map_err(|e| e.to_string());
        let rules = Rules {
            config: &self.deps.live().rules,
            workspace,
        };
        amber_policy::decide(&request, &rules, &shared.lock_grants())
    }

    fn emit(&self, kind: EventKind) {
        self.shared.hub.publish(Some(self.turn_id), kind);
    }

    /// The mode calls are judged in: the session's, never above the ceiling.
    pub(crate) fn mode(&self) -> Mode {
        let mode = self.shared.mode();
        self.mode_ceiling
            .map_or(mode, |ceiling| crate::agents::narrower(mode, ceiling))
    }

    /// Asks the approvers. `persist`: whether `allow_always` may store allow rules; when an
    /// ask rule asked it may not (the rule would still ask), so `allow_always` is taken as
    /// `allow_session` — the reason says so and `approval_resolved` reports it. The same
    /// for an `unsandboxed` run whose command no stored rule could name.
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
        let reason = match (persist || scopes.is_empty(), unsandboxed) {
            (true, _) => reason,
            (false, true) => format!("{reason} (allow_always counts for this session only)"),
            (false, false) => format!(
                "{reason} (allow_always counts for this session only: the rule would still ask)"
            ),
        };
        let approval = Approval {
            request_id: request_id.clone(),
            call_id: call.call.id.clone(),
            tool: call.call.name.clone(),
            arguments: call.args.clone(),
            reason: reason.clone(),
            scope,
            unsandboxed,
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
        self.emit(EventKind::ApprovalRequested {
            request_id: approval.request_id.clone(),
            call_id: approval.call_id.clone(),
            tool: approval.tool.clone(),
            arguments: approval.arguments.clone(),
            reason: approval.reason.clone(),
            scope: approval.scope.clone(),
            unsandboxed,
        });
        let Some(answer) = answer else {
            shared.approvals.close(&request_id);
            self.resolved(&request_id, Decision::Deny, ResolvedBy::NoApprover);
            return GateVerdict::Deny(format!(
                "needs approval ({reason}), and no approver is connected to this session"
            ));
        };
        let decision = tokio::select! {
            answer = answer => answer.ok(),
            () = self.cancel.cancelled() => None,
            () = shared.approvals.no_approver_left() => {
                shared.approvals.close(&request_id);
                shared.set_state(SessionState::Running);
                self.resolved(&request_id, Decision::Deny, ResolvedBy::NoApprover);
                return GateVerdict::Deny(format!(
                    "needs approval ({reason}), and the last approver disconnected"
                ));
            }
        };
        shared.set_state(SessionState::Running);
        let Some(decision) = decision else {
            shared.approvals.close(&request_id);
            self.resolved(&request_id, Decision::Deny, ResolvedBy::Policy);
            return GateVerdict::Deny("the turn was cancelled while waiting for approval".into());
        };
        let decision = match decision {
            Decision::AllowAlways if !persist => Decision::AllowSession,
            other => other,
        };
        self.resolved(&request_id, decision, ResolvedBy::Client);
        match decision {
            Decision::AllowOnce => GateVerdict::Allow,
            Decision::AllowSession => {
                shared.lock_grants().grant(&scopes);
                GateVerdict::Allow
            }
            Decision::AllowAlways => {
                shared.lock_grants().grant(&scopes);
                self.persist(&scopes);
                GateVerdict::Allow
            }
            Decision::Deny => GateVerdict::Deny("the user denied this call".into()),
        }
    }

    fn resolved(&self, request_id: &str, decision: Decision, by: ResolvedBy) {
        self.emit(EventKind::ApprovalResolved {
            request_id: request_id.to_owned(),
            decision,
            by,
        });
    }

    /// `allow_always`: the scopes become allow rules in the workspace's rules file.
    fn persist(&self, scopes: &[Scope]) {
        let mut rules = self.shared.lock_rules();
        for rule in amber_policy::rules_for(scopes) {
            if let Err(err) = rules.append(rule) {
                tracing::warn!(%err, "could not persist an allow_always rule");
            }
        }
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
