//! amber-llm: the LLM port of amberd, a streaming chat client for three provider dialects
//! (OpenAI-compatible chat completions, Anthropic Messages, OpenAI's Responses API).
//!
//! `LlmClient::stream_chat` sends one chat request, streams text and reasoning deltas to a
//! callback, and returns the assembled reply (text, tool calls in the internal shape, usage).
//! Inside: a `Dialect` chosen once per client from the flavor (`flavor.rs`, a provider's
//! dialect factory first, unknown flavor → openai), each dialect handing out a
//! `StreamDecoder` per response stream that owns the stream's state (the traits and the
//! pieces dialects share in `dialect.rs`; chat completions in `openai.rs` with `chunk.rs`,
//! `chunk_scan.rs` and `wire.rs`; Anthropic Messages in `anthropic/`; OpenAI Responses in
//! `responses/`), provider presets with their flavor's quirks (`presets.rs`, `provider.rs`),
//! the `[provider]` / `[providers.NAME]` settings and the default endpoint they resolve to
//! (`provider_settings.rs`, `endpoint.rs`), one cached client per provider (`pool.rs`), a
//! reqwest transport with retry/backoff, timeouts and cancellation (`client.rs`, `retry.rs`,
//! `io_thread.rs`), the SSE reader (`sse.rs`, `sse_decoder.rs`, `decode.rs`, `pace.rs`), the
//! tool-call delta accumulator (`accumulate.rs`) and the size bound of one reply
//! (`limits.rs`). Errors are a typed `ApiError` with `is_retryable` and a stable `code`.
//!
//! The crate knows no session, tool or config file: the daemon deserialises its settings
//! types from its own config and hands them in.

mod accumulate;
mod anthropic;
mod check;
mod chunk;
mod chunk_scan;
mod client;
mod decode;
mod dialect;
mod endpoint;
mod error;
mod error_chain;
mod flavor;
mod io_thread;
mod limits;
mod openai;
mod pace;
mod pool;
mod presets;
pub mod prices;
mod provider;
mod provider_settings;
mod responses;
mod retry;
mod settings;
mod sse;
mod sse_decoder;
mod wire;

#[cfg(test)]
mod decoder_tests;
#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod flavor_tests;
#[cfg(test)]
mod pool_tests;
#[cfg(test)]
mod stream_end_tests;
#[cfg(test)]
mod test_support;

use std::time::Duration;

use amber_proto::{Message, ReasoningItem, ToolCall, Usage};

pub use accumulate::{ToolCallAccumulator, ToolCallDelta};
pub use check::{ProviderCheck, check as check_provider};
pub use client::LlmClient;
pub use decode::{ChunkDelta, Decoded};
pub use dialect::{Dialect, StreamDecoder};
pub use endpoint::Endpoint;
pub use error::ApiError;
pub use error_chain::error_chain;
pub use flavor::make_dialect;
pub use limits::{DEFAULT_MAX_REPLY_BYTES, Oversized};
pub use pool::{LlmPool, NOT_CONFIGURED, ProviderCatalog};
pub use presets::{MaxTokensField, Preset, Quirks, all_presets, preset};
pub use prices::{Price, PriceSetting};
pub use provider::{DialectFactory, ProviderLookup, ProviderSpec, bundled_providers};
pub use provider_settings::{NamedProviderSettings, ProviderSettings};
pub use settings::LlmSettings;

/// A tool the model may call, in OpenAI function form.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// One chat-completions request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// Empty → the settings' model.
    pub model: String,
    pub messages: Vec<Message>,
    /// Empty → `tools` is omitted from the body.
    pub tools: Vec<ToolSpec>,
    /// Structured output: the reply's text must be JSON valid against this schema. Sent only
    /// by dialects whose provider supports it ([`LlmClient::structured_output`]).
    pub response_format: Option<ResponseFormat>,
    /// A key the provider may use to route requests to the same prompt cache (the session
    /// id; OpenAI Responses' `prompt_cache_key`). `None` → not sent.
    pub cache_key: Option<String>,
    /// A cap on this reply's tokens, below the settings' `max_tokens` (the lower of the two
    /// is sent). `None` → the settings' alone.
    pub max_tokens: Option<u32>,
}

impl ChatRequest {
    /// The reply's token cap to send: the lower of the request's and the settings'.
    pub(crate) fn max_tokens_for(&self, settings: &LlmSettings) -> Option<u32> {
        match (self.max_tokens, settings.max_tokens) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The model this request names, else the settings' (empty when neither names one).
    pub(crate) fn model_for<'a>(&'a self, settings: &'a LlmSettings) -> &'a str {
        if self.model.is_empty() {
            &settings.model
        } else {
            &self.model
        }
    }
}

/// A JSON Schema the reply must follow (OpenAI's `response_format: {type: "json_schema"}`).
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseFormat {
    /// The schema's name as the provider sees it (`[a-zA-Z0-9_-]`, at most 64 characters).
    pub name: String,
    pub schema: serde_json::Value,
    /// OpenAI's strict mode, which accepts only a subset of JSON Schema; amber sends
    /// `false` and validates the answer itself.
    pub strict: bool,
}

/// What `stream_chat` reports while a reply is being produced.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    ReasoningDelta(String),
    /// An attempt failed before anything was streamed; sleeping `delay`, then retry number
    /// `attempt` (1-based) of at most `max_attempts` (`max_retries`).
    Retrying {
        attempt: u32,
        max_attempts: u32,
        delay: Duration,
        /// Short and human: `429 rate limited`, `stream idle for 30 s` ([`ApiError::retry_reason`]).
        reason: String,
        /// The whole error, for the log.
        error: String,
    },
}

/// The assembled reply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatResponse {
    pub text: String,
    pub reasoning: String,
    /// Normalised: ids synthesised (`call_<n>`) when missing, empty arguments → `{}`.
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    /// What the model said instead of an answer, when it refused (OpenAI's refusal
    /// deltas and parts); an Anthropic refusal is `finish_reason` `refusal` alone.
    pub refusal: Option<String>,
    /// Reasoning the provider wants back verbatim on the next request (see
    /// [`ReasoningItem`]); the caller stores it on the assistant message.
    pub reasoning_items: Vec<ReasoningItem>,
}
