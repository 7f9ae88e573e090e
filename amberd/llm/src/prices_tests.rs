//! The price table's matching rules and the cost arithmetic.

use amber_proto::{CostUsd, Usage};

use super::{Price, PriceSetting, price_for};

fn table(provider: &str, model: &str) -> Option<Price> {
    price_for(&[], &[provider], model)
}

fn setting(model: &str, input: f64, output: f64) -> PriceSetting {
    PriceSetting {
        model: model.to_owned(),
        input,
        output,
        cached: None,
        cache_write: None,
    }
}

fn usd(cost: CostUsd) -> f64 {
    cost.usd()
}

#[test]
fn dated_model_ids_match_their_alias_entry() {
    let sonnet = table("anthropic", "claude-sonnet-4-5").unwrap();
    assert_eq!(
        table("anthropic", "claude-sonnet-4-5-20250929"),
        Some(sonnet)
    );
    assert_eq!(sonnet.input, 3.0);
    assert_eq!(
        table("anthropic", "claude-opus-4-1-20250805")
            .unwrap()
            .output,
        75.0
    );
    assert_eq!(
        table("anthropic", "claude-3-5-haiku-latest").unwrap().input,
        0.8
    );
    assert_eq!(table("openai", "gpt-4o-2024-08-06").unwrap().input, 2.5);
    assert_eq!(table("openai", "o3-2025-04-16").unwrap().input, 2.0);
}

#[test]
fn a_longer_model_name_is_not_priced_as_its_prefix() {
    // `claude-sonnet-4-…` is Sonnet 4; `-5-20250929` is not a date, so Sonnet 4.5's own
    // entry prices it (the same price, but the rule must not depend on that).
    assert_eq!(
        table("anthropic", "claude-sonnet-4-20250514")
            .unwrap()
            .input,
        3.0
    );
    assert_eq!(table("openai", "gpt-4o-mini").unwrap().input, 0.15);
    assert_eq!(
        table("openai", "gpt-4o-mini-2024-07-18").unwrap().input,
        0.15
    );
    assert_eq!(table("openai", "gpt-4o-2024-05-13").unwrap().input, 5.0);
    assert_eq!(table("openai", "o3-pro"), None, "o3-pro is not o3");
    assert_eq!(table("openai", "o3-mini"), None);
    assert_eq!(table("openai", "gpt-5.1"), None);
}

#[test]
fn unknown_models_and_providers_have_no_price() {
    assert_eq!(table("openai", "mock-model"), None);
    assert_eq!(
        table("openai", "claude-sonnet-4-5"),
        None,
        "Claude is Anthropic's"
    );
    assert_eq!(
        table("ollama", "gpt-4o"),
        None,
        "a local server bills nothing we know"
    );
    assert!(table("openai-responses", "gpt-5-codex").is_some());
    assert!(
        table("OpenAI", "GPT-4.1-mini").is_some(),
        "case does not matter"
    );
}

#[test]
fn config_entries_win_over_the_table_and_globs_match() {
    let settings = [setting("gpt-4o", 1.0, 2.0), setting("mock-*", 3.0, 4.0)];
    let own = price_for(&settings, &["openai"], "gpt-4o-2024-08-06").unwrap();
    assert_eq!((own.input, own.output), (1.0, 2.0));
    // Unset cached / cache-write prices are the input price.
    assert_eq!((own.cached, own.cache_write), (1.0, 1.0));
    assert_eq!(
        price_for(&settings, &["openai"], "mock-model")
            .unwrap()
            .input,
        3.0
    );
    // Not in the config: the table still answers.
    assert_eq!(
        price_for(&settings, &["openai"], "gpt-4.1").unwrap().input,
        2.0
    );
}

#[test]
fn the_most_specific_config_entry_wins() {
    let settings = [
        setting("*", 9.0, 9.0),
        setting("m*", 5.0, 5.0),
        setting("model", 1.0, 1.0),
    ];
    assert_eq!(price_for(&settings, &["x"], "model").unwrap().input, 1.0);
    assert_eq!(price_for(&settings, &["x"], "mo").unwrap().input, 5.0);
    assert_eq!(price_for(&settings, &["x"], "other").unwrap().input, 9.0);
}

#[test]
fn invalid_config_entries_are_reported_and_ignored() {
    let negative = setting("m", -1.0, 1.0);
    assert!(negative.invalid().unwrap().contains("`m`"));
    assert!(setting(" ", 1.0, 1.0).invalid().is_some());
    assert_eq!(price_for(&[negative], &["x"], "m"), None);
}

#[test]
fn cached_and_cache_write_tokens_are_billed_apart_from_uncached_input() {
    let price = Price {
        input: 3.0,
        output: 15.0,
        cached: 0.3,
        cache_write: 3.75,
    };
    // 10k prompt tokens of which 6k read from the cache and 2k written to it: 2k uncached.
    let usage = Usage {
        prompt_tokens: 10_000,
        completion_tokens: 1_000,
        cached_tokens: 6_000,
        cache_write_tokens: 2_000,
        total_tokens: 11_000,
        cost_usd: None,
    };
    let expected = (2_000.0 * 3.0 + 6_000.0 * 0.3 + 2_000.0 * 3.75 + 1_000.0 * 15.0) / 1e6;
    assert!((usd(price.cost(&usage)) - expected).abs() < 1e-9);
    assert_eq!(price.cost(&usage), CostUsd::from_usd(0.0303).unwrap());
}

#[test]
fn openai_cached_tokens_are_part_of_prompt_tokens() {
    // gpt-4o-mini: 1M prompt tokens with half cached = 0.5 × 0.15 + 0.5 × 0.075.
    let price = table("openai", "gpt-4o-mini").unwrap();
    let usage = Usage {
        prompt_tokens: 1_000_000,
        cached_tokens: 500_000,
        ..Usage::default()
    };
    assert_eq!(price.cost(&usage), CostUsd::from_usd(0.1125).unwrap());
}

#[test]
fn counts_that_do_not_add_up_never_bill_negative_input() {
    let price = table("anthropic", "claude-haiku-4-5").unwrap();
    let usage = Usage {
        prompt_tokens: 10,
        cached_tokens: 100,
        ..Usage::default()
    };
    assert_eq!(
        price.cost(&usage),
        CostUsd::from_usd(100.0 * 0.1 / 1e6).unwrap()
    );
}
