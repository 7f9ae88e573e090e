//! The check of arguments a `pre_tool_use` hook rewrote, against the tool's input schema,
//! with the `jsonschema` crate (the validator `--output-schema` uses too): MCP tools bring
//! schemas of their own, with `anyOf`, `$ref` and formats a hand-written subset would let
//! through. A schema that does not compile checks nothing (the tool still checks its
//! arguments when it runs), so a server's odd schema never blocks a rewrite on its own.

use serde_json::Value;

/// The errors shown at most (the first says enough to fix the hook).
const MAX_ERRORS: usize = 3;

/// `Err` names where `value` does not fit `schema` (`at /command: 5 is not of type "string"`).
pub fn check(value: &Value, schema: &Value) -> Result<(), String> {
    let validator = match jsonschema::validator_for(schema) {
        Ok(validator) => validator,
        Err(err) => {
            tracing::debug!(%err, "a tool's input schema does not compile; rewrite not checked");
            return Ok(());
        }
    };
    let errors: Vec<String> = validator
        .iter_errors(value)
        .take(MAX_ERRORS)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_owned() } else { at };
            format!("at {at}: {e}")
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}
