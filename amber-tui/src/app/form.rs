//! The form of an MCP server's elicitation (an approval with `mcp.kind = elicitation`):
//! one line per property of its `requestedSchema` (strings, integers, numbers, booleans,
//! enums: the flat schema MCP allows), filled with the schema's defaults, edited in the
//! approval overlay (`f`), and sent as `approval/respond {decision: allow_once, content}`.
//! What cannot be sent (a required field left empty, a number that is not one, a value
//! outside an enum) is said on the form, and nothing is sent.

use serde_json::{Map, Value};

/// How a field's text becomes its value.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    Text,
    Integer,
    Number,
    Boolean,
    Choice(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    pub name: String,
    pub kind: FieldKind,
    pub required: bool,
    /// The property's title or description, and its choices.
    pub hint: String,
    /// As typed (the default's text at first).
    pub value: String,
}

/// An elicitation form being filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitForm {
    pub request_id: String,
    pub fields: Vec<FormField>,
    /// The field the keys go to.
    pub at: usize,
    /// Why the last send was refused.
    pub error: Option<String>,
}

impl ElicitForm {
    /// The form of `schema`; `None` when it has no properties to fill in.
    pub fn of(request_id: &str, schema: &Value) -> Option<Self> {
        let properties = schema.get("properties")?.as_object()?;
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let fields: Vec<FormField> = properties
            .iter()
            .map(|(name, property)| field(name, property, required.contains(&name.as_str())))
            .collect();
        (!fields.is_empty()).then(|| ElicitForm {
            request_id: request_id.to_owned(),
            fields,
            at: 0,
            error: None,
        })
    }

    pub fn is_last(&self) -> bool {
        self.at + 1 >= self.fields.len()
    }

    pub fn next(&mut self) {
        if !self.is_last() {
            self.at += 1;
        }
    }

    pub fn previous(&mut self) {
        self.at = self.at.saturating_sub(1);
    }

    pub fn type_char(&mut self, c: char) {
        if let Some(field) = self.fields.get_mut(self.at) {
            field.value.push(c);
        }
        self.error = None;
    }

    pub fn backspace(&mut self) {
        if let Some(field) = self.fields.get_mut(self.at) {
            field.value.pop();
        }
        self.error = None;
    }

    /// The values to send, or why they cannot be (naming the field, which gets the keys).
    pub fn content(&mut self) -> Result<Value, String> {
        let mut content = Map::new();
        for (index, field) in self.fields.iter().enumerate() {
            match value_of(field) {
                Ok(Some(value)) => {
                    content.insert(field.name.clone(), value);
                }
                Ok(None) => {}
                Err(why) => {
                    self.at = index;
                    let message = format!("{}: {why}", field.name);
                    self.error = Some(message.clone());
                    return Err(message);
                }
            }
        }
        Ok(Value::Object(content))
    }
}

fn field(name: &str, property: &Value, required: bool) -> FormField {
    let choices: Option<Vec<String>> =
        property
            .get("enum")
            .and_then(Value::as_array)
            .map(|values| {
                values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            });
    let kind = match (choices, property.get("type").and_then(Value::as_str)) {
        (Some(choices), _) if !choices.is_empty() => FieldKind::Choice(choices),
        (_, Some("integer")) => FieldKind::Integer,
        (_, Some("number")) => FieldKind::Number,
        (_, Some("boolean")) => FieldKind::Boolean,
        _ => FieldKind::Text,
    };
    let mut hint = property
        .get("title")
        .or_else(|| property.get("description"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let shape = match &kind {
        FieldKind::Choice(choices) => Some(choices.join(" | ")),
        FieldKind::Boolean => Some("yes | no".to_owned()),
        FieldKind::Integer => Some("a whole number".to_owned()),
        FieldKind::Number => Some("a number".to_owned()),
        FieldKind::Text => None,
    };
    if let Some(shape) = shape {
        if !hint.is_empty() {
            hint.push_str(" — ");
        }
        hint.push_str(&shape);
    }
    let value = match property.get("default") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Bool(true)) => "yes".to_owned(),
        Some(Value::Bool(false)) => "no".to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    FormField {
        name: name.to_owned(),
        kind,
        required,
        hint,
        value,
    }
}

/// A field's value; `None` for an optional field left empty.
fn value_of(field: &FormField) -> Result<Option<Value>, String> {
    let text = field.value.trim();
    if text.is_empty() {
        return if field.required && field.kind != FieldKind::Text {
            Err("required".to_owned())
        } else if field.required {
            Ok(Some(Value::String(String::new())))
        } else {
            Ok(None)
        };
    }
    let value = match &field.kind {
        FieldKind::Text => Value::String(field.value.clone()),
        FieldKind::Integer => text
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("`{text}` is not a whole number"))?,
        FieldKind::Number => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("`{text}` is not a number"))?,
        FieldKind::Boolean => match text.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" | "1" => Value::Bool(true),
            "n" | "no" | "false" | "0" => Value::Bool(false),
            _ => return Err(format!("`{text}`: answer yes or no")),
        },
        FieldKind::Choice(choices) => match choices.iter().find(|c| c.as_str() == text) {
            Some(choice) => Value::String(choice.clone()),
            None => return Err(format!("`{text}` is not one of {}", choices.join(", "))),
        },
    };
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Your name", "default": "Ada"},
                "age": {"type": "integer", "default": 36},
                "score": {"type": "number"},
                "colour": {"type": "string", "enum": ["red", "green"], "default": "red"},
                "ok": {"type": "boolean", "default": true},
            },
            "required": ["name", "age"],
        })
    }

    #[test]
    fn the_form_starts_from_the_schemas_defaults_and_sends_them_typed() {
        let mut form = ElicitForm::of("apr_1", &schema()).unwrap();
        let names: Vec<&str> = form.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names.len(), 5);
        let colour = form.fields.iter().find(|f| f.name == "colour").unwrap();
        assert!(colour.hint.contains("red | green"), "{}", colour.hint);
        assert_eq!(
            form.content().unwrap(),
            json!({"name": "Ada", "age": 36, "colour": "red", "ok": true})
        );
    }

    #[test]
    fn typed_values_are_checked_against_their_kind() {
        let cases = [
            ("age", "forty", "not a whole number"),
            ("age", "", "required"),
            ("score", "x1", "not a number"),
            ("colour", "blue", "not one of red, green"),
            ("ok", "maybe", "yes or no"),
        ];
        for (name, typed, why) in cases {
            let mut form = ElicitForm::of("apr_1", &schema()).unwrap();
            let index = form.fields.iter().position(|f| f.name == name).unwrap();
            form.fields[index].value = typed.to_owned();
            let err = form.content().unwrap_err();
            assert!(err.contains(why), "{name}={typed}: {err}");
            assert_eq!(form.at, index, "the keys go to the field at fault");
            assert!(form.error.is_some());
        }
        let mut form = ElicitForm::of("apr_1", &schema()).unwrap();
        let score = form.fields.iter().position(|f| f.name == "score").unwrap();
        form.fields[score].value = "2.5".to_owned();
        let ok = form.fields.iter().position(|f| f.name == "ok").unwrap();
        form.fields[ok].value = "no".to_owned();
        let sent = form.content().unwrap();
        assert_eq!(sent["score"], 2.5);
        assert_eq!(sent["ok"], false);
    }

    #[test]
    fn a_schema_without_properties_has_no_form() {
        assert!(ElicitForm::of("apr_1", &json!({"type": "object"})).is_none());
        assert!(ElicitForm::of("apr_1", &json!({"properties": {}})).is_none());
    }
}
