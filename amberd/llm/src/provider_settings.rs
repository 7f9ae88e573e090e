//! The provider settings the daemon hands the pool: `ProviderSettings` (the default
//! provider, and the retry and timeout knobs every provider shares) and
//! `NamedProviderSettings` (one further provider a session may pick by name). They
//! deserialise from the daemon's `[provider]` and `[providers.NAME]` tables, key for key;
//! unknown keys are rejected so typos are caught early.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::MaxTokensField;
use super::prices::PriceSetting;

/// The default provider: an OpenAI-compatible endpoint, plus the retry and timeout knobs
/// of every provider.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderSettings {
    pub flavor: String,
    pub base_url: Option<String>,
    /// Name of the environment variable holding the API key.
    pub api_key_env: Option<String>,
    pub model: Option<String>,
    pub context_window: u64,
    pub max_tokens: Option<u32>,
    pub max_retries: u32,
    pub retry_base_ms: u64,
    pub retry_max_ms: u64,
    pub connect_timeout_ms: u64,
    pub idle_timeout_ms: u64,
    /// Most bytes of one model reply (text, reasoning and tool-call arguments together);
    /// past it the request ends with `reply_too_large`.
    pub max_reply_bytes: u64,
    /// Extra request headers; an empty value removes a preset's header.
    pub headers: BTreeMap<String, String>,
    /// Overrides the flavor's `stream_options.include_usage` quirk.
    pub include_usage: Option<bool>,
    /// Overrides the flavor's `max_tokens` / `max_completion_tokens` quirk.
    pub max_tokens_field: Option<MaxTokensField>,
    /// Overrides the flavor's structured-output quirk: `false` sends an output schema as an
    /// instruction instead of `response_format`.
    pub structured_output: Option<bool>,
    /// `[[provider.prices]]`: model prices that win over the built-in table.
    pub prices: Vec<PriceSetting>,
}

/// One named provider. Unset values come from the preset of that name (else of `flavor`);
/// retries, timeouts and the reply bound are the default provider's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NamedProviderSettings {
    pub flavor: Option<String>,
    pub base_url: Option<String>,
    /// Name of the environment variable holding the API key.
    pub api_key_env: Option<String>,
    pub model: Option<String>,
    pub context_window: Option<u64>,
    pub max_tokens: Option<u32>,
    pub headers: BTreeMap<String, String>,
    pub include_usage: Option<bool>,
    pub max_tokens_field: Option<MaxTokensField>,
    pub structured_output: Option<bool>,
    /// `[[providers.NAME.prices]]`: model prices that win over the built-in table.
    pub prices: Vec<PriceSetting>,
}

impl Default for ProviderSettings {
    fn default() -> Self {
        Self {
            flavor: "openai".into(),
            base_url: None,
            api_key_env: None,
            model: None,
            context_window: 128_000,
            max_tokens: None,
            max_retries: 4,
            retry_base_ms: 500,
            retry_max_ms: 30_000,
            connect_timeout_ms: 10_000,
            idle_timeout_ms: 120_000,
            max_reply_bytes: super::DEFAULT_MAX_REPLY_BYTES as u64,
            headers: BTreeMap::new(),
            include_usage: None,
            max_tokens_field: None,
            structured_output: None,
            prices: Vec::new(),
        }
    }
}
