//! Prompts a restart finds waiting: `session/prompt` acknowledged them (their
//! `prompt_queued` is in the log) but their turn never began. Restore runs them again in
//! order or ends each as cancelled (`[sessions] resume_queued`), so every acknowledged
//! `turnId` gets its `turn_completed`.

use amber_proto::EventKind;

use crate::StoredEvent;

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
    let types = ["prompt_queued", "turn_started", "turn_completed"];
    for event in events.iter().filter_map(|e| e.decode_if(&types)) {
        let (None, Some(turn_id)) = (event.agent_id, event.turn_id) else {
            continue;
        };
        match event.kind {
            EventKind::PromptQueued { prompt } => waiting.push(QueuedPrompt { turn_id, prompt }),
            EventKind::TurnStarted { .. } | EventKind::TurnCompleted { .. } => {
                waiting.retain(|q| q.turn_id != turn_id);
            }
            _ => {}
        }
    }
    waiting
}

#[cfg(test)]
mod tests {

    use amber_proto::{Event, Role, StopReason, Usage};

    use super::*;
    use crate::tests::{log, turn_event};

    fn queued(turn: &str) -> Event {
        let prompt = format!("do {turn}");
        turn_event(turn, None, EventKind::PromptQueued { prompt })
    }

    fn started(turn: &str) -> Event {
        let prompt = format!("do {turn}");
        turn_event(turn, None, EventKind::TurnStarted { prompt })
    }

    fn completed(turn: &str, stop_reason: StopReason) -> Event {
        let kind = EventKind::TurnCompleted {
            stop_reason,
            error: None,
            usage: Usage::default(),
            output: None,
            cost_usd: None,
            session_cost_usd: None,
            confirm_usage: None,
        };
        turn_event(turn, None, kind)
    }

    #[test]
    fn only_prompts_whose_turn_never_began_or_ended_are_waiting_in_queue_order() {
        let cases: Vec<(&str, Vec<Event>, Vec<&str>)> = vec![
            ("an empty log", vec![], vec![]),
            (
                "one prompt that ran",
                vec![
                    queued("t1"),
                    started("t1"),
                    completed("t1", StopReason::EndTurn),
                ],
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
                    completed("t1", StopReason::Error),
                    started("t2"),
                ],
                vec!["t3"],
            ),
            (
                "a prompt already ended as cancelled by an earlier restart",
                vec![
                    queued("t1"),
                    completed("t1", StopReason::Cancelled),
                    queued("t2"),
                ],
                vec!["t2"],
            ),
            (
                "logs written before prompt_queued existed have nothing waiting",
                vec![
                    started("t1"),
                    completed("t1", StopReason::EndTurn),
                    started("t2"),
                ],
                vec![],
            ),
            (
                "sub-agent turns and other events are not session prompts",
                vec![
                    turn_event(
                        "t1",
                        Some("a1"),
                        EventKind::PromptQueued { prompt: "x".into() },
                    ),
                    turn_event(
                        "t2",
                        None,
                        EventKind::MessageCompleted {
                            item_id: "i".into(),
                            role: Role::Assistant,
                            text: "prompt_queued".into(),
                        },
                    ),
                    queued("t2"),
                    turn_event(
                        "t2",
                        Some("a1"),
                        EventKind::TurnStarted { prompt: "x".into() },
                    ),
                ],
                vec!["t2"],
            ),
        ];
        for (what, events, expected) in cases {
            let got = queued_prompts(&log(events));
            let ids: Vec<&str> = got.iter().map(|q| q.turn_id.as_str()).collect();
            assert_eq!(ids, expected, "{what}");
            for q in &got {
                assert_eq!(q.prompt, format!("do {}", q.turn_id), "{what}");
            }
        }
    }
}
