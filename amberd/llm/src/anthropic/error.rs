//! Anthropic's errors → `ApiError`. Both an HTTP error body and a stream's `error` event
//! carry `{"type": "error", "error": {"type": "…_error", "message": "…"}}`: `overloaded_error`
//! (HTTP 529) is `Overloaded`, retryable; an `invalid_request_error` whose message says the
//! prompt does not fit is `ContextLengthExceeded`, so the agent compacts and tries again;
//! everything else is classified as for any provider.

use std::time::Duration;

use serde_json::Value;

use crate::ApiError;
use crate::error::{error_message_from_value, mentions_context_length};

/// Anthropic's status for an overloaded API (not a standard HTTP code).
const OVERLOADED_STATUS: u16 = 529;

/// What Anthropic's messages say when the input does not fit the window: `prompt is too
/// long: 210000 tokens > 200000 maximum`, and `input length and max_tokens exceed context
/// limit: …` when the prompt fits but not with the reserved output.
const TOO_LONG_MARKERS: &[&str] = &["prompt is too long", "exceed context limit"];

/// The `error` object of a body or event, read leniently.
struct ErrorObject {
    kind: Option<String>,
    message: String,
}

impl ErrorObject {
    fn parse(text: &str) -> Option<Self> {
        let value: Value = serde_json::from_str(text.trim()).ok()?;
        let inner = value.get("error").unwrap_or(&value);
        let kind = inner.get("type").and_then(Value::as_str).map(str::to_owned);
        let message = inner
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| error_message_from_value(&value))?;
        Some(Self { kind, message })
    }

    fn says_too_long(&self) -> bool {
        let lower = self.message.to_ascii_lowercase();
        TOO_LONG_MARKERS.iter().any(|m| lower.contains(m)) || mentions_context_length(&lower)
    }
}

/// A non-success HTTP response of the Messages API.
pub(super) fn classify_status(status: u16, body: &str, retry_after: Option<Duration>) -> ApiError {
    let parsed = ErrorObject::parse(body);
    let kind = parsed.as_ref().and_then(|e| e.kind.as_deref());
    if status == OVERLOADED_STATUS || kind == Some("overloaded_error") {
        return ApiError::Overloaded {
            message: parsed.map_or_else(|| body.trim().to_owned(), |e| e.message),
            retry_after,
        };
    }
    if let Some(e) = parsed.filter(|e| status == 400 && e.says_too_long()) {
        return ApiError::ContextLengthExceeded { message: e.message };
    }
    ApiError::from_status(status, body, retry_after)
}

/// An `error` event inside a 200 stream (`data` is its JSON).
pub(super) fn stream_error(data: &str) -> ApiError {
    let Some(e) = ErrorObject::parse(data) else {
        return ApiError::Stream {
            message: data.trim().to_owned(),
        };
    };
    match e.kind.as_deref() {
        Some("overloaded_error") => ApiError::Overloaded {
            message: e.message,
            retry_after: None,
        },
        _ if e.says_too_long() => ApiError::ContextLengthExceeded { message: e.message },
        Some(kind) if !e.message.contains(kind) => ApiError::Stream {
            message: format!("{} ({kind})", e.message),
        },
        _ => ApiError::Stream { message: e.message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OVERLOADED: &str =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    const TOO_LONG: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;

    #[test]
    fn status_529_is_a_retryable_overload() {
        let e = classify_status(529, OVERLOADED, Some(Duration::from_secs(3)));
        assert!(matches!(e, ApiError::Overloaded { .. }), "{e:?}");
        assert!(e.is_retryable());
        assert_eq!(e.code(), "overloaded");
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert!(e.to_string().contains("Overloaded"));
        // A 529 whose body is not Anthropic's JSON is still an overload.
        let e = classify_status(529, "busy", None);
        assert!(matches!(e, ApiError::Overloaded { ref message, .. } if message == "busy"));
    }

    #[test]
    fn a_prompt_too_long_400_is_context_overflow() {
        let e = classify_status(400, TOO_LONG, None);
        assert_eq!(e.code(), "context_length_exceeded");
        assert!(e.to_string().contains("210000 tokens"));
        let limit = r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 190000 + 32000 > 200000, decrease input length or `max_tokens` and try again"}}"#;
        assert_eq!(
            classify_status(400, limit, None).code(),
            "context_length_exceeded"
        );
    }

    #[test]
    fn other_errors_keep_their_status() {
        let bad = r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}"#;
        let e = classify_status(400, bad, None);
        assert!(matches!(e, ApiError::Http { status: 400, .. }), "{e:?}");
        assert!(!e.is_retryable());
        let e = classify_status(
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            None,
        );
        assert_eq!(e.code(), "http_error");
        assert!(e.to_string().contains("invalid x-api-key"));
        assert_eq!(classify_status(500, "", None).code(), "server_error");
    }

    #[test]
    fn stream_error_events_are_typed() {
        let e = stream_error(OVERLOADED);
        assert!(matches!(e, ApiError::Overloaded { .. }) && e.is_retryable());
        assert_eq!(stream_error(TOO_LONG).code(), "context_length_exceeded");
        let e = stream_error(
            r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
        );
        assert_eq!(e.code(), "stream_error");
        assert!(e.to_string().contains("Internal server error (api_error)"));
        assert_eq!(stream_error("not json").code(), "stream_error");
    }
}
