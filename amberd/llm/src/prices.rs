//! Model prices: a static table of list prices (USD per million tokens) for the models of
//! the providers whose prices are published and stable, keyed by provider (preset name or
//! flavor) and a model pattern; `[[provider.prices]]` / `[[providers.NAME.prices]]`
//! entries of the config win over it. A model found in neither has no price: its calls
//! have no cost, and a budget in dollars cannot be kept for it.
//!
//! How a call is billed ([`Price::cost`]): amber's `Usage.prompt_tokens` counts every
//! input token, cached reads and cache writes included (OpenAI's `prompt_tokens` includes
//! its cached tokens; dialects that report them apart add them up). So the uncached input
//! is `prompt - cached - cache_write`, billed at `input`; `cached` tokens at the cached
//! (read) price; `cache_write` tokens at the cache-write price; `completion` tokens
//! (reasoning included, as providers bill it) at `output`.

use amber_proto::{CostUsd, Usage};
use serde::Deserialize;

/// A model's price in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Uncached input tokens.
    pub input: f64,
    /// Output tokens, reasoning included.
    pub output: f64,
    /// Input tokens read from the prompt cache.
    pub cached: f64,
    /// Input tokens written to the prompt cache (Anthropic's 5-minute cache writes).
    pub cache_write: f64,
}

impl Price {
    /// What the tokens of `usage` cost at this price.
    pub fn cost(&self, usage: &Usage) -> CostUsd {
        let uncached = usage
            .prompt_tokens
            .saturating_sub(usage.cached_tokens)
            .saturating_sub(usage.cache_write_tokens);
        #[allow(clippy::cast_precision_loss)]
        let tokens = |n: u64| n as f64;
        let usd = (tokens(uncached) * self.input
            + tokens(usage.cached_tokens) * self.cached
            + tokens(usage.cache_write_tokens) * self.cache_write
            + tokens(usage.completion_tokens) * self.output)
            / 1e6;
        // Prices are validated non-negative, so this is only ever None for absurd input.
        CostUsd::from_usd(usd).unwrap_or(CostUsd::ZERO)
    }
}

/// One `[[provider.prices]]` entry: a model pattern and its price. `cached` and
/// `cache_write` default to `input` (no discount or surcharge known).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceSetting {
    /// An exact model id (which also matches its dated versions, `-20250929` or
    /// `-2025-04-16`, and `-latest`), or a glob with `*`.
    pub model: String,
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cached: Option<f64>,
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl PriceSetting {
    pub fn price(&self) -> Price {
        Price {
            input: self.input,
            output: self.output,
            cached: self.cached.unwrap_or(self.input),
            cache_write: self.cache_write.unwrap_or(self.input),
        }
    }

    /// Why this entry cannot be used, if it cannot: a blank model or a price that is
    /// negative or not a number.
    pub fn invalid(&self) -> Option<String> {
        if self.model.trim().is_empty() {
            return Some("a price needs a model".to_owned());
        }
        let p = self.price();
        [p.input, p.output, p.cached, p.cache_write]
            .iter()
            .any(|v| !v.is_finite() || *v < 0.0)
            .then(|| format!("the price of `{}` must be numbers >= 0", self.model))
    }
}

/// A row of the built-in table.
struct Entry {
    /// Preset names and flavors whose requests these prices apply to.
    providers: &'static [&'static str],
    model: &'static str,
    price: Price,
}

const ANTHROPIC: &[&str] = &["anthropic"];
const OPENAI: &[&str] = &["openai", "openai-responses"];

/// Anthropic bills a 5-minute cache write at 1.25× input and a cache read at 0.1× input.
const fn claude(input: f64, output: f64) -> Price {
    Price {
        input,
        output,
        cached: input / 10.0,
        cache_write: input * 1.25,
    }
}

/// OpenAI bills no cache writes (it reports none); a cached read has its own price.
const fn openai(input: f64, output: f64, cached: f64) -> Price {
    Price {
        input,
        output,
        cached,
        cache_write: input,
    }
}

