//! Crash recovery helpers: which turn was cut short, what it had asked and spent, and how
//! much of the persisted context can be sent to a model as it is.

use std::collections::HashMap;

use amber_proto::{EventKind, Message, Role, Usage};

use crate::{Loaded, StoredEvent};

/// The turn that was running when the daemon died: the newest session-level
/// `turn_started` with no later `turn_completed` of the same `turnId`. Turns of a session
/// run one at a time, so only the newest `turn_started` can be open; events raised by
/// sub-agents (tagged `agent` in the envelope) are ignored.
pub fn interrupted_turn(loaded: &Loaded) -> Option<String> {
    let mut completed: Vec<String> = Vec::new();
    let turn_ends = ["turn_started", "turn_completed"];
    for event in loaded
        .events
        .iter()
        .rev()
        .filter_map(|e| e.decode_if(&turn_ends))
    {
        if event.agent_id.is_some() {
            continue;
        }
        let Some(turn_id) = event.turn_id else {
            continue;
        };
        match event.kind {
            EventKind::TurnCompleted { .. } => completed.push(turn_id),
            EventKind::TurnStarted { .. } => {
                return (!completed.contains(&turn_id)).then_some(turn_id);
            }
            _ => {}
        }
    }
    None
}

/// The prompt of turn `turn_id` (its newest `turn_started`).
pub fn turn_prompt(events: &[StoredEvent], turn_id: &str) -> Option<String> {
    events
        .iter()
        .rev()
        .filter_map(|e| e.decode_if(&["turn_started"]))
        .find_map(|event| match event.kind {
            EventKind::TurnStarted { prompt } if event.turn_id.as_deref() == Some(turn_id) => {
                Some(prompt)
            }
            _ => None,
        })
}

/// The events a turn may publish while it waits, before its prompt reaches the model (its
/// fleet session waiting for a runner, that runner's setup).
const WAITING_EVENTS: &[&str] = &[
    "prompt_queued",
    "turn_started",
    "fleet_changed",
    "fleet_setup",
    "environment_connected",
    "environment_lost",
    "environment_resumed",
];

/// Whether turn `turn_id` did anything beyond waiting: a model request, a message, a tool
/// call, an approval. One that did not can run again from its prompt.
pub fn turn_went_past_waiting(events: &[StoredEvent], turn_id: &str) -> bool {
    events
        .iter()
        .filter(|e| e.may_be_of_turn(turn_id))
        .filter_map(StoredEvent::decode)
        .filter(|event| event.turn_id.as_deref() == Some(turn_id))
        .any(|event| !WAITING_EVENTS.contains(&event.kind.type_name()))
}

/// What the calls of turn `turn_id` (its sub-agents' included) used, from its `usage`
/// events: the interrupted turn's `turn_completed.usage`, as a finished turn would report.
pub fn turn_usage(events: &[StoredEvent], turn_id: &str) -> Usage {
    let mut spent = Usage::default();
    let of_turn = events.iter().filter(|e| e.may_be_of_turn(turn_id));
    for event in of_turn.filter_map(|e| e.decode_if(&["usage"])) {
        if let EventKind::Usage { usage, .. } = event.kind
            && event.turn_id.as_deref() == Some(turn_id)
        {
            spent.add(&usage);
        }
    }
    spent
}

/// Length of the longest prefix of `context` that a model accepts: every assistant
/// message with tool calls is followed by exactly one tool message per call (in any
/// order) before anything else, and no tool message stands outside such a group. The
/// first half-finished or broken group and everything after it is cut.
pub fn consistent_context(context: &[(Message, u64)]) -> usize {
    let mut i = 0;
    while let Some((message, _)) = context.get(i) {
        match message.role {
            Role::Tool => return i,
            Role::Assistant if !message.tool_calls.is_empty() => {
                let calls = message.tool_calls.len();
                let Some(answers) = context.get(i + 1..i + 1 + calls) else {
                    return i;
                };
                if !answers_match(message, answers) {
                    return i;
                }
                i += 1 + calls;
            }
            _ => i += 1,
        }
    }
    i
}

/// Whether `answers` are tool messages answering each call of `call` exactly once.
fn answers_match(call: &Message, answers: &[(Message, u64)]) -> bool {
    let mut open: HashMap<&str, usize> = HashMap::new();
    for c in &call.tool_calls {
        *open.entry(c.id.as_str()).or_default() += 1;
    }
    answers.iter().all(|(answer, _)| {
        answer.role == Role::Tool
            && answer
                .tool_call_id
                .as_deref()
                .and_then(|id| open.get_mut(id))
                .is_some_and(|left| {
                    let ok = *left > 0;
                    *left = left.saturating_sub(1);
                    ok
                })
    })
}

#[cfg(test)]
mod tests {
    use amber_proto::Event;

    use super::*;
    use crate::tests::{log, turn_event};

    fn usage(turn: &str, agent: Option<&str>, prompt_tokens: u64, total: u64) -> Event {
        let call = |p: u64| Usage {
            cache_write_tokens: 0,
            cost_usd: None,
            prompt_tokens: p,
            completion_tokens: 1,
            cached_tokens: 0,
            total_tokens: p + 1,
        };
        turn_event(
            turn,
            agent,
            EventKind::usage(call(prompt_tokens), call(total)),
        )
    }

    #[test]
    fn the_interrupted_turn_reports_what_its_calls_used() {
        let events = log(vec![
            usage("t0", None, 1000, 1000),
            turn_event("t1", None, EventKind::TurnStarted { prompt: "p".into() }),
            usage("t1", None, 100, 1100),
            usage("t1", Some("a1"), 10, 1110),
        ]);
        let got = turn_usage(&events, "t1");
        assert_eq!(
            (got.prompt_tokens, got.completion_tokens, got.total_tokens),
            (110, 2, 112)
        );
        assert_eq!(turn_usage(&events, "t2"), Usage::default());
    }
}
