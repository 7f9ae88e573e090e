//! Parameter parsing (done by `table.rs` before a handler runs) and the error mapping the
//! handlers share.

use amber_proto::errors;
use jsonrpsee::types::{ErrorObjectOwned, Params};
use serde::de::DeserializeOwned;

use std::sync::Arc;

use crate::agent::output_schema::OutputSchema;
use crate::session::{PromptOptions, SessionError};

/// [`parse`], after a `sessionId` that is a session's name (`fix-auth`) or a unique prefix
/// of a session's id (`3f2a`, as `amber-cli sessions` shows them) is replaced by the whole
/// id; a whole id wins over a name, a name over a prefix (`SessionManager::resolve_id`). A
/// prefix two sessions share is -32602 naming them; one that matches nothing is left for the
/// handler's -32001.
pub(crate) fn parse_for<T: DeserializeOwned>(
    params: &Params<'_>,
    daemon: &crate::daemon::Daemon,
) -> Result<T, ErrorObjectOwned> {
    /// Just the id: the rest of the params (a prompt's text) is skipped, not built.
    #[derive(serde::Deserialize)]
    struct Named<'a> {
        #[serde(rename = "sessionId", borrow)]
        session_id: Option<std::borrow::Cow<'a, str>>,
    }
    let raw = params.as_str().unwrap_or("{}");
    // Cheap test first; and only a name or a prefix (rare) has the params built and written
    // again.
    if raw.contains("\"sessionId\"")
        && let Ok(Named {
            session_id: Some(id),
        }) = serde_json::from_str::<Named<'_>>(raw)
        && let Some(whole) = daemon.sessions.resolve_id(&id)?
        && let Ok(serde_json::Value::Object(mut object)) = serde_json::from_str(raw)
    {
        object.insert("sessionId".into(), serde_json::Value::String(whole));
        let rewritten = serde_json::Value::Object(object).to_string();
        return parse_str(&rewritten);
    }
    parse(params)
}

/// Parses params into `T`; absent params count as `{}`. Errors are -32602 and name the
/// offending field (`sessionId: invalid type: integer, expected a string`).
pub(crate) fn parse<T: DeserializeOwned>(params: &Params<'_>) -> Result<T, ErrorObjectOwned> {
    parse_str(params.as_str().unwrap_or("{}"))
}

fn parse_str<T: DeserializeOwned>(raw: &str) -> Result<T, ErrorObjectOwned> {
    let raw = if raw.trim() == "null" { "{}" } else { raw };
    let mut de = serde_json::Deserializer::from_str(raw);
    serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let message = if path == "." || path.is_empty() {
            format!("invalid params: {}", strip_position(&inner))
        } else {
            format!("invalid params: {path}: {}", strip_position(&inner))
        };
        ErrorObjectOwned::owned(errors::INVALID_PARAMS, message, None::<()>)
    })
}

/// serde_json appends "at line 1 column 17", which means nothing to a client.
fn strip_position(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

pub(crate) fn error(code: i32, message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(code, message.into(), None::<()>)
}

impl From<SessionError> for ErrorObjectOwned {
    fn from(err: SessionError) -> Self {
        let code = match err {
            SessionError::NotFound(_) => errors::SESSION_NOT_FOUND,
            SessionError::InvalidWorkspace { .. } => errors::INVALID_WORKSPACE,
            SessionError::ShuttingDown => errors::OVERLOADED,
            SessionError::Store(_)
            | SessionError::NotQueued(_)
            | SessionError::Internal(_)
            | SessionError::Failed(_) => errors::INTERNAL_ERROR,
            SessionError::InvalidParams(_) => errors::INVALID_PARAMS,
        };
        error(code, err.to_string())
    }
}

/// `session/prompt`'s turn options, checked before anything is queued: the output schema
/// compiled (an invalid one is -32602 with the reason), `maxIterations` at least 1.
pub(crate) fn prompt_options(
    output_schema: Option<serde_json::Value>,
    max_iterations: Option<u32>,
) -> Result<PromptOptions, ErrorObjectOwned> {
    if max_iterations == Some(0) {
        return Err(error(
            errors::INVALID_PARAMS,
            "invalid params: maxIterations: must be at least 1",
        ));
    }
    let output_schema = output_schema
        .map(|schema| {
            OutputSchema::new(schema).map_err(|e| {
                error(
                    errors::INVALID_PARAMS,
                    format!("invalid params: outputSchema: {e}"),
                )
            })
        })
        .transpose()?
        .map(Arc::new);
    Ok(PromptOptions {
        output_schema,
        max_iterations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::SessionPromptParams;

    #[test]
    fn errors_name_the_field() {
        let p = Params::new(Some(r#"{"sessionId": 5, "text": "x"}"#));
        let err = parse::<SessionPromptParams>(&p).unwrap_err();
        assert_eq!(err.code(), errors::INVALID_PARAMS);
        assert!(err.message().contains("sessionId"), "{}", err.message());
        assert!(!err.message().contains("line 1"), "{}", err.message());

        let p = Params::new(Some(r#"{"sessionId": "s"}"#));
        let err = parse::<SessionPromptParams>(&p).unwrap_err();
        assert!(err.message().contains("`text`"), "{}", err.message());
    }

    #[test]
    fn absent_params_are_an_empty_object() {
        let p = Params::new(None);
        parse::<amber_proto::Empty>(&p).unwrap();
        parse::<amber_proto::SessionListParams>(&p).unwrap();
    }

    #[test]
    fn prompt_options_refuse_a_bad_schema_and_zero_iterations() {
        let err = prompt_options(Some(serde_json::json!({"type": 5})), None).unwrap_err();
        assert_eq!(err.code(), errors::INVALID_PARAMS);
        assert!(
            err.message()
                .starts_with("invalid params: outputSchema: invalid JSON Schema:"),
            "{}",
            err.message()
        );
        let err = prompt_options(None, Some(0)).unwrap_err();
        assert!(err.message().contains("maxIterations"), "{}", err.message());
        let ok = prompt_options(Some(serde_json::json!({"type": "object"})), Some(3)).unwrap();
        assert!(ok.output_schema.is_some());
        assert_eq!(ok.max_iterations, Some(3));
    }
}
