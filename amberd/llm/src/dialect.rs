//! `Dialect`: how one provider family wants its endpoint, headers, body and chunks.
//! `make_dialect(flavor)` / `make_dialect_with(flavor, lookup)` resolve a flavor once per
//! client (a provider's dialect factory first); unknown flavors fall back to openai with a
//! warning, so a typo never breaks a session.

use std::sync::Arc;
use std::time::Duration;

use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::anthropic::{self, AnthropicDialect};
use super::decode::{ChunkDelta, Decoded};
use super::presets::{Preset, all_presets, preset};
use super::provider::DialectFactory;
use super::responses::{self, ResponsesDialect};
use super::{ApiError, ChatRequest, ChunkMemo, LlmSettings, chunk, wire};

/// Flavors without a preset that still speak plain OpenAI chat-completions (every preset's
/// flavor does too).
const OPENAI_FLAVORS: &[&str] = &["openai-compatible", "openai_compatible", "sglang", "local"];

/// Whether `flavor` is known to speak OpenAI chat-completions (no fallback warning).
fn is_openai_flavor(flavor: &str) -> bool {
    let openai_preset = |p: &Preset| !is_anthropic(p.flavor);
    !is_anthropic(flavor)
        && (OPENAI_FLAVORS
            .iter()
            .any(|k| k.eq_ignore_ascii_case(flavor))
            || preset(flavor).is_some_and(openai_preset)
            || all_presets()
                .iter()
                .any(|p| openai_preset(p) && p.flavor.eq_ignore_ascii_case(flavor)))
}

/// Whether `flavor` selects the Anthropic Messages dialect.
fn is_anthropic(flavor: &str) -> bool {
    flavor.eq_ignore_ascii_case(anthropic::FLAVOR)
}

