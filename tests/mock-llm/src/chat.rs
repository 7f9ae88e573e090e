//! Renders one [`MockTurn`] as an OpenAI chat-completions answer: the SSE frames of a
//! streaming response (`chat.completion.chunk`s, the usage-only chunk, `[DONE]`) or the
//! `chat.completion` object of a non-streaming one. Pure: no I/O, no clock.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::reply::{self, Body, FLUSH_PAUSE, Frame, Reply, Step};
use crate::turn::{Deltas, Ending, MockToolCall, MockTurn, pieces};

/// `created` of every object the mock sends: fixed so recorded output is reproducible.
const CREATED: u64 = 1_700_000_000;

/// The answer to a chat-completions request for `turn` (its `Delay`s are the server's to wait).
pub(crate) fn render(turn: &MockTurn, ctx: &Ctx, stream: bool) -> Reply {
    let deltas = match Reply::unless_deltas(turn) {
        Ok(deltas) => deltas,
        Err(whole) => return whole,
    };
    if stream {
        return Reply::event_stream(stream_steps(&deltas, ctx));
    }
    if let Ending::Fail { code, message } = &deltas.ending {
        let error = json!({"error": {"code": code, "message": message, "type": code}});
        return Reply::ok_json(Body::Whole(Bytes::from(error.to_string())));
    }
    let whole = Bytes::from(completion(&deltas, ctx).to_string());
    match deltas.ending {
        Ending::Cut => Reply::ok_json(Body::steps(reply::cut_in_half(&whole))),
        Ending::Finish(_) | Ending::Fail { .. } => Reply {
            pause: deltas.total_pause(),
            ..Reply::ok_json(Body::Whole(whole))
        },
    }
}

/// Accumulates the frames of one streamed answer.
struct Frames<'a> {
    ctx: &'a Ctx,
    steps: Vec<Step>,
}

impl<'a> Frames<'a> {
    fn new(ctx: &'a Ctx) -> Self {
        Frames {
            ctx,
            steps: Vec::new(),
        }
    }

    fn data(&mut self, value: &Value, frame: Frame) {
        let bytes = Bytes::from(format!("data: {value}\n\n"));
        self.steps.push(Step::Data(bytes, frame));
    }

    fn chunk(&mut self, delta: Value, finish_reason: Option<&str>, frame: Frame) {
        let chunk = json!({
            "id": self.ctx.chat_id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.ctx.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        });
        self.data(&chunk, frame);
    }

    fn tool_calls(&mut self, calls: &[MockToolCall]) {
        for (index, call) in calls.iter().enumerate() {
            let head = json!({"tool_calls": [{
                "index": index,
                "id": self.ctx.call_id(index, call.id.as_deref()),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]});
            self.chunk(head, None, Frame::Other);
            for piece in pieces(&call.arguments, self.ctx.argument_piece_chars) {
                let delta =
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]});
                self.chunk(delta, None, Frame::Other);
            }
        }
    }

    /// Final chunk with `finish_reason`, the usage-only chunk, then `[DONE]`.
    fn finish(mut self, reason: &str, chars: usize, cached: u64) -> Vec<Step> {
        self.chunk(json!({}), Some(reason), Frame::Other);
        let usage = json!({
            "id": self.ctx.chat_id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.ctx.model,
            "choices": [],
            "usage": usage(self.ctx, chars, cached),
        });
        self.data(&usage, Frame::Usage);
        self.steps.push(Step::Data(
            Bytes::from_static(b"data: [DONE]\n\n"),
            Frame::Other,
        ));
        self.steps
    }
}

fn usage(ctx: &Ctx, chars: usize, cached: u64) -> Value {
    let (completion, total) = ctx.tokens(chars);
    json!({
        "prompt_tokens": ctx.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": total,
        "prompt_tokens_details": {"cached_tokens": cached.min(ctx.prompt_tokens)},
    })
}

/// The SSE body of a streamed (`stream: true`) answer.
fn stream_steps(deltas: &Deltas, ctx: &Ctx) -> Vec<Step> {
    let mut f = Frames::new(ctx);
    let role_content = if deltas.null_content() {
        Value::Null
    } else {
        json!("")
    };
    f.chunk(
        json!({"role": "assistant", "content": role_content}),
        None,
        Frame::Other,
    );
    for piece in &deltas.reasoning {
        f.chunk(json!({"reasoning_content": piece}), None, Frame::Reasoning);
    }
    for (i, piece) in deltas.content.iter().enumerate() {
        if let Some(interval) = deltas.interval
            && i > 0
        {
            f.steps.push(Step::Sleep(interval));
        }
        f.chunk(json!({"content": piece}), None, Frame::Content);
    }
    f.tool_calls(&deltas.calls);
    match &deltas.ending {
        Ending::Finish(reason) => f.finish(reason, deltas.chars(), deltas.cached_tokens),
        Ending::Fail { code, message } => {
            f.data(
                &json!({"error": {"code": code, "message": message, "type": code}}),
                Frame::Other,
            );
            f.steps
        }
        Ending::Cut => {
            let mut steps = f.steps;
            steps.push(Step::Sleep(FLUSH_PAUSE));
            steps.push(Step::Cut);
            steps
        }
    }
}

