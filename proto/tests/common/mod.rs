//! Helpers shared by the round-trip suites: parse literal JSON into a type, serialize it
//! back, and compare as `serde_json::Value`, so a missing rename or a wrongly skipped
//! optional field shows up as a difference.

#![allow(dead_code)]

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses `value` (from its text, as it arrives on the wire) into `T` and serializes it back.
pub(crate) type Check = fn(&Value) -> Result<Value, String>;

pub(crate) fn rt<T: Serialize + DeserializeOwned>(value: &Value) -> Result<Value, String> {
    let text = serde_json::to_string(value).map_err(|e| e.to_string())?;
    let parsed: T = serde_json::from_str(&text).map_err(|e| format!("parse: {e}"))?;
    serde_json::to_value(&parsed).map_err(|e| format!("serialize: {e}"))
}

/// Parses `value` into `T`, panicking with the serde error.
pub(crate) fn parse<T: DeserializeOwned>(value: Value) -> T {
    let text = value.to_string();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Runs every row and reports all failures at once.
pub(crate) fn run_table(cases: &[(&str, Check, Value)]) {
    let mut failures = Vec::new();
    for (name, check, literal) in cases {
        match check(literal) {
            Ok(back) if back == *literal => {}
            Ok(back) => failures.push(format!(
                "{name}: round trip differs\n  literal: {literal}\n  back:    {back}"
            )),
            Err(e) => failures.push(format!("{name}: {e}\n  literal: {literal}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
