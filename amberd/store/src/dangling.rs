//! Closing what a crash left open: in the turn the daemon was running when it died, a
//! `tool_call_started` may have no `tool_call_completed`, a `subagent_started` no
//! `subagent_completed` and an `approval_requested` no `approval_resolved` (it resolves as
//! `deny` by `policy`, as cancelling a turn does). Restore publishes the closing events computed here (before the
//! turn's `turn_completed{interrupted}`), so every client sees each started item end.

use amber_proto::{Decision, EventKind, ResolvedBy, ToolStatus};

use crate::StoredEvent;

/// What a tool call still running at the crash reports as its output.
pub const INTERRUPTED_CALL: &str = "[interrupted] the daemon stopped while this call was running";
/// What a sub-agent still running at the crash reports as its result.
pub const INTERRUPTED_SUBAGENT: &str =
    "[sub-agent interrupted] the daemon stopped while this sub-agent was running";

/// The event types that start or end an item; the others are skipped undecoded.
const ITEM_EVENTS: [&str; 6] = [
    "tool_call_started",
    "tool_call_completed",
    "subagent_started",
    "subagent_completed",
    "approval_requested",
    "approval_resolved",
];

/// One closing event and the sub-agent tag its envelope carries (as its start did).
#[derive(Debug, Clone, PartialEq)]
pub struct Closing {
    pub agent: Option<String>,
    pub kind: EventKind,
}

/// An item of the turn that started and has not ended yet.
enum Open {
    Call { agent: Option<String>, id: String },
    Subagent { id: String, task: String },
    Approval { agent: Option<String>, id: String },
}

impl Open {
    /// The event that ends this item as interrupted.
    fn closing(self) -> Closing {
        match self {
            Open::Call { agent, id } => Closing {
                agent,
                kind: EventKind::ToolCallCompleted {
                    call_id: id,
                    status: ToolStatus::Error,
                    output: INTERRUPTED_CALL.to_owned(),
                    duration_ms: 0,
                    diff: None,
                },
            },
            Open::Subagent { id, task } => Closing {
                // `subagent_*` events are published under the sub-agent's own tag.
                agent: Some(id.clone()),
                kind: EventKind::SubagentCompleted {
                    agent_id: id,
                    task,
                    result: Some(INTERRUPTED_SUBAGENT.to_owned()),
                    stop_reason: Some(amber_proto::StopReason::Error),
                    limit: None,
                },
            },
            Open::Approval { agent, id } => Closing {
                agent,
                kind: EventKind::ApprovalResolved {
                    request_id: id,
                    decision: Decision::Deny,
                    by: ResolvedBy::Policy,
                },
            },
        }
    }
}

/// The events that end every item of turn `turn_id` still open in `events`, innermost
/// first (newest start first): a sub-agent's calls close before the sub-agent, which
/// closes before the parent's `task` call. Calls end `error` with [`INTERRUPTED_CALL`];
/// sub-agents end with [`INTERRUPTED_SUBAGENT`].
pub fn closing_events(events: &[StoredEvent], turn_id: &str) -> Vec<Closing> {
    let mut open: Vec<Open> = Vec::new();
    let of_turn = events.iter().filter(|e| e.may_be_of_turn(turn_id));
    for event in of_turn.filter_map(|e| e.decode_if(&ITEM_EVENTS)) {
        if event.turn_id.as_deref() != Some(turn_id) {
            continue;
        }
        let agent = event.agent_id;
        match event.kind {
            EventKind::ToolCallStarted { call_id, .. } => {
                open.push(Open::Call { agent, id: call_id });
            }
            EventKind::ToolCallCompleted { call_id, .. } => open.retain(
                |o| !matches!(o, Open::Call { agent: a, id } if *id == call_id && *a == agent),
            ),
            EventKind::SubagentStarted { agent_id, task } => {
                open.push(Open::Subagent { id: agent_id, task });
            }
            EventKind::SubagentCompleted { agent_id, .. } => {
                open.retain(|o| !matches!(o, Open::Subagent { id, .. } if *id == agent_id));
            }
            EventKind::ApprovalRequested(amber_proto::Approval { request_id, .. }) => {
                open.push(Open::Approval {
                    agent,
                    id: request_id,
                })
            }
            EventKind::ApprovalResolved { request_id, .. } => {
                open.retain(|o| !matches!(o, Open::Approval { id, .. } if *id == request_id));
            }
            _ => {}
        }
    }
    open.into_iter().rev().map(Open::closing).collect()
}

#[cfg(test)]
mod tests {

    use amber_proto::{Event, Role, StopReason, Usage};
    use serde_json::json;

    use super::*;
    use crate::tests::{log, turn_event};

    fn main(turn: &str, kind: EventKind) -> Event {
        turn_event(turn, None, kind)
    }

