//! Renders one [`MockTurn`] over OpenAI's Responses API (`POST /v1/responses`): for amber's
//! `openai-responses` dialect, and for clients that speak only it (amber-bench's `--compare`
//! runs codex, which refuses `wire_api = "chat"`). A stream has `response.created`, every
//! output item between `response.output_item.added` and `.done`: a reasoning item (summary
//! deltas, then the item with its `encrypted_content`), the message (text deltas), function
//! calls (argument deltas, `.arguments.done`); then `response.completed` with usage (cached
//! tokens included), or an `error` event and `response.failed`. A non-streaming request
//! gets the `response` object. Pure: no I/O, no clock.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::reply::{Body, FLUSH_PAUSE, Frame, Reply, Step};
use crate::turn::{Deltas, Ending, MockTurn, pieces};

/// The answer to a Responses API request for `turn` (its `Delay`s are the server's to wait).
pub(crate) fn render(turn: &MockTurn, ctx: &Ctx, stream: bool) -> Reply {
    let deltas = match Reply::unless_deltas(turn) {
        Ok(deltas) => deltas,
        Err(whole) => return whole,
    };
    if stream {
        return Reply::event_stream(stream_steps(&deltas, ctx));
    }
    let object = match &deltas.ending {
        Ending::Fail { code, message } => json!({
            "id": ctx.response_id, "object": "response", "status": "failed", "model": ctx.model,
            "error": {"code": code, "message": message}, "output": [],
        }),
        _ => json!({
            "id": ctx.response_id, "object": "response", "status": "completed", "model": ctx.model,
            "output": items(&deltas, ctx), "usage": usage(&deltas, ctx),
        }),
    };
    Reply {
        pause: deltas.total_pause(),
        ..Reply::ok_json(Body::Whole(Bytes::from(object.to_string())))
    }
}

/// The `encrypted_content` of the reasoning item of answer `seq` (a script's request number,
/// 1-based): opaque to the client, which must send it back.
pub fn encrypted_reasoning(seq: usize) -> String {
    format!("gAAAAA-mock-encrypted-reasoning-{seq}")
}

/// The output items of an answer: reasoning, the message, the function calls.
fn items(deltas: &Deltas, ctx: &Ctx) -> Vec<Value> {
    let seq = ctx.seq;
    let mut items = Vec::new();
    if !deltas.reasoning.is_empty() {
        items.push(json!({"type": "reasoning", "id": format!("rs_{seq}"),
            "encrypted_content": encrypted_reasoning(seq),
            "summary": [{"type": "summary_text", "text": deltas.reasoning.concat()}]}));
    }
    if !deltas.content.is_empty() {
        items.push(json!({"type": "message", "id": format!("msg_{seq}"), "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": deltas.content.concat(), "annotations": []}]}));
    }
    for (i, call) in deltas.calls.iter().enumerate() {
        items.push(
            json!({"type": "function_call", "id": format!("fc_{seq}_{i}"),
            "call_id": ctx.call_id(i, call.id.as_deref()), "name": call.name,
            "arguments": call.arguments, "status": "completed"}),
        );
    }
    items
}

fn usage(deltas: &Deltas, ctx: &Ctx) -> Value {
    let (output, total) = ctx.tokens(deltas.chars());
    let cached = deltas.cached_tokens.min(ctx.prompt_tokens);
    json!({"input_tokens": ctx.prompt_tokens, "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": total})
}

/// One SSE event, named by its `type`.
fn event(value: &Value, frame: Frame) -> Step {
    let kind = value["type"].as_str().unwrap_or("message");
    Step::Data(
        Bytes::from(format!("event: {kind}\ndata: {value}\n\n")),
        frame,
    )
}

