//! Closing what a crash left open: in the turn the daemon was running when it died, a
//! `tool_call_started` may have no `tool_call_completed`, a `subagent_started` no
//! `subagent_completed` and an `approval_requested` no `approval_resolved` (it resolves as
//! `deny` by `policy`, as cancelling a turn does). Restore publishes the closing events computed here (before the
//! turn's `turn_completed{interrupted}`), so every client sees each started item end.

use amber_proto::{Decision, EventKind, ResolvedBy, ToolStatus};
use serde::Deserialize;

use super::StoredEvent;

/// What a tool call still running at the crash reports as its output.
pub const INTERRUPTED_CALL: &str = "[interrupted] the daemon stopped while this call was running";
/// What a sub-agent still running at the crash reports as its result.
pub const INTERRUPTED_SUBAGENT: &str =
    "[sub-agent interrupted] the daemon stopped while this sub-agent was running";

/// One closing event and the sub-agent tag its envelope carries (as its start did).
#[derive(Debug, Clone, PartialEq)]
pub struct Closing {
    pub agent: Option<String>,
    pub kind: EventKind,
}

/// The envelope and item fields this looks at; the rest is skipped unparsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Item {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    turn_id: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    task: Option<String>,
    #[serde(default)]
    request_id: Option<String>,
}

/// An item of the turn that started and has not ended yet.
enum Open {
    Call { agent: Option<String>, id: String },
    Subagent { id: String, task: String },
    Approval { agent: Option<String>, id: String },
}

/// The events that end every item of turn `turn_id` still open in `events`, innermost
/// first (newest start first): a sub-agent's calls close before the sub-agent, which
/// closes before the parent's `task` call. Calls end `error` with [`INTERRUPTED_CALL`];
/// sub-agents end with [`INTERRUPTED_SUBAGENT`].
pub fn closing_events(events: &[StoredEvent], turn_id: &str) -> Vec<Closing> {
    let mut open: Vec<Open> = Vec::new();
    for event in events {
        let Ok(item) = serde_json::from_str::<Item>(event.json.get()) else {
            continue;
        };
        if item.turn_id.as_deref() != Some(turn_id) {
            continue;
        }
        match (item.kind.as_str(), item.call_id, item.agent_id) {
            ("tool_call_started", Some(id), _) => open.push(Open::Call {
                agent: item.agent,
                id,
            }),
            ("tool_call_completed", Some(id), _) => open.retain(
                |o| !matches!(o, Open::Call { agent, id: open_id } if *open_id == id && *agent == item.agent),
            ),
            ("subagent_started", _, Some(id)) => open.push(Open::Subagent {
                id,
                task: item.task.unwrap_or_default(),
            }),
            ("subagent_completed", _, Some(id)) => {
                open.retain(|o| !matches!(o, Open::Subagent { id: open_id, .. } if *open_id == id));
            }
            ("approval_requested", _, _) => {
                if let Some(id) = item.request_id {
                    open.push(Open::Approval {
                        agent: item.agent,
                        id,
                    });
                }
            }
            ("approval_resolved", _, _) => {
                if let Some(id) = item.request_id {
                    open.retain(|o| !matches!(o, Open::Approval { id: open_id, .. } if *open_id == id));
                }
            }
            _ => {}
        }
    }
    open.into_iter()
        .rev()
        .map(|item| match item {
            Open::Call { agent, id } => Closing {
                agent,
                kind: EventKind::ToolCallCompleted {
                    call_id: id,
                    status: ToolStatus::Error,
                    output: INTERRUPTED_CALL.to_owned(),
                    duration_ms: 0,
                },
            },
            Open::Subagent { id, task } => Closing {
                // `subagent_*` events are published under the sub-agent's own tag.
                agent: Some(id.clone()),
                kind: EventKind::SubagentCompleted {
                    agent_id: id,
                    task,
                    result: Some(INTERRUPTED_SUBAGENT.to_owned()),
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
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::tests::log;

    fn completed(call_id: &str, agent: Option<&str>) -> Closing {
        Closing {
            agent: agent.map(str::to_owned),
            kind: EventKind::ToolCallCompleted {
                call_id: call_id.into(),
                status: ToolStatus::Error,
                output: INTERRUPTED_CALL.into(),
                duration_ms: 0,
            },
        }
    }

    #[test]
    fn open_calls_and_subagents_of_the_turn_are_closed_innermost_first() {
        let events = log(&[
            // An earlier, finished turn: nothing to close there.
            json!({"type": "turn_started", "turnId": "t0", "prompt": "p"}),
            json!({"type": "tool_call_started", "turnId": "t0", "callId": "c0", "name": "read"}),
            json!({"type": "turn_completed", "turnId": "t0", "stopReason": "end_turn"}),
            // The interrupted turn: one finished call, a `task` call with two sub-agents,
            // one of which finished; the other has a call of its own in flight.
            json!({"type": "turn_started", "turnId": "t1", "prompt": "p"}),
            json!({"type": "tool_call_started", "turnId": "t1", "callId": "c1", "name": "read"}),
            json!({"type": "tool_call_completed", "turnId": "t1", "callId": "c1", "status": "ok"}),
            json!({"type": "tool_call_started", "turnId": "t1", "callId": "c2", "name": "task"}),
            json!({"type": "subagent_started", "turnId": "t1", "agent": "a1", "agentId": "a1", "task": "one"}),
            json!({"type": "subagent_started", "turnId": "t1", "agent": "a2", "agentId": "a2", "task": "two"}),
            // Sub-agents' call ids can repeat the parent's: the tag tells them apart.
            json!({"type": "tool_call_started", "turnId": "t1", "agent": "a2", "callId": "c1", "name": "bash"}),
            json!({"type": "subagent_completed", "turnId": "t1", "agent": "a1", "agentId": "a1", "task": "one", "result": "ok"}),
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
                    },
                },
                completed("c2", None),
            ]
        );
    }

    #[test]
    fn a_turn_with_everything_closed_needs_nothing() {
        let events = log(&[
            json!({"type": "turn_started", "turnId": "t1", "prompt": "p"}),
            json!({"type": "tool_call_started", "turnId": "t1", "callId": "c1", "name": "read"}),
            json!({"type": "tool_call_completed", "turnId": "t1", "callId": "c1", "status": "ok"}),
            json!({"type": "message_completed", "turnId": "t1", "itemId": "i", "text": "x"}),
        ]);
        assert!(closing_events(&events, "t1").is_empty());
        // Another turn's open call is not this turn's business.
        assert!(closing_events(&events, "t2").is_empty());
    }

    #[test]
    fn a_pending_approval_is_denied_by_policy_before_its_call_closes() {
        let events = log(&[
            json!({"type": "turn_started", "turnId": "t1", "prompt": "p"}),
            json!({"type": "tool_call_started", "turnId": "t1", "callId": "c1", "name": "bash"}),
            json!({"type": "approval_requested", "turnId": "t1", "requestId": "r1", "callId": "c1"}),
            json!({"type": "approval_resolved", "turnId": "t1", "requestId": "r1", "decision": "allow_once", "by": "client"}),
            json!({"type": "tool_call_completed", "turnId": "t1", "callId": "c1", "status": "ok"}),
            json!({"type": "tool_call_started", "turnId": "t1", "callId": "c2", "name": "bash"}),
            json!({"type": "approval_requested", "turnId": "t1", "requestId": "r2", "callId": "c2"}),
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
