//! Renders one [`MockTurn`] as an Anthropic Messages API answer (`POST /v1/messages`): the
//! typed SSE events of a streamed message — `message_start` with usage, a `thinking` block
//! with a signature for reasoning, a `text` block, a `tool_use` block per call with its
//! input in `input_json_delta` fragments, `message_delta` with the stop reason and output
//! usage, `message_stop` — or the whole `message` object of a non-streamed one. Also the
//! constructors of turns only this API has: an `error` event and the 529 status. Pure: no
//! I/O, no clock.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::reply::{self, Body, FLUSH_PAUSE, Frame, Reply, Step};
use crate::turn::{Deltas, Ending, MockTurn, pieces};

/// Anthropic's status for an overloaded API.
const OVERLOADED_STATUS: u16 = 529;

impl MockTurn {
    /// A 200 stream that fails at once with an Anthropic `error` event of this type
    /// (`overloaded_error`, `invalid_request_error`, `api_error`…) and message.
    pub fn anthropic_error_event(kind: &str, message: &str) -> MockTurn {
        let error = json!({"type": "error", "error": {"type": kind, "message": message}});
        MockTurn::Raw(format!("event: error\ndata: {error}\n\n"))
    }

    /// HTTP 529 with Anthropic's `overloaded_error` body.
    pub fn anthropic_overloaded() -> MockTurn {
        let body = json!({"type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"}});
        MockTurn::Status {
            code: OVERLOADED_STATUS,
            retry_after: None,
            body: body.to_string(),
        }
    }
}

/// The answer to a Messages API request for `turn` (its `Delay`s are the server's to wait).
pub(crate) fn render(turn: &MockTurn, ctx: &Ctx, stream: bool) -> Reply {
    let deltas = match Reply::unless_deltas(turn) {
        Ok(deltas) => deltas,
        Err(whole) => return whole,
    };
    if stream {
        return Reply::event_stream(stream_steps(&deltas, ctx));
    }
    if let Ending::Fail { code, message } = &deltas.ending {
        let error = json!({"type": "error", "error": {"type": code, "message": message}});
        return Reply::ok_json(Body::Whole(Bytes::from(error.to_string())));
    }
    let whole = Bytes::from(message(&deltas, ctx).to_string());
    match deltas.ending {
        Ending::Cut => Reply::ok_json(Body::steps(reply::cut_in_half(&whole))),
        Ending::Finish(_) | Ending::Fail { .. } => Reply {
            pause: deltas.total_pause(),
            ..Reply::ok_json(Body::Whole(whole))
        },
    }
}

/// The signature of the thinking block of request (or step) `seq`: opaque, as the real one.
fn signature(ctx: &Ctx) -> String {
    format!("mock-signature-{}", ctx.seq)
}

/// The API's stop reason for how the turn ends.
fn stop_reason(deltas: &Deltas) -> &'static str {
    if deltas.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

