//! Provider presets: per provider, the endpoint, key variable, default model, context window
//! and the flavor's wire quirks (reasoning field names, `stream_options.include_usage`,
//! `max_tokens` vs `max_completion_tokens`, extra headers). Every value is a default that
//! `[provider]` / `[providers.NAME]` in config.toml can override.

use serde::Deserialize;

/// Every field some OpenAI-compatible server streams reasoning in. Decoding accepts all of
/// them whatever the flavor (first non-empty wins, so a provider sending the same text in
/// two fields is not doubled).
pub(crate) const KNOWN_REASONING_FIELDS: &[&str] = &[
    "reasoning_content",
    "reasoning",
    "reasoning_details",
    "thinking",
];

/// Which body field carries the completion-length cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`: what every OpenAI-compatible server understands.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's current name (`max_tokens` is refused by its
    /// reasoning models).
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The JSON field name.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// How one flavor deviates from plain OpenAI chat-completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quirks {
    /// Where the flavor streams reasoning (informational: decoding accepts every field in
    /// `KNOWN_REASONING_FIELDS`).
    pub reasoning_fields: &'static [&'static str],
    /// Send `stream_options: {include_usage: true}`.
    pub include_usage: bool,
    pub max_tokens_field: MaxTokensField,
    /// Sent with every request; `[providers.NAME] headers` adds to or overrides them.
    pub extra_headers: &'static [(&'static str, &'static str)],
    /// Accepts `response_format: {type: "json_schema"}` (structured output). Without it an
    /// output schema reaches the model as an instruction instead.
    pub structured_output: bool,
}

impl Quirks {
    /// A generic OpenAI-compatible server: usage asked for (servers that do not know
    /// `stream_options` ignore it), the universally understood `max_tokens`.
    pub const GENERIC: Quirks = Quirks {
        reasoning_fields: &["reasoning_content", "reasoning"],
        include_usage: true,
        max_tokens_field: MaxTokensField::MaxTokens,
        extra_headers: &[],
        structured_output: true,
    };
}

impl Default for Quirks {
    fn default() -> Self {
        Quirks::GENERIC
    }
}

/// What a provider implies when the user did not say otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// Provider name, as `[providers.NAME]` and a session's `provider` spell it.
    pub name: &'static str,
    /// Dialect selector.
    pub flavor: &'static str,
    pub base_url: &'static str,
    /// Environment variable conventionally holding this provider's key.
    pub api_key_env: &'static str,
    /// Empty: `model` is omitted and the server uses the model it has loaded.
    pub default_model: &'static str,
    pub context_window: u64,
    pub quirks: Quirks,
}

/// Local servers: no key needed, `max_tokens` (the field every version knows).
const LOCAL: Quirks = Quirks {
    reasoning_fields: &["reasoning_content", "reasoning"],
    include_usage: true,
    max_tokens_field: MaxTokensField::MaxTokens,
    extra_headers: &[],
    structured_output: true,
};

