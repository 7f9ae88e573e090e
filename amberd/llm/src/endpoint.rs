//! `Endpoint`: the default provider's endpoint, resolved once from its settings and the
//! daemon's environment (`AMBER_*` over the settings, the flavor's preset filling the rest).

use std::ffi::OsString;

use super::preset;
use super::provider_settings::ProviderSettings;

/// Model used when neither the settings nor the environment names one.
const DEFAULT_MODEL: &str = "gpt-4o-mini";

/// The resolved LLM endpoint, after environment overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub flavor: String,
    /// None when nothing usable is configured; turns then fail with a hint.
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// Where the key was read from: `AMBER_API_KEY` when set, else the flavor's variable.
    pub key_variable: String,
    pub model: String,
}

impl Endpoint {
    /// Resolves the default provider: `AMBER_BASE_URL`, `AMBER_API_KEY`, `AMBER_MODEL`,
    /// `AMBER_FLAVOR` override `settings`. A flavor's preset supplies the key variable and,
    /// when a key is found or the flavor was chosen explicitly, the base URL — so with
    /// nothing set at all the daemon never sends anything anywhere, and `OPENAI_API_KEY`
    /// alone means OpenAI.
    pub fn resolve(settings: &ProviderSettings, env: &impl Fn(&str) -> Option<OsString>) -> Self {
        let var = |key: &str| non_blank(env(key));
        let env_flavor = var("AMBER_FLAVOR");
        let explicit_flavor =
            env_flavor.is_some() || settings.flavor != ProviderSettings::default().flavor;
        let flavor = env_flavor.unwrap_or_else(|| settings.flavor.clone());
        let preset = preset(&flavor);
        let key_var = settings
            .api_key_env
            .clone()
            .or_else(|| preset.map(|pr| pr.api_key_env.to_owned()))
            .unwrap_or_else(|| "OPENAI_API_KEY".to_owned());
        let amber_key = var("AMBER_API_KEY");
        let key_variable = match amber_key {
            Some(_) => "AMBER_API_KEY".to_owned(),
            None => key_var.clone(),
        };
        let api_key = amber_key.or_else(|| var(&key_var));
        let configured_url = var("AMBER_BASE_URL").or_else(|| settings.base_url.clone());
        let base_url = configured_url.or_else(|| {
            preset
                .filter(|_| api_key.is_some() || explicit_flavor)
                .map(|pr| pr.base_url.to_owned())
        });
        // The flavor's own default model (empty for local servers: they serve what is loaded).
        let model = var("AMBER_MODEL")
            .or_else(|| settings.model.clone())
            .or_else(|| preset.map(|pr| pr.default_model.to_owned()))
            .unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        Endpoint {
            flavor,
            base_url,
            api_key,
            key_variable,
            model,
        }
    }
}

/// An environment variable's value, unless it is unset, not UTF-8 or blank.
pub(crate) fn non_blank(value: Option<OsString>) -> Option<String> {
    value
        .and_then(|v| v.into_string().ok())
        .filter(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{env, tables};

    #[test]
    fn environment_overrides_the_file() {
        let t = tables(
            "[provider]\nflavor = \"vllm\"\nbase_url = \"http://file/v1\"\nmodel = \"m1\"\n",
        );
        let ep = Endpoint::resolve(
            &t.provider,
            &env(&[("AMBER_BASE_URL", "http://env/v1"), ("AMBER_MODEL", "m2")]),
        );
        assert_eq!(ep.base_url.as_deref(), Some("http://env/v1"));
        assert_eq!(ep.model, "m2");
        assert_eq!(ep.flavor, "vllm");
    }

    #[test]
    fn nothing_configured_means_no_endpoint() {
        let defaults = ProviderSettings::default();
        let ep = Endpoint::resolve(&defaults, &env(&[]));
        assert_eq!(ep.base_url, None);
        let ep = Endpoint::resolve(&defaults, &env(&[("OPENAI_API_KEY", "sk-1")]));
        assert_eq!(ep.base_url.as_deref(), Some("https://api.openai.com/v1"));
        assert_eq!(ep.api_key.as_deref(), Some("sk-1"));
    }

    #[test]
    fn api_key_env_names_the_variable() {
        let t = tables("[provider]\napi_key_env = \"GROQ_KEY\"\nbase_url = \"http://g/v1\"");
        assert_eq!(
            Endpoint::resolve(&t.provider, &env(&[("GROQ_KEY", "k")]))
                .api_key
                .as_deref(),
            Some("k")
        );
    }

    #[test]
    fn an_explicit_local_flavor_needs_no_key() {
        let ep = Endpoint::resolve(
            &ProviderSettings::default(),
            &env(&[("AMBER_FLAVOR", "ollama")]),
        );
        assert_eq!(ep.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
        assert_eq!(ep.api_key, None);
    }
}
