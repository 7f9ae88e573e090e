//! Structured output (`session/prompt {outputSchema}`): the JSON Schema a turn's final
//! answer must satisfy — checked once when the prompt arrives, sent to the provider as
//! `response_format` or as an instruction, and applied to the final answer (a ```json fence
//! and surrounding whitespace tolerated) with the `jsonschema` crate; `Turn::final_output`
//! is the end of such a turn: the check, the one repair round, `invalid_output`.
//!
//! **Invariants:** a schema that does not compile is refused before anything is queued
//! (`OutputSchema::new`); an answer is valid only when it parses as one JSON value and the
//! validator reports no error; the validator never fetches anything (no remote `$ref`: the
//! crate is built without its resolvers).
//!
//! Why `jsonschema`: the drafts' keywords (`$ref`, `anyOf`, formats,
//! `unevaluatedProperties`) are easy to get wrong by hand; the crate is maintained and
//! tested against the spec's suite, and reports each error's instance path, which the
//! repair round shows the model.

use amber_llm::ResponseFormat;
use amber_proto::{ErrorInfo, Message, StopReason};
use amber_store::context::Context;
use serde_json::Value;

use super::Turn;

/// The name of the schema in `response_format.json_schema.name`.
const FORMAT_NAME: &str = "output";

/// At most this many validation errors are listed (to the model and in `invalid_output`).
const MAX_ERRORS: usize = 10;

/// The model requests a repair round may make at least: its answer and the confirm
/// exchange.
const REPAIR_ROUNDS: u32 = 2;

/// Why an output schema was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OutputSchemaError {
    #[error("not a JSON Schema: it must be an object or a boolean")]
    NotASchema,
    #[error("invalid JSON Schema: {0}")]
    Invalid(String),
}

/// A compiled output schema, shared by the prompt's queue entry and its turn.
pub(crate) struct OutputSchema {
    schema: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSchema")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl OutputSchema {
    /// Compiles `schema` (validated against its draft's meta-schema first).
    pub(crate) fn new(schema: Value) -> Result<Self, OutputSchemaError> {
        if !(schema.is_object() || schema.is_boolean()) {
            return Err(OutputSchemaError::NotASchema);
        }
        let validator = jsonschema::validator_for(&schema).map_err(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                OutputSchemaError::Invalid(e.to_string())
            } else {
                OutputSchemaError::Invalid(format!("{e} (at {at})"))
            }
        })?;
        Ok(Self { schema, validator })
    }

    /// The structured-output request field for providers that take one.
    pub(crate) fn response_format(&self) -> ResponseFormat {
        ResponseFormat {
            name: FORMAT_NAME.to_owned(),
            schema: self.schema.clone(),
            strict: false,
        }
    }

    /// The instruction for providers without structured output (in the prompt's tail).
    pub(crate) fn instruction(&self) -> String {
        format!(
            "Your final answer must be a single JSON value valid against this JSON Schema, \
             and nothing else (no prose around it): {}",
            self.schema
        )
    }

    /// The final answer as a JSON value valid against the schema, or what is wrong with it.
    pub(crate) fn check(&self, answer: &str) -> Result<Value, Vec<String>> {
        let value = parse_answer(answer).map_err(|e| vec![e])?;
        let errors: Vec<String> = self
            .validator
            .iter_errors(&value)
            .take(MAX_ERRORS)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                format!("at {at}: {e}")
            })
            .collect();
        if errors.is_empty() {
            Ok(value)
        } else {
            Err(errors)
        }
    }
}

impl Turn<'_, '_> {
    /// A turn with an output schema that ended with `end_turn`: the final answer parsed and
    /// validated; an invalid one gets one repair round (the errors as a user message, in
    /// the same turn), and is `invalid_output` when still invalid.
    pub(super) async fn final_output(
        &mut self,
        context: &mut Context,
        schema: &OutputSchema,
    ) -> (StopReason, Option<ErrorInfo>, Option<serde_json::Value>) {
        let errors = match schema.check(&self.final_text) {
            Ok(value) => return (StopReason::EndTurn, None, Some(value)),
            Err(errors) => errors,
        };
        tracing::debug!(
            ?errors,
            "final answer invalid against the output schema; repairing"
        );
        context.push(Message::user(repair_prompt(&errors)));
        self.env.host.context_changed(context);
        self.final_text.clear();
        let remaining = self.env.max_iterations.saturating_sub(self.rounds);
        let (stop, error) = self.run(context, remaining.max(REPAIR_ROUNDS)).await;
        if stop != StopReason::EndTurn {
            return (stop, error, None);
        }
        match schema.check(&self.final_text) {
            Ok(value) => (StopReason::EndTurn, None, Some(value)),
            Err(errors) => {
                let message = invalid_output_message(&errors);
                let (stop, error) = self.fail("invalid_output", message, false);
                (stop, error, None)
            }
        }
    }
}

/// The final answer as one JSON value: the text itself, or the inside of a fenced code
/// block (```json or a bare ```) that is all there is, whitespace around either ignored.
pub(crate) fn parse_answer(answer: &str) -> Result<Value, String> {
    let text = answer.trim();
    if text.is_empty() {
        return Err("the final answer is empty; it must be a JSON value".to_owned());
    }
    let body = unfence(text).unwrap_or(text);
    serde_json::from_str(body).map_err(|e| format!("the final answer is not valid JSON: {e}"))
}

