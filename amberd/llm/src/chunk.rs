//! Chat-completions chunks and responses in: JSON → `ChunkDelta`, and `ChunkStream`, the
//! decoder of one chat-completions stream (it keeps the stream's `ChunkMemo`).
//!
//! Three readings, one meaning. The common chunk — one choice with text — is scanned by
//! `chunk_scan` without serde. Any other deserialises the envelope (`choices`, `delta`)
//! straight into `ChunkWire`, so the ids, model names and timestamps every chunk repeats
//! cost no allocation; the leaves that vary between providers (`content` strings or parts,
//! reasoning strings or objects, tool calls, usage) stay `serde_json::Value`. A chunk whose
//! envelope has an unexpected type (a string `delta`, an object `choices`) is read again as
//! a `Value` and mapped into the same `ChunkWire` leniently, so odd providers still pass and
//! both readings share `ChunkWire::into_delta`.

use amber_proto::Usage;
use serde::Deserialize;
use serde_json::Value;

use crate::accumulate::ToolCallDelta;
use crate::chunk_scan::{ChunkMemo, scan_simple_chunk, scan_stream_chunk};
use crate::decode::{ChunkDelta, Decoded};
use crate::dialect::StreamDecoder;
use crate::error::{ApiError, clip, error_message_from_value};
use crate::presets::KNOWN_REASONING_FIELDS;

/// One SSE event's `data` → internal shape, read on its own.
pub(crate) fn parse_chunk(event: &str, data: &str) -> Result<Decoded, ApiError> {
    parse(event, data, None)
}

/// The decoder of one chat-completions stream: `parse_chunk` for its events, in order,
/// with the memo of its chunk shapes kept across them.
#[derive(Debug, Default)]
pub(crate) struct ChunkStream {
    memo: ChunkMemo,
}

impl StreamDecoder for ChunkStream {
    fn decode(&mut self, event: &str, data: &str) -> Result<Decoded, ApiError> {
        parse(event, data, Some(&mut self.memo))
    }
}

fn parse(event: &str, data: &str, memo: Option<&mut ChunkMemo>) -> Result<Decoded, ApiError> {
    let data = data.trim();
    if data == "[DONE]" {
        return Ok(Decoded::Done);
    }
    if event == "error" {
        let message = serde_json::from_str::<Value>(data)
            .ok()
            .and_then(|v| error_message_from_value(&v))
            .unwrap_or_else(|| data.to_owned());
        return Err(ApiError::from_stream_error(message, data));
    }
    if !data.starts_with('{') {
        // `data: : keepalive`, `data: ping` and friends.
        tracing::trace!(data, "ignoring non-JSON SSE data");
        return Ok(Decoded::Skip);
    }
    let scanned = match memo {
        Some(memo) => scan_stream_chunk(data, memo),
        None => scan_simple_chunk(data),
    };
    if let Some(delta) = scanned {
        return Ok(Decoded::Chunk(delta));
    }
    parse_chunk_json(data)
}

/// A JSON chunk of any shape, through serde (`chunk_scan` answers the common one).
fn parse_chunk_json(data: &str) -> Result<Decoded, ApiError> {
    let wire = ChunkWire::parse(data)
        .map_err(|e| ApiError::Decode(format!("{e} in chunk {}", clip(data))))?;
    if let Some(error) = &wire.error {
        let message = error_message_from_value(error).unwrap_or_else(|| data.to_owned());
        return Err(ApiError::from_stream_error(message, data));
    }
    Ok(Decoded::Chunk(wire.into_delta()))
}

/// A whole non-streamed completion (`stream: false`, or a server that ignored `stream`).
pub(crate) fn parse_response(body: &str) -> Result<ChunkDelta, ApiError> {
    let body = body.trim();
    let wire = ChunkWire::parse(body)
        .map_err(|e| ApiError::Decode(format!("{e} in response {}", clip(body))))?;
    if let Some(error) = &wire.error {
        let message = error_message_from_value(error).unwrap_or_else(|| clip(body));
        return Err(ApiError::from_stream_error(message, body));
    }
    Ok(wire.into_delta())
}

