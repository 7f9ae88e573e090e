//! MCP progress while a turn runs: which amber events are worth a
//! `notifications/progress`, the message each carries, and a counter that only rises.
//! Pure but for [`Progress::send`].

use amber_proto::{Event, EventKind, ToolStatus};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};

/// The progress message for one event of the turn; `None` for events not worth one
/// (deltas, usage, ...).
#[deny(clippy::wildcard_enum_match_arm)] // a new event kind is a decision here
pub(crate) fn message(event: &Event) -> Option<String> {
    let text = match &event.kind {
        EventKind::TurnStarted { .. } => "turn started".to_owned(),
        EventKind::ToolCallStarted {
            name, arguments, ..
        } => match detail(arguments) {
            Some(detail) => format!("running {name}: {detail}"),
            None => format!("running {name}"),
        },
        EventKind::ToolCallCompleted {
            status,
            duration_ms,
            ..
        } => {
            let status = match status {
                ToolStatus::Ok => "done",
                ToolStatus::Error => "failed",
                ToolStatus::Denied => "denied",
            };
            format!("tool call {status} ({duration_ms} ms)")
        }
        EventKind::MessageCompleted { text, .. } => {
            format!("message: {}", first_line(text, 120))
        }
        EventKind::ApprovalRequested(amber_proto::Approval { tool, .. }) => {
            format!("approval requested for {tool}")
        }
        EventKind::ApprovalResolved { decision, .. } => {
            format!(
                "approval answered: {}",
                amber_client::turn::decision_name(*decision)
            )
        }
        EventKind::CompactionStarted { .. } => "compacting the conversation".to_owned(),
        EventKind::EnvironmentLost { environment } => {
            format!("lost the link to {}", environment.spec)
        }
        EventKind::EnvironmentResumed { environment, .. } => {
            format!("attached again to {}", environment.spec)
        }
        EventKind::FleetChanged {
            environment,
            reason,
        } => match &environment.fleet {
            Some(fleet) => format!("fleet: {}", fleet.describe(reason.as_deref())),
            None => return None,
        },
        EventKind::TurnCompleted { stop_reason, .. } => {
            format!("turn completed: {}", stop_reason.as_str())
        }
        EventKind::FleetPushed {
            branch,
            commit,
            changed,
            error,
        } => format!(
            "fleet: {}",
            amber_proto::describe_push(branch, commit.as_deref(), *changed, error.as_deref())
        ),
        EventKind::MessageSent { to, .. } => format!("message sent to {to}"),
        EventKind::MessageReceived { from, .. } => {
            format!("message from {}", from.as_deref().unwrap_or("a client"))
        }
        EventKind::GoalSet { goal } => match goal {
            Some(goal) => format!("goal: {goal}"),
            None => "goal cleared".to_owned(),
        },
        EventKind::GoalCheck { met, note } => {
            format!("goal {}: {note}", if *met { "met" } else { "not met" })
        }
        EventKind::GoalMet { summary } => format!("goal met: {summary}"),
        EventKind::SubagentQueued { task, .. } => format!("sub-agent waits for a slot: {task}"),
        EventKind::BudgetWarning {
            scope,
            key,
            period,
            spent_usd,
            cap_usd,
        } => amber_proto::describe_budget(*scope, key.as_deref(), period, *spent_usd, *cap_usd),
        EventKind::RoutineFinished {
            name, stop_reason, ..
        } => format!("routine {name} finished: {}", stop_reason.as_str()),
        EventKind::NetworkConnection(connection) => amber_proto::describe_connection(connection),
        EventKind::PromptQueued { .. }
        | EventKind::MessageDelta { .. }
        | EventKind::ReasoningDelta { .. }
        | EventKind::ToolOutputDelta { .. }
        | EventKind::Retrying { .. }
        | EventKind::Steer { .. }
        | EventKind::CompactionCompleted { .. }
        | EventKind::CompactionFailed { .. }
        | EventKind::Usage { .. }
        | EventKind::TodoUpdated { .. }
        | EventKind::SubagentStarted { .. }
        | EventKind::SubagentCompleted { .. }
        | EventKind::McpStatus(_)
        | EventKind::Error { .. }
        | EventKind::Rewound { .. }
        | EventKind::HookFailed { .. }
        | EventKind::EnvironmentConnected { .. }
        | EventKind::FleetSetup { .. }
        | EventKind::Synced { .. } => return None,
    };
    Some(text)
}

/// What a tool call is about, in a few words: its command or path.
fn detail(arguments: &serde_json::Value) -> Option<String> {
    ["command", "path", "pattern", "description"]
        .iter()
        .find_map(|key| arguments.get(key).and_then(serde_json::Value::as_str))
        .map(|text| first_line(text, 80))
}

/// The first line of `text`, cut to `max` characters.
fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut cut: String = line.chars().take(max).collect();
    if line.chars().count() > max {
        cut.push('…');
    }
    cut
}

/// Progress notifications for one request that carried a progress token.
pub(crate) struct Progress {
    target: Option<(Peer<RoleServer>, ProgressToken)>,
    count: u32,
}

impl Progress {
    /// Sends nothing without a token.
    pub(crate) fn new(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> Self {
        Self {
            target: token.map(|token| (peer, token)),
            count: 0,
        }
    }

    /// Sends the progress for `event`, if it is worth one; the value rises by one each time.
    pub(crate) async fn on_event(&mut self, event: &Event) {
        if let Some(text) = message(event) {
            self.send(text).await;
        }
    }

    async fn send(&mut self, text: String) {
        let Some((peer, token)) = &self.target else {
            return;
        };
        self.count += 1;
        let param =
            ProgressNotificationParam::new(token.clone(), f64::from(self.count)).with_message(text);
        // A client that went away learns nothing more; the turn goes on.
        let _ = peer.notify_progress(param).await;
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use serde_json::json;

    fn ev(body: serde_json::Value) -> Event {
        let mut v = json!({"sessionId": "s1", "turnId": "t1", "time": "2026-01-01T00:00:00Z"});
        v.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn tool_calls_and_messages_make_progress_messages() {
        let started = ev(
            json!({"seq": 1, "type": "tool_call_started", "itemId": "m1", "callId": "c1", "name": "bash", "arguments": {"command": "cargo test\nmore"}}),
        );
        assert_eq!(message(&started).unwrap(), "running bash: cargo test");
        let done = ev(
            json!({"seq": 2, "type": "tool_call_completed", "callId": "c1", "status": "error", "output": "x", "durationMs": 12}),
        );
        assert_eq!(message(&done).unwrap(), "tool call failed (12 ms)");
        let said = ev(
            json!({"seq": 3, "type": "message_completed", "itemId": "m2", "role": "assistant", "text": "\nAll tests pass."}),
        );
        assert_eq!(message(&said).unwrap(), "message: All tests pass.");
        let end =
            ev(json!({"seq": 4, "type": "turn_completed", "stopReason": "end_turn", "usage": {}}));
        assert_eq!(message(&end).unwrap(), "turn completed: end_turn");
    }

    #[test]
    fn deltas_make_no_progress() {
        let delta = ev(json!({"type": "message_delta", "itemId": "m1", "delta": "Lo"}));
        assert_eq!(message(&delta), None);
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "x".repeat(300);
        let cut = first_line(&long, 80);
        assert_eq!(cut.chars().count(), 81);
        assert!(cut.ends_with('…'));
    }
}
