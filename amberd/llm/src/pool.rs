//! `LlmPool`: one `LlmClient` per provider name, built on first use and cached until
//! `invalidate`. Names resolve through the named provider settings (`[providers.NAME]`),
//! then the provider lookup (bundled presets, or the plugin registry); no name means the
//! default provider, its settings + `AMBER_*` exactly as `Endpoint::resolve` resolves them.

use amber_proto::sync::{Locked, RwLocked};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use super::endpoint::{Endpoint, non_blank};
use super::flavor::make_dialect_with;
use super::presets::{MaxTokensField, Preset, Quirks, all_presets, preset};
use super::prices::{Price, price_for};
use super::provider::{DialectFactory, ProviderLookup};
use super::provider_settings::{NamedProviderSettings, ProviderSettings};
use super::{LlmClient, LlmSettings};

/// The turn error when no endpoint is configured.
pub const NOT_CONFIGURED: &str = "no LLM endpoint configured: set AMBER_BASE_URL (an \
OpenAI-compatible base such as http://127.0.0.1:8080/v1), AMBER_API_KEY and AMBER_MODEL in \
amberd's environment, or [provider] base_url / api_key_env / model in config.toml, or \
OPENAI_API_KEY for api.openai.com. amberd reads config.toml again when it changes; a \
variable takes effect when amberd starts: `amber-cli daemon restart` starts it again with \
your shell's environment";

/// The name that always means the default provider (unless a `[providers.default]` exists).
pub(crate) const DEFAULT_PROVIDER: &str = "default";

/// Names of every provider the registry knows (for `names()` and error messages).
pub type ProviderCatalog = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// Lazily built, cached LLM clients, one per provider. Cheap to clone (shared state).
#[derive(Clone)]
pub struct LlmPool {
    inner: Arc<Inner>,
}

struct Inner {
    /// Replaced whole by [`LlmPool::reconfigure`] (a config file edit); each call reads
    /// one snapshot, so a resolution never mixes an old and a new setting.
    settings: RwLock<Arc<PoolSettings>>,
    providers: ProviderLookup,
    state: Mutex<State>,
}

/// What the config file and the daemon's environment say about providers.
struct PoolSettings {
    /// `[provider]`: the default provider, and the retry/timeout knobs of every provider.
    provider: ProviderSettings,
    /// The default provider's endpoint, resolved when the settings were read.
    endpoint: Endpoint,
    tables: BTreeMap<String, NamedProviderSettings>,
    /// Key variables read then (the pool outlives the `env` reference it was given).
    env: HashMap<String, String>,
}

impl PoolSettings {
    fn read(
        provider: &ProviderSettings,
        named: &BTreeMap<String, NamedProviderSettings>,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> PoolSettings {
        let endpoint = Endpoint::resolve(provider, &env);
        let key_vars = all_presets()
            .iter()
            .map(|p| p.api_key_env)
            .chain(provider.api_key_env.as_deref())
            .chain(named.values().filter_map(|t| t.api_key_env.as_deref()));
        let env = key_vars
            .filter_map(|k| Some((k.to_owned(), non_blank(env(k))?)))
            .collect();
        PoolSettings {
            provider: provider.clone(),
            endpoint,
            tables: named.clone(),
            env,
        }
    }
}

#[derive(Default)]
struct State {
    /// Bumped by `invalidate`, so a client built across it is not cached.
    generation: u64,
    /// Key "" is the default provider.
    clients: HashMap<String, LlmClient>,
    catalog: Option<ProviderCatalog>,
}

/// A provider resolved to everything but its client.
struct Resolved {
    settings: LlmSettings,
    /// The provider's own dialect, when it has one for its flavor.
    dialect: Option<DialectFactory>,
    context_window: u64,
    /// Set when the name resolved but no base URL did.
    missing_base_url: Option<String>,
}

impl std::fmt::Debug for LlmPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cached: Vec<String> = self.state().clients.keys().cloned().collect();
        let settings = self.settings();
        f.debug_struct("LlmPool")
            .field("default", &settings.endpoint.flavor)
            .field("tables", &settings.tables.keys().collect::<Vec<_>>())
            .field("cached", &cached)
            .finish_non_exhaustive()
    }
}