/// The parts of a chunk (or a whole completion) amber reads. Unknown fields are skipped.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ChunkWire {
    choices: Option<Vec<ChoiceWire>>,
    usage: Option<Value>,
    /// Groq puts usage here.
    x_groq: Option<Value>,
    /// llama.cpp's timings carry the cached-token count.
    timings: Option<Value>,
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ChoiceWire {
    index: Option<Value>,
    // Boxed: a `DeltaWire` is 224 bytes, and serde moves each value a few times on its way
    // into place (those moves were a tenth of the decoding time).
    delta: Option<Box<DeltaWire>>,
    /// Non-streamed completions (and some streams' last chunk) say `message`.
    message: Option<Box<DeltaWire>>,
    finish_reason: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DeltaWire {
    content: Option<Value>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
    reasoning_details: Option<Value>,
    thinking: Option<Value>,
    tool_calls: Option<Value>,
    function_call: Option<Value>,
    refusal: Option<Value>,
}

impl ChunkWire {
    /// The typed reading, or the lenient one when the envelope has unexpected types.
    fn parse(json: &str) -> Result<Self, serde_json::Error> {
        match serde_json::from_str::<ChunkWire>(json) {
            Ok(wire) => Ok(wire),
            Err(typed) => match serde_json::from_str::<Value>(json) {
                Ok(value) => Ok(Self::from_value(value)),
                // Not JSON at all: the typed error names the position as well.
                Err(_) => Err(typed),
            },
        }
    }

    fn from_value(value: Value) -> Self {
        let Value::Object(mut o) = value else {
            return Self::default();
        };
        let choices = match o.remove("choices") {
            Some(Value::Array(items)) => {
                Some(items.into_iter().map(ChoiceWire::from_value).collect())
            }
            _ => None,
        };
        let mut take = |key: &str| o.remove(key).filter(|v| !v.is_null());
        Self {
            choices,
            usage: take("usage"),
            x_groq: take("x_groq"),
            timings: take("timings"),
            error: take("error"),
        }
    }

    fn into_delta(self) -> ChunkDelta {
        let mut out = ChunkDelta {
            usage: chunk_usage(
                self.usage.as_ref(),
                self.x_groq.as_ref(),
                self.timings.as_ref(),
            ),
            ..ChunkDelta::default()
        };
        let Some(choice) = self.choices.and_then(first_choice) else {
            return out;
        };
        out.finish_reason = choice
            .finish_reason
            .as_ref()
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let Some(mut delta) = choice.delta.or(choice.message) else {
            return out;
        };
        let (text, thinking) = delta.content.take().map(content_text).unwrap_or_default();
        out.text = text;
        out.refusal = delta
            .refusal
            .as_ref()
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .map(str::to_owned);
        // First non-empty field only: OpenRouter sends the same text as `reasoning` and in
        // `reasoning_details`.
        out.reasoning = KNOWN_REASONING_FIELDS
            .iter()
            .find_map(|k| delta.reasoning_field(k).and_then(reasoning_text))
            .or(thinking);
        if let Some(Value::Array(calls)) = &delta.tool_calls {
            out.tool_calls = calls.iter().map(tool_call_delta).collect();
        } else if let Some(f) = delta.function_call.as_ref().filter(|f| f.is_object()) {
            out.tool_calls = vec![function_delta(None, None, f)];
        }
        out
    }
}

impl ChoiceWire {
    fn from_value(value: Value) -> Self {
        let Value::Object(mut o) = value else {
            return Self::default();
        };
        let mut take = |key: &str| o.remove(key).filter(|v| !v.is_null());
        Self {
            index: take("index"),
            delta: take("delta").and_then(DeltaWire::from_value).map(Box::new),
            message: take("message")
                .and_then(DeltaWire::from_value)
                .map(Box::new),
            finish_reason: take("finish_reason"),
        }
    }

    /// A missing or non-numeric index counts as 0.
    fn index(&self) -> u64 {
        self.index.as_ref().and_then(Value::as_u64).unwrap_or(0)
    }
}

impl DeltaWire {
    /// None for a delta that is not an object (then `message` is read instead).
    fn from_value(value: Value) -> Option<Self> {
        let Value::Object(mut o) = value else {
            return None;
        };
        let mut take = |key: &str| o.remove(key).filter(|v| !v.is_null());
        Some(Self {
            content: take("content"),
            reasoning_content: take("reasoning_content"),
            reasoning: take("reasoning"),
            reasoning_details: take("reasoning_details"),
            thinking: take("thinking"),
            tool_calls: take("tool_calls"),
            function_call: take("function_call"),
            refusal: take("refusal"),
        })
    }

    /// The field named by an entry of `KNOWN_REASONING_FIELDS`.
    fn reasoning_field(&self, name: &str) -> Option<&Value> {
        match name {
            "reasoning_content" => self.reasoning_content.as_ref(),
            "reasoning" => self.reasoning.as_ref(),
            "reasoning_details" => self.reasoning_details.as_ref(),
            "thinking" => self.thinking.as_ref(),
            _ => None,
        }
    }
}

/// Choice 0 (or the first one); other choices are ignored (we never ask for n > 1).
fn first_choice(mut choices: Vec<ChoiceWire>) -> Option<ChoiceWire> {
    let at = choices.iter().position(|c| c.index() == 0).unwrap_or(0);
    (at < choices.len()).then(|| choices.swap_remove(at))
}

/// `content` as a string, or an array of parts → (text, reasoning). Parts of type
/// `thinking` (Mistral's Magistral) are reasoning; every other part's `text` is text.
fn content_text(v: Value) -> (Option<String>, Option<String>) {
    let non_empty = |s: String| (!s.is_empty()).then_some(s);
    match v {
        Value::String(s) => (non_empty(s), None),
        Value::Array(parts) => {
            let (mut text, mut thinking) = (String::new(), String::new());
            for p in &parts {
                if p.get("type").and_then(Value::as_str) == Some("thinking") {
                    if let Some(t) = p.get("thinking").and_then(reasoning_text) {
                        thinking.push_str(&t);
                    }
                } else if let Some(t) = p.get("text").and_then(Value::as_str).or_else(|| p.as_str())
                {
                    text.push_str(t);
                }
            }
            (non_empty(text), non_empty(thinking))
        }
        _ => (None, None),
    }
}

/// Reasoning as a string, an object (`{text}`, `{content}`, `{summary}`) or an array of
/// those (OpenRouter's `reasoning_details`; encrypted entries carry no text).
fn reasoning_text(v: &Value) -> Option<String> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => ["text", "content", "summary"]
            .iter()
            .find_map(|k| o.get(*k).and_then(reasoning_text))
            .unwrap_or_default(),
        Value::Array(items) => items.iter().filter_map(reasoning_text).collect(),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

fn tool_call_delta(v: &Value) -> ToolCallDelta {
    let index = v
        .get("index")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok());
    let id = v.get("id").and_then(Value::as_str).map(str::to_owned);
    match v.get("function") {
        Some(f) => function_delta(index, id, f),
        None => ToolCallDelta {
            index,
            id,
            ..ToolCallDelta::default()
        },
    }
}

