//! `Dialect`: how one provider family wants its endpoint, headers, body and chunks.
//! `make_dialect(flavor)` resolves a flavor once per client; unknown flavors fall back to
//! openai with a warning, so a typo never breaks a session.

use std::sync::Arc;
use std::time::Duration;

use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};

use super::decode::{ChunkDelta, Decoded};
use super::{ApiError, ChatRequest, LlmSettings, wire};

/// Flavors that speak plain OpenAI chat-completions.
const OPENAI_FLAVORS: &[&str] = &[
    "openai",
    "openai-compatible",
    "openai_compatible",
    "openrouter",
    "deepseek",
    "groq",
    "together",
    "fireworks",
    "mistral",
    "xai",
    "ollama",
    "llamacpp",
    "llama.cpp",
    "llama-cpp",
    "vllm",
    "lmstudio",
    "sglang",
    "local",
];

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

    /// One SSE event (`event` name, `data` text) → internal shape.
    fn decode_event(&self, event: &str, data: &str) -> Result<Decoded, ApiError>;

    /// A whole non-streamed response body → internal shape.
    fn decode_response(&self, body: &str) -> Result<ChunkDelta, ApiError>;

    /// A non-success HTTP response → typed error.
    fn classify_error(&self, status: u16, body: &str, retry_after: Option<Duration>) -> ApiError {
        ApiError::from_status(status, body, retry_after)
    }
}

/// Resolve a flavor to its dialect. Never fails: unknown → openai, with a warning.
pub fn make_dialect(flavor: &str) -> Arc<dyn Dialect> {
    let f = flavor.trim();
    if !f.is_empty() && !OPENAI_FLAVORS.iter().any(|k| k.eq_ignore_ascii_case(f)) {
        tracing::warn!(flavor = f, "unknown LLM flavor, using the openai dialect");
    }
    Arc::new(OpenAiDialect)
}

/// OpenAI chat-completions, the dialect every OpenAI-compatible server speaks.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiDialect;

impl Dialect for OpenAiDialect {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn endpoint(&self, base_url: &str) -> String {
        format!("{}/chat/completions", base_url.trim().trim_end_matches('/'))
    }

    fn headers(&self, api_key: Option<&str>) -> Result<HeaderMap, ApiError> {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(key) = api_key.map(str::trim).filter(|k| !k.is_empty()) {
            let mut v = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                ApiError::InvalidConfig(
                    "the API key contains characters not allowed in an HTTP header".into(),
                )
            })?;
            v.set_sensitive(true);
            h.insert(AUTHORIZATION, v);
        }
        Ok(h)
    }

    fn body(&self, req: &ChatRequest, settings: &LlmSettings) -> serde_json::Value {
        wire::request_body(req, settings)
    }

    fn decode_event(&self, event: &str, data: &str) -> Result<Decoded, ApiError> {
        wire::parse_chunk(event, data)
    }

    fn decode_response(&self, body: &str) -> Result<ChunkDelta, ApiError> {
        wire::parse_response(body)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn unknown_flavor_falls_back_to_openai() {
        assert_eq!(make_dialect("no-such-provider").name(), "openai");
        assert_eq!(make_dialect("OpenRouter").name(), "openai");
        assert_eq!(make_dialect("").name(), "openai");
    }

    #[test]
    fn endpoint_trims_trailing_slash() {
        let d = OpenAiDialect;
        assert_eq!(
            d.endpoint("http://h:1/v1/"),
            "http://h:1/v1/chat/completions"
        );
        assert_eq!(
            d.endpoint("http://h:1/v1"),
            "http://h:1/v1/chat/completions"
        );
    }

    #[test]
    fn bearer_only_with_a_key() {
        let d = OpenAiDialect;
        assert!(d.headers(None).unwrap().get(AUTHORIZATION).is_none());
        assert!(d.headers(Some("  ")).unwrap().get(AUTHORIZATION).is_none());
        let h = d.headers(Some("sk-1")).unwrap();
        assert_eq!(h.get(AUTHORIZATION).unwrap(), "Bearer sk-1");
        assert!(d.headers(Some("bad\nkey")).is_err());
    }
}
