//! The script language: one [`MockTurn`] is one answer of the scripted model, with the quirks
//! a real endpoint has (errors, latency, slow or cut-off streams, raw bodies). Pure data.

use std::time::Duration;

use serde_json::Value;

/// One scripted answer of the mock endpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum MockTurn {
    /// Streamed as content deltas of about 8 chars each; `finish_reason: "stop"`.
    Text(String),
    /// Exactly these content deltas; `finish_reason: "stop"`.
    Chunks(Vec<String>),
    /// `reasoning_content` deltas, then content deltas; `finish_reason: "stop"`.
    Reasoning { reasoning: String, text: String },
    /// Tool calls, arguments split across several chunks; `finish_reason: "tool_calls"`.
    ToolCalls(Vec<MockToolCall>),
    /// Content deltas, then tool calls; `finish_reason: "tool_calls"`.
    TextAndToolCalls {
        text: String,
        calls: Vec<MockToolCall>,
    },
    /// Exactly these content deltas (none: the role chunk says `content: null`), then tool
    /// calls; `finish_reason: "tool_calls"` when there are calls, else `"stop"`.
    ChunksAndToolCalls {
        chunks: Vec<String>,
        calls: Vec<MockToolCall>,
    },
    /// A non-200 answer (429, 500, 400…) with this body and, when set, a `Retry-After` header.
    Status {
        code: u16,
        retry_after: Option<u64>,
        body: String,
    },
    /// Wait `ms` before answering with `then` (the request is recorded at once).
    Delay { ms: u64, then: Box<MockTurn> },
    /// `then`, with `interval_ms` between its content deltas (a model streaming at a pace).
    Paced {
        interval_ms: u64,
        then: Box<MockTurn>,
    },
    /// These content deltas with `interval_ms` between each, then a normal end (the same as
    /// `Paced` over `Chunks`).
    Slow {
        chunks: Vec<String>,
        interval_ms: u64,
    },
    /// These content deltas, then the connection is closed mid-body: no `finish_reason`, no
    /// usage chunk, no `[DONE]`, no terminating HTTP chunk.
    Drop { chunks: Vec<String> },
    /// This exact body text (for recorded provider quirks), sent as `text/event-stream`.
    Raw(String),
    /// These content deltas, then an error inside the 200 stream: chat completions'
    /// `{"error": {code, message}}` chunk, the Responses API's `error` event followed by
    /// `response.failed`. A non-streamed request gets the error object whole.
    StreamError {
        chunks: Vec<String>,
        code: String,
        message: String,
    },
    /// `then`, its usage reporting `tokens` of the prompt as read from the provider's
    /// prompt cache (`cached_tokens`). Put a `Delay` outside it, not inside.
    Cached { tokens: u64, then: Box<MockTurn> },
    /// `reasoning` streamed before `then`'s answer: a reasoning model's tool calls (over
    /// the Responses API, a reasoning item with `encrypted_content`).
    Thinking {
        reasoning: String,
        then: Box<MockTurn>,
    },
    /// `then`, streamed, and the connection then held open `hold_ms` after its final event
    /// (`[DONE]`, `message_stop`, `response.completed`) before the body ends: a proxy
    /// that keeps connections open. Put a `Delay` outside it, not inside.
    Held { hold_ms: u64, then: Box<MockTurn> },
    /// A reasoning model that never stops: `piece` as one reasoning delta, again and again
    /// until the client goes away (the dialect's events before it are sent first).
    EndlessReasoning { piece: String },
    /// This exact text, sent as `text/event-stream` again and again until the client goes
    /// away (say, a `data:` line that never ends).
    EndlessRaw(String),
}

impl MockTurn {
    /// A `Text` turn.
    pub fn text(text: impl Into<String>) -> MockTurn {
        MockTurn::Text(text.into())
    }

    /// A `ToolCalls` turn with one call (generated id).
    pub fn tool_call(name: impl Into<String>, arguments: &Value) -> MockTurn {
        MockTurn::ToolCalls(vec![MockToolCall::new(name, arguments)])
    }

