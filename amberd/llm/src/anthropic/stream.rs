//! Messages API stream events → `ChunkDelta`s, and a whole (non-streamed) message too.
//!
//! The stream is typed events about numbered content blocks: `message_start` (input usage),
//! `content_block_start` / `_delta` / `_stop` (text, `tool_use` with its input as JSON
//! fragments, `thinking` with a signature, `redacted_thinking`), `message_delta` (stop
//! reason, output usage), `message_stop`, `ping`, `error`. What spans events lives in
//! [`AnthropicStream`], the stream's decoder (one per stream): the input usage, to report
//! whole usage with the output count, and the open thinking blocks, which complete into a
//! `ReasoningItem` when they stop. Unknown event and block types are skipped, so new API
//! features do not break a stream.
//!
//! Usage: Anthropic's `input_tokens` counts only the input neither read from nor written to
//! the cache. amber's `prompt_tokens` is the whole prompt (as OpenAI reports it, and as the
//! compaction gate needs it): `input_tokens + cache_read_input_tokens +
//! cache_creation_input_tokens`; `cached_tokens` is the cache read and `cache_write_tokens`
//! the cache creation, both parts of `prompt_tokens`.

use amber_proto::{ReasoningItem, Usage};
use serde::Deserialize;
use serde_json::{Value, json};

use super::REASONING_FORMAT;
use super::error::stream_error;
use crate::accumulate::ToolCallDelta;
use crate::decode::{ChunkDelta, Decoded};
use crate::dialect::StreamDecoder;
use crate::error::{ApiError, clip};

/// Content blocks are numbered from 0 in the order they start; a message has a handful. A
/// block index past this is no message's, and would let a stream grow the open blocks
/// without bound.
const MAX_BLOCK_INDEX: usize = 4096;

/// The decoder of one Messages stream: what it remembers between its events.
#[derive(Debug, Default)]
pub(super) struct AnthropicStream {
    /// The usage `message_start` reported; `message_delta` adds the output to it.
    usage: WireUsage,
    /// Content blocks started and not yet stopped, by index.
    open: Vec<(usize, OpenBlock)>,
}

/// A content block that completes into something only when it stops.
#[derive(Debug)]
enum OpenBlock {
    /// Text streams as it comes; nothing to keep.
    Text,
    Thinking {
        thinking: String,
        signature: String,
    },
    /// Kept verbatim: its `data` is sent back as it came.
    Redacted(Value),
    /// A call whose `input` came whole in its start (no `input_json_delta` followed yet).
    ToolUse {
        start_input: Option<String>,
    },
}

/// Usage as the API reports it; every count optional, since `message_delta` may repeat
/// only some.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl WireUsage {
    /// `later`'s counts over these.
    fn update(&mut self, later: WireUsage) {
        let over = |a: &mut Option<u64>, b: Option<u64>| {
            if b.is_some() {
                *a = b;
            }
        };
        over(&mut self.input_tokens, later.input_tokens);
        over(&mut self.output_tokens, later.output_tokens);
        over(
            &mut self.cache_read_input_tokens,
            later.cache_read_input_tokens,
        );
        over(
            &mut self.cache_creation_input_tokens,
            later.cache_creation_input_tokens,
        );
    }

    /// amber's usage (see the module comment for what counts as prompt).
    fn to_usage(self) -> Usage {
        let cached = self.cache_read_input_tokens.unwrap_or(0);
        let written = self.cache_creation_input_tokens.unwrap_or(0);
        // The endpoint's counts: a sum past u64 is capped, never a panic.
        let prompt = self
            .input_tokens
            .unwrap_or(0)
            .saturating_add(cached)
            .saturating_add(written);
        let completion = self.output_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_tokens: cached,
            cache_write_tokens: written,
            total_tokens: prompt.saturating_add(completion),
            cost_usd: None,
        }
    }
}

/// The events, by their `type` (the SSE event name says the same; the data is what counts).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartedMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
struct StartedMessage {
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Debug, Default, Deserialize)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Other,
}