    fn started(call_id: &str, name: &str) -> EventKind {
        EventKind::ToolCallStarted {
            item_id: format!("item_{call_id}"),
            call_id: call_id.into(),
            name: name.into(),
            arguments: json!({}),
        }
    }

    fn finished(call_id: &str) -> EventKind {
        EventKind::ToolCallCompleted {
            call_id: call_id.into(),
            status: ToolStatus::Ok,
            output: "ok".into(),
            duration_ms: 1,
            diff: None,
        }
    }

    fn subagent(id: &str, task: &str) -> Event {
        turn_event(
            "t1",
            Some(id),
            EventKind::SubagentStarted {
                agent_id: id.into(),
                task: task.into(),
            },
        )
    }

    fn turn(turn: &str) -> Event {
        main(turn, EventKind::TurnStarted { prompt: "p".into() })
    }

    fn asked(request_id: &str, call_id: &str) -> EventKind {
        EventKind::ApprovalRequested(amber_proto::Approval {
            request_id: request_id.into(),
            call_id: call_id.into(),
            tool: "bash".into(),
            arguments: json!({"command": "make"}),
            reason: "runs a command".into(),
            scope: "command".into(),
            unsandboxed: false,
            person_only: false,
            mcp: None,
        })
    }

    fn completed(call_id: &str, agent: Option<&str>) -> Closing {
        Closing {
            agent: agent.map(str::to_owned),
            kind: EventKind::ToolCallCompleted {
                call_id: call_id.into(),
                status: ToolStatus::Error,
                output: INTERRUPTED_CALL.into(),
                duration_ms: 0,
                diff: None,
            },
        }
    }

    #[test]
    fn open_calls_and_subagents_of_the_turn_are_closed_innermost_first() {
        let events = log(vec![
            // An earlier, finished turn: nothing to close there.
            turn("t0"),
            main("t0", started("c0", "read")),
            main(
                "t0",
                EventKind::TurnCompleted {
                    stop_reason: StopReason::EndTurn,
                    error: None,
                    usage: Usage::default(),
                    output: None,
                    cost_usd: None,
                    session_cost_usd: None,
                    confirm_usage: None,
                },
            ),
            // The interrupted turn: one finished call, a `task` call with two sub-agents,
            // one of which finished; the other has a call of its own in flight.
            turn("t1"),
            main("t1", started("c1", "read")),
            main("t1", finished("c1")),
            main("t1", started("c2", "task")),
            subagent("a1", "one"),
            subagent("a2", "two"),
            // Sub-agents' call ids can repeat the parent's: the tag tells them apart.
            turn_event("t1", Some("a2"), started("c1", "bash")),
            turn_event(
                "t1",
                Some("a1"),
                EventKind::SubagentCompleted {
                    agent_id: "a1".into(),
                    task: "one".into(),
                    result: Some("ok".into()),
                    stop_reason: Some(amber_proto::StopReason::EndTurn),
                    limit: None,
                },
            ),
        ]);
        let closing = closing_events(&events, "t1");
        assert_eq!(
            closing,
            vec![
                completed("c1", Some("a2")),
                Closing {
                    agent: Some("a2".into()),
                    kind: EventKind::SubagentCompleted {
                        agent_id: "a2".into(),
                        task: "two".into(),
                        result: Some(INTERRUPTED_SUBAGENT.into()),
                        stop_reason: Some(amber_proto::StopReason::Error),
                        limit: None,
                    },
                },
                completed("c2", None),
            ]
        );
    }

    #[test]
    fn a_turn_with_everything_closed_needs_nothing() {
        let events = log(vec![
            turn("t1"),
            main("t1", started("c1", "read")),
            main("t1", finished("c1")),
            main(
                "t1",
                EventKind::MessageCompleted {
                    item_id: "i".into(),
                    role: Role::Assistant,
                    text: "x".into(),
                },
            ),
        ]);
        assert!(closing_events(&events, "t1").is_empty());
        // Another turn's open call is not this turn's business.
        assert!(closing_events(&events, "t2").is_empty());
    }

    #[test]
    fn a_pending_approval_is_denied_by_policy_before_its_call_closes() {
        let events = log(vec![
            turn("t1"),
            main("t1", started("c1", "bash")),
            main("t1", asked("r1", "c1")),
            main(
                "t1",
                EventKind::ApprovalResolved {
                    request_id: "r1".into(),
                    decision: Decision::AllowOnce,
                    by: ResolvedBy::Client,
                },
            ),
            main("t1", finished("c1")),
            main("t1", started("c2", "bash")),
            main("t1", asked("r2", "c2")),
        ]);
        assert_eq!(
            closing_events(&events, "t1"),
            vec![
                Closing {
                    agent: None,
                    kind: EventKind::ApprovalResolved {
                        request_id: "r2".into(),
                        decision: Decision::Deny,
                        by: ResolvedBy::Policy,
                    },
                },
                completed("c2", None),
            ]
        );
    }
}
