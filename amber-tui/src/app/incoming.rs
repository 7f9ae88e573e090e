//! What the subscription delivers, as the app applies it: an [`Event`] of `amber_proto`, or —
//! from a daemon newer than this build — an event it cannot decode, kept as its `type` (and
//! `seq`, so a replay never shows it twice) for a dimmed line in the transcript instead of
//! being dropped.

use amber_client::RawEvent;
use amber_proto::{Event, EventKind};
use serde::Deserialize;

/// One event of the subscription.
#[derive(Debug, Clone, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "nearly every event is `Known`: boxing it would allocate once per delta"
)]
pub enum Incoming {
    /// An event this build knows.
    Known(Event),
    /// An event this build cannot decode: a type it does not know, or a shape it does not.
    Unknown(UnknownEvent),
}

/// The parts of an undecodable event the app still uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEvent {
    /// Durable events are numbered whatever their type: replayed ones are still skipped.
    pub seq: Option<u64>,
    /// Its `type` (what the transcript shows), or [`UnknownEvent::UNTYPED`].
    pub type_name: String,
}

/// The envelope fields every event has, read from one that does not decode as a whole.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default, rename = "type")]
    type_name: Option<String>,
}

impl UnknownEvent {
    /// Shown for an event object without a string `type`.
    pub const UNTYPED: &'static str = "(no type)";

    /// Reads what it can of an event object that did not decode.
    fn read(json: &str) -> Self {
        let head = serde_json::from_str::<Head>(json).unwrap_or(Head {
            seq: None,
            type_name: None,
        });
        UnknownEvent {
            seq: head.seq,
            type_name: head
                .type_name
                .unwrap_or_else(|| UnknownEvent::UNTYPED.to_owned()),
        }
    }
}

impl Incoming {
    /// Decodes one event object (JSON text as the daemon sent it).
    pub fn from_json(json: &str) -> Self {
        match serde_json::from_str::<Event>(json) {
            Ok(event) => Incoming::Known(event),
            Err(_) => Incoming::Unknown(UnknownEvent::read(json)),
        }
    }

    /// The durable `seq`, if the event has one.
    pub fn seq(&self) -> Option<u64> {
        match self {
            Incoming::Known(event) => event.seq,
            Incoming::Unknown(unknown) => unknown.seq,
        }
    }

    /// A `retrying` event (whose notice every other event ends).
    pub(crate) fn is_retrying(&self) -> bool {
        matches!(
            self,
            Incoming::Known(Event {
                kind: EventKind::Retrying { .. },
                ..
            })
        )
    }
}

/// amber-client has already decoded the event (`RawEvent::event`): only an undecodable one is
/// read again, for its type.
impl From<RawEvent> for Incoming {
    fn from(raw: RawEvent) -> Self {
        match raw.event {
            Some(event) => Incoming::Known(event),
            None => Incoming::Unknown(UnknownEvent::read(raw.raw.get())),
        }
    }
}

impl From<Event> for Incoming {
    fn from(event: Event) -> Self {
        Incoming::Known(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_event_decodes_to_its_kind() {
        let json = r#"{"type":"steer","seq":4,"sessionId":"s_1","time":"t","reason":"tool_failures","text":"stop"}"#;
        let Incoming::Known(event) = Incoming::from_json(json) else {
            panic!("not decoded: {json}");
        };
        assert_eq!(event.seq, Some(4));
        assert!(matches!(event.kind, EventKind::Steer { .. }));
    }

    #[test]
    fn an_unknown_type_keeps_its_name_and_seq() {
        let json = r#"{"type":"plan_updated","seq":9,"sessionId":"s_1","time":"t","steps":[]}"#;
        assert_eq!(
            Incoming::from_json(json),
            Incoming::Unknown(UnknownEvent {
                seq: Some(9),
                type_name: "plan_updated".into()
            })
        );
    }

    #[test]
    fn an_event_without_a_type_is_still_unknown_not_lost() {
        for json in [r#"{"seq":3}"#, r#"{"type":7}"#, "[1,2]", "null"] {
            let Incoming::Unknown(unknown) = Incoming::from_json(json) else {
                panic!("decoded: {json}");
            };
            assert_eq!(unknown.type_name, UnknownEvent::UNTYPED, "{json}");
        }
    }
}