/// The content of a text that is one fenced code block (info string `json` or none).
fn unfence(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("```")?;
    let inner = rest.strip_suffix("```")?;
    let (info, body) = inner.split_once('\n')?;
    let info = info.trim();
    (info.is_empty() || info.eq_ignore_ascii_case("json")).then(|| body.trim())
}

/// The user message of the repair round: the errors, and what to do about them.
pub(crate) fn repair_prompt(errors: &[String]) -> String {
    format!(
        "[amber] Your final answer is not valid against the required output schema:\n{}\n\
         Reply again with only the corrected JSON value.",
        bullet_list(errors)
    )
}

/// The message of the `invalid_output` error that ends a turn whose repair failed too.
pub(crate) fn invalid_output_message(errors: &[String]) -> String {
    format!(
        "the final answer is not valid against the output schema (after one repair):\n{}",
        bullet_list(errors)
    )
}

fn bullet_list(errors: &[String]) -> String {
    errors
        .iter()
        .map(|e| format!("- {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {

    use super::*;
    use serde_json::json;

    fn schema() -> OutputSchema {
        OutputSchema::new(json!({
            "type": "object",
            "required": ["verdict", "count"],
            "properties": {
                "verdict": {"enum": ["pass", "fail"]},
                "count": {"type": "integer", "minimum": 0}
            }
        }))
        .unwrap()
    }

    #[test]
    fn plain_and_fenced_answers_parse() {
        assert_eq!(parse_answer(" {\"a\": 1}\n").unwrap(), json!({"a": 1}));
        assert_eq!(
            parse_answer("```json\n{\"a\": [1, 2]}\n```").unwrap(),
            json!({"a": [1, 2]})
        );
        assert_eq!(parse_answer("\n```JSON\n 3 \n```\n\n").unwrap(), json!(3));
        assert_eq!(parse_answer("```\n\"s\"\n```").unwrap(), json!("s"));
        assert_eq!(parse_answer("[true]").unwrap(), json!([true]));
    }

    #[test]
    fn prose_other_fences_and_empty_answers_do_not_parse() {
        for bad in [
            "",
            "  \n",
            "Here it is: {\"a\": 1}",
            "```python\n{\"a\": 1}\n```",
            "```json\n{\"a\": 1}\n``` and more",
            "```json {\"a\": 1}```",
            "{\"a\": 1} {\"b\": 2}",
        ] {
            assert!(parse_answer(bad).is_err(), "{bad:?} parsed");
        }
        assert!(parse_answer("").unwrap_err().contains("empty"));
        assert!(parse_answer("nope").unwrap_err().contains("not valid JSON"));
    }

    #[test]
    fn a_valid_answer_is_the_parsed_value() {
        let s = schema();
        assert_eq!(
            s.check("```json\n{\"verdict\": \"pass\", \"count\": 2}\n```")
                .unwrap(),
            json!({"verdict": "pass", "count": 2})
        );
    }

    #[test]
    fn an_invalid_answer_lists_each_error_with_its_place() {
        let errors = schema()
            .check(r#"{"verdict": "maybe", "count": -1}"#)
            .unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors.iter().any(|e| e.starts_with("at /verdict:")),
            "{errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.starts_with("at /count:")),
            "{errors:?}"
        );
        let missing = schema().check("{}").unwrap_err();
        assert!(missing[0].starts_with("at /:"), "{missing:?}");
        assert!(missing.iter().any(|e| e.contains("verdict")), "{missing:?}");
        let not_json = schema().check("pass").unwrap_err();
        assert_eq!(not_json.len(), 1);
        assert!(not_json[0].contains("not valid JSON"));
    }

    #[test]
    fn invalid_schemas_are_refused_with_the_reason() {
        let err = OutputSchema::new(json!({"type": "nonsense"})).unwrap_err();
        assert!(err.to_string().starts_with("invalid JSON Schema:"), "{err}");
        assert!(matches!(
            OutputSchema::new(json!("string")),
            Err(OutputSchemaError::NotASchema)
        ));
        assert!(OutputSchema::new(json!({"minimum": "zero"})).is_err());
        assert!(OutputSchema::new(json!(true)).is_ok());
    }

    #[test]
    fn the_request_field_and_the_instruction_carry_the_schema() {
        let s = schema();
        let format = s.response_format();
        assert_eq!(format.name, "output");
        assert!(!format.strict);
        assert_eq!(format.schema["required"], json!(["verdict", "count"]));
        assert!(
            s.instruction()
                .contains(r#""required":["verdict","count"]"#)
        );
    }

    #[test]
    fn repair_and_failure_messages_list_the_errors() {
        let errors = vec!["at /a: x".to_owned(), "at /b: y".to_owned()];
        let repair = repair_prompt(&errors);
        assert!(repair.contains("- at /a: x\n- at /b: y"), "{repair}");
        assert!(invalid_output_message(&errors).contains("- at /b: y"));
    }
}