fn function_delta(index: Option<usize>, id: Option<String>, f: &Value) -> ToolCallDelta {
    let arguments = match f.get("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    ToolCallDelta {
        index,
        id,
        name: f.get("name").and_then(Value::as_str).map(str::to_owned),
        arguments,
    }
}

fn count(v: &Value, keys: &[&str]) -> Option<u64> {
    keys.iter().find_map(|k| {
        let n = v.get(*k)?;
        // Rounding a token count reported as a float is intended.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        n.as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
    })
}

/// Usage where providers put it: top-level `usage`, Groq's `x_groq.usage`; llama.cpp's
/// `timings.cache_n` supplies cached tokens it reports nowhere else.
fn chunk_usage(
    top: Option<&Value>,
    x_groq: Option<&Value>,
    timings: Option<&Value>,
) -> Option<Usage> {
    let mut u = top
        .and_then(usage)
        .or_else(|| x_groq?.get("usage").and_then(usage))?;
    if u.cached_tokens == 0
        && let Some(cached) = timings.and_then(|t| count(t, &["cache_n"]))
    {
        u.cached_tokens = cached;
    }
    Some(u)
}

fn usage(v: &Value) -> Option<Usage> {
    if !v.is_object() {
        return None;
    }
    let prompt_tokens = count(v, &["prompt_tokens", "input_tokens"]).unwrap_or(0);
    let completion_tokens = count(v, &["completion_tokens", "output_tokens"]).unwrap_or(0);
    let cached_tokens = ["prompt_tokens_details", "input_tokens_details"]
        .iter()
        .find_map(|k| v.get(*k).and_then(|d| count(d, &["cached_tokens"])))
        .or_else(|| count(v, &["prompt_cache_hit_tokens", "cached_tokens"]))
        .unwrap_or(0);
    // An endpoint names the counts: a sum past u64 is its nonsense, not a reason to panic.
    let total_tokens =
        count(v, &["total_tokens"]).unwrap_or(prompt_tokens.saturating_add(completion_tokens));
    Some(Usage {
        cache_write_tokens: 0,
        cost_usd: None,
        prompt_tokens,
        completion_tokens,
        cached_tokens,
        total_tokens,
    })
}

#[cfg(test)]
#[path = "chunk_tests.rs"]
mod tests;
