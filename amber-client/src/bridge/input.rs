//! What the bridge makes of one input line, before anything reaches the daemon: a message to
//! forward (with the ids whose answers it will wait for), or a line it answers itself.
//!
//! **The bridge waits only for answers the daemon is bound to send**: those of requests with
//! a valid JSON-RPC id — a string, or an integer the daemon's id type holds (`0..=u64::MAX`,
//! as jsonrpsee reads ids). A notification, a request with an invalid id (`1.5`, `true`,
//! `[1]`, `-0`, `2^64`, `null`) or a bare value gets what the daemon makes of it, printed if
//! it comes, but end of input never waits for it. A line that is not UTF-8 or not JSON is
//! never forwarded: the bridge answers it with a `-32700` error line and goes on (its `id`
//! is the line's when it comes before the fault, as in `{"id":3,"params":"\ud800"}`, else
//! `null`).
//! Nor is a line over the bridge's limit (`lines.rs`): it is answered `-32007` naming the
//! limit, with the request's id when its head shows one.
//!
//! A request over a limit the daemon was configured lower than the bridge's gets the
//! daemon's `-32007` with `id: null`; the bridge stops waiting for the largest request in
//! flight then, the one that answer is for (`in_flight.rs` in the client explains why).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::envelope::Envelope;
use super::lines::Line;

/// One non-blank input line, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InputLine {
    /// Valid JSON: sent as it is.
    Forward(Outgoing),
    /// Not UTF-8 or not JSON: this error line goes to the output instead.
    Unparsable(String),
}

/// A message to forward and what to expect back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outgoing {
    pub(crate) text: String,
    /// Keys ([`id_key`]) of the answers the daemon owes for it.
    pub(crate) answers: Vec<String>,
    /// The key of its id when it is an `initialize` request with a valid id.
    pub(crate) initialize: Option<String>,
}

/// Classifies one line as read: a line over the limit is answered here without being
/// parsed. `limit` is the bridge's, named in the answer.
pub(crate) fn classify_line(line: &Line, number: u64, limit: usize) -> Option<InputLine> {
    match line {
        Line::Complete(bytes) => classify(bytes, number),
        Line::Oversized { head, len } => Some(InputLine::Unparsable(
            json!({
                "jsonrpc": "2.0",
                "id": Envelope::of(head).reply_id(),
                "error": {
                    "code": amber_proto::errors::REQUEST_TOO_BIG,
                    "message": format!(
                        "Request is too big: input line {number} has {len} bytes, over the \
                         bridge's limit of {limit} bytes; it was not sent to amberd"
                    ),
                    "data": {"limit": limit},
                },
            })
            .to_string(),
        )),
    }
}

/// Classifies one line (without its newline); `None` for a blank one. `number` (1-based)
/// names the line in the error message.
pub(crate) fn classify(bytes: &[u8], number: u64) -> Option<InputLine> {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Some(InputLine::Unparsable(parse_error(
            bytes,
            format!("input line {number} is not valid UTF-8"),
        )));
    };
    if text.trim().is_empty() {
        return None;
    }
    let msg = match serde_json::from_str::<Value>(text) {
        Ok(msg) => msg,
        Err(e) => {
            return Some(InputLine::Unparsable(parse_error(
                bytes,
                format!("input line {number} is not JSON: {e}"),
            )));
        }
    };
    let answers = match &msg {
        Value::Array(items) => items.iter().filter_map(owed_answer).collect(),
        single => owed_answer(single).into_iter().collect(),
    };
    let initialize = (msg.get("method").and_then(Value::as_str) == Some("initialize"))
        .then(|| owed_answer(&msg))
        .flatten();
    Some(InputLine::Forward(Outgoing {
        text: text.to_owned(),
        answers,
        initialize,
    }))
}

/// The JSON-RPC parse error line the bridge prints for a line it cannot forward: with the
/// line's id when it was read before the fault, else `id: null`.
fn parse_error(bytes: &[u8], message: String) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": Envelope::of(bytes).reply_id(),
        "error": { "code": amber_proto::errors::PARSE_ERROR, "message": format!("Parse error: {message}") },
    })
    .to_string()
}

/// The key of the answer one message is owed: a request object with a valid id.
fn owed_answer(msg: &Value) -> Option<String> {
    valid_id(msg.as_object()?.get("id")?)
}

/// A valid id's key: a string, or an integer jsonrpsee's `Id` holds (`u64`). Everything
/// else (`null`, fractions, `-0`, negatives, out of range, booleans, arrays) is `None`.
pub(crate) fn valid_id(id: &Value) -> Option<String> {
    match id {
        Value::String(_) => Some(id_key(id)),
        Value::Number(n) if n.is_u64() => Some(id_key(id)),
        _ => None,
    }
}

/// The map key of an id: its JSON text, so `"1"` and `1` stay apart.
fn id_key(id: &Value) -> String {
    id.to_string()
}