/// Whether `flavor` names OpenAI's Responses API (by flavor, or by its preset's name).
fn is_responses_flavor(flavor: &str) -> bool {
    flavor.eq_ignore_ascii_case(responses::FLAVOR)
        || preset(flavor).is_some_and(|p| p.flavor == responses::FLAVOR)
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

    /// One SSE event (`event` name, `data` text) → internal shape.
    fn decode_event(&self, event: &str, data: &str) -> Result<Decoded, ApiError>;

    /// `decode_event` for the events of one stream, in order, with `memo` kept across
    /// them (a dialect may remember the shape of its chunks). The default ignores it.
    fn decode_stream_event(
        &self,
        memo: &mut ChunkMemo,
        event: &str,
        data: &str,
    ) -> Result<Decoded, ApiError> {
        let _ = memo;
        self.decode_event(event, data)
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

/// Resolve a flavor to its dialect. Never fails: unknown → openai, with a warning.
pub fn make_dialect(flavor: &str) -> Arc<dyn Dialect> {
    let f = flavor.trim();
    if is_anthropic(f) {
        return Arc::new(AnthropicDialect);
    }
    if is_responses_flavor(f) {
        return Arc::new(ResponsesDialect);
    }
    if !f.is_empty() && !is_openai_flavor(f) {
        tracing::warn!(flavor = f, "unknown LLM flavor, using the openai dialect");
    }
    Arc::new(OpenAiDialect)
}

/// Like `make_dialect`, but a dialect factory that `lookup` finds for the flavor (a
/// provider plugin's) wins over the built-in table.
pub(crate) fn make_dialect_with(
    flavor: &str,
    lookup: &dyn Fn(&str) -> Option<DialectFactory>,
) -> Arc<dyn Dialect> {
    let f = flavor.trim();
    match lookup(f).filter(|_| !f.is_empty()) {
        Some(factory) => factory(),
        None => make_dialect(f),
    }
}

/// OpenAI chat-completions, the dialect every OpenAI-compatible server speaks.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OpenAiDialect;

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
        chunk::parse_chunk(event, data)
    }

    fn decode_stream_event(
        &self,
        memo: &mut ChunkMemo,
        event: &str,
        data: &str,
    ) -> Result<Decoded, ApiError> {
        chunk::parse_stream_chunk(memo, event, data)
    }

    fn decode_response(&self, body: &str) -> Result<ChunkDelta, ApiError> {
        chunk::parse_response(body)
    }

    fn structured_output(&self, settings: &LlmSettings) -> bool {
        settings.quirks.structured_output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_flavor_falls_back_to_openai() {
        assert_eq!(make_dialect("no-such-provider").name(), "openai");
        assert_eq!(make_dialect("OpenRouter").name(), "openai");
        assert_eq!(make_dialect("").name(), "openai");
    }

    #[test]
    fn anthropic_flavor_has_its_own_dialect() {
        assert_eq!(make_dialect("anthropic").name(), "anthropic");
        assert_eq!(make_dialect(" Anthropic ").name(), "anthropic");
        assert!(!is_openai_flavor("anthropic"));
        let lookup = |_: &str| None;
        assert_eq!(make_dialect_with("anthropic", &lookup).name(), "anthropic");
    }

    #[test]
    fn the_responses_flavor_has_its_own_dialect() {
        assert_eq!(make_dialect("openai-responses").name(), "openai-responses");
        assert_eq!(
            make_dialect(" OpenAI-Responses ").name(),
            "openai-responses"
        );
        // The chat-completions preset keeps chat completions.
        assert_eq!(make_dialect("openai").name(), "openai");
        let d = make_dialect("openai-responses");
        assert_eq!(d.endpoint("http://h:1/v1/"), "http://h:1/v1/responses");
    }

    #[test]
    fn every_preset_flavor_is_known() {
        for p in all_presets() {
            let dialect = make_dialect(p.flavor).name();
            if is_anthropic(p.flavor) {
                assert_eq!(dialect, "anthropic");
            } else {
                assert!(is_openai_flavor(p.flavor), "{}", p.flavor);
            }
        }
        assert!(is_openai_flavor("llama.cpp"));
        assert!(!is_openai_flavor("no-such-provider"));
    }

    /// A dialect only a factory can produce.
    struct Custom;
    impl Dialect for Custom {
        fn name(&self) -> &'static str {
            "custom"
        }
        fn endpoint(&self, base_url: &str) -> String {
            format!("{base_url}/generate")
        }
        fn headers(&self, _: Option<&str>) -> Result<HeaderMap, ApiError> {
            Ok(HeaderMap::new())
        }
        fn body(&self, _: &ChatRequest, _: &LlmSettings) -> serde_json::Value {
            serde_json::Value::Null
        }
        fn decode_event(&self, _: &str, _: &str) -> Result<Decoded, ApiError> {
            Ok(Decoded::Skip)
        }
        fn decode_response(&self, _: &str) -> Result<ChunkDelta, ApiError> {
            Ok(ChunkDelta::default())
        }
    }

    #[test]
    fn factory_lookup_wins_then_openai_fallback() {
        fn custom() -> Arc<dyn Dialect> {
            Arc::new(Custom)
        }
        let lookup = |f: &str| (f == "custom").then_some(custom as DialectFactory);
        assert_eq!(make_dialect_with("custom", &lookup).name(), "custom");
        assert_eq!(make_dialect_with(" custom ", &lookup).name(), "custom");
        assert_eq!(make_dialect_with("groq", &lookup).name(), "openai");
        assert_eq!(make_dialect_with("typo", &lookup).name(), "openai");
        assert_eq!(make_dialect_with("", &|_| Some(custom)).name(), "openai");
    }

    #[test]
    fn extra_headers_quirks_then_config() {
        let settings = LlmSettings {
            api_key: Some("k".into()),
            quirks: crate::preset("openrouter").unwrap().quirks,
            extra_headers: vec![
                ("X-Title".into(), "my app".into()),
                ("HTTP-Referer".into(), String::new()),
                ("X-Extra".into(), "1".into()),
            ],
            ..LlmSettings::default()
        };
        let h = OpenAiDialect.request_headers(&settings).unwrap();
        assert_eq!(h.get("x-title").unwrap(), "my app");
        assert!(h.get("http-referer").is_none());
        assert_eq!(h.get("x-extra").unwrap(), "1");
        assert_eq!(h.get(AUTHORIZATION).unwrap(), "Bearer k");
        let bad = LlmSettings {
            extra_headers: vec![("Bad Name".into(), "v".into())],
            ..LlmSettings::default()
        };
        let err = OpenAiDialect.request_headers(&bad).unwrap_err();
        assert!(err.to_string().contains("Bad Name"), "{err}");
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
