//! The JSON-RPC 2.0 envelope check every request passes before jsonrpsee parses it.
//!
//! jsonrpsee represents an id only as null, a `u64` or a string. A request whose id is
//! anything else (`1.5`, `true`, `[1]`, `2^64`, `-0`) fails its request parse and then
//! *succeeds* as a notification, so it runs and is never answered; and a valid JSON object
//! that is no request at all (`{}`) is answered -32700 (parse error). JSON-RPC 2.0 says
//! both are -32600 (invalid request), with `id: null` when the id cannot be determined.
//! [`check`] answers those itself and passes everything else through untouched; in a
//! batch it replaces each entry with an invalid id by `{"id":null}`, which jsonrpsee
//! answers -32600 with `id: null` in that entry's place.
//!
//! It also says whether the message expects a reply (the WebSocket guard counts unanswered
//! calls to apply backpressure).

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// What to do with one JSON-RPC message (a WebSocket data message or an HTTP body).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Hand it to jsonrpsee as it is.
    Pass { expects_reply: bool },
    /// Hand jsonrpsee this batch instead: entries with invalid ids neutralised.
    Rewrite(String),
    /// Do not hand it on; this is the whole answer.
    Answer(String),
}

/// The members of a request object this check looks at; the rest (params) is skipped.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
}

/// `Some` for a member that is there, `null` included (an `Option` alone would read a
/// `null` id as no id, and a call with id null as a notification).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// How one request object stands.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    /// A call jsonrpsee answers (valid, or invalid with an id it can echo).
    Call,
    /// A valid notification: no reply.
    Notification,
    /// An id jsonrpsee cannot represent.
    BadId,
    /// Not a request, and no id to answer with: jsonrpsee would say parse error.
    NoRequest,
    /// Not JSON jsonrpsee and this check read alike; jsonrpsee decides.
    Unread,
}

fn entry(raw: &str) -> Entry {
    let Ok(envelope) = serde_json::from_str::<Envelope<'_>>(raw) else {
        return if first_byte(raw.as_bytes()) == Some(b'{') {
            Entry::Unread
        } else {
            // `1`, `"x"`, `[…]` inside a batch: valid JSON, not a request object.
            Entry::NoRequest
        };
    };
    let well_formed = envelope.jsonrpc.is_some_and(|v| v.get() == r#""2.0""#)
        && envelope.method.is_some_and(|m| m.get().starts_with('"'));
    match envelope.id {
        Some(id) if !representable_id(id.get()) => Entry::BadId,
        Some(_) => Entry::Call,
        None if well_formed => Entry::Notification,
        None => Entry::NoRequest,
    }
}

/// null, a string, or a plain non-negative integer that fits a `u64` — what jsonrpsee's
/// `Id` can hold and echo back exactly. A string must decode to text: a lone surrogate
/// (`"\ud800"`) passes a raw read but fails jsonrpsee's, which then cannot answer at all.
fn representable_id(raw: &str) -> bool {
    match raw.as_bytes() {
        b"null" => true,
        [b'"', ..] => serde_json::from_str::<String>(raw).is_ok(),
        [b'0'] => true,
        digits @ [b'1'..=b'9', ..] => {
            digits.iter().all(u8::is_ascii_digit) && raw.parse::<u64>().is_ok()
        }
        _ => false,
    }
}

fn first_byte(body: &[u8]) -> Option<u8> {
    body.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// The answer for a message that is not a request: -32600 with `id: null`.
pub(super) fn invalid_request(message: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": amber_proto::errors::INVALID_REQUEST, "message": message},
    })
    .to_string()
}

const BAD_ID: &str = "invalid request: `id` must be a string, a non-negative integer or null";
const NOT_A_REQUEST: &str =
    "invalid request: expected {\"jsonrpc\": \"2.0\", \"method\": …, \"id\": …}";

/// The answer for a message that is not JSON text at all: -32700 with `id: null`.
pub(super) fn parse_error(message: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": amber_proto::errors::PARSE_ERROR, "message": message},
    })
    .to_string()
}

const NOT_UTF8: &str = "parse error: a JSON-RPC message must be UTF-8 text";

/// Checks one message; see the module header.
pub(super) fn check(body: &[u8]) -> Verdict {
    let Ok(text) = std::str::from_utf8(body) else {
        // JSON is UTF-8 (RFC 8259); jsonrpsee would read no id from it and stay silent.
        return Verdict::Answer(parse_error(NOT_UTF8));
    };
    match first_byte(body) {
        Some(b'{') => match entry(text) {
            Entry::BadId => Verdict::Answer(invalid_request(BAD_ID)),
            Entry::NoRequest => Verdict::Answer(invalid_request(NOT_A_REQUEST)),
            Entry::Notification => Verdict::Pass {
                expects_reply: false,
            },
            Entry::Call | Entry::Unread => Verdict::Pass {
                expects_reply: true,
            },
        },
        Some(b'[') => batch(text),
        _ if serde_json::from_str::<&RawValue>(text).is_ok() => {
            Verdict::Answer(invalid_request(NOT_A_REQUEST))
        }
        _ => Verdict::Pass {
            expects_reply: true,
        },
    }
}