/// The SSE body of a streamed answer: each item added, its deltas, each item done.
fn stream_steps(deltas: &Deltas, ctx: &Ctx) -> Vec<Step> {
    let mut steps = vec![event(
        &json!({"type": "response.created",
            "response": {"id": ctx.response_id, "status": "in_progress"}}),
        Frame::Other,
    )];
    for (index, item) in items(deltas, ctx).into_iter().enumerate() {
        let mut added = item.clone();
        let id = &item["id"];
        match item["type"].as_str() {
            Some("message") => {
                added["status"] = json!("in_progress");
                added["content"] = json!([]);
            }
            Some("reasoning") => {
                added["summary"] = json!([]);
                if let Some(o) = added.as_object_mut() {
                    o.remove("encrypted_content");
                }
            }
            Some("function_call") => {
                added["status"] = json!("in_progress");
                added["arguments"] = json!("");
            }
            _ => {}
        }
        steps.push(event(
            &json!({"type": "response.output_item.added", "output_index": index, "item": added}),
            Frame::Other,
        ));
        match item["type"].as_str() {
            Some("reasoning") => {
                for piece in &deltas.reasoning {
                    steps.push(event(
                        &json!({"type": "response.reasoning_summary_text.delta", "item_id": id,
                            "output_index": index, "summary_index": 0, "delta": piece}),
                        Frame::Reasoning,
                    ));
                }
            }
            Some("message") => {
                for (i, piece) in deltas.content.iter().enumerate() {
                    if let Some(interval) = deltas.interval
                        && i > 0
                    {
                        steps.push(Step::Sleep(interval));
                    }
                    steps.push(event(
                        &json!({"type": "response.output_text.delta", "item_id": id,
                            "output_index": index, "content_index": 0, "delta": piece}),
                        Frame::Content,
                    ));
                }
                match &deltas.ending {
                    Ending::Cut => return cut(steps),
                    Ending::Fail { code, message } => return failed(steps, ctx, code, message),
                    Ending::Finish(_) => {}
                }
            }
            Some("function_call") => {
                let arguments = item["arguments"].as_str().unwrap_or_default();
                for piece in pieces(arguments, ctx.argument_piece_chars) {
                    steps.push(event(
                        &json!({"type": "response.function_call_arguments.delta", "item_id": id,
                            "output_index": index, "delta": piece}),
                        Frame::Other,
                    ));
                }
                steps.push(event(
                    &json!({"type": "response.function_call_arguments.done", "item_id": id,
                        "output_index": index, "arguments": arguments}),
                    Frame::Other,
                ));
            }
            _ => {}
        }
        steps.push(event(
            &json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            Frame::Other,
        ));
    }
    match &deltas.ending {
        Ending::Cut => return cut(steps),
        Ending::Fail { code, message } => return failed(steps, ctx, code, message),
        Ending::Finish(_) => {}
    }
    steps.push(event(
        &json!({"type": "response.completed", "response": {"id": ctx.response_id,
            "status": "completed", "usage": usage(deltas, ctx)}}),
        Frame::Other,
    ));
    steps
}

/// The connection closed after what was sent.
fn cut(mut steps: Vec<Step>) -> Vec<Step> {
    steps.push(Step::Sleep(FLUSH_PAUSE));
    steps.push(Step::Cut);
    steps
}

