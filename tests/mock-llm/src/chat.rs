//! Renders one scripted [`MockTurn`] as an OpenAI chat-completions answer: the SSE frames of a
//! streaming response (as [`Step`]s: data, pauses, an abort) or the `chat.completion` object of a
//! non-streaming one. Pure: no I/O, no clock.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::server::{MockToolCall, MockTurn};

/// `created` of every object the mock sends: fixed so recorded output is reproducible.
const CREATED: u64 = 1_700_000_000;
/// Size, in chars, of the pieces a `Text` turn and tool-call arguments are cut into.
const PIECE_CHARS: usize = 8;

/// Pause before a scripted abort, so the server flushes the data already sent (an error from
/// the body stream makes hyper drop the connection without writing what it has buffered).
pub(crate) const FLUSH_PAUSE: Duration = Duration::from_millis(20);

/// One step of a streamed response body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Bytes to write as they are.
    Data(Bytes),
    /// Pause before the next step.
    Sleep(Duration),
    /// Close the connection mid-body (no terminating chunk).
    Abort,
}

/// What the renderer needs to know about the request being answered.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// `id` of the completion (`chatcmpl-mock-N`).
    pub id: String,
    /// `model` echoed from the request.
    pub model: String,
    /// Whether the request asked for `stream_options.include_usage`.
    pub include_usage: bool,
    /// Rough prompt size in tokens (request bytes / 4).
    pub prompt_tokens: u64,
    /// 1-based index of the request, used to make tool-call ids unique.
    pub request_no: usize,
}

/// Cuts `text` into pieces of at most `n` chars (never splitting a char).
pub(crate) fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

fn call_id(ctx: &Ctx, index: usize, call: &MockToolCall) -> String {
    call.id
        .clone()
        .unwrap_or_else(|| format!("call_{}_{}", ctx.request_no, index))
}

fn usage(ctx: &Ctx, completion_chars: usize) -> Value {
    let completion = (completion_chars as u64).div_ceil(4).max(1);
    json!({
        "prompt_tokens": ctx.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": ctx.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
    })
}

/// Accumulates the frames of one streamed answer.
struct Frames<'a> {
    ctx: &'a Ctx,
    steps: Vec<Step>,
    completion_chars: usize,
}

impl<'a> Frames<'a> {
    fn new(ctx: &'a Ctx) -> Self {
        Frames {
            ctx,
            steps: Vec::new(),
            completion_chars: 0,
        }
    }

    fn data(&mut self, value: &Value) {
        self.steps
            .push(Step::Data(Bytes::from(format!("data: {value}\n\n"))));
    }

    fn chunk(&mut self, delta: Value, finish_reason: Option<&str>) {
        let frame = json!({
            "id": self.ctx.id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.ctx.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        });
        self.data(&frame);
    }

    fn role(&mut self, content: Value) {
        self.chunk(json!({"role": "assistant", "content": content}), None);
    }

    fn content(&mut self, piece: &str) {
        self.completion_chars += piece.chars().count();
        self.chunk(json!({"content": piece}), None);
    }

    fn reasoning(&mut self, piece: &str) {
        self.completion_chars += piece.chars().count();
        self.chunk(json!({"reasoning_content": piece}), None);
    }

    fn tool_calls(&mut self, calls: &[MockToolCall]) {
        for (index, call) in calls.iter().enumerate() {
            self.completion_chars += call.name.len() + call.arguments.chars().count();
            let head = json!({"tool_calls": [{
                "index": index,
                "id": call_id(self.ctx, index, call),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]});
            self.chunk(head, None);
            for piece in pieces(&call.arguments, PIECE_CHARS) {
                let delta =
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]});
                self.chunk(delta, None);
            }
        }
    }

    /// Final chunk with `finish_reason`, the usage-only chunk when asked for, then `[DONE]`.
    fn finish(mut self, reason: &str) -> Vec<Step> {
        self.chunk(json!({}), Some(reason));
        if self.ctx.include_usage {
            let frame = json!({
                "id": self.ctx.id,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": self.ctx.model,
                "choices": [],
                "usage": usage(self.ctx, self.completion_chars),
            });
            self.data(&frame);
        }
        self.steps
            .push(Step::Data(Bytes::from_static(b"data: [DONE]\n\n")));
        self.steps
    }
}