impl StreamDecoder for AnthropicStream {
    /// One SSE event of a Messages stream.
    fn decode(&mut self, event: &str, data: &str) -> Result<Decoded, ApiError> {
        let data = data.trim();
        if event == "error" {
            return Err(stream_error(data));
        }
        if !data.starts_with('{') {
            return Ok(Decoded::Skip);
        }
        let parsed: Event = serde_json::from_str(data)
            .map_err(|e| ApiError::Decode(format!("{e} in event {}", clip(data))))?;
        let delta = match parsed {
            Event::MessageStart { message } => {
                self.usage = message.usage;
                ChunkDelta {
                    usage: Some(self.usage.to_usage()),
                    ..ChunkDelta::default()
                }
            }
            Event::ContentBlockStart { index, .. } if index >= MAX_BLOCK_INDEX => {
                return Err(ApiError::Decode(format!(
                    "content block {index}: a message has fewer than {MAX_BLOCK_INDEX}"
                )));
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block),
            Event::ContentBlockDelta { index, delta } => self.block_delta(index, delta),
            Event::ContentBlockStop { index } => self.stop_block(index),
            Event::MessageDelta { delta, usage } => {
                if let Some(usage) = usage {
                    self.usage.update(usage);
                }
                ChunkDelta {
                    finish_reason: delta.stop_reason.as_deref().map(finish_reason),
                    usage: Some(self.usage.to_usage()),
                    ..ChunkDelta::default()
                }
            }
            Event::MessageStop => return Ok(Decoded::Done),
            Event::Error => return Err(stream_error(data)),
            Event::Ping | Event::Unknown => return Ok(Decoded::Skip),
        };
        Ok(Decoded::Chunk(delta))
    }
}

impl AnthropicStream {
    fn start_block(&mut self, index: usize, block: Value) -> ChunkDelta {
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        let mut out = ChunkDelta::default();
        let open = match text("type") {
            "text" => {
                out.text = Some(text("text").to_owned()).filter(|t| !t.is_empty());
                OpenBlock::Text
            }
            "thinking" => {
                out.reasoning = Some(text("thinking").to_owned()).filter(|t| !t.is_empty());
                OpenBlock::Thinking {
                    thinking: text("thinking").to_owned(),
                    signature: text("signature").to_owned(),
                }
            }
            "redacted_thinking" => OpenBlock::Redacted(block),
            "tool_use" => {
                out.tool_calls.push(ToolCallDelta {
                    index: Some(index),
                    id: Some(text("id").to_owned()),
                    name: Some(text("name").to_owned()),
                    arguments: None,
                });
                // Streamed calls start with `input: {}` and send the input as fragments;
                // a start with a non-empty input (a proxy that does not stream it) is
                // the whole input, used if no fragment follows.
                let start_input = block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                    .map(Value::to_string);
                OpenBlock::ToolUse { start_input }
            }
            _ => return out,
        };
        self.open.retain(|(i, _)| *i != index);
        self.open.push((index, open));
        out
    }

    fn block_delta(&mut self, index: usize, delta: BlockDelta) -> ChunkDelta {
        let block = self
            .open
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b);
        match (delta, block) {
            (BlockDelta::TextDelta { text }, _) => ChunkDelta {
                text: Some(text),
                ..ChunkDelta::default()
            },
            // Input of a block amber does not run (a server tool's) is not a call.
            (
                BlockDelta::InputJsonDelta { partial_json },
                Some(OpenBlock::ToolUse { start_input }),
            ) => {
                *start_input = None;
                ChunkDelta {
                    tool_calls: vec![ToolCallDelta {
                        index: Some(index),
                        arguments: Some(partial_json),
                        ..ToolCallDelta::default()
                    }],
                    ..ChunkDelta::default()
                }
            }
            (BlockDelta::ThinkingDelta { thinking }, block) => {
                if let Some(OpenBlock::Thinking { thinking: all, .. }) = block {
                    all.push_str(&thinking);
                }
                ChunkDelta {
                    reasoning: Some(thinking),
                    ..ChunkDelta::default()
                }
            }
            (BlockDelta::SignatureDelta { signature }, block) => {
                let mut out = ChunkDelta::default();
                if let Some(OpenBlock::Thinking { signature: all, .. }) = block {
                    all.push_str(&signature);
                    out.held_bytes = signature.len();
                }
                out
            }
            (BlockDelta::InputJsonDelta { .. } | BlockDelta::Other, _) => ChunkDelta::default(),
        }
    }

    fn stop_block(&mut self, index: usize) -> ChunkDelta {
        let Some(at) = self.open.iter().position(|(i, _)| *i == index) else {
            return ChunkDelta::default();
        };
        let (_, block) = self.open.remove(at);
        let mut out = ChunkDelta::default();
        match block {
            OpenBlock::Text => {}
            OpenBlock::Thinking {
                thinking,
                signature,
            } => out
                .reasoning_items
                .push(thinking_item(&thinking, &signature)),
            OpenBlock::Redacted(block) => out.reasoning_items.push(ReasoningItem {
                format: REASONING_FORMAT.to_owned(),
                data: block.to_string(),
            }),
            OpenBlock::ToolUse { start_input } => {
                if let Some(input) = start_input {
                    out.tool_calls.push(ToolCallDelta {
                        index: Some(index),
                        arguments: Some(input),
                        ..ToolCallDelta::default()
                    });
                }
            }
        }
        out
    }
}

