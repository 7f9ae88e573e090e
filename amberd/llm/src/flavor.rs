//! A flavor → its dialect. `make_dialect(flavor)` / `make_dialect_with(flavor, lookup)`
//! resolve a flavor once per client (a provider's dialect factory first); unknown flavors
//! fall back to openai with a warning, so a typo never breaks a session. The one module
//! that knows every built-in dialect.

use std::sync::Arc;

use crate::anthropic::{self, AnthropicDialect};
use crate::dialect::Dialect;
use crate::openai::OpenAiDialect;
use crate::presets::{Preset, all_presets, preset};
use crate::provider::DialectFactory;
use crate::responses::{self, ResponsesDialect};

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

#[cfg(test)]
mod tests {
    use http::header::HeaderMap;

    use super::*;
    use crate::decode::{ChunkDelta, Decoded};
    use crate::dialect::StreamDecoder;
    use crate::{ApiError, ChatRequest, LlmSettings};

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
    /// Its streams: every event means nothing.
    struct Silent;
    impl StreamDecoder for Silent {
        fn decode(&mut self, _: &str, _: &str) -> Result<Decoded, ApiError> {
            Ok(Decoded::Skip)
        }
    }
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
        fn stream(&self) -> Box<dyn StreamDecoder> {
            Box::new(Silent)
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
}
