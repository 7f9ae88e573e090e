//! Test helpers: an environment of chosen variables only, and provider settings read from
//! TOML as the daemon's config file holds them (`[provider]`, `[providers.NAME]`).

use std::collections::BTreeMap;
use std::ffi::OsString;

use serde::Deserialize;

use super::{NamedProviderSettings, ProviderSettings};

/// An environment of these variables only.
pub(crate) fn env(
    pairs: &'static [(&'static str, &'static str)],
) -> impl Fn(&str) -> Option<OsString> {
    move |k| {
        pairs
            .iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| OsString::from(v))
    }
}

/// The provider tables of a config file; any other key is an error.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Tables {
    pub provider: ProviderSettings,
    pub providers: BTreeMap<String, NamedProviderSettings>,
}

/// `toml` read as provider tables; panics on anything else.
pub(crate) fn tables(toml: &str) -> Tables {
    toml::from_str(toml).expect("provider tables")
}
