//! The requests a connection has sent and not had answered, so that an answer the call
//! machinery could not place never ends the connection.
//!
//! jsonrpsee's client treats an answer it cannot match to a pending call as fatal. amberd
//! sends two kinds: an error with `id: null` (a message over `[server] max_message_bytes`
//! is answered `-32007` that way, as jsonrpsee's server cannot read its id), and, in
//! principle, a second answer to one id. Every outgoing request is recorded here with its
//! size ([`TrackedSender`]), every answer ticks one off, and the receiving side
//! (`transport::WatchedReceiver`) asks [`InFlight::place`] what to do with an answer:
//!
//! - `-32007` with `id: null` is given the id of the largest request in flight. Only
//!   messages over the daemon's limit get it, and every one of those is larger than every
//!   message within it, so the largest in flight is always one that was refused (which of
//!   several refused ones gets which answer does not matter: each gets one). The call then
//!   fails with the daemon's error instead of waiting for an answer that never comes.
//! - Any other answer with no id, or with an id nothing waits for, is logged and dropped:
//!   the calls still pending stay pending.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jsonrpsee::core::client::TransportSenderT;
use serde_json::Value;

use crate::bridge::envelope::Envelope;

/// What to do with one incoming frame.
#[derive(Debug, PartialEq)]
pub(crate) enum Placement {
    /// Pass it on as it is (an answer to a request in flight, a notification, anything else).
    Deliver,
    /// Pass on this rewrite instead (a `-32007` given its request's id).
    Rewrite(String),
    /// Drop it: an answer nothing waits for.
    Drop,
}

/// Requests sent and not yet answered: id key → (id, size in bytes).
#[derive(Debug, Clone, Default)]
pub(crate) struct InFlight(Arc<Mutex<HashMap<String, (Value, usize)>>>);

impl InFlight {
    /// Records an outgoing message (only requests with an id are waited for).
    pub(crate) fn sent(&self, message: &str) {
        let envelope = Envelope::of(message.as_bytes());
        let (Some(id), true) = (envelope.id, envelope.method) else {
            return;
        };
        if let Ok(mut map) = self.0.lock() {
            map.insert(id.to_string(), (id, message.len()));
        }
    }

    /// Decides what becomes of an incoming frame, ticking off the request it answers.
    pub(crate) fn place(&self, frame: &str) -> Placement {
        let envelope = Envelope::of(frame.as_bytes());
        if !envelope.is_answer() {
            return Placement::Deliver;
        }
        let Ok(mut map) = self.0.lock() else {
            return Placement::Deliver;
        };
        if let Some(id) = &envelope.id {
            if map.remove(&id.to_string()).is_some() {
                return Placement::Deliver;
            }
            tracing::warn!(
                "amberd answered id {id}, which no call is waiting for: {}",
                head(frame)
            );
            return Placement::Drop;
        }
        let error = serde_json::from_str::<Value>(frame)
            .ok()
            .and_then(|v| v.get("error").cloned());
        let code = error
            .as_ref()
            .and_then(|e| e.get("code"))
            .and_then(Value::as_i64);
        if code == Some(i64::from(amber_proto::errors::REQUEST_TOO_BIG)) {
            let largest = map
                .iter()
                .max_by_key(|(_, (_, size))| *size)
                .map(|(key, _)| key.clone());
            if let Some((id, size)) = largest.and_then(|key| map.remove(&key)) {
                let mut error = error.unwrap_or(Value::Null);
                if let Some(message) = error.get("message").and_then(Value::as_str) {
                    let detail = error.get("data").and_then(Value::as_str).unwrap_or("");
                    error["message"] = Value::from(
                        format!("{message}: this request has {size} bytes. {detail}")
                            .trim_end()
                            .to_owned(),
                    );
                }
                let rewritten = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error});
                return Placement::Rewrite(rewritten.to_string());
            }
        }
        tracing::warn!(
            "amberd sent an answer with no id (dropped; pending calls go on waiting): {}",
            head(frame)
        );
        Placement::Drop
    }
}

/// The first bytes of a frame, for a log line.
fn head(frame: &str) -> &str {
    let mut end = frame.len().min(300);
    while !frame.is_char_boundary(end) {
        end -= 1;
    }
    &frame[..end]
}

/// The sending half of any transport, recording each request in [`InFlight`] as it goes.
pub(crate) struct TrackedSender<S> {
    pub(crate) inner: S,
    pub(crate) in_flight: InFlight,
}

impl<S: TransportSenderT + Send> TransportSenderT for TrackedSender<S> {
    type Error = S::Error;

    async fn send(&mut self, msg: String) -> Result<(), Self::Error> {
        self.in_flight.sent(&msg);
        self.inner.send(msg).await
    }

    async fn send_ping(&mut self) -> Result<(), Self::Error> {
        self.inner.send_ping().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

#[cfg(test)]
mod tests {

    use serde_json::json;

    use super::*;

    fn request(id: u64, size: usize) -> String {
        let pad = "x".repeat(size);
        json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {"text": pad}})
            .to_string()
    }

    const TOO_BIG: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32007,"message":"Request is too big","data":"Exceeded max limit of 1000"}}"#;

    #[test]
    fn answers_tick_off_their_request_and_strays_are_dropped() {
        let in_flight = InFlight::default();
        in_flight.sent(&request(1, 10));
        assert_eq!(
            in_flight.place(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Placement::Deliver
        );
        // A second answer to 1, an answer to 9: nothing waits for them.
        assert_eq!(
            in_flight.place(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Placement::Drop
        );
        assert_eq!(
            in_flight.place(r#"{"jsonrpc":"2.0","id":9,"error":{}}"#),
            Placement::Drop
        );
        // Notifications and other frames pass.
        assert_eq!(
            in_flight.place(r#"{"jsonrpc":"2.0","method":"session/event","params":{"subscription":"s","result":{}}}"#),
            Placement::Deliver
        );
        // A null-id error that is not -32007 is dropped; the pending call stays.
        in_flight.sent(&request(2, 10));
        let parse =
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#;
        assert_eq!(in_flight.place(parse), Placement::Drop);
        assert_eq!(
            in_flight.place(r#"{"jsonrpc":"2.0","id":2,"result":{}}"#),
            Placement::Deliver
        );
    }

    #[test]
    fn a_too_big_answer_goes_to_the_largest_request_in_flight() {
        let in_flight = InFlight::default();
        in_flight.sent(&request(1, 10));
        in_flight.sent(&request(2, 5000));
        in_flight.sent(&request(3, 20));
        let Placement::Rewrite(frame) = in_flight.place(TOO_BIG) else {
            panic!("not rewritten")
        };
        let v: Value = serde_json::from_str(&frame).unwrap();
        assert_eq!(v["id"], 2);
        assert_eq!(v["error"]["code"], -32007);
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("Exceeded max limit of 1000") && message.contains("bytes"),
            "{message}"
        );
        // The others still wait for their answers; with none in flight, it is dropped.
        assert_eq!(
            in_flight.place(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Placement::Deliver
        );
        assert_eq!(
            in_flight.place(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Placement::Deliver
        );
        assert_eq!(in_flight.place(TOO_BIG), Placement::Drop);
    }
}
