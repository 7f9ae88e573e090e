//! `LlmSettings`: endpoint, credentials, retry and timeout knobs, and the flavor's wire
//! quirks, everything one `LlmClient` needs. Presets live in `presets.rs`.

use std::time::Duration;

use super::presets::Quirks;

/// Everything the LLM client needs to reach one endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct LlmSettings {
    /// Dialect selector; unknown values fall back to `openai`.
    pub flavor: String,
    /// OpenAI-compatible base such as `http://127.0.0.1:8080/v1`. `None` → `NotConfigured`.
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// The variable the key is read from (or would be: `OPENAI_API_KEY` when none is set),
    /// for errors that must say where the key came from; never the key.
    pub key_variable: Option<String>,
    /// Default model; a non-empty `ChatRequest::model` wins. Empty → omitted from the body.
    pub model: String,
    /// Retries after the first attempt.
    pub max_retries: u32,
    pub retry_base: Duration,
    pub retry_max: Duration,
    pub connect_timeout: Duration,
    /// Longest silence allowed while waiting for headers or between stream chunks.
    pub idle_timeout: Duration,
    pub max_tokens: Option<u32>,
    /// Most bytes of one reply (text, reasoning, tool calls), and so of its stream's events
    /// (`limits.rs`); past it the request fails with `ReplyTooLarge`.
    pub max_reply_bytes: usize,
    /// Body shape and headers of the flavor (default: a generic OpenAI-compatible server).
    pub quirks: Quirks,
    /// Headers from config, after the quirks' own; an empty value removes a header.
    pub extra_headers: Vec<(String, String)>,
}

impl Default for LlmSettings {
    fn default() -> Self {
        Self {
            flavor: "openai".to_owned(),
            base_url: None,
            api_key: None,
            key_variable: None,
            model: String::new(),
            max_retries: 4,
            retry_base: Duration::from_millis(500),
            retry_max: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_tokens: None,
            max_reply_bytes: super::DEFAULT_MAX_REPLY_BYTES,
            quirks: Quirks::GENERIC,
            extra_headers: Vec::new(),
        }
    }
}

impl std::fmt::Debug for LlmSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmSettings")
            .field("flavor", &self.flavor)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("max_retries", &self.max_retries)
            .field("retry_base", &self.retry_base)
            .field("retry_max", &self.retry_max)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_tokens", &self.max_tokens)
            .field("max_reply_bytes", &self.max_reply_bytes)
            .field("quirks", &self.quirks)
            // Header values may carry credentials too.
            .field(
                "extra_headers",
                &self
                    .extra_headers
                    .iter()
                    .map(|(k, _)| k)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let s = LlmSettings::default();
        assert_eq!(s.flavor, "openai");
        assert_eq!(s.max_retries, 4);
        assert_eq!(s.retry_base, Duration::from_millis(500));
        assert_eq!(s.retry_max, Duration::from_secs(30));
        assert_eq!(s.connect_timeout, Duration::from_secs(10));
        assert_eq!(s.idle_timeout, Duration::from_secs(120));
        assert!(s.base_url.is_none());
        assert_eq!(s.quirks, Quirks::GENERIC);
        assert!(s.extra_headers.is_empty());
    }

    #[test]
    fn debug_redacts_key() {
        let s = LlmSettings {
            api_key: Some("secret".into()),
            extra_headers: vec![("X-Api-Key".into(), "secret".into())],
            ..Default::default()
        };
        assert!(!format!("{s:?}").contains("secret"));
    }
}
