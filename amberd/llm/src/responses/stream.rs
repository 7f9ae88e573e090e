//! Stream decoding: the Responses API's semantic SSE events → `ChunkDelta`s.
//!
//! Text and reasoning arrive as deltas; a function call as an `output_item.added` (its
//! `call_id` and name), argument pieces, and a `.done` carrying the whole arguments, which
//! is all a server that skips the pieces sends. `ResponsesStream` remembers, per output
//! index, which tool-call slot a call fills and how much of its arguments was folded in,
//! so a `.done` adds only what the pieces did not. A finished reply is
//! `response.completed` (or `.incomplete`), the stream's final event (`Decoded::Final`:
//! reading stops there, whether or not the server closes the body); `response.failed` and
//! `error` are typed errors; any other event type is skipped.

use serde_json::Value;

use super::reply;
use crate::accumulate::ToolCallDelta;
use crate::decode::{ChunkDelta, Decoded};
use crate::dialect::StreamDecoder;
use crate::error::{ApiError, clip};

/// Output items are numbered from 0; a response has a handful. An `output_index` past this
/// is no response's, and would let a stream grow what is remembered per item without bound.
const MAX_OUTPUT_INDEX: u64 = 4096;

/// The decoder of one Responses stream: what it remembers between events.
#[derive(Debug, Default)]
pub(super) struct ResponsesStream {
    calls: Vec<CallSlot>,
    /// Output indexes whose reasoning or text streamed as deltas (their `.done` items then
    /// add no text).
    streamed: Vec<u64>,
    /// The reasoning part last streamed: (output index, summary index).
    reasoning_at: Option<(u64, u64)>,
}

/// One function call of the reply.
#[derive(Debug)]
struct CallSlot {
    output_index: u64,
    /// Its slot in the tool-call accumulator (calls in output order).
    slot: usize,
    /// The arguments text folded in so far.
    sent: String,
}

impl ResponsesStream {
    /// The call at `output_index`, created if unseen.
    fn call(&mut self, output_index: u64) -> &mut CallSlot {
        let at = match self
            .calls
            .iter()
            .position(|c| c.output_index == output_index)
        {
            Some(at) => at,
            None => {
                let slot = self.calls.len();
                self.calls.push(CallSlot {
                    output_index,
                    slot,
                    sent: String::new(),
                });
                slot
            }
        };
        &mut self.calls[at]
    }

    fn mark_streamed(&mut self, output_index: u64) {
        if !self.streamed.contains(&output_index) {
            self.streamed.push(output_index);
        }
    }
}

impl CallSlot {
    /// The part of the complete `arguments` not folded in yet: all of it when nothing
    /// was, the rest when the pieces were its beginning. Pieces that disagree with the
    /// whole keep what was folded in (it can not be taken back).
    fn rest_of(&mut self, arguments: &str) -> Option<String> {
        let rest = match arguments.strip_prefix(self.sent.as_str()) {
            Some(rest) => rest.to_owned(),
            None => {
                tracing::warn!(
                    output_index = self.output_index,
                    "streamed function-call arguments disagree with the final ones"
                );
                return None;
            }
        };
        self.sent.push_str(&rest);
        (!rest.is_empty()).then_some(rest)
    }
}