fn input_usage(ctx: &Ctx) -> Value {
    json!({"input_tokens": ctx.prompt_tokens, "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0, "output_tokens": 1})
}

/// The whole `message` object.
fn message(deltas: &Deltas, ctx: &Ctx) -> Value {
    let mut content = Vec::new();
    if !deltas.reasoning.is_empty() {
        content.push(
            json!({"type": "thinking", "thinking": deltas.reasoning.concat(),
            "signature": signature(ctx)}),
        );
    }
    if !deltas.content.is_empty() {
        content.push(json!({"type": "text", "text": deltas.content.concat()}));
    }
    for (i, call) in deltas.calls.iter().enumerate() {
        // Arguments that are not JSON (a bad-argument script) go as a string input.
        let input = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        content.push(
            json!({"type": "tool_use", "id": ctx.call_id(i, call.id.as_deref()),
            "name": call.name, "input": input}),
        );
    }
    let mut usage = input_usage(ctx);
    usage["output_tokens"] = json!(ctx.tokens(deltas.chars()).0);
    json!({"id": format!("msg_mock_{}", ctx.seq), "type": "message", "role": "assistant",
        "model": ctx.model, "content": content, "stop_reason": stop_reason(deltas),
        "stop_sequence": null, "usage": usage})
}

/// Accumulates the events of one streamed answer.
struct Events {
    steps: Vec<Step>,
    /// Index of the next content block.
    block: usize,
}

impl Events {
    fn event(&mut self, value: &Value, frame: Frame) {
        let kind = value["type"].as_str().unwrap_or("message");
        let bytes = Bytes::from(format!("event: {kind}\ndata: {value}\n\n"));
        self.steps.push(Step::Data(bytes, frame));
    }

    fn start_block(&mut self, block: Value) -> usize {
        let index = self.block;
        self.block += 1;
        self.event(
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
            Frame::Other,
        );
        index
    }

    fn delta(&mut self, index: usize, delta: Value, frame: Frame) {
        self.event(
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            frame,
        );
    }

    fn stop_block(&mut self, index: usize) {
        self.event(
            &json!({"type": "content_block_stop", "index": index}),
            Frame::Other,
        );
    }

    fn cut(mut self) -> Vec<Step> {
        self.steps.push(Step::Sleep(FLUSH_PAUSE));
        self.steps.push(Step::Cut);
        self.steps
    }
}

/// The SSE body of a streamed (`stream: true`) answer.
fn stream_steps(deltas: &Deltas, ctx: &Ctx) -> Vec<Step> {
    let mut e = Events {
        steps: Vec::new(),
        block: 0,
    };
    e.event(
        &json!({"type": "message_start", "message": {"id": format!("msg_mock_{}", ctx.seq),
            "type": "message", "role": "assistant", "model": ctx.model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": input_usage(ctx)}}),
        Frame::Other,
    );
    if !deltas.reasoning.is_empty() {
        let index = e.start_block(json!({"type": "thinking", "thinking": ""}));
        for piece in &deltas.reasoning {
            e.delta(
                index,
                json!({"type": "thinking_delta", "thinking": piece}),
                Frame::Reasoning,
            );
        }
        e.delta(
            index,
            json!({"type": "signature_delta", "signature": signature(ctx)}),
            Frame::Other,
        );
        e.stop_block(index);
    }
    if !deltas.content.is_empty() || deltas.ending == Ending::Cut {
        let index = e.start_block(json!({"type": "text", "text": ""}));
        for (i, piece) in deltas.content.iter().enumerate() {
            if let Some(interval) = deltas.interval
                && i > 0
            {
                e.steps.push(Step::Sleep(interval));
            }
            e.delta(
                index,
                json!({"type": "text_delta", "text": piece}),
                Frame::Content,
            );
        }
        if deltas.ending == Ending::Cut {
            return e.cut();
        }
        e.stop_block(index);
    }
    // A scripted in-stream failure: Anthropic's `error` event ends the stream.
    if let Ending::Fail { code, message } = &deltas.ending {
        e.event(
            &json!({"type": "error", "error": {"type": code, "message": message}}),
            Frame::Other,
        );
        return e.steps;
    }
    for (i, call) in deltas.calls.iter().enumerate() {
        let id = ctx.call_id(i, call.id.as_deref());
        let index =
            e.start_block(json!({"type": "tool_use", "id": id, "name": call.name, "input": {}}));
        for piece in pieces(&call.arguments, ctx.argument_piece_chars) {
            e.delta(
                index,
                json!({"type": "input_json_delta", "partial_json": piece}),
                Frame::Other,
            );
        }
        e.stop_block(index);
    }
    e.event(
        &json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(deltas), "stop_sequence": null},
            "usage": {"output_tokens": ctx.tokens(deltas.chars()).0}}),
        Frame::Other,
    );
    e.event(&json!({"type": "message_stop"}), Frame::Other);
    e.steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::MockToolCall;

    fn body_of(reply: &Reply) -> String {
        reply.streamed_text()
    }

    /// The `data` of every event, parsed.
    fn events(body: &str) -> Vec<Value> {
        body.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    #[test]
    fn reasoning_streams_a_signed_thinking_block_before_the_text() {
        let turn = MockTurn::Reasoning {
            reasoning: "think it through".into(),
            text: "answer".into(),
        };
        let reply = render(&turn, &Ctx::for_request(3, "m", 40), true);
        let all = events(&body_of(&reply));
        let types: Vec<&str> = all.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types.first(), Some(&"message_start"));
        assert_eq!(types.last(), Some(&"message_stop"));
        assert_eq!(all[0]["message"]["usage"]["input_tokens"], 10);
        assert_eq!(all[1]["content_block"]["type"], "thinking");
        let signature = all
            .iter()
            .find(|e| e["delta"]["type"] == "signature_delta")
            .unwrap();
        assert_eq!(signature["delta"]["signature"], "mock-signature-3");
        let text_start = all
            .iter()
            .position(|e| e["content_block"]["type"] == "text")
            .unwrap();
        assert!(text_start > 1);
        assert_eq!(all[all.len() - 2]["delta"]["stop_reason"], "end_turn");
    }

    #[test]
    fn tool_calls_stream_their_input_in_fragments() {
        let turn = MockTurn::ToolCalls(vec![
            MockToolCall::new("read", &json!({"path": "a-long-file-name.txt"})),
            MockToolCall {
                id: Some("toolu_own".into()),
                name: "bash".into(),
                arguments: r#"{"command":"ls"}"#.into(),
            },
        ]);
        let reply = render(&turn, &Ctx::for_request(2, "m", 10), true);
        let all = events(&body_of(&reply));
        let starts: Vec<&Value> = all
            .iter()
            .filter(|e| e["type"] == "content_block_start")
            .collect();
        assert_eq!(starts[0]["content_block"]["id"], "call_2_0");
        assert_eq!(starts[1]["content_block"]["id"], "toolu_own");
        assert_eq!(starts[1]["index"], 1);
        let first_input: String = all
            .iter()
            .filter(|e| e["index"] == 0 && e["delta"]["type"] == "input_json_delta")
            .map(|e| e["delta"]["partial_json"].as_str().unwrap())
            .collect();
        assert_eq!(first_input, r#"{"path":"a-long-file-name.txt"}"#);
        assert_eq!(all[all.len() - 2]["delta"]["stop_reason"], "tool_use");
    }

    #[test]
    fn a_dropped_turn_never_stops() {
        let turn = MockTurn::Drop {
            chunks: vec!["par".into(), "tial".into()],
        };
        let reply = render(&turn, &Ctx::for_request(1, "m", 10), true);
        let body = body_of(&reply);
        assert!(body.contains(r#""text":"tial""#), "{body}");
        assert!(!body.contains("message_delta") && !body.contains("message_stop"));
        let Body::Steps { steps, content } = &reply.body else {
            panic!("a stream expected");
        };
        assert_eq!(*content, 2);
        assert_eq!(steps.last(), Some(&Step::Cut));
    }

    #[test]
    fn a_whole_message_lists_its_blocks() {
        let turn = MockTurn::TextAndToolCalls {
            text: "doing it".into(),
            calls: vec![MockToolCall::new("bash", &json!({"command": "pwd"}))],
        };
        let reply = render(&turn, &Ctx::for_request(4, "m", 10), false);
        let Body::Whole(bytes) = &reply.body else {
            panic!("a whole answer expected");
        };
        let v: Value = serde_json::from_slice(bytes).unwrap();
        assert_eq!(v["type"], "message");
        assert_eq!(v["content"][0]["text"], "doing it");
        assert_eq!(v["content"][1]["input"], json!({"command": "pwd"}));
        assert_eq!(v["stop_reason"], "tool_use");
    }

    #[test]
    fn errors_only_this_api_has() {
        let MockTurn::Raw(body) = MockTurn::anthropic_error_event("overloaded_error", "Overloaded")
        else {
            panic!("a raw body expected");
        };
        assert!(body.starts_with("event: error\ndata: "), "{body}");
        assert_eq!(events(&body)[0]["error"]["type"], "overloaded_error");
        let MockTurn::Status { code, body, .. } = MockTurn::anthropic_overloaded() else {
            panic!("a status expected");
        };
        assert_eq!(code, 529);
        assert!(body.contains("overloaded_error"));
    }
}
