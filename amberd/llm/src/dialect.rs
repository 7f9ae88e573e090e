//! `Dialect`: how one provider family wants its endpoint, headers and body, and how its
//! replies read; `StreamDecoder`: the decoder of one response stream a dialect hands out,
//! owning whatever that stream's events need remembered. Also the header pieces the
//! dialects share (JSON in, SSE out, an API key as a sensitive header value).
//!
//! This module sits below every dialect: the dialects (`openai.rs`, `anthropic/`,
//! `responses/`) import it and nothing of each other, and `flavor.rs` picks one of them.

use std::time::Duration;

use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use crate::decode::{ChunkDelta, Decoded};
use crate::error::ApiError;
use crate::{ChatRequest, LlmSettings};

/// The decoder of one response stream: its events in order, each SSE event (`event` name,
/// `data` text) → internal shape. What spans events (the shape of the last chunk, open
/// content blocks, function calls by output index) lives in the decoder, so two streams
/// never share it. One is made per stream by [`Dialect::stream`].
pub trait StreamDecoder: Send {
    /// The next event of this stream.
    fn decode(&mut self, event: &str, data: &str) -> Result<Decoded, ApiError>;
}

/// A provider wire format.
pub trait Dialect: Send + Sync {
    /// The canonical flavor name of this dialect.
    fn name(&self) -> &'static str;

    /// Full URL of the chat endpoint for a configured base URL.
    fn endpoint(&self, base_url: &str) -> String;

    /// Request headers, auth included.
    fn headers(&self, api_key: Option<&str>) -> Result<HeaderMap, ApiError>;

    /// The JSON body of a streamed chat request.
    fn body(&self, req: &ChatRequest, settings: &LlmSettings) -> serde_json::Value;

    /// A fresh decoder for one response stream (the reader asks once per stream).
    fn stream(&self) -> Box<dyn StreamDecoder>;

    /// One SSE event read on its own, as the first event of a fresh stream.
    fn decode_event(&self, event: &str, data: &str) -> Result<Decoded, ApiError> {
        self.stream().decode(event, data)
    }

    /// A whole non-streamed response body → internal shape.
    fn decode_response(&self, body: &str) -> Result<ChunkDelta, ApiError>;

    /// Whether `body` sends a request's `response_format` (structured output) to this
    /// provider. A dialect that does not gets an output schema as an instruction instead.
    fn structured_output(&self, settings: &LlmSettings) -> bool {
        let _ = settings;
        false
    }

    /// Every header of a request: `headers(api_key)`, then the quirks' extra headers, then
    /// the configured ones (later wins; an empty configured value removes the header).
    fn request_headers(&self, settings: &LlmSettings) -> Result<HeaderMap, ApiError> {
        let mut h = self.headers(settings.api_key.as_deref())?;
        let quirks = settings.quirks.extra_headers.iter().map(|(k, v)| (*k, *v));
        let configured = settings
            .extra_headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()));
        for (name, value) in quirks.chain(configured) {
            let bad = |what: &str| {
                ApiError::InvalidConfig(format!("extra header {name:?}: invalid {what}"))
            };
            let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad("name"))?;
            if value.is_empty() {
                h.remove(&name);
                continue;
            }
            let mut value = HeaderValue::from_str(value).map_err(|_| bad("value"))?;
            // Configured headers may carry credentials; keep them out of debug output.
            value.set_sensitive(true);
            h.insert(name, value);
        }
        Ok(h)
    }

    /// A non-success HTTP response → typed error.
    fn classify_error(&self, status: u16, body: &str, retry_after: Option<Duration>) -> ApiError {
        ApiError::from_status(status, body, retry_after)
    }
}

/// `Content-Type: application/json` and `Accept: text/event-stream`, which every dialect
/// sends.
pub(crate) fn json_sse_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    h
}

/// The configured API key, trimmed; `None` when blank.
pub(crate) fn api_key(api_key: Option<&str>) -> Option<&str> {
    api_key.map(str::trim).filter(|k| !k.is_empty())
}

/// A header value carrying a credential: kept out of debug output.
pub(crate) fn secret_value(value: &str) -> Result<HeaderValue, ApiError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| {
        ApiError::InvalidConfig(
            "the API key contains characters not allowed in an HTTP header".into(),
        )
    })?;
    v.set_sensitive(true);
    Ok(v)
}

/// `json_sse_headers` and `Authorization: Bearer <key>` when a key is set: OpenAI's chat
/// completions and Responses API authenticate alike.
pub(crate) fn bearer_headers(key: Option<&str>) -> Result<HeaderMap, ApiError> {
    let mut h = json_sse_headers();
    if let Some(key) = api_key(key) {
        h.insert(AUTHORIZATION, secret_value(&format!("Bearer {key}"))?);
    }
    Ok(h)
}