impl StreamDecoder for ResponsesStream {
    /// One SSE event → internal shape.
    fn decode(&mut self, event: &str, data: &str) -> Result<Decoded, ApiError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(Decoded::Done);
        }
        if !data.starts_with('{') {
            // Keep-alives and other payloads without meaning.
            return Ok(Decoded::Skip);
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| ApiError::Decode(format!("{e} in event {}", clip(data))))?;
        // The payload's `type` names the event; the SSE `event:` line only when it is missing.
        let kind = v.get("type").and_then(Value::as_str).unwrap_or(event);
        let output_index = v.get("output_index").and_then(Value::as_u64).unwrap_or(0);
        if output_index >= MAX_OUTPUT_INDEX {
            return Err(ApiError::Decode(format!(
                "output item {output_index}: a response has fewer than {MAX_OUTPUT_INDEX}"
            )));
        }
        let text = |key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default();
        let mut out = ChunkDelta::default();
        match kind {
            "response.output_text.delta" => {
                self.mark_streamed(output_index);
                out.text = Some(text("delta").to_owned());
            }
            // What the model said instead of an answer: kept apart, the turn ends on it.
            "response.refusal.delta" => {
                self.mark_streamed(output_index);
                out.refusal = Some(text("delta").to_owned());
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.mark_streamed(output_index);
                let part = v
                    .get("summary_index")
                    .or_else(|| v.get("content_index"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let mut delta = String::new();
                // A new part of the same item's summary starts a new paragraph.
                if let Some((at, previous)) = self.reasoning_at
                    && at == output_index
                    && previous != part
                {
                    delta.push_str("\n\n");
                }
                self.reasoning_at = Some((output_index, part));
                delta.push_str(text("delta"));
                out.reasoning = Some(delta);
            }
            "response.output_item.added" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    let call = self.call(output_index);
                    let mut delta = reply::function_call(item, call.slot);
                    delta.arguments = delta.arguments.and_then(|a| call.rest_of(&a));
                    out.tool_calls.push(delta);
                }
            }
            "response.function_call_arguments.delta" => {
                let call = self.call(output_index);
                call.sent.push_str(text("delta"));
                out.tool_calls.push(ToolCallDelta {
                    index: Some(call.slot),
                    arguments: Some(text("delta").to_owned()),
                    ..ToolCallDelta::default()
                });
            }
            "response.function_call_arguments.done" => {
                let call = self.call(output_index);
                let arguments = call.rest_of(text("arguments"));
                out.tool_calls.push(ToolCallDelta {
                    index: Some(call.slot),
                    name: v.get("name").and_then(Value::as_str).map(str::to_owned),
                    arguments,
                    ..ToolCallDelta::default()
                });
            }
            "response.output_item.done" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                let streamed = self.streamed.contains(&output_index);
                match item.get("type").and_then(Value::as_str) {
                    Some("function_call") => {
                        let call = self.call(output_index);
                        let mut delta = reply::function_call(item, call.slot);
                        delta.arguments = delta.arguments.and_then(|a| call.rest_of(&a));
                        out.tool_calls.push(delta);
                    }
                    Some("reasoning") => {
                        out.reasoning_items.extend(reply::reasoning_item(item));
                        if !streamed {
                            out.reasoning = reply::reasoning_text(item);
                        }
                    }
                    Some("message") if !streamed => {
                        out.text = reply::message_text(item);
                        out.refusal = reply::message_refusal(item);
                    }
                    _ => {}
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = v.get("response").unwrap_or(&Value::Null);
                out.usage = response.get("usage").and_then(reply::usage);
                let mut r = response.clone();
                if kind == "response.incomplete" && r.get("status").is_none() {
                    r["status"] = Value::from("incomplete");
                }
                out.finish_reason = Some(reply::finish_reason(&r, !self.calls.is_empty()));
                // The last event of a response: nothing after it is waited for.
                return Ok(Decoded::Final(out));
            }
            "response.failed" => {
                let error = v.pointer("/response/error").filter(|e| !e.is_null());
                return Err(reply::failure(error, data));
            }
            "error" => {
                // Published as `{type, code, message, param}`; some servers nest `error`.
                let error = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
                return Err(reply::failure(Some(error), data));
            }
            _ => return Ok(Decoded::Skip),
        }
        Ok(Decoded::Chunk(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(state: &mut ResponsesStream, data: &str) -> ChunkDelta {
        match state.decode("", data).unwrap() {
            Decoded::Chunk(d) => d,
            other => panic!("a chunk expected, got {other:?}"),
        }
    }

    #[test]
    fn a_done_after_pieces_adds_only_the_rest() {
        let mut s = ResponsesStream::default();
        step(
            &mut s,
            r#"{"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"a\""}"#,
        );
        let d = step(
            &mut s,
            r#"{"type":"response.function_call_arguments.done","output_index":1,"arguments":"{\"a\":1}"}"#,
        );
        assert_eq!(d.tool_calls[0].arguments.as_deref(), Some(":1}"));
        let d = step(
            &mut s,
            r#"{"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","call_id":"c","name":"n","arguments":"{\"a\":1}"}}"#,
        );
        assert_eq!(d.tool_calls[0].arguments, None);
        assert_eq!(d.tool_calls[0].id.as_deref(), Some("c"));
    }

    #[test]
    fn a_refusal_is_kept_apart_from_the_text() {
        let mut s = ResponsesStream::default();
        let d = step(
            &mut s,
            r#"{"type":"response.refusal.delta","output_index":0,"delta":"I can't help with that."}"#,
        );
        assert_eq!(d.refusal.as_deref(), Some("I can't help with that."));
        assert_eq!(d.text, None);
        // An item that was not streamed carries its refusal in the item.
        let mut s = ResponsesStream::default();
        let d = step(
            &mut s,
            r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"message","content":[{"type":"refusal","refusal":"No."}]}}"#,
        );
        assert_eq!(d.refusal.as_deref(), Some("No."));
        assert_eq!(d.text, None);
    }

    #[test]
    fn unknown_events_and_keepalives_are_skipped() {
        let mut s = ResponsesStream::default();
        for data in [
            r#"{"type":"response.in_progress","response":{}}"#,
            r#"{"type":"response.content_part.added","part":{}}"#,
            "ping",
        ] {
            assert_eq!(s.decode("", data).unwrap(), Decoded::Skip);
        }
    }

    #[test]
    fn summary_parts_are_paragraphs() {
        let mut s = ResponsesStream::default();
        let ev = |i: u64, d: &str| {
            format!(
                r#"{{"type":"response.reasoning_summary_text.delta","output_index":0,"summary_index":{i},"delta":"{d}"}}"#
            )
        };
        assert_eq!(step(&mut s, &ev(0, "A")).reasoning.as_deref(), Some("A"));
        assert_eq!(step(&mut s, &ev(0, "b")).reasoning.as_deref(), Some("b"));
        assert_eq!(
            step(&mut s, &ev(1, "C")).reasoning.as_deref(),
            Some("\n\nC")
        );
    }
}
