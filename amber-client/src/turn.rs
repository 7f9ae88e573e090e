//! Following one turn from the client side: what happened in it (final text, denied tool
//! calls, how it ended) collected from its events by [`TurnTracker`]; how a headless
//! client's `--yes` answers an approval request ([`yes_decision`]); and the words for a
//! decision ([`decision_name`]). Pure: fed events, no I/O. Shared by amber-cli's `run` and
//! `wait` and by the MCP server.

use std::collections::HashMap;

use amber_proto::{
    Approval, CostUsd, Decision, ErrorInfo, Event, EventKind, NetworkConnection, Role, StopReason,
    ToolStatus, Usage,
};
use serde::Serialize;
use serde_json::Value;

/// How `--yes` answers an approval request (`amber-cli run --yes`, `amber-cli mcp-server
/// --yes`): allow_once, except leaving the OS sandbox and what only a person may answer
/// (secret reads, protected writes, trusting workspace configuration), which nobody at a
/// terminal confirmed.
pub fn yes_decision(unsandboxed: bool, person_only: bool) -> Decision {
    if unsandboxed || person_only {
        Decision::Deny
    } else {
        Decision::AllowOnce
    }
}

/// What a client says of a person-only request: only a person answers it, and for a call
/// the answer covers that call alone; for trusting a configuration file (`trust`, `hooks`)
/// and a network allowlist question (`network`) "for the session" and "always" keep their
/// meaning.
pub fn person_only_note(tool: &str) -> &'static str {
    match tool {
        "trust" | "hooks" | "network" => {
            "only you can answer this (no rule, hook or --yes does); once, session and always mean what they say"
        }
        _ => "only you can answer this; any allow covers this request only",
    }
}

/// A decision in words, for a sentence (`approval answered: allowed once`).
pub fn decision_name(d: Decision) -> &'static str {
    match d {
        Decision::AllowOnce => "allowed once",
        Decision::AllowSession => "allowed for the session",
        Decision::AllowAlways => "allowed always",
        Decision::Deny => "denied",
    }
}

/// A tool call of the turn that was denied.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Denial {
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    /// Why: the approval request's reason when there was one, else the denial output.
    pub reason: String,
    pub output: String,
}

/// How the turn ended (its `turn_completed`).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub stop_reason: StopReason,
    pub error: Option<ErrorInfo>,
    pub usage: Usage,
    pub output: Option<Value>,
    pub cost_usd: Option<CostUsd>,
    pub session_cost_usd: Option<CostUsd>,
    /// The part of `usage` the silent confirm exchange spent, when the turn sent one.
    pub confirm_usage: Option<Usage>,
}

/// amberd's dispatch refuses malformed calls with `denied` too (unknown tool, arguments
/// that are not a JSON object, a repeat of the previous turn's call): those are the model's
/// mistakes, not permission decisions, and are no [`Denial`].
fn is_dispatch_refusal(output: &str) -> bool {
    let reason = output.strip_prefix("denied: ").unwrap_or(output);
    [
        "unknown tool `",
        "the arguments of `",
        "duplicate of a call made in the previous turn",
    ]
    .iter()
    .any(|prefix| reason.starts_with(prefix))
}

/// Collects what matters of one turn from its events.
#[derive(Debug, Default)]
pub struct TurnTracker {
    turn_id: String,
    tools: HashMap<String, (String, Value)>,
    approval_reasons: HashMap<String, String>,
    denials: Vec<Denial>,
    text: String,
    completion: Option<Completion>,
    /// Items of the model's replies seen (a reply is one item, its text and calls alike).
    replies: std::collections::HashSet<String>,
    /// `usage` events: one per model request answered, the silent ones included.
    requests: u32,
    /// The connections its commands made through the egress proxy, in order.
    network: Vec<NetworkConnection>,
}

impl TurnTracker {
    pub fn new(turn_id: impl Into<String>) -> Self {
        Self {
            turn_id: turn_id.into(),
            ..Self::default()
        }
    }

    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// True for events of this tracker's turn.
    pub fn is_mine(&self, event: &Event) -> bool {
        event.turn_id.as_deref() == Some(self.turn_id.as_str())
    }

