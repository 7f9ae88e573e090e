//! The Anthropic Messages dialect (`flavor = "anthropic"`): `POST {base}/v1/messages` with
//! `x-api-key` and `anthropic-version`, a request body mapped from the internal messages
//! (`request.rs`), the stream's typed events folded into `ChunkDelta`s by an
//! `AnthropicStream`, the decoder of one stream, which keeps its open blocks and usage
//! (`stream.rs`), and Anthropic's error shapes — 529 and `overloaded_error`, the
//! prompt-too-long 400 — classified (`error.rs`).
//!
//! Thinking blocks come back as `ReasoningItem`s of format `anthropic` (the block's JSON,
//! signature included) and are sent back first in their assistant message, as the API
//! requires for a tool-use turn with extended thinking.

mod error;
mod request;
mod stream;

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod request_tests;

use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::decode::ChunkDelta;
use crate::dialect::{Dialect, StreamDecoder, api_key, json_sse_headers, secret_value};
use crate::error::ApiError;
use crate::{ChatRequest, LlmSettings};
use stream::AnthropicStream;

/// The flavor name that selects this dialect.
pub(crate) const FLAVOR: &str = "anthropic";

/// The `format` of the reasoning items this dialect makes and sends back.
pub(crate) const REASONING_FORMAT: &str = "anthropic";

/// The API version amber speaks (the event and block shapes decoded here are this one's).
const API_VERSION: &str = "2023-06-01";

/// Anthropic Messages.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AnthropicDialect;

impl Dialect for AnthropicDialect {
    fn name(&self) -> &'static str {
        FLAVOR
    }

    /// `{base}/v1/messages`; a base that already ends in `/v1` (as OpenAI-style bases do)
    /// gets `/messages` only.
    fn endpoint(&self, base_url: &str) -> String {
        let base = base_url.trim().trim_end_matches('/');
        if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        }
    }

    fn headers(&self, key: Option<&str>) -> Result<HeaderMap, ApiError> {
        let mut h = json_sse_headers();
        h.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = api_key(key) {
            h.insert(HeaderName::from_static("x-api-key"), secret_value(key)?);
        }
        Ok(h)
    }

    fn body(&self, req: &ChatRequest, settings: &LlmSettings) -> serde_json::Value {
        request::request_body(req, settings)
    }

    /// Blocks that span events (a thinking block's signature, usage split between
    /// `message_start` and `message_delta`) are kept by the stream's decoder.
    fn stream(&self) -> Box<dyn StreamDecoder> {
        Box::new(AnthropicStream::default())
    }

    fn decode_response(&self, body: &str) -> Result<ChunkDelta, ApiError> {
        stream::decode_message(body)
    }

    fn classify_error(&self, status: u16, body: &str, retry_after: Option<Duration>) -> ApiError {
        error::classify_status(status, body, retry_after)
    }
}

#[cfg(test)]
mod tests {
    use http::header::ACCEPT;

    use super::*;

    #[test]
    fn endpoint_adds_v1_unless_the_base_has_it() {
        let d = AnthropicDialect;
        assert_eq!(
            d.endpoint("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            d.endpoint("https://api.anthropic.com/"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(d.endpoint("http://h:1/v1/"), "http://h:1/v1/messages");
    }

    #[test]
    fn the_preset_reaches_the_messages_endpoint_with_its_key_variable() {
        let p = crate::preset("anthropic").unwrap();
        assert_eq!(p.flavor, FLAVOR);
        assert_eq!(p.api_key_env, "ANTHROPIC_API_KEY");
        let dialect = crate::make_dialect(p.flavor);
        assert_eq!(
            dialect.endpoint(p.base_url),
            "https://api.anthropic.com/v1/messages"
        );
        let settings = LlmSettings {
            flavor: p.flavor.into(),
            api_key: Some("sk-ant".into()),
            quirks: p.quirks,
            ..LlmSettings::default()
        };
        let h = dialect.request_headers(&settings).unwrap();
        assert_eq!(h.len(), 4, "{h:?}");
        // No `response_format` for this API: output schemas go as instructions.
        assert!(!dialect.structured_output(&settings));
    }

    #[test]
    fn headers_carry_the_key_and_the_version() {
        let d = AnthropicDialect;
        let h = d.headers(Some("sk-ant-1")).unwrap();
        assert_eq!(h.get("x-api-key").unwrap(), "sk-ant-1");
        assert_eq!(h.get("anthropic-version").unwrap(), API_VERSION);
        assert_eq!(h.get(ACCEPT).unwrap(), "text/event-stream");
        assert!(h.get(http::header::AUTHORIZATION).is_none());
        assert!(d.headers(None).unwrap().get("x-api-key").is_none());
        assert!(d.headers(Some(" ")).unwrap().get("x-api-key").is_none());
        assert!(d.headers(Some("bad\nkey")).is_err());
    }
}