/// List prices, USD per million tokens, as published by the providers (Anthropic's
/// prompts up to 200k tokens; OpenAI's standard tier).
#[rustfmt::skip]
const TABLE: &[Entry] = &[
    // Anthropic: the aliases (`claude-sonnet-4-5`) and the dated ids behind them.
    Entry { providers: ANTHROPIC, model: "claude-opus-4-1", price: claude(15.0, 75.0) },
    Entry { providers: ANTHROPIC, model: "claude-opus-4-0", price: claude(15.0, 75.0) },
    Entry { providers: ANTHROPIC, model: "claude-opus-4", price: claude(15.0, 75.0) },
    Entry { providers: ANTHROPIC, model: "claude-sonnet-4-5", price: claude(3.0, 15.0) },
    Entry { providers: ANTHROPIC, model: "claude-sonnet-4-0", price: claude(3.0, 15.0) },
    Entry { providers: ANTHROPIC, model: "claude-sonnet-4", price: claude(3.0, 15.0) },
    Entry { providers: ANTHROPIC, model: "claude-haiku-4-5", price: claude(1.0, 5.0) },
    Entry { providers: ANTHROPIC, model: "claude-3-5-haiku", price: claude(0.8, 4.0) },
    // OpenAI.
    Entry { providers: OPENAI, model: "gpt-4o", price: openai(2.5, 10.0, 1.25) },
    // The first gpt-4o snapshot kept its launch price and had no cache discount.
    Entry { providers: OPENAI, model: "gpt-4o-2024-05-13", price: openai(5.0, 15.0, 5.0) },
    Entry { providers: OPENAI, model: "gpt-4o-mini", price: openai(0.15, 0.6, 0.075) },
    Entry { providers: OPENAI, model: "gpt-4.1", price: openai(2.0, 8.0, 0.5) },
    Entry { providers: OPENAI, model: "gpt-4.1-mini", price: openai(0.4, 1.6, 0.1) },
    Entry { providers: OPENAI, model: "gpt-4.1-nano", price: openai(0.1, 0.4, 0.025) },
    Entry { providers: OPENAI, model: "o3", price: openai(2.0, 8.0, 0.5) },
    Entry { providers: OPENAI, model: "o4-mini", price: openai(1.1, 4.4, 0.275) },
    Entry { providers: OPENAI, model: "gpt-5", price: openai(1.25, 10.0, 0.125) },
    Entry { providers: OPENAI, model: "gpt-5-chat-latest", price: openai(1.25, 10.0, 0.125) },
    Entry { providers: OPENAI, model: "gpt-5-codex", price: openai(1.25, 10.0, 0.125) },
    Entry { providers: OPENAI, model: "gpt-5-mini", price: openai(0.25, 2.0, 0.025) },
    Entry { providers: OPENAI, model: "gpt-5-nano", price: openai(0.05, 0.4, 0.005) },
];

/// The price of `model` for a provider known by `providers` (its preset name and its
/// flavor): the best-matching entry of `settings` (the provider's config), else of the
/// built-in table. `None`: no price is known.
pub fn price_for(settings: &[PriceSetting], providers: &[&str], model: &str) -> Option<Price> {
    let configured = best(
        settings
            .iter()
            .filter(|s| s.invalid().is_none())
            .map(|s| (s.model.as_str(), s.price())),
        model,
    );
    configured.or_else(|| {
        let rows = TABLE
            .iter()
            .filter(|e| {
                e.providers
                    .iter()
                    .any(|p| providers.iter().any(|q| q.eq_ignore_ascii_case(p)))
            })
            .map(|e| (e.model, e.price));
        best(rows, model)
    })
}

/// The most specific matching pattern's price: an exact id beats its dated form, which
/// beats a glob; among globs, the longest.
fn best<'p>(rows: impl Iterator<Item = (&'p str, Price)>, model: &str) -> Option<Price> {
    rows.filter_map(|(pattern, price)| Some((specificity(pattern, model)?, price)))
        .max_by_key(|(rank, _)| *rank)
        .map(|(_, price)| price)
}

/// How closely `pattern` names `model` (higher is closer), or `None` when it does not.
/// Case-insensitive.
fn specificity(pattern: &str, model: &str) -> Option<(u8, usize)> {
    let pattern = pattern.trim().to_ascii_lowercase();
    let model = model.trim().to_ascii_lowercase();
    if pattern.contains('*') {
        return glob(&pattern, &model).then_some((0, pattern.len()));
    }
    if model == pattern {
        return Some((2, pattern.len()));
    }
    let suffix = model.strip_prefix(&pattern)?.strip_prefix('-')?;
    is_version_suffix(suffix).then_some((1, pattern.len()))
}

/// A dated snapshot or the moving alias: `20250929`, `2025-04-16`, `latest`. Nothing
/// else, so that `claude-sonnet-4` does not price `claude-sonnet-4-5` nor `o3` `o3-pro`.
fn is_version_suffix(suffix: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let dashed = suffix.split('-').collect::<Vec<_>>();
    suffix == "latest"
        || (suffix.len() == 8 && digits(suffix))
        || (dashed.len() == 3
            && dashed[0].len() == 4
            && dashed[1].len() == 2
            && dashed[2].len() == 2
            && dashed.iter().all(|part| digits(part)))
}

/// `*` matches any run of characters (none included); everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return true;
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    // No `*` at all: the whole text must have been the pattern.
    rest.is_empty()
}

#[cfg(test)]
#[path = "prices_tests.rs"]
mod tests;
