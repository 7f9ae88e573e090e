//! What a provider plugin contributes on the LLM side: `ProviderSpec` (name, flavor,
//! presets, optional dialect factory) and the bundled providers, one per preset. The
//! plugin runtime registers these; `LlmPool` resolves through a lookup over them.

use std::sync::Arc;

use super::dialect::Dialect;
use super::presets::{Preset, all_presets};

/// Builds a provider's own dialect; called once per client.
pub type DialectFactory = fn() -> Arc<dyn Dialect>;

/// A lookup of providers by name (the provider registry, or the bundled list).
pub type ProviderLookup = Arc<dyn Fn(&str) -> Option<ProviderSpec> + Send + Sync>;

/// One provider as a plugin declares it.
#[derive(Debug, Clone)]
pub struct ProviderSpec {
    pub name: String,
    /// Dialect selector for clients of this provider.
    pub flavor: String,
    /// Endpoint, key variable, model, window and quirks; the one named like the provider
    /// (else the first) is what `LlmPool` uses.
    pub presets: Vec<Preset>,
    /// `None`: the dialect comes from `make_dialect(flavor)`.
    pub dialect: Option<DialectFactory>,
}

impl ProviderSpec {
    /// The preset this provider's clients start from.
    pub fn preset(&self) -> Option<&Preset> {
        self.presets
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(&self.name))
            .or_else(|| self.presets.first())
    }
}

/// The compiled-in providers: one per preset, none with its own dialect.
pub fn bundled_providers() -> Vec<ProviderSpec> {
    all_presets()
        .iter()
        .map(|p| ProviderSpec {
            name: p.name.to_owned(),
            flavor: p.flavor.to_owned(),
            presets: vec![*p],
            dialect: None,
        })
        .collect()
}

/// A lookup over `bundled_providers()` (case-insensitive), as the daemon's provider
/// registry resolves them.
#[cfg(test)]
pub(crate) fn bundled_lookup() -> ProviderLookup {
    let specs = bundled_providers();
    Arc::new(move |name: &str| {
        let name = name.trim();
        super::presets::preset(name)
            .and_then(|p| specs.iter().find(|s| s.name == p.name))
            .cloned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bundled_provider_per_preset() {
        let specs = bundled_providers();
        assert_eq!(specs.len(), all_presets().len());
        for s in &specs {
            assert!(s.dialect.is_none());
            assert_eq!(s.preset().unwrap().name, s.name);
            assert_eq!(s.preset().unwrap().flavor, s.flavor);
        }
    }

    #[test]
    fn bundled_lookup_accepts_aliases() {
        let lookup = bundled_lookup();
        assert_eq!(lookup("Groq").unwrap().name, "groq");
        assert_eq!(lookup("llama.cpp").unwrap().name, "llamacpp");
        assert!(lookup("nope").is_none());
    }

    #[test]
    fn spec_preset_prefers_its_own_name() {
        let mut presets = vec![*all_presets().last().unwrap()];
        presets.extend(super::super::presets::preset("groq").copied());
        let spec = ProviderSpec {
            name: "groq".into(),
            flavor: "groq".into(),
            presets,
            dialect: None,
        };
        assert_eq!(spec.preset().unwrap().name, "groq");
    }
}
