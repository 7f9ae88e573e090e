//! What a session's events say that its metadata or tools may not know yet: the metadata is
//! saved after a turn's events, so after a crash it can be a turn behind the log, and the
//! todo list lives only in the events.

use amber_proto::{EventKind, Todo, Usage};

use crate::StoredEvent;

/// The todo list as the last `todo_updated` left it.
pub fn last_todos(events: &[StoredEvent]) -> Option<Vec<Todo>> {
    events
        .iter()
        .rev()
        .filter_map(|e| e.decode_if(&["todo_updated"]))
        .find_map(|event| match event.kind {
            EventKind::TodoUpdated { todos } => Some(todos),
            _ => None,
        })
}

/// The session's running usage total, as the last `usage` event reported it.
pub fn last_usage_total(events: &[StoredEvent]) -> Option<Usage> {
    events
        .iter()
        .rev()
        .filter_map(|e| e.decode_if(&["usage"]))
        .find_map(|event| match event.kind {
            EventKind::Usage { total, .. } => Some(total),
            _ => None,
        })
}

/// The prompt of the session's first turn (sub-agents' turns are tagged and skipped).
pub fn first_prompt(events: &[StoredEvent]) -> Option<String> {
    events
        .iter()
        .filter_map(|e| e.decode_if(&["turn_started"]))
        .find_map(|event| match event.kind {
            EventKind::TurnStarted { prompt } if event.agent_id.is_none() => Some(prompt),
            _ => None,
        })
}

/// The ids of the completed tool calls whose id starts with `prefix`, oldest first: the
/// calls the daemon made itself under that prefix (a result delivered into the session).
pub fn completed_calls_with_prefix(events: &[StoredEvent], prefix: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.json.get().contains(prefix))
        .filter_map(|e| e.decode_if(&["tool_call_completed"]))
        .filter_map(|event| match event.kind {
            EventKind::ToolCallCompleted { call_id, .. } if call_id.starts_with(prefix) => {
                Some(call_id)
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use amber_proto::{Event, TodoStatus};

    use super::*;
    use crate::tests::{log, turn_event};

    fn todos(status: TodoStatus) -> Vec<Todo> {
        vec![Todo {
            id: "1".into(),
            text: "write the test".into(),
            status,
        }]
    }

    fn total(total_tokens: u64) -> Usage {
        Usage {
            total_tokens,
            ..Usage::default()
        }
    }

    fn started(turn: &str, agent: Option<&str>, prompt: &str) -> Event {
        let prompt = prompt.into();
        turn_event(turn, agent, EventKind::TurnStarted { prompt })
    }

    #[test]
    fn the_newest_todos_and_usage_total_and_the_first_session_prompt_are_read_back() {
        assert_eq!(last_todos(&[]), None);
        assert_eq!(last_usage_total(&[]), None);
        assert_eq!(first_prompt(&[]), None);
        let events = log(vec![
            // A sub-agent's turn is not the session's first prompt.
            started("t1", Some("a1"), "the sub-agent's task"),
            started("t1", None, "first"),
            turn_event("t1", None, EventKind::usage(total(10), total(10))),
            turn_event(
                "t1",
                None,
                EventKind::TodoUpdated {
                    todos: todos(TodoStatus::Pending),
                },
            ),
            started("t2", None, "second"),
            turn_event("t2", None, EventKind::usage(total(5), total(15))),
            turn_event(
                "t2",
                None,
                EventKind::TodoUpdated {
                    todos: todos(TodoStatus::Done),
                },
            ),
            // `turn_completed` carries a `usage` too; it is not the running total.
            turn_event(
                "t2",
                None,
                EventKind::TurnCompleted {
                    stop_reason: amber_proto::StopReason::EndTurn,
                    error: None,
                    usage: total(5),
                    output: None,
                    cost_usd: None,
                    session_cost_usd: None,
                    confirm_usage: None,
                },
            ),
        ]);
        assert_eq!(last_todos(&events), Some(todos(TodoStatus::Done)));
        assert_eq!(last_usage_total(&events), Some(total(15)));
        assert_eq!(first_prompt(&events).as_deref(), Some("first"));
    }

    #[test]
    fn only_completed_calls_under_the_prefix_are_read_back_in_order() {
        let completed = |id: &str| {
            turn_event(
                "t1",
                None,
                EventKind::ToolCallCompleted {
                    call_id: id.into(),
                    status: amber_proto::ToolStatus::Ok,
                    output: "mine_2 in the output".into(),
                    duration_ms: 0,
                    diff: None,
                },
            )
        };
        let events = log(vec![
            completed("mine_1"),
            completed("call_1"),
            turn_event(
                "t1",
                None,
                EventKind::ToolCallStarted {
                    item_id: "mine_3".into(),
                    call_id: "mine_3".into(),
                    name: "task_wait".into(),
                    arguments: serde_json::json!({}),
                },
            ),
            completed("mine_2"),
        ]);
        assert_eq!(
            completed_calls_with_prefix(&events, "mine_"),
            ["mine_1", "mine_2"]
        );
        assert!(completed_calls_with_prefix(&events, "none_").is_empty());
    }
}
