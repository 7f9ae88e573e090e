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

impl LlmSettings {
    /// Apply amberd's environment on top of configured values (PROTOCOL.md):
    /// `AMBER_FLAVOR`, `AMBER_BASE_URL`, `AMBER_API_KEY`, `AMBER_MODEL` override; with no key
    /// set anywhere the flavor preset's key variable (`OPENAI_API_KEY` for `openai`) is used,
    /// and only when such a key is found does the preset's base URL fill a missing `base_url`
    /// — so an unconfigured daemon never sends anything anywhere by surprise.
    /// `get` is the environment lookup (`|k| std::env::var(k).ok()` in production).
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        if let Some(v) = get("AMBER_FLAVOR") {
            self.flavor = v.trim().to_owned();
        }
        if let Some(v) = get("AMBER_BASE_URL") {
            self.base_url = Some(v.trim().to_owned());
        }
        if let Some(v) = get("AMBER_API_KEY") {
            self.api_key = Some(v.trim().to_owned());
        }
        if let Some(v) = get("AMBER_MODEL") {
            self.model = v.trim().to_owned();
        }
        if let Some(p) = preset(&self.flavor)
            && self.api_key.is_none()
        {
            self.api_key = get(p.api_key_env).map(|v| v.trim().to_owned());
            if self.api_key.is_some() && self.base_url.is_none() {
                self.base_url = Some(p.base_url.to_owned());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

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
    fn amber_env_overrides() {
        let mut s = LlmSettings {
            base_url: Some("http://config/v1".into()),
            ..Default::default()
        };
        s.apply_env(env(&[
            ("AMBER_BASE_URL", "http://127.0.0.1:9/v1"),
            ("AMBER_API_KEY", "k"),
            ("AMBER_MODEL", "m"),
            ("AMBER_FLAVOR", "deepseek"),
        ]));
        assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(s.api_key.as_deref(), Some("k"));
        assert_eq!(s.model, "m");
        assert_eq!(s.flavor, "deepseek");
    }

    #[test]
    fn openai_key_brings_preset_url_but_nothing_stays_unconfigured() {
        let mut s = LlmSettings::default();
        s.apply_env(env(&[("OPENAI_API_KEY", "sk")]));
        assert_eq!(s.base_url.as_deref(), Some("https://api.openai.com/v1"));
        assert_eq!(s.api_key.as_deref(), Some("sk"));

        let mut s = LlmSettings::default();
        s.apply_env(env(&[]));
        assert!(s.base_url.is_none());
        assert!(s.api_key.is_none());
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
