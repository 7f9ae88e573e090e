//! Reading stored events back as the protocol's [`Event`], for crash recovery and restore.
//!
//! **Invariant:** an event that does not decode (a type or field this daemon does not
//! know, written by a newer one; an event whose serialisation failed and was stored as
//! `null`) is skipped by every reader, never an error: one such line must not make a
//! session unloadable. The log itself keeps it byte for byte, so replays still send it.

use amber_proto::Event;

use crate::StoredEvent;

impl StoredEvent {
    /// This event as the protocol types it; `None` when it does not decode.
    pub fn decode(&self) -> Option<Event> {
        serde_json::from_str(self.json.get()).ok()
    }

    /// [`StoredEvent::decode`], only for an event whose text mentions one of `types`
    /// (wire `type` names): a substring search, cheaper than decoding, that every event of
    /// those types passes, so readers skip the many events of other types undecoded.
    pub(crate) fn decode_if(&self, types: &[&str]) -> Option<Event> {
        let json = self.json.get();
        if types.iter().any(|t| json.contains(t)) {
            self.decode()
        } else {
            None
        }
    }

    /// Whether this event can be one of turn `turn_id`'s: a substring search that every event
    /// of that turn passes, since JSON writes an id without quotes, backslashes or control
    /// characters as it is (any other id passes every event).
    pub(crate) fn may_be_of_turn(&self, turn_id: &str) -> bool {
        let verbatim = !turn_id
            .chars()
            .any(|c| c == '"' || c == '\\' || c.is_control());
        !verbatim || self.json.get().contains(turn_id)
    }
}

#[cfg(test)]
mod tests {

    use amber_proto::EventKind;
    use serde_json::json;
    use serde_json::value::RawValue;

    use crate::tests::{log, meta, turn_event};
    use crate::{
        Loaded, closing_events, first_prompt, interrupted_turn, last_todos, last_usage_total,
        queued_prompts, turn_prompt, turn_usage,
    };

    #[test]
    fn events_that_do_not_decode_are_skipped_by_every_reader() {
        let mut events = log(vec![
            turn_event("t1", None, EventKind::PromptQueued { prompt: "p".into() }),
            turn_event("t1", None, EventKind::TurnStarted { prompt: "p".into() }),
        ]);
        // A newer daemon's event type, an event of a known type missing its fields, and
        // what the hub stores when an event cannot be serialised: none may end the turn,
        // open a call or stop a load.
        let unreadable = [
            json!({"seq": 3, "sessionId": "s", "time": "t", "turnId": "t1",
                   "type": "turn_paused", "reason": "a newer daemon's event"}),
            json!({"seq": 4, "turnId": "t1", "type": "turn_completed"}),
            json!({"seq": 5, "turnId": "t1", "type": "tool_call_started", "callId": "c1"}),
            json!({"seq": 6, "turnId": "t1", "type": "todo_updated"}),
            json!(null),
        ];
        for (json, seq) in unreadable.iter().zip(3..) {
            let json = RawValue::from_string(json.to_string()).unwrap();
            events.push(crate::StoredEvent { seq, json });
        }
        assert!(events[2..].iter().all(|e| e.decode().is_none()));
        let loaded = Loaded {
            meta: meta("s", "1"),
            events,
            context: Vec::new(),
            repaired_tail: false,
            confirm_at: None,
        };
        let events = &loaded.events;
        assert_eq!(interrupted_turn(&loaded).as_deref(), Some("t1"));
        assert!(closing_events(events, "t1").is_empty());
        assert!(queued_prompts(events).is_empty());
        assert_eq!(turn_prompt(events, "t1").as_deref(), Some("p"));
        assert_eq!(turn_usage(events, "t1"), amber_proto::Usage::default());
        assert_eq!(last_todos(events), None);
        assert_eq!(last_usage_total(events), None);
        assert_eq!(first_prompt(events).as_deref(), Some("p"));
    }

    #[test]
    fn events_of_a_turn_whose_id_json_escapes_are_still_found() {
        let turn = "t\"1\\";
        let usage = amber_proto::Usage {
            total_tokens: 7,
            ..amber_proto::Usage::default()
        };
        let started = EventKind::ToolCallStarted {
            item_id: "i".into(),
            call_id: "c1".into(),
            name: "read".into(),
            arguments: json!({}),
        };
        let events = log(vec![
            turn_event(turn, None, EventKind::TurnStarted { prompt: "p".into() }),
            turn_event(turn, None, started),
            turn_event(turn, None, EventKind::usage(usage, usage)),
        ]);
        assert!(!events[1].json.get().contains(turn), "the id is escaped");
        assert_eq!(closing_events(&events, turn).len(), 1);
        assert_eq!(turn_usage(&events, turn), usage);
        assert!(closing_events(&events, "t1").is_empty());
    }
}