    /// The wait before this turn answers (its `Delay`s, summed; `None` without one) and the
    /// turn it then answers with.
    pub(crate) fn split_delay(&self) -> (Option<Duration>, &MockTurn) {
        let mut delay = None;
        let mut turn = self;
        while let MockTurn::Delay { ms, then } = turn {
            delay = Some(delay.unwrap_or(Duration::ZERO) + Duration::from_millis(*ms));
            turn = then;
        }
        (delay, turn)
    }
}

/// One tool call of a scripted turn.
#[derive(Debug, Clone, PartialEq)]
pub struct MockToolCall {
    /// The call id; `None` generates `call_<n>_<index>`, `n` being the request's number (or
    /// the turn's step in a [`Conversation`](crate::Conversation)).
    pub id: Option<String>,
    /// The tool name the model "chose".
    pub name: String,
    /// The raw JSON text of the arguments (need not be valid JSON, for bad-argument tests).
    pub arguments: String,
}

impl MockToolCall {
    /// A call with a generated id and `arguments` serialized as JSON.
    pub fn new(name: impl Into<String>, arguments: &Value) -> MockToolCall {
        MockToolCall {
            id: None,
            name: name.into(),
            arguments: arguments.to_string(),
        }
    }
}

/// Cuts `text` into pieces of at most `n` chars (never splitting a char): how a `Text` turn
/// becomes deltas.
pub fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

/// Size, in chars, of the deltas a `Text` (or `Reasoning`) turn is cut into.
pub(crate) const TEXT_PIECE_CHARS: usize = 8;

/// How its deltas end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ending {
    /// A finish reason, usage, and the end of the stream.
    Finish(&'static str),
    /// The connection is cut after the last delta.
    Cut,
    /// An error reported inside the stream after the last delta, then the end of the body.
    Fail { code: String, message: String },
}

/// A turn that streams deltas, reduced to what every renderer draws: reasoning pieces,
/// content pieces (paced or not), tool calls, and how it ends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Deltas {
    pub reasoning: Vec<String>,
    pub content: Vec<String>,
    pub calls: Vec<MockToolCall>,
    /// Pause before each content delta but the first.
    pub interval: Option<Duration>,
    pub ending: Ending,
    /// Prompt tokens the usage reports as cached.
    pub cached_tokens: u64,
}

/// What a turn draws, its `Delay` and `Paced` wrappers seen through (the server waits for
/// the outer `Delay`s; one inside a `Paced` is answered at once).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Shape<'a> {
    Status {
        code: u16,
        retry_after: Option<u64>,
        body: &'a str,
    },
    Raw(&'a str),
    Deltas(Deltas),
}

impl MockTurn {
    /// This turn's shape.
    pub(crate) fn shape(&self) -> Shape<'_> {
        let text = |t: &str| pieces(t, TEXT_PIECE_CHARS);
        let deltas = |reasoning, content, calls: Vec<MockToolCall>| Deltas {
            reasoning,
            content,
            ending: Ending::Finish(if calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }),
            calls,
            interval: None,
            cached_tokens: 0,
        };
        Shape::Deltas(match self {
            MockTurn::Status {
                code,
                retry_after,
                body,
            } => {
                return Shape::Status {
                    code: *code,
                    retry_after: *retry_after,
                    body,
                };
            }
            MockTurn::Raw(body) | MockTurn::EndlessRaw(body) => return Shape::Raw(body),
            MockTurn::Delay { then, .. } | MockTurn::Held { then, .. } => return then.shape(),
            MockTurn::EndlessReasoning { piece } => {
                deltas(vec![piece.clone()], Vec::new(), Vec::new())
            }
            MockTurn::Paced { interval_ms, then } => {
                let shape = then.shape();
                let Shape::Deltas(inner) = shape else {
                    return shape;
                };
                Deltas {
                    interval: Some(Duration::from_millis(*interval_ms)),
                    ..inner
                }
            }
            MockTurn::Text(t) => deltas(Vec::new(), text(t), Vec::new()),
            MockTurn::Chunks(chunks) => deltas(Vec::new(), chunks.clone(), Vec::new()),
            MockTurn::Reasoning { reasoning, text: t } => {
                deltas(text(reasoning), text(t), Vec::new())
            }
            MockTurn::ToolCalls(calls) => deltas(Vec::new(), Vec::new(), calls.clone()),
            MockTurn::TextAndToolCalls { text: t, calls } => {
                deltas(Vec::new(), text(t), calls.clone())
            }
            MockTurn::ChunksAndToolCalls { chunks, calls } => {
                deltas(Vec::new(), chunks.clone(), calls.clone())
            }
            MockTurn::Slow {
                chunks,
                interval_ms,
            } => Deltas {
                interval: Some(Duration::from_millis(*interval_ms)),
                ..deltas(Vec::new(), chunks.clone(), Vec::new())
            },
            MockTurn::Drop { chunks } => Deltas {
                ending: Ending::Cut,
                ..deltas(Vec::new(), chunks.clone(), Vec::new())
            },
            MockTurn::StreamError {
                chunks,
                code,
                message,
            } => Deltas {
                ending: Ending::Fail {
                    code: code.clone(),
                    message: message.clone(),
                },
                ..deltas(Vec::new(), chunks.clone(), Vec::new())
            },
            MockTurn::Thinking { reasoning, then } => {
                let shape = then.shape();
                let Shape::Deltas(inner) = shape else {
                    return shape;
                };
                Deltas {
                    reasoning: text(reasoning),
                    ..inner
                }
            }
            MockTurn::Cached { tokens, then } => {
                let shape = then.shape();
                let Shape::Deltas(inner) = shape else {
                    return shape;
                };
                Deltas {
                    cached_tokens: *tokens,
                    ..inner
                }
            }
        })
    }
}

