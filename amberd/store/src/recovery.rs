//! Crash recovery helpers: which turn was cut short, and how much of the persisted
//! context can be sent to a model as it is.

use std::collections::HashMap;

use amber_proto::{Message, Role};
use serde::Deserialize;

use super::Loaded;

/// The envelope fields recovery looks at (here and in `queued.rs`); the rest of an event
/// is skipped unparsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Head {
    #[serde(rename = "type", default)]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) turn_id: Option<String>,
    /// The sub-agent tag of the envelope: sub-agents' turns are not session turns.
    #[serde(default)]
    pub(super) agent: Option<String>,
    /// `prompt_queued`'s prompt.
    #[serde(default)]
    pub(super) prompt: Option<String>,
}

/// The turn that was running when the daemon died: the newest session-level
/// `turn_started` with no later `turn_completed` of the same `turnId`. Turns of a session
/// run one at a time, so only the newest `turn_started` can be open; events raised by
/// sub-agents (tagged `agent` in the envelope) are ignored.
pub fn interrupted_turn(loaded: &Loaded) -> Option<String> {
    let mut completed: Vec<String> = Vec::new();
    for event in loaded.events.iter().rev() {
        let Ok(head) = serde_json::from_str::<Head>(event.json.get()) else {
            continue;
        };
        if head.agent.is_some() {
            continue;
        }
        let Some(turn_id) = head.turn_id else {
            continue;
        };
        match head.kind.as_str() {
            "turn_completed" => completed.push(turn_id),
            "turn_started" => return (!completed.contains(&turn_id)).then_some(turn_id),
            _ => {}
        }
    }
    None
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