const PRESETS: &[Preset] = &[
    // OpenAI deprecated `max_tokens` (its o-series refuses it); chat-completions streams no
    // reasoning text; usage only comes when asked for.
    Preset {
        name: "openai",
        flavor: "openai",
        base_url: "https://api.openai.com/v1",
        api_key_env: "OPENAI_API_KEY",
        default_model: "gpt-4o-mini",
        context_window: 128_000,
        quirks: Quirks {
            reasoning_fields: &[],
            include_usage: true,
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            extra_headers: &[],
            structured_output: true,
        },
    },
    // OpenAI's Responses API: its own dialect (`responses/`), reasoning items kept across
    // turns encrypted, `max_output_tokens` (the quirks below are chat-completions fields the
    // dialect does not read, except `structured_output`).
    Preset {
        name: "openai-responses",
        flavor: "openai-responses",
        base_url: "https://api.openai.com/v1",
        api_key_env: "OPENAI_API_KEY",
        default_model: "gpt-5-mini",
        // 400K in all, of which 272K input: the window compaction must respect.
        context_window: 272_000,
        quirks: Quirks {
            reasoning_fields: &[],
            include_usage: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            extra_headers: &[],
            structured_output: true,
        },
    },
    // OpenRouter streams `reasoning` (string) plus `reasoning_details` (objects) and asks
    // apps to identify themselves with these attribution headers.
    Preset {
        name: "openrouter",
        flavor: "openrouter",
        base_url: "https://openrouter.ai/api/v1",
        api_key_env: "OPENROUTER_API_KEY",
        default_model: "openai/gpt-4o-mini",
        context_window: 128_000,
        quirks: Quirks {
            reasoning_fields: &["reasoning", "reasoning_details"],
            include_usage: true,
            max_tokens_field: MaxTokensField::MaxTokens,
            extra_headers: &[
                ("HTTP-Referer", "https://github.com/amber-agent/amber"),
                ("X-Title", "amber"),
            ],
            structured_output: true,
        },
    },
    // Ollama's OpenAI layer: `reasoning` for thinking models; usage only when asked (older
    // versions ignore `stream_options`, harmless). Its default num_ctx is small and it
    // truncates silently rather than failing, so the window assumed here is modest.
    Preset {
        name: "ollama",
        flavor: "ollama",
        base_url: "http://127.0.0.1:11434/v1",
        api_key_env: "OLLAMA_API_KEY",
        default_model: "qwen2.5-coder",
        context_window: 8_192,
        quirks: Quirks {
            reasoning_fields: &["reasoning"],
            ..LOCAL
        },
    },
    // vLLM: `reasoning_content` with a reasoning parser (newer releases: `reasoning`);
    // the key is what `vllm serve --api-key` / VLLM_API_KEY set; `model` optional.
    Preset {
        name: "vllm",
        flavor: "vllm",
        base_url: "http://127.0.0.1:8000/v1",
        api_key_env: "VLLM_API_KEY",
        default_model: "",
        context_window: 32_768,
        quirks: LOCAL,
    },
    // llama-server: `reasoning_content` (--reasoning-format deepseek), ignores `model`,
    // reads its key from LLAMA_API_KEY; it fails loudly on overflow, so compaction recovers.
    Preset {
        name: "llamacpp",
        flavor: "llamacpp",
        base_url: "http://127.0.0.1:8080/v1",
        api_key_env: "LLAMA_API_KEY",
        default_model: "",
        context_window: 32_768,
        quirks: Quirks {
            reasoning_fields: &["reasoning_content"],
            ..LOCAL
        },
    },
    // LM Studio needs no key by default (the variable is amber's convention) and uses the
    // loaded model when none is named.
    Preset {
        name: "lmstudio",
        flavor: "lmstudio",
        base_url: "http://127.0.0.1:1234/v1",
        api_key_env: "LMSTUDIO_API_KEY",
        default_model: "",
        context_window: 32_768,
        quirks: LOCAL,
    },
    // Groq reports usage in `x_groq.usage` on the last chunk without being asked, documents
    // `max_completion_tokens` (`max_tokens` deprecated) and streams parsed reasoning as
    // `reasoning`.
    Preset {
        name: "groq",
        flavor: "groq",
        base_url: "https://api.groq.com/openai/v1",
        api_key_env: "GROQ_API_KEY",
        default_model: "llama-3.3-70b-versatile",
        context_window: 131_072,
        quirks: Quirks {
            reasoning_fields: &["reasoning"],
            include_usage: false,
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            extra_headers: &[],
            // Structured output on some models only: the schema goes as an instruction.
            structured_output: false,
        },
    },
    // DeepSeek: `reasoning_content` (deepseek-reasoner), cache hits in
    // `prompt_cache_hit_tokens`; 64K is the window of its original V3 API.
    Preset {
        name: "deepseek",
        flavor: "deepseek",
        base_url: "https://api.deepseek.com/v1",
        api_key_env: "DEEPSEEK_API_KEY",
        default_model: "deepseek-chat",
        context_window: 65_536,
        quirks: Quirks {
            reasoning_fields: &["reasoning_content"],
            include_usage: true,
            max_tokens_field: MaxTokensField::MaxTokens,
            extra_headers: &[],
            // Only `json_object`, no `json_schema`: the schema goes as an instruction.
            structured_output: false,
        },
    },
    // Together puts usage on the final chunk unasked; not sending `stream_options` avoids
    // depending on its support.
    Preset {
        name: "together",
        flavor: "together",
        base_url: "https://api.together.xyz/v1",
        api_key_env: "TOGETHER_API_KEY",
        default_model: "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        context_window: 131_072,
        quirks: Quirks {
            reasoning_fields: &["reasoning"],
            include_usage: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            extra_headers: &[],
            // Its `response_format` takes the schema in another shape: an instruction instead.
            structured_output: false,
        },
    },
    // Mistral rejects request fields it does not know (so no `stream_options`), always sends
    // usage on the final chunk, and streams Magistral thinking as `thinking` content parts.
    Preset {
        name: "mistral",
        flavor: "mistral",
        base_url: "https://api.mistral.ai/v1",
        api_key_env: "MISTRAL_API_KEY",
        default_model: "mistral-large-latest",
        context_window: 131_072,
        quirks: Quirks {
            reasoning_fields: &["thinking"],
            include_usage: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            extra_headers: &[],
            structured_output: true,
        },
    },
    // Fireworks: `reasoning_content`, usage on the final chunk unasked.
    Preset {
        name: "fireworks",
        flavor: "fireworks",
        base_url: "https://api.fireworks.ai/inference/v1",
        api_key_env: "FIREWORKS_API_KEY",
        default_model: "accounts/fireworks/models/llama-v3p3-70b-instruct",
        context_window: 131_072,
        quirks: Quirks {
            reasoning_fields: &["reasoning_content"],
            include_usage: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            extra_headers: &[],
            structured_output: true,
        },
    },
    // xAI: `reasoning_content` on its reasoning models, OpenAI-style usage.
    Preset {
        name: "xai",
        flavor: "xai",
        base_url: "https://api.x.ai/v1",
        api_key_env: "XAI_API_KEY",
        default_model: "grok-3-mini",
        context_window: 131_072,
        quirks: Quirks {
            reasoning_fields: &["reasoning_content"],
            include_usage: true,
            max_tokens_field: MaxTokensField::MaxTokens,
            extra_headers: &[],
            structured_output: true,
        },
    },
    // Anthropic's Messages API (its own dialect, `anthropic/`): the key goes in `x-api-key`;
    // `max_tokens` is required, and when unset comes from the model's family
    // (`anthropic::default_max_tokens`); no `response_format`, so an output schema goes as an
    // instruction.
    Preset {
        name: "anthropic",
        flavor: "anthropic",
        base_url: "https://api.anthropic.com",
        api_key_env: "ANTHROPIC_API_KEY",
        default_model: "claude-sonnet-4-5",
        context_window: 200_000,
        quirks: Quirks {
            reasoning_fields: &[],
            include_usage: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            extra_headers: &[],
            structured_output: false,
        },
    },
];

