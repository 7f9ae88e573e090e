//! What a JSON-RPC message says about itself — its `id`, whether it has a `method`, whether
//! it carries a `result` or `error` — read from its head without parsing the rest: enough to
//! answer an oversized line with its own id, and to match a frame to a request without
//! building the (possibly large) value it carries.
//!
//! The scan walks the top-level object's keys in order and stops as soon as it has both the
//! `id` and the kind of message (`method`, or `result`/`error`); values of other keys are
//! skipped unparsed (a message with no `id` is scanned to its end). A head cut anywhere (even inside a UTF-8 sequence) gives
//! whatever was read before the cut.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

/// The parts of a message's envelope read before the scan stopped.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Envelope {
    /// `id`, when it was read and is a valid JSON-RPC id (a string or a number).
    pub id: Option<Value>,
    /// `id` was present as `null`.
    pub null_id: bool,
    /// A `method` key was seen (a request or notification).
    pub method: bool,
    /// A `result` or `error` key was seen (an answer).
    pub outcome: bool,
}

impl Envelope {
    /// Reads the envelope of `bytes`, a whole message or only its head.
    pub fn of(bytes: &[u8]) -> Envelope {
        let mut envelope = Envelope::default();
        let mut de = serde_json::Deserializer::from_slice(bytes);
        // The scan stops early on purpose, and a head may be cut: the error that follows
        // says nothing about what was already read.
        let _ = de.deserialize_map(Scan { out: &mut envelope });
        envelope
    }

    /// An answer (`result` or `error`, no `method`).
    pub fn is_answer(&self) -> bool {
        self.outcome && !self.method
    }

    /// The id to answer this message with: its own when readable, else `null`.
    pub fn reply_id(&self) -> Value {
        self.id.clone().unwrap_or(Value::Null)
    }
}

struct Scan<'a> {
    out: &'a mut Envelope,
}

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<KeyName>()? {
            match key {
                KeyName::Id => {
                    match map.next_value::<Value>()? {
                        id @ (Value::String(_) | Value::Number(_)) => self.out.id = Some(id),
                        Value::Null => self.out.null_id = true,
                        _ => {}
                    }
                    if self.out.method || self.out.outcome {
                        return Ok(());
                    }
                }
                KeyName::Method | KeyName::Outcome => {
                    match key {
                        KeyName::Method => self.out.method = true,
                        _ => self.out.outcome = true,
                    }
                    if self.out.id.is_some() || self.out.null_id {
                        // Both known: the value (params, result) is not needed.
                        return Ok(());
                    }
                    map.next_value::<IgnoredAny>()?;
                }
                KeyName::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The keys the scan cares about.
enum KeyName {
    Id,
    Method,
    Outcome,
    Other,
}

impl<'de> de::Deserialize<'de> for KeyName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = KeyName;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<KeyName, E> {
        Ok(match key {
            "id" => KeyName::Id,
            "method" => KeyName::Method,
            "result" | "error" => KeyName::Outcome,
            _ => KeyName::Other,
        })
    }
}

#[cfg(test)]
mod tests {

    use serde_json::json;

    use super::*;

    #[test]
    fn ids_are_read_from_whole_messages_and_from_cut_heads() {
        let request =
            br#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"text":"aaaa"}}"#;
        for cut in [request.len(), 40, 24, 23] {
            let env = Envelope::of(&request[..cut]);
            assert_eq!(env.id, Some(json!(7)), "cut at {cut}");
        }
        // Cut inside the id: nothing read.
        assert_eq!(Envelope::of(&request[..22]).id, None);
        let env = Envelope::of(br#"{"id":"a\u00e9","method":"x"#);
        assert_eq!((env.id, env.method), (Some(json!("a\u{e9}")), true));
        // The id after the method and a nested id, still the top-level one.
        let env = Envelope::of(br#"{"method":"tools/call","params":{"id":3},"id":4,"params2":"#);
        assert_eq!((env.id, env.method), (Some(json!(4)), true));
    }

    #[test]
    fn invalid_ids_and_non_objects_give_no_id() {
        for bytes in [
            &br#"{"id":[1],"method":"x"}"#[..],
            br#"{"id":{"a":1}}"#,
            br#"{"id":true}"#,
            br#"[{"id":1}]"#,
            b"5",
            b"\xff\xfe",
            br#"{"id":"\ud800","method":"x"}"#,
        ] {
            assert_eq!(
                Envelope::of(bytes).id,
                None,
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        assert!(Envelope::of(br#"{"jsonrpc":"2.0","id":null,"error":{}}"#).null_id);
    }

    #[test]
    fn answers_and_requests_are_told_apart() {
        let answer = Envelope::of(br#"{"jsonrpc":"2.0","id":3,"result":{"big":"..."}}"#);
        assert!(answer.is_answer());
        assert_eq!(answer.id, Some(json!(3)));
        let error = Envelope::of(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32007}}"#);
        assert!(error.is_answer() && error.null_id && error.id.is_none());
        let event = Envelope::of(br#"{"jsonrpc":"2.0","method":"session/event","params":{}}"#);
        assert!(!event.is_answer() && event.method);
    }
}