/// An `error` event, then `response.failed` carrying the same error: the stream's end.
fn failed(mut steps: Vec<Step>, ctx: &Ctx, code: &str, message: &str) -> Vec<Step> {
    steps.push(event(
        &json!({"type": "error", "code": code, "message": message, "param": null}),
        Frame::Other,
    ));
    steps.push(event(
        &json!({"type": "response.failed", "response": {"id": ctx.response_id,
            "status": "failed", "error": {"code": code, "message": message}, "output": []}}),
        Frame::Other,
    ));
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::MockToolCall;

    fn body_of(reply: &Reply) -> String {
        reply.streamed_text()
    }

    #[test]
    fn a_turn_streams_text_and_items() {
        let turn = MockTurn::ChunksAndToolCalls {
            chunks: vec!["he".into(), "llo".into()],
            calls: vec![MockToolCall {
                id: None,
                name: "bash".into(),
                arguments: r#"{"command":"ls"}"#.into(),
            }],
        };
        let reply = render(&turn, &Ctx::for_step(1, "m"), true);
        let Body::Steps { content, .. } = &reply.body else {
            panic!("a stream expected");
        };
        assert_eq!(*content, 2);
        let body = body_of(&reply);
        assert!(body.starts_with("event: response.created\n"), "{body}");
        assert!(body.contains(r#""text":"hello""#), "{body}");
        assert!(body.contains(r#""call_id":"call_1_0""#), "{body}");
        assert!(body.contains(r#""id":"fc_1_0""#), "{body}");
        assert!(body.trim_end().ends_with('}') && body.contains("event: response.completed"));
    }

    #[test]
    fn a_dropped_turn_never_completes() {
        let turn = MockTurn::Drop {
            chunks: vec!["par".into(), "tial".into()],
        };
        let reply = render(&turn, &Ctx::for_request(1, "m", 10), true);
        let body = body_of(&reply);
        assert!(body.contains(r#""delta":"tial""#), "{body}");
        assert!(!body.contains("response.completed"), "{body}");
        let Body::Steps { steps, .. } = &reply.body else {
            panic!("a stream expected");
        };
        assert_eq!(steps.last(), Some(&Step::Cut));
    }

    #[test]
    fn a_whole_response_lists_its_output() {
        let reply = render(
            &MockTurn::text("plain"),
            &Ctx::for_request(2, "m", 10),
            false,
        );
        let Body::Whole(bytes) = &reply.body else {
            panic!("a whole answer expected");
        };
        let v: Value = serde_json::from_slice(bytes).unwrap_or_default();
        assert_eq!(v["id"], "resp_mock_2");
        assert_eq!(v["output"][0]["content"][0]["text"], "plain");
        assert!(v["usage"]["total_tokens"].as_u64() > Some(0));
    }

    /// The `data` of every event of a streamed reply, parsed.
    fn events_of(reply: &Reply) -> Vec<Value> {
        body_of(reply)
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap_or_default())
            .collect()
    }

    #[test]
    fn call_arguments_stream_in_pieces_then_done() {
        let arguments = r#"{"path":"src/main.rs","content":"fn main() {}"}"#;
        let turn = MockTurn::ToolCalls(vec![MockToolCall {
            id: Some("call_x".into()),
            name: "write".into(),
            arguments: arguments.into(),
        }]);
        let events = events_of(&render(&turn, &Ctx::for_request(3, "m", 10), true));
        let added = &events[1];
        assert_eq!(added["type"], "response.output_item.added");
        assert_eq!(added["item"]["arguments"], "");
        assert_eq!(added["item"]["call_id"], "call_x");
        let pieces: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "response.function_call_arguments.delta")
            .map(|e| e["delta"].as_str().unwrap_or_default())
            .collect();
        assert!(pieces.len() > 1, "{pieces:?}");
        assert_eq!(pieces.concat(), arguments);
        let done: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "response.function_call_arguments.done")
            .collect();
        assert_eq!(done[0]["arguments"], arguments);
        assert_eq!(
            events.last().map(|e| e["type"].clone()),
            Some(json!("response.completed"))
        );
    }

    #[test]
    fn reasoning_streams_its_summary_and_ends_with_encrypted_content() {
        let turn = MockTurn::Cached {
            tokens: 7,
            then: Box::new(MockTurn::Reasoning {
                reasoning: "think about it carefully".into(),
                text: "ok".into(),
            }),
        };
        let events = events_of(&render(&turn, &Ctx::for_request(4, "m", 400), true));
        let summary: String = events
            .iter()
            .filter(|e| e["type"] == "response.reasoning_summary_text.delta")
            .filter_map(|e| e["delta"].as_str())
            .collect();
        assert_eq!(summary, "think about it carefully");
        let added = &events[1];
        assert!(added["item"].get("encrypted_content").is_none(), "{added}");
        let done = events
            .iter()
            .find(|e| e["type"] == "response.output_item.done" && e["item"]["type"] == "reasoning")
            .cloned()
            .unwrap_or_default();
        assert_eq!(done["item"]["encrypted_content"], encrypted_reasoning(4));
        let completed = events.last().cloned().unwrap_or_default();
        assert_eq!(
            completed["response"]["usage"]["input_tokens_details"]["cached_tokens"],
            7
        );
    }

    #[test]
    fn a_stream_error_is_an_error_event_then_a_failed_response() {
        let turn = MockTurn::StreamError {
            chunks: vec!["half".into()],
            code: "context_length_exceeded".into(),
            message: "Your input exceeds the context window of this model.".into(),
        };
        let events = events_of(&render(&turn, &Ctx::for_request(1, "m", 10), true));
        let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.output_item.added",
                "response.output_text.delta",
                "error",
                "response.failed"
            ]
        );
        assert_eq!(events[3]["code"], "context_length_exceeded");
        assert_eq!(
            events[4]["response"]["error"]["code"],
            "context_length_exceeded"
        );
    }
}