impl LlmPool {
    /// Reads the default provider's settings (`[provider]`), the named ones
    /// (`[providers.*]`) and the relevant variables of `env` now; builds nothing yet. A key
    /// variable the pool did not know at start (one named only by a provider registered
    /// later) is read from the process environment when needed.
    pub fn new(
        provider: &ProviderSettings,
        named: &BTreeMap<String, NamedProviderSettings>,
        env: &dyn Fn(&str) -> Option<OsString>,
        providers: ProviderLookup,
    ) -> LlmPool {
        LlmPool {
            inner: Arc::new(Inner {
                settings: RwLock::new(Arc::new(PoolSettings::read(provider, named, env))),
                providers,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Takes new `[provider]` / `[providers.*]` settings (a config file edit): every
    /// clone of the pool sees them, and clients are built anew from the next request on.
    /// Requests already running finish with the client they have.
    pub fn reconfigure(
        &self,
        provider: &ProviderSettings,
        named: &BTreeMap<String, NamedProviderSettings>,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) {
        let settings = Arc::new(PoolSettings::read(provider, named, env));
        *self.inner.settings.write_locked() = settings;
        self.invalidate();
    }

    /// The default provider's endpoint as the pool resolves it now.
    pub fn endpoint(&self) -> Endpoint {
        self.settings().endpoint.clone()
    }

    fn settings(&self) -> Arc<PoolSettings> {
        self.inner.settings.read_locked().clone()
    }

    /// Lets `names()` (and the unknown-provider message) list a registry's providers, not
    /// just the bundled presets it resolves.
    pub fn set_catalog(&self, catalog: ProviderCatalog) {
        self.state().catalog = Some(catalog);
    }

    /// The client of `provider` (`None`: the default provider), built on first use.
    /// Err: how to configure it, or which providers exist.
    pub fn client(&self, provider: Option<&str>) -> Result<LlmClient, String> {
        let name = self.named(provider);
        let key = name.unwrap_or_default();
        let generation = {
            let state = self.state();
            if let Some(client) = state.clients.get(key) {
                return Ok(client.clone());
            }
            state.generation
        };
        // Built without our lock held: the lookup may take the provider registry's lock,
        // and the registry calls `invalidate` while holding that one.
        let client = self.build(name)?;
        let mut state = self.state();
        if state.generation != generation {
            return Ok(client);
        }
        // A racing caller may have cached one first; everyone shares that.
        Ok(state
            .clients
            .entry(key.to_owned())
            .or_insert(client)
            .clone())
    }

    /// What [`Self::client`] would refuse for `provider`'s settings (an unknown name, no
    /// base URL), found without building the HTTP client: the daemon's start reports it
    /// and leaves the client to the first request.
    pub fn check(&self, provider: Option<&str>) -> Result<(), String> {
        match self.resolve(provider)?.missing_base_url {
            Some(message) => Err(message),
            None => Ok(()),
        }
    }

    /// The context window of `provider` (unknown names: the default's).
    pub fn context_window(&self, provider: Option<&str>) -> u64 {
        self.resolve(provider)
            .map_or(self.settings().provider.context_window, |r| {
                r.context_window
            })
    }

    /// The model `provider` uses when a request names none (unknown names: the default's).
    /// Empty: the server picks (local servers serve what they have loaded).
    pub fn default_model(&self, provider: Option<&str>) -> String {
        self.resolve(provider).map_or_else(
            |_| self.settings().endpoint.model.clone(),
            |r| r.settings.model,
        )
    }

    /// The price of `model` on `provider` (`None`: the default): the provider's
    /// `prices` entries, else the built-in table for its preset name or flavor. `None`:
    /// unknown (and for a provider name that does not resolve).
    pub fn price(&self, provider: Option<&str>, model: &str) -> Option<Price> {
        let settings = self.settings();
        match self.named(provider) {
            None => price_for(
                &settings.provider.prices,
                &[settings.endpoint.flavor.as_str()],
                model,
            ),
            Some(name) => {
                let flavor = self.resolve_named(name).ok()?.settings.flavor;
                let own = settings
                    .tables
                    .get(name)
                    .map_or(&[][..], |t| t.prices.as_slice());
                price_for(own, &[name, flavor.as_str()], model)
            }
        }
    }

    /// A session's `provider` choice: `Ok(None)` for the default (empty or `default`), the
    /// name as the registry spells it, or why it is unknown.
    pub fn selection(&self, provider: &str) -> Result<Option<String>, String> {
        let name = provider.trim();
        if name.is_empty() || name == DEFAULT_PROVIDER {
            return Ok(None);
        }
        let names = self.names();
        match names.iter().find(|n| n.eq_ignore_ascii_case(name)) {
            Some(known) => Ok(Some(known.clone())),
            None => {
                let known: Vec<&str> = std::iter::once(DEFAULT_PROVIDER)
                    .chain(names.iter().map(String::as_str))
                    .collect();
                Err(format!(
                    "unknown provider `{name}`; known: {}",
                    known.join(", ")
                ))
            }
        }
    }

    /// Every provider name a session may pick, sorted.
    pub fn names(&self) -> Vec<String> {
        let catalog = self.state().catalog.clone();
        let mut names: BTreeSet<String> = self.settings().tables.keys().cloned().collect();
        match catalog {
            Some(catalog) => names.extend(catalog()),
            None => names.extend(
                all_presets()
                    .iter()
                    .filter(|p| (self.inner.providers)(p.name).is_some())
                    .map(|p| p.name.to_owned()),
            ),
        }
        names.into_iter().collect()
    }

    /// The default provider (named `default`, flagged) and every named one, for
    /// `provider/list`.
    pub fn infos(&self) -> Vec<amber_proto::ProviderInfo> {
        let settings = self.settings();
        let ep = &settings.endpoint;
        let default = amber_proto::ProviderInfo {
            name: DEFAULT_PROVIDER.to_owned(),
            flavor: ep.flavor.clone(),
            base_url: ep.base_url.clone(),
            default_model: ep.model.clone(),
            context_window: settings.provider.context_window,
            default: true,
        };
        let named = self.names().into_iter().filter_map(|name| {
            let r = self.resolve_named(&name).ok()?;
            Some(amber_proto::ProviderInfo {
                name,
                flavor: r.settings.flavor,
                base_url: r.settings.base_url,
                default_model: r.settings.model,
                context_window: r.context_window,
                default: false,
            })
        });
        std::iter::once(default).chain(named).collect()
    }

    /// Drops every cached client (e.g. after a provider plugin was disabled); sessions
    /// holding a clone finish their request with it.
    pub fn invalidate(&self) {
        let mut state = self.state();
        state.generation += 1;
        state.clients.clear();
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent at every step, so a panic elsewhere cannot spoil it.
        self.inner.state.locked()
    }

    fn build(&self, name: Option<&str>) -> Result<LlmClient, String> {
        let resolved = self.resolve(name)?;
        if let Some(message) = resolved.missing_base_url {
            return Err(message);
        }
        let dialect = match resolved.dialect {
            Some(factory) => factory(),
            None => make_dialect_with(&resolved.settings.flavor, &|flavor| {
                (self.inner.providers)(flavor).and_then(|s| s.dialect)
            }),
        };
        LlmClient::with_dialect(resolved.settings, dialect).map_err(|e| e.to_string())
    }

    /// `None` for the default provider: no name, a blank one, or `default`.
    fn named<'n>(&self, provider: Option<&'n str>) -> Option<&'n str> {
        provider.map(str::trim).filter(|n| {
            !n.is_empty()
                && (!n.eq_ignore_ascii_case(DEFAULT_PROVIDER)
                    || self.settings().tables.contains_key(*n))
        })
    }

    fn resolve(&self, name: Option<&str>) -> Result<Resolved, String> {
        match self.named(name) {
            None => Ok(self.resolve_default()),
            Some(name) => self.resolve_named(name),
        }
    }

    /// `[provider]` + `AMBER_*`; the quirks are those of its flavor's preset.
    fn resolve_default(&self) -> Resolved {
        let settings = self.settings();
        let p = &settings.provider;
        let ep = &settings.endpoint;
        let preset = self.flavor_preset(&ep.flavor);
        let mut settings = self.base_settings();
        settings.flavor = ep.flavor.clone();
        settings.base_url = ep.base_url.clone();
        settings.api_key = ep.api_key.clone();
        settings.key_variable = Some(ep.key_variable.clone());
        settings.model = ep.model.clone();
        settings.max_tokens = p.max_tokens;
        settings.quirks = override_quirks(
            quirks_for(preset.as_ref(), ep.base_url.as_deref()),
            QuirkOverrides {
                include_usage: p.include_usage,
                max_tokens_field: p.max_tokens_field,
                structured_output: p.structured_output,
            },
        );
        settings.extra_headers = headers(&p.headers);
        Resolved {
            missing_base_url: ep.base_url.is_none().then(|| NOT_CONFIGURED.to_owned()),
            settings,
            dialect: None,
            context_window: p.context_window,
        }
    }

    /// `[providers.NAME]` over the provider lookup's preset (by name, else by the table's
    /// flavor).
    fn resolve_named(&self, name: &str) -> Result<Resolved, String> {
        let lookup = &self.inner.providers;
        let pool = self.settings();
        let table = pool.tables.get(name);
        let spec = lookup(name).or_else(|| {
            let flavor = table?.flavor.as_deref()?;
            lookup(flavor)
        });
        if table.is_none() && spec.is_none() {
            let names = self.names();
            let known = if names.is_empty() {
                "none (is the `providers` plugin disabled?)".to_owned()
            } else {
                names.join(", ")
            };
            return Err(format!("unknown provider `{name}`; known: {known}"));
        }
        let empty = NamedProviderSettings::default();
        let table = table.unwrap_or(&empty);
        let flavor = table
            .flavor
            .clone()
            .or_else(|| spec.as_ref().map(|s| s.flavor.clone()))
            .unwrap_or_else(|| "openai".to_owned());
        // A table without flavor or preset is a bare OpenAI-compatible server: it inherits
        // nothing from OpenAI's preset (above all not OPENAI_API_KEY).
        let preset = spec
            .as_ref()
            .and_then(|s| s.preset().copied())
            .or_else(|| table.flavor.as_deref().and_then(|f| self.flavor_preset(f)));
        let base_url = table
            .base_url
            .clone()
            .or_else(|| preset.map(|p| p.base_url.to_owned()))
            .filter(|u| !u.trim().is_empty());
        let key_variable = table
            .api_key_env
            .as_deref()
            .or(preset.map(|p| p.api_key_env));
        let api_key = key_variable.and_then(|var| self.env(var));
        let mut settings = self.base_settings();
        settings.quirks = override_quirks(
            quirks_for(preset.as_ref(), base_url.as_deref()),
            QuirkOverrides {
                include_usage: table.include_usage,
                max_tokens_field: table.max_tokens_field,
                structured_output: table.structured_output,
            },
        );
        settings.base_url = base_url;
        settings.api_key = api_key;
        settings.key_variable = key_variable.map(str::to_owned);
        settings.model = table
            .model
            .clone()
            .or_else(|| preset.map(|p| p.default_model.to_owned()))
            .unwrap_or_default();
        settings.max_tokens = table.max_tokens;
        settings.extra_headers = headers(&table.headers);
        // The provider's own dialect only serves its own flavor.
        let dialect = spec
            .filter(|s| s.flavor.eq_ignore_ascii_case(&flavor))
            .and_then(|s| s.dialect);
        settings.flavor = flavor;
        Ok(Resolved {
            missing_base_url: settings.base_url.is_none().then(|| {
                format!("provider `{name}` has no base_url: set it under [providers.{name}]")
            }),
            context_window: table
                .context_window
                .or(preset.map(|p| p.context_window))
                .unwrap_or(pool.provider.context_window),
            settings,
            dialect,
        })
    }

    /// The preset of a flavor: the lookup's provider of that name, else the bundled table.
    fn flavor_preset(&self, flavor: &str) -> Option<Preset> {
        (self.inner.providers)(flavor)
            .and_then(|s| s.preset().copied())
            .or_else(|| preset(flavor).copied())
    }

    /// Retries, timeouts and the reply bound, shared by every provider.
    fn base_settings(&self) -> LlmSettings {
        let settings = self.settings();
        let p = &settings.provider;
        LlmSettings {
            max_retries: p.max_retries,
            retry_base: Duration::from_millis(p.retry_base_ms),
            retry_max: Duration::from_millis(p.retry_max_ms),
            connect_timeout: Duration::from_millis(p.connect_timeout_ms),
            idle_timeout: Duration::from_millis(p.idle_timeout_ms),
            max_reply_bytes: usize::try_from(p.max_reply_bytes).unwrap_or(usize::MAX),
            ..LlmSettings::default()
        }
    }

    fn env(&self, var: &str) -> Option<String> {
        self.settings()
            .env
            .get(var)
            .cloned()
            .or_else(|| non_blank(std::env::var_os(var)))
    }
}

/// A preset's quirks describe its own server. `openai` doubles as "any OpenAI-compatible
/// server" (it is the default flavor), so pointed elsewhere it gets the generic quirks:
/// a local server may not know `max_completion_tokens`.
fn quirks_for(preset: Option<&Preset>, base_url: Option<&str>) -> Quirks {
    match preset {
        Some(p) if p.flavor == "openai" && !same_url(base_url, p.base_url) => Quirks::GENERIC,
        Some(p) => p.quirks,
        None => Quirks::GENERIC,
    }
}

fn same_url(a: Option<&str>, b: &str) -> bool {
    a.is_some_and(|a| a.trim().trim_end_matches('/') == b.trim_end_matches('/'))
}

/// The quirks a provider's settings override (unset: the preset's).
struct QuirkOverrides {
    include_usage: Option<bool>,
    max_tokens_field: Option<MaxTokensField>,
    structured_output: Option<bool>,
}

fn override_quirks(mut quirks: Quirks, overrides: QuirkOverrides) -> Quirks {
    if let Some(v) = overrides.include_usage {
        quirks.include_usage = v;
    }
    if let Some(v) = overrides.max_tokens_field {
        quirks.max_tokens_field = v;
    }
    if let Some(v) = overrides.structured_output {
        quirks.structured_output = v;
    }
    quirks
}

fn headers(table: &BTreeMap<String, String>) -> Vec<(String, String)> {
    table.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}
