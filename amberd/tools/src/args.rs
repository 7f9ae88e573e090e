//! Typed access to a tool call's JSON arguments, with errors naming the field.

use serde_json::{Map, Value};

/// Arguments that do not fit the tool's schema.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    #[error("invalid arguments for `{tool}`: expected a JSON object, got {got}")]
    NotObject { tool: String, got: String },
    #[error("invalid arguments for `{tool}`: missing required field `{field}`")]
    Missing { tool: String, field: &'static str },
    #[error("invalid arguments for `{tool}`: field `{field}` must be {expected}, got {got}")]
    WrongType {
        tool: String,
        field: &'static str,
        expected: &'static str,
        got: String,
    },
}

/// A short description of a JSON value's type, for error messages.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => "a string".to_owned(),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// A view of the arguments object of one call to `tool`.
pub(crate) struct Args<'a> {
    tool: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    pub(crate) fn new(tool: &'a str, value: &'a Value) -> Result<Self, ArgError> {
        match value {
            Value::Object(map) => Ok(Self { tool, map }),
            other => Err(ArgError::NotObject {
                tool: tool.to_owned(),
                got: describe(other),
            }),
        }
    }

    /// A field; JSON `null` counts as absent.
    fn field(&self, field: &str) -> Option<&'a Value> {
        self.map.get(field).filter(|v| !v.is_null())
    }

    fn wrong(&self, field: &'static str, expected: &'static str, got: &Value) -> ArgError {
        ArgError::WrongType {
            tool: self.tool.to_owned(),
            field,
            expected,
            got: describe(got),
        }
    }

    pub(crate) fn string(&self, field: &'static str) -> Result<&'a str, ArgError> {
        self.opt_string(field)?.ok_or_else(|| ArgError::Missing {
            tool: self.tool.to_owned(),
            field,
        })
    }

    pub(crate) fn opt_string(&self, field: &'static str) -> Result<Option<&'a str>, ArgError> {
        match self.field(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.wrong(field, "a string", other)),
        }
    }

    pub(crate) fn opt_u64(&self, field: &'static str) -> Result<Option<u64>, ArgError> {
        match self.field(field) {
            None => Ok(None),
            Some(value) => value
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.wrong(field, "a non-negative integer", value)),
        }
    }

    pub(crate) fn opt_bool(&self, field: &'static str) -> Result<Option<bool>, ArgError> {
        match self.field(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.wrong(field, "a boolean", other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_field() {
        let value = json!({"path": 5, "offset": -1, "flag": "yes"});
        let args = Args::new("read", &value).unwrap();
        let err = args.string("path").unwrap_err().to_string();
        assert!(err.contains("`path`") && err.contains("a string"), "{err}");
        let err = args.opt_u64("offset").unwrap_err().to_string();
        assert!(err.contains("`offset`") && err.contains("-1"), "{err}");
        let err = args.opt_bool("flag").unwrap_err().to_string();
        assert!(err.contains("`flag`"), "{err}");
        let err = args.string("content").unwrap_err().to_string();
        assert!(err.contains("missing required field `content`"), "{err}");
    }

    #[test]
    fn null_is_absent() {
        let value = json!({"limit": null});
        let args = Args::new("read", &value).unwrap();
        assert_eq!(args.opt_u64("limit").unwrap(), None);
    }

    #[test]
    fn non_object_is_rejected() {
        let value = json!([1]);
        assert!(matches!(
            Args::new("read", &value),
            Err(ArgError::NotObject { .. })
        ));
    }
}