fn batch(text: &str) -> Verdict {
    let Ok(entries) = serde_json::from_str::<Vec<&RawValue>>(text) else {
        return Verdict::Pass {
            expects_reply: true,
        };
    };
    let kinds: Vec<Entry> = entries.iter().map(|e| entry(e.get())).collect();
    if kinds.contains(&Entry::BadId) {
        let rewritten: Vec<&str> = entries
            .iter()
            .zip(&kinds)
            .map(|(raw, kind)| match kind {
                Entry::BadId => r#"{"id":null}"#,
                _ => raw.get(),
            })
            .collect();
        return Verdict::Rewrite(format!("[{}]", rewritten.join(",")));
    }
    Verdict::Pass {
        expects_reply: entries.is_empty() || kinds.iter().any(|k| *k != Entry::Notification),
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn answered_invalid(verdict: &Verdict) -> bool {
        let Verdict::Answer(text) = verdict else {
            return false;
        };
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        v["error"]["code"] == -32600 && v["id"].is_null() && v["jsonrpc"] == "2.0"
    }

    #[test]
    fn ids_jsonrpsee_cannot_hold_are_invalid_requests_with_a_null_id() {
        for id in [
            "1.5",
            "true",
            "false",
            "[1]",
            "{}",
            "18446744073709551616",
            "-0",
            "-1",
            "1e3",
        ] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"daemon/status"}}"#);
            assert!(answered_invalid(&check(body.as_bytes())), "id {id}");
        }
    }

    #[test]
    fn ids_and_bodies_that_do_not_decode_to_text_are_answered_with_a_null_id() {
        for id in [r#""\ud800""#, r#""a\udfffb""#, r#""\ud800\u0041""#] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"daemon/status"}}"#);
            assert!(answered_invalid(&check(body.as_bytes())), "id {id}");
        }
        let mut body = br#"{"jsonrpc":"2.0","id":"a"#.to_vec();
        body.extend_from_slice(&[0xff, 0xfe]);
        body.extend_from_slice(br#"","method":"daemon/status"}"#);
        let Verdict::Answer(text) = check(&body) else {
            panic!("not answered");
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["code"], -32700);
        assert!(v["id"].is_null());
        // A surrogate pair is text.
        let body = r#"{"jsonrpc":"2.0","id":"\ud83d\ude00","method":"daemon/status"}"#;
        assert_eq!(
            check(body.as_bytes()),
            Verdict::Pass {
                expects_reply: true
            }
        );
    }

    #[test]
    fn representable_ids_pass_and_expect_a_reply() {
        for id in ["0", "7", "18446744073709551615", r#""abc""#, "null"] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"daemon/status"}}"#);
            assert_eq!(
                check(body.as_bytes()),
                Verdict::Pass {
                    expects_reply: true
                },
                "id {id}"
            );
        }
    }

    #[test]
    fn objects_that_are_no_request_are_invalid_not_parse_errors() {
        for body in [
            "{}",
            r#"{"foo":1}"#,
            r#"{"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"1.0","method":"x"}"#,
            r#"{"jsonrpc":"2.0","method":1}"#,
            "1",
            r#""text""#,
            "null",
        ] {
            assert!(answered_invalid(&check(body.as_bytes())), "{body}");
        }
    }

    #[test]
    fn what_jsonrpsee_answers_rightly_passes_through() {
        for (body, expects_reply) in [
            (r#"{"jsonrpc":"2.0","method":"x"}"#, false),
            (
                r#"{"jsonrpc":"2.0","method":"x","params":{"a":[1,2]}}"#,
                false,
            ),
            // An invalid request with an id jsonrpsee can echo: it answers -32600 with it.
            (r#"{"id":5}"#, true),
            // Not JSON: jsonrpsee's -32700 is right.
            ("{not json", true),
            ("nonsense", true),
            ("[1,", true),
            ("[]", true),
            (r#"[{"jsonrpc":"2.0","method":"x"}]"#, false),
            (r#"[{"jsonrpc":"2.0","method":"x"},{"id":1}]"#, true),
            ("[1]", true),
        ] {
            assert_eq!(
                check(body.as_bytes()),
                Verdict::Pass { expects_reply },
                "{body}"
            );
        }
    }

    #[test]
    fn a_batch_entry_with_a_bad_id_becomes_a_null_id_invalid_request() {
        let body =
            r#"[{"jsonrpc":"2.0","id":1,"method":"a"}, {"jsonrpc":"2.0","id":1.5,"method":"b"}]"#;
        assert_eq!(
            check(body.as_bytes()),
            Verdict::Rewrite(r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"id":null}]"#.into())
        );
    }
}