/// Other spellings of preset names.
const ALIASES: &[(&str, &str)] = &[
    ("llama.cpp", "llamacpp"),
    ("llama-cpp", "llamacpp"),
    ("lm-studio", "lmstudio"),
    ("x.ai", "xai"),
];

/// Every bundled preset.
pub fn all_presets() -> &'static [Preset] {
    PRESETS
}

/// The preset named `name` (case-insensitive, aliases such as `llama.cpp` accepted).
pub fn preset(name: &str) -> Option<&'static Preset> {
    let name = name.trim();
    let name = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .map_or(name, |(_, canonical)| canonical);
    PRESETS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_list_is_covered_and_names_are_unique() {
        for name in [
            "openai",
            "openrouter",
            "ollama",
            "vllm",
            "llamacpp",
            "lmstudio",
            "groq",
            "deepseek",
            "together",
            "mistral",
            "anthropic",
            "openai-responses",
        ] {
            assert!(preset(name).is_some(), "{name}");
        }
        let mut names: Vec<_> = all_presets().iter().map(|p| p.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all_presets().len());
    }

    #[test]
    fn presets_are_well_formed() {
        for p in all_presets() {
            assert!(p.base_url.starts_with("http"), "{}", p.name);
            assert!(!p.base_url.ends_with('/'), "{}", p.name);
            assert!(!p.api_key_env.is_empty(), "{}", p.name);
            assert!(p.context_window >= 4_096, "{}", p.name);
            for f in p.quirks.reasoning_fields {
                assert!(KNOWN_REASONING_FIELDS.contains(f), "{}: {f}", p.name);
            }
        }
    }

    #[test]
    fn lookup_is_case_insensitive_with_aliases() {
        assert_eq!(preset(" OpenRouter ").unwrap().name, "openrouter");
        assert_eq!(preset("llama.cpp").unwrap().name, "llamacpp");
        assert!(preset("nope").is_none());
    }

    #[test]
    fn max_tokens_field_names() {
        assert_eq!(MaxTokensField::MaxTokens.as_str(), "max_tokens");
        assert_eq!(
            MaxTokensField::MaxCompletionTokens.as_str(),
            "max_completion_tokens"
        );
        assert_eq!(Quirks::default(), Quirks::GENERIC);
    }
}
