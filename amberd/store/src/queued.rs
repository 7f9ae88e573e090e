//! Prompts a restart finds waiting: `session/prompt` acknowledged them (their
//! `prompt_queued` is in the log) but their turn never began. Restore runs them again in
//! order or ends each as cancelled (`[sessions] resume_queued`), so every acknowledged
//! `turnId` gets its `turn_completed`.

use super::StoredEvent;

/// A prompt that was queued and never started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedPrompt {
    pub turn_id: String,
    pub prompt: String,
}

/// Every session-level `prompt_queued` whose turn has neither started (`turn_started`) nor
/// ended (`turn_completed`, e.g. cancelled by an earlier restart), oldest first: the order
/// `session/prompt` acknowledged them in, which is the order they must run in.
pub fn queued_prompts(events: &[StoredEvent]) -> Vec<QueuedPrompt> {
    let mut waiting: Vec<QueuedPrompt> = Vec::new();
    for event in events {
        let json = event.json.get();
        // Most events are none of these three: skip them without parsing.
        if !(json.contains("prompt_queued") || json.contains("turn_")) {
            continue;
        }
        let Ok(head) = serde_json::from_str::<super::recovery::Head>(json) else {
            continue;
        };
        let (None, Some(turn_id)) = (head.agent, head.turn_id) else {
            continue;
        };
        match head.kind.as_str() {
            "prompt_queued" => waiting.push(QueuedPrompt {
                turn_id,
                prompt: head.prompt.unwrap_or_default(),
            }),
            "turn_started" | "turn_completed" => waiting.retain(|q| q.turn_id != turn_id),
            _ => {}
        }
    }
    waiting
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use super::*;
    use crate::tests::log;

    fn queued(turn: &str) -> Value {
        json!({"type": "prompt_queued", "turnId": turn, "prompt": format!("do {turn}")})
    }

    fn started(turn: &str) -> Value {
        json!({"type": "turn_started", "turnId": turn, "prompt": format!("do {turn}")})
    }

    fn completed(turn: &str, reason: &str) -> Value {
        json!({"type": "turn_completed", "turnId": turn, "stopReason": reason})
    }

    #[test]
    fn only_prompts_whose_turn_never_began_or_ended_are_waiting_in_queue_order() {
        let cases: Vec<(&str, Vec<Value>, Vec<&str>)> = vec![
            ("an empty log", vec![], vec![]),
            (
                "one prompt that ran",
                vec![queued("t1"), started("t1"), completed("t1", "end_turn")],
                vec![],
            ),
            (
                "the running turn is not waiting (restore ends it as interrupted)",
                vec![queued("t1"), started("t1")],
                vec![],
            ),
            (
                "four queued behind a running one, in the order they were acknowledged",
                vec![
                    queued("t1"),
                    started("t1"),
                    queued("t2"),
                    queued("t3"),
                    queued("t4"),
                    queued("t5"),
                ],
                vec!["t2", "t3", "t4", "t5"],
            ),
            (
                "a second restart: some ran, the rest still wait",
                vec![
                    queued("t1"),
                    queued("t2"),
                    queued("t3"),
                    started("t1"),
                    completed("t1", "error"),
                    started("t2"),
                ],
                vec!["t3"],
            ),
            (
                "a prompt already ended as cancelled by an earlier restart",
                vec![queued("t1"), completed("t1", "cancelled"), queued("t2")],
                vec!["t2"],
            ),
            (
                "logs written before prompt_queued existed have nothing waiting",
                vec![started("t1"), completed("t1", "end_turn"), started("t2")],
                vec![],
            ),
            (
                "sub-agent turns and other events are not session prompts",
                vec![
                    json!({"type": "prompt_queued", "turnId": "t1", "agent": "a1", "prompt": "x"}),
                    json!({"type": "message_completed", "turnId": "t2", "itemId": "i", "text": "prompt_queued"}),
                    queued("t2"),
                    json!({"type": "turn_started", "turnId": "t2", "agent": "a1", "prompt": "x"}),
                ],
                vec!["t2"],
            ),
        ];
        for (what, events, expected) in cases {
            let got = queued_prompts(&log(&events));
            let ids: Vec<&str> = got.iter().map(|q| q.turn_id.as_str()).collect();
            assert_eq!(ids, expected, "{what}");
            for q in &got {
                assert_eq!(q.prompt, format!("do {}", q.turn_id), "{what}");
            }
        }
    }
}