/// A thinking block as the API wants it back.
fn thinking_item(thinking: &str, signature: &str) -> ReasoningItem {
    ReasoningItem {
        format: REASONING_FORMAT.to_owned(),
        data: json!({"type": "thinking", "thinking": thinking, "signature": signature}).to_string(),
    }
}

/// A `stop_reason` in the chat-completions words the agent knows.
fn finish_reason(stop: &str) -> String {
    match stop {
        "end_turn" | "stop_sequence" | "pause_turn" => "stop",
        "tool_use" => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "refusal" => "refusal",
        other => other,
    }
    .to_owned()
}

/// A whole message (`stream: false`, or a server that ignored `stream`), or an error body.
pub(super) fn decode_message(body: &str) -> Result<ChunkDelta, ApiError> {
    #[derive(Deserialize)]
    struct Whole {
        #[serde(rename = "type", default)]
        kind: Option<String>,
        #[serde(default)]
        content: Vec<Value>,
        #[serde(default)]
        stop_reason: Option<String>,
        #[serde(default)]
        usage: Option<WireUsage>,
    }
    let body = body.trim();
    let whole: Whole = serde_json::from_str(body)
        .map_err(|e| ApiError::Decode(format!("{e} in response {}", clip(body))))?;
    if whole.kind.as_deref() == Some("error") {
        return Err(stream_error(body));
    }
    let mut out = ChunkDelta {
        finish_reason: whole.stop_reason.as_deref().map(finish_reason),
        usage: whole.usage.map(WireUsage::to_usage),
        ..ChunkDelta::default()
    };
    let (mut text, mut reasoning) = (String::new(), String::new());
    for (index, block) in whole.content.into_iter().enumerate() {
        let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        match field("type") {
            "text" => text.push_str(field("text")),
            "thinking" => {
                reasoning.push_str(field("thinking"));
                out.reasoning_items
                    .push(thinking_item(field("thinking"), field("signature")));
            }
            "redacted_thinking" => out.reasoning_items.push(ReasoningItem {
                format: REASONING_FORMAT.to_owned(),
                data: block.to_string(),
            }),
            "tool_use" => out.tool_calls.push(ToolCallDelta {
                index: Some(index),
                id: Some(field("id").to_owned()),
                name: Some(field("name").to_owned()),
                arguments: block.get("input").map(Value::to_string),
            }),
            _ => {}
        }
    }
    out.text = Some(text).filter(|t| !t.is_empty());
    out.reasoning = Some(reasoning).filter(|r| !r.is_empty());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_whose_sum_overflows_are_capped() {
        let wire = WireUsage {
            input_tokens: Some(u64::MAX),
            output_tokens: Some(5),
            cache_read_input_tokens: Some(7),
            cache_creation_input_tokens: None,
        };
        let usage = wire.to_usage();
        assert_eq!(
            (usage.prompt_tokens, usage.total_tokens),
            (u64::MAX, u64::MAX)
        );
    }
}