impl Deltas {
    /// Whether the first chunk says `content: null`: a turn of tool calls only, as providers
    /// send it.
    pub(crate) fn null_content(&self) -> bool {
        self.content.is_empty() && self.reasoning.is_empty() && !self.calls.is_empty()
    }

    /// Size of the answer, in chars, for the usage figures.
    pub(crate) fn chars(&self) -> usize {
        let count = |pieces: &[String]| pieces.iter().map(|p| p.chars().count()).sum::<usize>();
        count(&self.reasoning)
            + count(&self.content)
            + self
                .calls
                .iter()
                .map(|c| c.name.len() + c.arguments.chars().count())
                .sum::<usize>()
    }

    /// How long a whole (non-streamed) answer takes: every pause of the stream.
    pub(crate) fn total_pause(&self) -> Duration {
        let pauses = self.content.len().saturating_sub(1) as u32;
        self.interval.map_or(Duration::ZERO, |i| i * pauses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pieces_respect_char_boundaries() {
        assert_eq!(pieces("héllo wörld!", 5), vec!["héllo", " wörl", "d!"]);
        assert!(pieces("", 8).is_empty());
    }

    #[test]
    fn delays_sum_and_pacing_wraps_any_stream() {
        let turn = MockTurn::Delay {
            ms: 5,
            then: Box::new(MockTurn::Delay {
                ms: 7,
                then: Box::new(MockTurn::Paced {
                    interval_ms: 3,
                    then: Box::new(MockTurn::tool_call("bash", &json!({}))),
                }),
            }),
        };
        let (delay, inner) = turn.split_delay();
        assert_eq!(delay, Some(Duration::from_millis(12)));
        let Shape::Deltas(deltas) = inner.shape() else {
            panic!("deltas expected");
        };
        assert_eq!(deltas.interval, Some(Duration::from_millis(3)));
        assert_eq!(deltas.ending, Ending::Finish("tool_calls"));
        assert!(deltas.null_content());
        assert_eq!(MockTurn::text("x").split_delay().0, None);
        let raw = MockTurn::Paced {
            interval_ms: 1,
            then: Box::new(MockTurn::Raw("x".into())),
        };
        assert_eq!(raw.shape(), Shape::Raw("x"));
    }

    #[test]
    fn slow_is_paced_chunks() {
        let chunks = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let slow = MockTurn::Slow {
            chunks: chunks.clone(),
            interval_ms: 10,
        };
        let paced = MockTurn::Paced {
            interval_ms: 10,
            then: Box::new(MockTurn::Chunks(chunks)),
        };
        assert_eq!(slow.shape(), paced.shape());
        let Shape::Deltas(deltas) = slow.shape() else {
            panic!("deltas expected");
        };
        assert_eq!(deltas.total_pause(), Duration::from_millis(20));
    }
}