/// The body of a streamed (`stream: true`) answer to `turn`. `Delay` and `Status` are handled by
/// the server before rendering; given here they render their inner turn / an empty stop.
pub(crate) fn stream_steps(turn: &MockTurn, ctx: &Ctx) -> Vec<Step> {
    let mut f = Frames::new(ctx);
    match turn {
        MockTurn::Text(text) => {
            f.role(json!(""));
            for piece in pieces(text, PIECE_CHARS) {
                f.content(&piece);
            }
            f.finish("stop")
        }
        MockTurn::Chunks(chunks) => {
            f.role(json!(""));
            for chunk in chunks {
                f.content(chunk);
            }
            f.finish("stop")
        }
        MockTurn::Reasoning { reasoning, text } => {
            f.role(json!(""));
            for piece in pieces(reasoning, PIECE_CHARS) {
                f.reasoning(&piece);
            }
            for piece in pieces(text, PIECE_CHARS) {
                f.content(&piece);
            }
            f.finish("stop")
        }
        MockTurn::ToolCalls(calls) => {
            f.role(Value::Null);
            f.tool_calls(calls);
            f.finish("tool_calls")
        }
        MockTurn::TextAndToolCalls { text, calls } => {
            f.role(json!(""));
            for piece in pieces(text, PIECE_CHARS) {
                f.content(&piece);
            }
            f.tool_calls(calls);
            f.finish("tool_calls")
        }
        MockTurn::Slow {
            chunks,
            interval_ms,
        } => {
            f.role(json!(""));
            for (i, chunk) in chunks.iter().enumerate() {
                if i > 0 {
                    f.steps
                        .push(Step::Sleep(Duration::from_millis(*interval_ms)));
                }
                f.content(chunk);
            }
            f.finish("stop")
        }
        MockTurn::Drop { chunks } => {
            f.role(json!(""));
            for chunk in chunks {
                f.content(chunk);
            }
            let mut steps = f.steps;
            steps.push(Step::Sleep(FLUSH_PAUSE));
            steps.push(Step::Abort);
            steps
        }
        MockTurn::Raw(body) => vec![Step::Data(Bytes::from(body.clone()))],
        MockTurn::Delay { then, .. } => stream_steps(then, ctx),
        MockTurn::Status { .. } => f.finish("stop"),
    }
}

/// Text, reasoning, tool calls and finish reason of a turn, for the non-streaming answer.
fn parts(turn: &MockTurn) -> (String, Option<String>, Vec<MockToolCall>, &'static str) {
    match turn {
        MockTurn::Text(text) => (text.clone(), None, Vec::new(), "stop"),
        MockTurn::Chunks(chunks) | MockTurn::Slow { chunks, .. } | MockTurn::Drop { chunks } => {
            (chunks.concat(), None, Vec::new(), "stop")
        }
        MockTurn::Reasoning { reasoning, text } => {
            (text.clone(), Some(reasoning.clone()), Vec::new(), "stop")
        }
        MockTurn::ToolCalls(calls) => (String::new(), None, calls.clone(), "tool_calls"),
        MockTurn::TextAndToolCalls { text, calls } => {
            (text.clone(), None, calls.clone(), "tool_calls")
        }
        MockTurn::Delay { then, .. } => parts(then),
        MockTurn::Status { .. } | MockTurn::Raw(_) => (String::new(), None, Vec::new(), "stop"),
    }
}

/// The `chat.completion` object answering a non-streaming (`stream: false`) request.
pub(crate) fn completion_json(turn: &MockTurn, ctx: &Ctx) -> Value {
    let (text, reasoning, calls, finish_reason) = parts(turn);
    let mut chars = text.chars().count();
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) },
    });
    if let Some(reasoning) = reasoning {
        chars += reasoning.chars().count();
        message["reasoning_content"] = json!(reasoning);
    }
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                chars += call.name.len() + call.arguments.chars().count();
                json!({
                    "id": call_id(ctx, index, call),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                })
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": ctx.id,
        "object": "chat.completion",
        "created": CREATED,
        "model": ctx.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage(ctx, chars),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(include_usage: bool) -> Ctx {
        Ctx {
            id: "chatcmpl-mock-1".into(),
            model: "m".into(),
            include_usage,
            prompt_tokens: 10,
            request_no: 1,
        }
    }

    fn text_of(steps: &[Step]) -> String {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Data(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn pieces_respect_char_boundaries() {
        assert_eq!(pieces("héllo wörld!", 5), vec!["héllo", " wörl", "d!"]);
        assert!(pieces("", 8).is_empty());
    }

    #[test]
    fn usage_chunk_only_when_asked() {
        let turn = MockTurn::Text("hi".into());
        let with = text_of(&stream_steps(&turn, &ctx(true)));
        let without = text_of(&stream_steps(&turn, &ctx(false)));
        assert!(with.contains("\"choices\":[]"));
        assert!(!without.contains("\"choices\":[]"));
        assert!(with.ends_with("data: [DONE]\n\n") && without.ends_with("data: [DONE]\n\n"));
    }

    #[test]
    fn drop_ends_with_abort() {
        let steps = stream_steps(
            &MockTurn::Drop {
                chunks: vec!["a".into()],
            },
            &ctx(true),
        );
        assert_eq!(steps.last(), Some(&Step::Abort));
        assert!(!text_of(&steps).contains("[DONE]"));
    }

    #[test]
    fn completion_json_carries_tool_calls() {
        let turn = MockTurn::ToolCalls(vec![MockToolCall {
            id: None,
            name: "read".into(),
            arguments: r#"{"path":"a"}"#.into(),
        }]);
        let v = completion_json(&turn, &ctx(false));
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(v["choices"][0]["message"]["content"], Value::Null);
        let call = &v["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["id"], "call_1_0");
        assert_eq!(call["function"]["arguments"], r#"{"path":"a"}"#);
    }
}