/// Answers still owed by the daemon, by id key (an id may be in flight more than once),
/// each with the size of the message that asked for it.
#[derive(Debug, Default)]
pub struct Pending {
    by_id: HashMap<String, Vec<usize>>,
}

impl Pending {
    /// Counts the answers a forwarded message is owed.
    pub(crate) fn sent(&mut self, outgoing: &Outgoing) {
        for key in &outgoing.answers {
            self.by_id
                .entry(key.clone())
                .or_default()
                .push(outgoing.text.len());
        }
    }

    /// Ticks off the answers one incoming frame carries.
    pub fn received(&mut self, frame: &str) {
        if frame.trim_start().starts_with('[') {
            if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(frame) {
                items.iter().for_each(|item| self.received_one(item));
            }
            return;
        }
        // Read without parsing what the answer carries (a result may be megabytes).
        let envelope = Envelope::of(frame.as_bytes());
        if !envelope.is_answer() {
            return;
        }
        match envelope.id {
            Some(id) => {
                if let Some(key) = valid_id(&id) {
                    self.tick(&key);
                }
            }
            None if envelope.null_id && is_too_big(frame) => self.tick_largest(),
            None => {}
        }
    }

    fn received_one(&mut self, msg: &Value) {
        if let Some(key) = answer_id(msg) {
            self.tick(&key);
        }
    }

    fn tick(&mut self, key: &str) {
        if let Some(sizes) = self.by_id.get_mut(key) {
            sizes.pop();
            if sizes.is_empty() {
                self.by_id.remove(key);
            }
        }
    }

