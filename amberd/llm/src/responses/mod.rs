//! The OpenAI Responses API dialect (`flavor = "openai-responses"`): `POST {base}/responses`,
//! stateless (`store: false`), reasoning carried across turns as encrypted items.
//!
//! `request.rs` maps a `ChatRequest` onto the body (instructions, input items, tools),
//! `stream.rs` folds the semantic SSE events of one reply into `ChunkDelta`s (a
//! `ResponsesStream` per reply, the decoder that keeps its items' state), `reply.rs` holds
//! what both a stream and a whole response object need: usage, the reasoning item, the
//! error of a failed response.

mod reply;
mod request;
mod stream;

#[cfg(test)]
mod fixture_tests;

use http::header::HeaderMap;

use crate::decode::ChunkDelta;
use crate::dialect::{Dialect, StreamDecoder, bearer_headers};
use crate::error::ApiError;
use crate::{ChatRequest, LlmSettings};
use stream::ResponsesStream;

/// The `format` of the reasoning items this dialect produces and sends back.
pub(crate) const REASONING_FORMAT: &str = "openai-responses";

/// The flavor name, as config and presets spell it.
pub(crate) const FLAVOR: &str = "openai-responses";

/// OpenAI's Responses API.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ResponsesDialect;

impl Dialect for ResponsesDialect {
    fn name(&self) -> &'static str {
        FLAVOR
    }

    fn endpoint(&self, base_url: &str) -> String {
        format!("{}/responses", base_url.trim().trim_end_matches('/'))
    }

    fn headers(&self, api_key: Option<&str>) -> Result<HeaderMap, ApiError> {
        // The same bearer auth and content types as chat completions.
        bearer_headers(api_key)
    }

    fn body(&self, req: &ChatRequest, settings: &LlmSettings) -> serde_json::Value {
        request::request_body(req, settings)
    }

    /// What a `.done` completion adds depends on the pieces before it: the decoder keeps,
    /// per output index, what was already sent.
    fn stream(&self) -> Box<dyn StreamDecoder> {
        Box::new(ResponsesStream::default())
    }

    fn decode_response(&self, body: &str) -> Result<ChunkDelta, ApiError> {
        reply::decode_response(body)
    }

    fn structured_output(&self, settings: &LlmSettings) -> bool {
        // The Responses API takes a JSON schema under `text.format` for every model; the
        // quirk stays, so `structured_output = false` in config still turns it off.
        settings.quirks.structured_output
    }
}
