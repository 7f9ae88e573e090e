//! Renders one [`MockTurn`] over OpenAI's Responses API (`POST /v1/responses`), for clients
//! that speak only it (amber-bench's `--compare` runs codex, which refuses `wire_api = "chat"`).
//! Only what such a client needs to run a task: `response.created`, text deltas, every output
//! item in `response.output_item.added` / `.done`, and `response.completed` with usage; a
//! non-streaming request gets the `response` object. Pure: no I/O, no clock.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::reply::{Body, FLUSH_PAUSE, Frame, Reply, Step};
use crate::turn::{Deltas, Ending, MockTurn};

/// The answer to a Responses API request for `turn` (its `Delay`s are the server's to wait).
pub(crate) fn render(turn: &MockTurn, ctx: &Ctx, stream: bool) -> Reply {
    let deltas = match Reply::unless_deltas(turn) {
        Ok(deltas) => deltas,
        Err(whole) => return whole,
    };
    if stream {
        return Reply::event_stream(stream_steps(&deltas, ctx));
    }
    let object = json!({
        "id": ctx.response_id, "object": "response", "status": "completed", "model": ctx.model,
        "output": items(&deltas, ctx), "usage": usage(&deltas, ctx),
    });
    Reply {
        pause: deltas.total_pause(),
        ..Reply::ok_json(Body::Whole(Bytes::from(object.to_string())))
    }
}

/// The output items of an answer: reasoning, the message, the function calls.
fn items(deltas: &Deltas, ctx: &Ctx) -> Vec<Value> {
    let seq = ctx.seq;
    let mut items = Vec::new();
    if !deltas.reasoning.is_empty() {
        items.push(json!({"type": "reasoning", "id": format!("rs_{seq}"),
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
    json!({"input_tokens": ctx.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
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

/// The SSE body of a streamed answer: each item added, the message's text deltas in between,
/// each item done.
fn stream_steps(deltas: &Deltas, ctx: &Ctx) -> Vec<Step> {
    let mut steps = vec![event(
        &json!({"type": "response.created",
            "response": {"id": ctx.response_id, "status": "in_progress"}}),
        Frame::Other,
    )];
    for (index, item) in items(deltas, ctx).into_iter().enumerate() {
        let mut added = item.clone();
        if item["type"] == "message" {
            added["status"] = json!("in_progress");
            added["content"] = json!([]);
        }
        steps.push(event(
            &json!({"type": "response.output_item.added", "output_index": index, "item": added}),
            Frame::Other,
        ));
        if item["type"] == "message" {
            for (i, piece) in deltas.content.iter().enumerate() {
                if let Some(interval) = deltas.interval
                    && i > 0
                {
                    steps.push(Step::Sleep(interval));
                }
                steps.push(event(
                    &json!({"type": "response.output_text.delta", "item_id": item["id"],
                        "output_index": index, "content_index": 0, "delta": piece}),
                    Frame::Content,
                ));
            }
            if deltas.ending == Ending::Cut {
                steps.push(Step::Sleep(FLUSH_PAUSE));
                steps.push(Step::Cut);
                return steps;
            }
        }
        steps.push(event(
            &json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            Frame::Other,
        ));
    }
    if deltas.ending == Ending::Cut {
        steps.push(Step::Sleep(FLUSH_PAUSE));
        steps.push(Step::Cut);
        return steps;
    }
    steps.push(event(
        &json!({"type": "response.completed", "response": {"id": ctx.response_id,
            "status": "completed", "usage": usage(deltas, ctx)}}),
        Frame::Other,
    ));
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::MockToolCall;

    fn body_of(reply: &Reply) -> String {
        let Body::Steps { steps, .. } = &reply.body else {
            return String::new();
        };
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Data(b, _) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect()
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
}