/// The `chat.completion` object answering a non-streaming (`stream: false`) request.
fn completion(deltas: &Deltas, ctx: &Ctx) -> Value {
    let text = deltas.content.concat();
    let calls = &deltas.calls;
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) },
    });
    if !deltas.reasoning.is_empty() {
        message["reasoning_content"] = json!(deltas.reasoning.concat());
    }
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                json!({
                    "id": ctx.call_id(index, call.id.as_deref()),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                })
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    let finish_reason = match deltas.ending {
        Ending::Finish(reason) => reason,
        Ending::Cut | Ending::Fail { .. } => "stop",
    };
    json!({
        "id": ctx.chat_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": ctx.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage(ctx, deltas.chars(), deltas.cached_tokens),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::Body;

    fn ctx() -> Ctx {
        Ctx::for_request(1, "m", 40)
    }

    fn steps(reply: &Reply) -> Vec<Step> {
        match &reply.body {
            Body::Steps { steps, .. } => steps.to_vec(),
            Body::Whole(bytes) => vec![Step::Data(bytes.clone(), Frame::Other)],
        }
    }

    fn text_of(steps: &[Step]) -> String {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Data(b, _) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_usage_chunk_is_marked_and_done_ends_the_stream() {
        let reply = render(&MockTurn::text("hi"), &ctx(), true);
        let steps = steps(&reply);
        let usage: Vec<&Step> = steps
            .iter()
            .filter(|s| matches!(s, Step::Data(_, Frame::Usage)))
            .collect();
        assert_eq!(usage.len(), 1);
        assert!(text_of(&steps).contains("\"choices\":[]"));
        assert!(text_of(&steps).ends_with("data: [DONE]\n\n"));
        assert_eq!(reply.content_type, reply::EVENT_STREAM);
    }

    #[test]
    fn drop_ends_with_a_cut() {
        let turn = MockTurn::Drop {
            chunks: vec!["a".into()],
        };
        let streamed = steps(&render(&turn, &ctx(), true));
        assert_eq!(streamed.last(), Some(&Step::Cut));
        assert!(!text_of(&streamed).contains("[DONE]"));
        let whole = steps(&render(&turn, &ctx(), false));
        assert_eq!(whole.last(), Some(&Step::Cut));
    }

    #[test]
    fn paced_content_sleeps_between_content_frames_only() {
        let turn = MockTurn::Paced {
            interval_ms: 5,
            then: Box::new(MockTurn::ChunksAndToolCalls {
                chunks: vec!["a".into(), "b".into()],
                calls: vec![MockToolCall::new("bash", &json!({"command": "ls"}))],
            }),
        };
        let steps = steps(&render(&turn, &ctx(), true));
        let sleeps = steps.iter().filter(|s| matches!(s, Step::Sleep(_))).count();
        assert_eq!(sleeps, 1);
        let content = steps
            .iter()
            .filter(|s| matches!(s, Step::Data(_, Frame::Content)))
            .count();
        assert_eq!(content, 2);
        assert!(text_of(&steps).contains(r#""finish_reason":"tool_calls""#));
    }

    #[test]
    fn completion_carries_tool_calls() {
        let turn = MockTurn::ToolCalls(vec![MockToolCall {
            id: None,
            name: "read".into(),
            arguments: r#"{"path":"a"}"#.into(),
        }]);
        let Body::Whole(bytes) = render(&turn, &ctx(), false).body else {
            panic!("a whole answer expected");
        };
        let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(v["choices"][0]["message"]["content"], Value::Null);
        let call = &v["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["id"], "call_1_0");
        assert_eq!(call["function"]["arguments"], r#"{"path":"a"}"#);
    }

    #[test]
    fn a_step_of_a_conversation_streams_text_and_calls() {
        let turn = MockTurn::ChunksAndToolCalls {
            chunks: vec!["ab".into(), "c".into()],
            calls: vec![MockToolCall {
                id: None,
                name: "bash".into(),
                arguments: r#"{"command":"echo hello there"}"#.into(),
            }],
        };
        let reply = render(&turn, &Ctx::for_step(1, "amber-bench"), true);
        let Body::Steps { steps, content } = &reply.body else {
            panic!("a stream expected");
        };
        assert_eq!(*content, 2);
        let body = text_of(steps);
        assert!(body.contains(r#""id":"call_1_0""#), "{body}");
        assert!(body.contains(r#""model":"amber-bench""#), "{body}");
        // The call's head (empty arguments), then 30 chars of arguments in pieces of 16.
        let argument_frames = body.matches(r#""function":{"arguments":"#).count();
        assert_eq!(argument_frames, 3, "{body}");
    }
}
