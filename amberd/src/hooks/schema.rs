//! The check of arguments a `pre_tool_use` hook rewrote, against the tool's input schema:
//! the subset of JSON Schema the tools' schemas use (`type`, `properties`, `required`,
//! `additionalProperties: false`, `enum`, `items`, `minimum`, `maximum`). Keywords outside
//! it are not checked; the tool still checks its arguments when it runs.

use serde_json::Value;

/// `Err` names the first place where `value` does not fit `schema` (`command: expected a
/// string, got a number`).
pub fn check(value: &Value, schema: &Value) -> Result<(), String> {
    check_at(value, schema, "")
}

fn check_at(value: &Value, schema: &Value, at: &str) -> Result<(), String> {
    let Value::Object(schema) = schema else {
        return Ok(());
    };
    let place = |msg: String| {
        if at.is_empty() {
            msg
        } else {
            format!("`{at}`: {msg}")
        }
    };
    if let Some(expected) = schema.get("type") {
        let types: Vec<&str> = match expected {
            Value::String(t) => vec![t.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.is_empty() && !types.iter().any(|t| is_type(value, t)) {
            return Err(place(format!(
                "expected {}, got {}",
                types.join(" or "),
                kind(value)
            )));
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        return Err(place(format!(
            "{value} is not one of {}",
            Value::Array(allowed.clone())
        )));
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(place(format!("{n} is below the minimum {min}")));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(place(format!("{n} is above the maximum {max}")));
        }
    }
    if let Value::Object(map) = value {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = schema.get("required") {
            for field in required.iter().filter_map(Value::as_str) {
                if map.get(field).is_none_or(Value::is_null) {
                    return Err(place(format!("missing required field `{field}`")));
                }
            }
        }
        for (key, inner) in map {
            let inner_at = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            match properties.and_then(|p| p.get(key)) {
                Some(sub) => check_at(inner, sub, &inner_at)?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(place(format!("unknown field `{key}`")));
                }
                None => {}
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check_at(item, item_schema, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

fn is_type(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        _ => true,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