    /// Feeds one event; events of other turns are ignored.
    #[deny(clippy::wildcard_enum_match_arm)] // a new event kind is a decision here
    pub fn observe(&mut self, event: &Event) {
        if !self.is_mine(event) {
            return;
        }
        match &event.kind {
            EventKind::MessageCompleted {
                role: Role::Assistant,
                text,
                item_id,
            } => {
                self.text.clone_from(text);
                self.replies.insert(item_id.clone());
            }
            EventKind::ToolCallStarted {
                call_id,
                name,
                arguments,
                item_id,
            } => {
                self.replies.insert(item_id.clone());
                self.tools
                    .insert(call_id.clone(), (name.clone(), arguments.clone()));
            }
            EventKind::ApprovalRequested(Approval {
                call_id, reason, ..
            }) => {
                self.approval_reasons
                    .insert(call_id.clone(), reason.clone());
            }
            EventKind::ToolCallCompleted {
                call_id,
                status: ToolStatus::Denied,
                output,
                ..
            } if !is_dispatch_refusal(output) => {
                let (tool, arguments) = self
                    .tools
                    .get(call_id)
                    .cloned()
                    .unwrap_or_else(|| (String::new(), Value::Null));
                let reason = self
                    .approval_reasons
                    .get(call_id)
                    .cloned()
                    .unwrap_or_else(|| output.clone());
                self.denials.push(Denial {
                    call_id: call_id.clone(),
                    tool,
                    arguments,
                    reason,
                    output: output.clone(),
                });
            }
            EventKind::TurnCompleted {
                stop_reason,
                error,
                usage,
                output,
                cost_usd,
                session_cost_usd,
                confirm_usage,
            } => {
                self.completion = Some(Completion {
                    stop_reason: *stop_reason,
                    error: error.clone(),
                    usage: *usage,
                    output: output.clone(),
                    cost_usd: *cost_usd,
                    session_cost_usd: *session_cost_usd,
                    confirm_usage: *confirm_usage,
                });
            }
            EventKind::Usage { .. } => self.requests += 1,
            EventKind::PromptQueued { .. }
            | EventKind::TurnStarted { .. }
            | EventKind::MessageDelta { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::MessageCompleted { .. }
            | EventKind::ToolOutputDelta { .. }
            | EventKind::Retrying { .. }
            | EventKind::ToolCallCompleted { .. }
            | EventKind::ApprovalResolved { .. }
            | EventKind::Steer { .. }
            | EventKind::CompactionStarted { .. }
            | EventKind::CompactionCompleted { .. }
            | EventKind::CompactionFailed { .. }
            | EventKind::TodoUpdated { .. }
            | EventKind::SubagentStarted { .. }
            | EventKind::SubagentCompleted { .. }
            | EventKind::McpStatus(_)
            | EventKind::Error { .. }
            | EventKind::EnvironmentConnected { .. }
            | EventKind::EnvironmentLost { .. }
            | EventKind::EnvironmentResumed { .. }
            | EventKind::FleetChanged { .. }
            | EventKind::FleetSetup { .. }
            | EventKind::FleetPushed { .. }
            | EventKind::MessageSent { .. }
            | EventKind::MessageReceived { .. }
            | EventKind::GoalSet { .. }
            | EventKind::GoalCheck { .. }
            | EventKind::GoalMet { .. }
            | EventKind::SubagentQueued { .. }
            | EventKind::BudgetWarning { .. }
            | EventKind::RoutineFinished { .. }
            | EventKind::Rewound { .. }
            | EventKind::HookFailed { .. }
            | EventKind::Synced { .. } => {}
            EventKind::NetworkConnection(connection) => self.network.push(connection.clone()),
        }
    }

    /// The connections the turn's commands made through the egress proxy.
    pub fn network(&self) -> &[NetworkConnection] {
        &self.network
    }

    /// The model's replies in this turn that the user saw (text or tool calls); the silent
    /// confirm exchange is not one.
    pub fn replies(&self) -> u32 {
        u32::try_from(self.replies.len()).unwrap_or(u32::MAX)
    }

    /// Model requests this turn made whose usage the provider reported (every request of
    /// the loop, the silent confirm exchange and compaction included).
    pub fn requests(&self) -> u32 {
        self.requests
    }

    /// How the turn ended, once its `turn_completed` was seen.
    pub fn completion(&self) -> Option<&Completion> {
        self.completion.as_ref()
    }

    /// The turn's denied tool calls so far.
    pub fn denials(&self) -> &[Denial] {
        &self.denials
    }

    /// The final text of the turn so far (its last assistant message).
    pub fn text(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_person_only_question_says_whether_its_answer_lasts() {
        for tool in ["trust", "hooks", "network"] {
            assert!(
                person_only_note(tool).contains("always mean what they say"),
                "{tool}"
            );
        }
        assert!(person_only_note("bash").contains("covers this request only"));
    }
    use serde_json::json;

    fn ev(turn: &str, body: Value) -> Event {
        let mut v = json!({"sessionId": "s1", "turnId": turn, "time": "2026-01-01T00:00:00Z"});
        v.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_turn_gives_its_last_text_its_denials_and_how_it_ended() {
        let mut t = TurnTracker::new("t1");
        for e in [
            ev(
                "t1",
                json!({"seq": 1, "type": "message_completed", "itemId": "m1", "role": "assistant", "text": "Looking."}),
            ),
            ev(
                "t1",
                json!({"seq": 2, "type": "tool_call_started", "itemId": "m1", "callId": "c1", "name": "bash", "arguments": {"command": "rm -rf /"}}),
            ),
            ev(
                "t1",
                json!({"seq": 3, "type": "approval_requested", "requestId": "r1", "callId": "c1", "tool": "bash", "arguments": {"command": "rm -rf /"}, "reason": "destructive command", "scope": "command"}),
            ),
            ev(
                "t1",
                json!({"seq": 4, "type": "tool_call_completed", "callId": "c1", "status": "denied", "output": "denied: no approver", "durationMs": 0}),
            ),
            // The model's own mistake, refused by dispatch: no denial.
            ev(
                "t1",
                json!({"seq": 5, "type": "tool_call_completed", "callId": "c9", "status": "denied", "output": "unknown tool `frobnicate`; available: read", "durationMs": 0}),
            ),
            // Another turn's events are not this one's.
            ev(
                "t2",
                json!({"seq": 6, "type": "message_completed", "itemId": "m9", "role": "assistant", "text": "other turn"}),
            ),
            ev(
                "t1",
                json!({"seq": 7, "type": "message_completed", "itemId": "m2", "role": "assistant", "text": "Done."}),
            ),
        ] {
            t.observe(&e);
        }
        assert_eq!(t.text(), "Done.");
        assert!(t.completion().is_none());
        assert_eq!(
            t.denials(),
            [Denial {
                call_id: "c1".into(),
                tool: "bash".into(),
                arguments: json!({"command": "rm -rf /"}),
                reason: "destructive command".into(),
                output: "denied: no approver".into(),
            }]
        );
        t.observe(&ev(
            "t1",
            json!({"seq": 8, "type": "turn_completed", "stopReason": "max_iterations", "usage": {}}),
        ));
        assert_eq!(
            t.completion().map(|c| c.stop_reason),
            Some(StopReason::MaxIterations)
        );
    }

    #[test]
    fn yes_allows_once_but_never_an_unsandboxed_command_or_a_person_only_ask() {
        use Decision::{AllowOnce, Deny};
        for (unsandboxed, person_only, expected) in [
            (false, false, AllowOnce),
            (true, false, Deny),
            (false, true, Deny),
            (true, true, Deny),
        ] {
            assert_eq!(
                yes_decision(unsandboxed, person_only),
                expected,
                "{unsandboxed} {person_only}"
            );
        }
    }
}
