//! `LlmSettings` (endpoint, credentials, retry and timeout knobs), the environment
//! overrides of PROTOCOL.md, and per-flavor presets (default endpoint, key variable).

use std::time::Duration;

/// Everything the LLM client needs to reach one endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct LlmSettings {
    /// Dialect selector; unknown values fall back to `openai`.
    pub flavor: String,
    /// OpenAI-compatible base such as `http://127.0.0.1:8080/v1`. `None` → `NotConfigured`.
    pub base_url: Option<String>,
    pub api_key: Option<String>,
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
}

impl Default for LlmSettings {
    fn default() -> Self {
        Self {
            flavor: "openai".to_owned(),
            base_url: None,
            api_key: None,
            model: String::new(),
            max_retries: 4,
            retry_base: Duration::from_millis(500),
            retry_max: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_tokens: None,
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
            .finish()
    }
}

/// What a flavor implies when the user did not say otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub flavor: &'static str,
    pub base_url: &'static str,
    /// Environment variable conventionally holding this provider's key.
    pub api_key_env: &'static str,
}

const PRESETS: &[Preset] = &[
    Preset {
        flavor: "openai",
        base_url: "https://api.openai.com/v1",
        api_key_env: "OPENAI_API_KEY",
    },
    Preset {
        flavor: "openrouter",
        base_url: "https://openrouter.ai/api/v1",
        api_key_env: "OPENROUTER_API_KEY",
    },
    Preset {
        flavor: "deepseek",
        base_url: "https://api.deepseek.com/v1",
        api_key_env: "DEEPSEEK_API_KEY",
    },
    Preset {
        flavor: "groq",
        base_url: "https://api.groq.com/openai/v1",
        api_key_env: "GROQ_API_KEY",
    },
    Preset {
        flavor: "ollama",
        base_url: "http://127.0.0.1:11434/v1",
        api_key_env: "OLLAMA_API_KEY",
    },
    Preset {
        flavor: "llamacpp",
        base_url: "http://127.0.0.1:8080/v1",
        api_key_env: "LLAMA_API_KEY",
    },
];

/// The preset for `flavor` (case-insensitive), if there is one.
pub fn preset(flavor: &str) -> Option<&'static Preset> {
    PRESETS
        .iter()
        .find(|p| p.flavor.eq_ignore_ascii_case(flavor.trim()))
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
    }

    #[test]
    fn debug_redacts_key() {
        let s = LlmSettings {
            api_key: Some("secret".into()),
            ..Default::default()
        };
        assert!(!format!("{s:?}").contains("secret"));
    }
}