    /// The daemon refused a message as too big without reading its id: the largest one
    /// in flight is the one refused.
    fn tick_largest(&mut self) {
        let largest = self
            .by_id
            .iter()
            .flat_map(|(key, sizes)| {
                sizes
                    .iter()
                    .enumerate()
                    .map(move |(at, size)| (*size, key, at))
            })
            .max()
            .map(|(_, key, at)| (key.clone(), at));
        if let Some((key, at)) = largest
            && let Some(sizes) = self.by_id.get_mut(&key)
        {
            sizes.swap_remove(at);
            if sizes.is_empty() {
                self.by_id.remove(&key);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_id.values().map(Vec::len).sum()
    }
}

/// A `-32007` error (request too big).
fn is_too_big(frame: &str) -> bool {
    serde_json::from_str::<Value>(frame)
        .ok()
        .and_then(|v| v.get("error")?.get("code")?.as_i64())
        == Some(i64::from(amber_proto::errors::REQUEST_TOO_BIG))
}

/// The id key of a response (`None` for notifications and answers with an invalid id).
fn answer_id(msg: &Value) -> Option<String> {
    let map = msg.as_object()?;
    if map.contains_key("method") {
        return None; // a notification from the daemon
    }
    valid_id(map.get("id")?)
}

/// The id key of a single response frame, to match the handshake's answer.
pub(crate) fn frame_answer_id(frame: &str) -> Option<String> {
    answer_id(&serde_json::from_str::<Value>(frame).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forward(line: &str) -> Outgoing {
        match classify(line.as_bytes(), 1) {
            Some(InputLine::Forward(out)) => out,
            other => panic!("{line}: expected a message to forward, got {other:?}"),
        }
    }

    #[test]
    fn only_valid_ids_are_waited_for() {
        // (id as written, whether the daemon owes an answer keyed by it)
        let cases: &[(&str, bool)] = &[
            (r#""a""#, true),
            (r#""""#, true),
            ("0", true),
            ("7", true),
            ("18446744073709551615", true),  // u64::MAX
            ("18446744073709551616", false), // 2^64
            ("-1", false),
            ("-0", false),
            ("1.5", false),
            ("1.0", false),
            ("1e2", false),
            ("true", false),
            ("null", false),
            ("[1]", false),
            (r#"{"a":1}"#, false),
        ];
        for (id, owed) in cases {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"daemon/status"}}"#);
            let out = forward(&line);
            assert_eq!(!out.answers.is_empty(), *owed, "id {id}");
            if *owed {
                assert_eq!(out.answers, vec![id.to_string()], "id {id}");
            }
        }
    }

    #[test]
    fn notifications_bare_values_and_batches() {
        assert!(
            forward(r#"{"jsonrpc":"2.0","method":"note"}"#)
                .answers
                .is_empty()
        );
        assert!(forward("5").answers.is_empty());
        assert!(forward("[]").answers.is_empty());
        assert!(forward("{}").answers.is_empty());
        // A malformed request with a valid id is still answered with that id.
        assert_eq!(forward(r#"{"id":3}"#).answers, vec!["3"]);
        let batch = forward(
            r#"[{"jsonrpc":"2.0","id":2,"method":"x"},{"jsonrpc":"2.0","method":"y"},{"jsonrpc":"2.0","id":1.5,"method":"z"},{"jsonrpc":"2.0","id":"b","method":"w"}]"#,
        );
        assert_eq!(batch.answers, vec!["2", r#""b""#]);
    }

    #[test]
    fn unparsable_lines_are_answered_here_with_a_parse_error() {
        // (line, what the message says, the id answered)
        let cases: &[(&[u8], &str, Value)] = &[
            (b"\xff\xfe{}", "not valid UTF-8", Value::Null),
            (
                b"{\"id\":1,\"method\":\"a\xc3\x28\"}",
                "not valid UTF-8",
                json!(1),
            ),
            (b"{not json", "not JSON", Value::Null),
            (br#"{"id":"\ud800","method":"x"}"#, "not JSON", Value::Null),
            (
                br#"{"id":"q","params":{"text":"\ud800"}}"#,
                "not JSON",
                json!("q"),
            ),
        ];
        for (bytes, what, id) in cases {
            let Some(InputLine::Unparsable(line)) = classify(bytes, 4) else {
                panic!("{bytes:?} should be unparsable");
            };
            let v: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["error"]["code"], -32700, "{line}");
            assert_eq!(&v["id"], id, "{line}");
            let message = v["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("line 4") && message.contains(what),
                "{message}"
            );
        }
        assert_eq!(classify(b"   ", 1), None);
        assert_eq!(classify(b"\r", 1), None);
    }

    #[test]
    fn the_handshake_is_recognised_only_with_a_valid_id() {
        let init = forward(r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}"#);
        assert_eq!(init.initialize.as_deref(), Some("7"));
        let odd = forward(r#"{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{}}"#);
        assert_eq!(odd.initialize, None, "an answer keyed 1.5 never comes");
        assert_eq!(
            forward(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#).initialize,
            None
        );
        assert_eq!(
            frame_answer_id(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#).as_deref(),
            Some("7")
        );
        assert_eq!(
            frame_answer_id(r#"{"jsonrpc":"2.0","method":"session/event","params":{}}"#),
            None
        );
    }

    #[test]
    fn pending_ticks_off_answers_by_id() {
        let mut p = Pending::default();
        p.sent(&forward(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#,
        ));
        p.sent(&forward(
            r#"{"jsonrpc":"2.0","id":"a","method":"daemon/status"}"#,
        ));
        p.sent(&forward(
            r#"{"jsonrpc":"2.0","id":"a","method":"daemon/status"}"#,
        ));
        p.sent(&forward(
            r#"{"jsonrpc":"2.0","id":true,"method":"daemon/status"}"#,
        ));
        assert_eq!(p.len(), 3);
        p.received(
            r#"{"jsonrpc":"2.0","method":"session/event","params":{"subscription":1,"result":{}}}"#,
        );
        p.received(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}"#);
        p.received(r#"{"jsonrpc":"2.0","id":"1","result":{}}"#);
        assert_eq!(
            p.len(),
            3,
            "notifications, null ids and other ids tick nothing off"
        );
        p.received(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        p.received(
            r#"[{"jsonrpc":"2.0","id":"a","result":{}},{"jsonrpc":"2.0","id":"a","result":{}}]"#,
        );
        assert!(p.is_empty());
    }

    #[test]
    fn an_oversized_line_is_answered_with_its_id_and_the_limit() {
        let cases: &[(&[u8], Value)] = &[
            (
                br#"{"jsonrpc":"2.0","id":41,"method":"session/prompt","params":{"text":"xx"#,
                json!(41),
            ),
            (
                br#"{"method":"session/prompt","id":"p","params":{"text":"xx"#,
                json!("p"),
            ),
            (
                br#"{"jsonrpc":"2.0","method":"session/prompt","params":{"text":"xx"#,
                Value::Null,
            ),
            (b"\xff\xfe\xfd", Value::Null),
        ];
        for (head, id) in cases {
            let line = Line::Oversized {
                head: head.to_vec(),
                len: 17 << 20,
            };
            let Some(InputLine::Unparsable(answer)) = classify_line(&line, 3, 16 << 20) else {
                panic!("not answered")
            };
            let v: Value = serde_json::from_str(&answer).unwrap();
            assert_eq!(&v["id"], id, "{answer}");
            assert_eq!(v["error"]["code"], -32007);
            assert_eq!(v["error"]["data"]["limit"], 16 << 20);
            let message = v["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("16777216") && message.contains("line 3"),
                "{message}"
            );
        }
    }

    #[test]
    fn a_too_big_answer_with_a_null_id_ticks_off_the_largest_request() {
        let mut p = Pending::default();
        let small = r#"{"jsonrpc":"2.0","id":1,"method":"daemon/status"}"#;
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{{"text":"{}"}}}}"#,
            "x".repeat(1000)
        );
        p.sent(&forward(small));
        p.sent(&forward(&big));
        p.received(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}"#);
        assert_eq!(p.len(), 2, "only a too-big error is placed");
        p.received(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32007,"message":"Request is too big"}}"#,
        );
        assert_eq!(p.len(), 1);
        p.received(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert!(p.is_empty(), "the small request was still waited for");
    }
}
