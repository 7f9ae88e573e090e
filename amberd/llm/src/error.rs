//! `ApiError`: every way an LLM call can fail, with a stable snake_case `code()` for the
//! protocol's `error` event and the `is_retryable` classification the retry loop uses; and
//! what every dialect reads error bodies with (the message, a context-length phrase, a
//! payload clipped for a message).

use std::time::Duration;

use super::limits::{Oversized, human_bytes};

/// How to point amberd at an endpoint; part of every "not configured" message.
const CONFIGURE_HINT: &str = "set AMBER_BASE_URL (e.g. http://127.0.0.1:8080/v1), AMBER_API_KEY and \
     AMBER_MODEL in amberd's environment, or `base_url` under `[provider]` in config.toml";

/// Phrases providers use when the prompt does not fit the model's window.
const CONTEXT_LENGTH_MARKERS: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "context size",
    "exceed_context_size",
    "too many tokens",
    "prompt is too long",
];

/// How a broken stream's `Connect` message starts (`retry_reason` tells it apart).
pub(crate) const CONNECTION_LOST: &str = "connection lost while streaming";

/// A failed LLM call.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No endpoint (base URL) is configured.
    #[error("no LLM endpoint configured (missing {missing}): {CONFIGURE_HINT}")]
    NotConfigured { missing: String },
    /// The configuration is present but unusable (bad URL, bad header value, TLS setup).
    #[error("invalid LLM configuration: {0}")]
    InvalidConfig(String),
    /// Could not connect, or the connection broke.
    #[error("connection to the LLM endpoint failed: {0}")]
    Connect(String),
    /// The connect (or another transport) timeout.
    #[error("LLM endpoint timed out: {0}")]
    Timeout(String),
    /// Nothing came for the idle timeout: no response head (`streaming: false`), or no data
    /// in the middle of the body (`streaming: true`, a stream gone silent).
    #[error("LLM endpoint timed out: {}", silence(*streaming, *after))]
    Idle { after: Duration, streaming: bool },
    /// A non-success HTTP status.
    #[error("LLM endpoint returned HTTP {status}: {message}")]
    Http {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// The prompt does not fit the model's context window (HTTP 400 or an in-stream error).
    #[error("context length exceeded: {message}")]
    ContextLengthExceeded { message: String },
    /// The provider is overloaded for now (Anthropic's HTTP 529, or its `overloaded_error`
    /// event inside a 200 stream): worth another attempt after a pause.
    #[error("LLM provider is overloaded: {message}")]
    Overloaded {
        message: String,
        retry_after: Option<Duration>,
    },
    /// An `{"error": ...}` object inside a 200 stream.
    #[error("LLM stream reported an error: {message}")]
    Stream { message: String },
    /// The stream ended before any `finish_reason` and before `[DONE]`.
    #[error("LLM stream ended before the response was complete")]
    Truncated,
    /// The reply, or one event of its stream, passed its size bound (`limits.rs`): no model
    /// sends that much, so the endpoint is broken or hostile. Not retried.
    #[error(
        "LLM reply too large: {what} passed {} ({limit} bytes), more than any model sends; \
         the bound is `[provider] max_reply_bytes`",
        human_bytes(*limit)
    )]
    ReplyTooLarge { what: Oversized, limit: usize },
    /// A chunk or body that could not be understood.
    #[error("could not decode the LLM response: {0}")]
    Decode(String),
    /// The caller cancelled the request.
    #[error("LLM request cancelled")]
    Cancelled,
}

impl ApiError {
    /// What to check, for a failure the endpoint's settings may explain: which URL, model and
    /// key variable were used, and the likely fix. `None` when the settings are not the
    /// question (a cancelled request, a reply too large).
    pub fn explain(&self, settings: &crate::LlmSettings) -> Option<String> {
        let url = settings.base_url.as_deref().unwrap_or("no endpoint");
        let model = match settings.model.as_str() {
            "" => "the server's default model".to_owned(),
            model => format!("model `{model}`"),
        };
        let key = match (&settings.api_key, settings.key_variable.as_deref()) {
            (Some(_), Some(var)) => format!("the key from {var}"),
            (Some(_), None) => "a key".to_owned(),
            (None, Some(var)) => format!("no key ({var} is not set)"),
            (None, None) => "no key".to_owned(),
        };
        let used = format!("sent to {url} with {model} and {key}");
        let fix = match self {
            ApiError::Http {
                status: 401 | 403, ..
            } => {
                "the key was refused: check it, or set the provider's key variable \
                  (`amber-cli doctor` checks it)"
            }
            ApiError::Http { status: 404, .. } => {
                "the endpoint or the model was not found: the base URL usually ends in `/v1`, \
                 and the model must be one the provider serves (`amber-cli doctor` lists them)"
            }
            ApiError::Http {
                status: 400 | 422,
                message,
                ..
            } if message.to_ascii_lowercase().contains("model") => {
                "the provider refused the model: set one it serves (AMBER_MODEL, \
                 `[provider] model`, or `/model`)"
            }
            ApiError::Connect(_) | ApiError::Timeout(_) => {
                "nothing answered there: is the server running, and is the URL right?"
            }
            _ => return None,
        };
        Some(format!("{used}; {fix}"))
    }

    /// Whether a fresh attempt may succeed (the retry loop also requires that nothing was
    /// streamed to the caller yet).
    pub fn is_retryable(&self) -> bool {
        match self {
            ApiError::Connect(_)
            | ApiError::Timeout(_)
            | ApiError::Idle { .. }
            | ApiError::Overloaded { .. }
            | ApiError::Stream { .. }
            | ApiError::Truncated => true,
            ApiError::Http { status, .. } => {
                *status == 429 || *status == 408 || (500..=599).contains(status)
            }
            ApiError::NotConfigured { .. }
            | ApiError::InvalidConfig(_)
            | ApiError::ContextLengthExceeded { .. }
            | ApiError::ReplyTooLarge { .. }
            | ApiError::Decode(_)
            | ApiError::Cancelled => false,
        }
    }

    /// Stable snake_case code for the protocol's `error` event.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::NotConfigured { .. } | ApiError::InvalidConfig(_) => "not_configured",
            ApiError::Connect(_) => "connect",
            ApiError::Timeout(_) | ApiError::Idle { .. } => "timeout",
            ApiError::Http { status: 429, .. } => "rate_limited",
            ApiError::Http { status, .. } if (500..=599).contains(status) => "server_error",
            ApiError::Http { .. } => "http_error",
            ApiError::ContextLengthExceeded { .. } => "context_length_exceeded",
            ApiError::Overloaded { .. } => "overloaded",
            ApiError::Stream { .. } => "stream_error",
            ApiError::Truncated => "stream_truncated",
            ApiError::ReplyTooLarge { .. } => "reply_too_large",
            ApiError::Decode(_) => "decode",
            ApiError::Cancelled => "cancelled",
        }
    }

    /// The server's requested delay before the next attempt, if it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::Http { retry_after, .. } | ApiError::Overloaded { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// Why an attempt is being retried, short and human (the `retrying` event's `reason`):
    /// `429 rate limited`, `HTTP 503`, `connection refused`, `stream idle for 30 s`.
    pub fn retry_reason(&self) -> String {
        match self {
            ApiError::Http { status: 429, .. } => "429 rate limited".into(),
            ApiError::Http { status, .. } => format!("HTTP {status}"),
            ApiError::Idle {
                after,
                streaming: true,
            } => format!("stream idle for {}", human_duration(*after)),
            ApiError::Idle {
                after,
                streaming: false,
            } => format!("no response for {}", human_duration(*after)),
            ApiError::Timeout(_) => "timed out".into(),
            // reqwest reports the OS error deep in its chain: "… (os error 111)".
            ApiError::Connect(text) if text.to_ascii_lowercase().contains("connection refused") => {
                "connection refused".into()
            }
            ApiError::Connect(text) if text.starts_with(CONNECTION_LOST) => {
                "connection lost".into()
            }
            ApiError::Connect(_) => "connection failed".into(),
            ApiError::Overloaded { .. } => "provider overloaded".into(),
            ApiError::Stream { message } => format!("stream error: {message}"),
            ApiError::Truncated => "stream ended early".into(),
            other => other.to_string(),
        }
    }

    /// Classify a non-success HTTP response.
    pub(crate) fn from_status(status: u16, body: &str, retry_after: Option<Duration>) -> Self {
        let message = error_message(body).unwrap_or_else(|| {
            if body.trim().is_empty() {
                "(empty body)".to_owned()
            } else {
                body.trim().to_owned()
            }
        });
        if matches!(status, 400 | 413 | 422)
            && (mentions_context_length(body) || mentions_context_length(&message))
        {
            return ApiError::ContextLengthExceeded { message };
        }
        ApiError::Http {
            status,
            message,
            retry_after,
        }
    }

    /// Classify an error object found inside a 200 stream.
    pub(crate) fn from_stream_error(message: String, raw: &str) -> Self {
        if mentions_context_length(raw) || mentions_context_length(&message) {
            ApiError::ContextLengthExceeded { message }
        } else {
            ApiError::Stream { message }
        }
    }
}

/// `no data from the LLM endpoint for 30s` / `no response from the LLM endpoint within 30s`.
fn silence(streaming: bool, after: Duration) -> String {
    if streaming {
        format!("no data from the LLM endpoint for {after:?}")
    } else {
        format!("no response from the LLM endpoint within {after:?}")
    }
}

/// `30 s`, `1.5 s`, `250 ms`: a delay as people read it.
pub(crate) fn human_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{} ms", d.as_millis());
    }
    let tenths = (d.as_millis() + 50) / 100;
    if tenths.is_multiple_of(10) {
        format!("{} s", tenths / 10)
    } else {
        format!("{}.{} s", tenths / 10, tenths % 10)
    }
}

/// True when `text` carries one of the provider phrases for an over-long prompt.
pub(crate) fn mentions_context_length(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    CONTEXT_LENGTH_MARKERS.iter().any(|m| lower.contains(m))
}

/// At most the first 200 characters of a payload, for an error message (`…` when cut).
pub(crate) fn clip(s: &str) -> String {
    const MAX: usize = 200;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// Pull a human message out of an error body: `{"error": {"message": ..}}`,
/// `{"error": ".."}`, `{"message": ..}` or `{"detail": ..}`.
pub(crate) fn error_message(body: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    error_message_from_value(&value)
}

/// Same as [`error_message`], for an already parsed value.
pub(crate) fn error_message_from_value(value: &serde_json::Value) -> Option<String> {
    let inner = value.get("error").unwrap_or(value);
    if let Some(s) = inner.as_str() {
        return Some(s.to_owned());
    }
    let msg = inner
        .get("message")
        .or_else(|| inner.get("detail"))
        .and_then(|m| m.as_str())?;
    let code = inner
        .get("code")
        .and_then(|c| c.as_str())
        .or_else(|| inner.get("type").and_then(|t| t.as_str()));
    Some(match code {
        Some(code) if !msg.contains(code) => format!("{msg} ({code})"),
        _ => msg.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classification() {
        let e = ApiError::from_status(429, "{}", Some(Duration::from_secs(2)));
        assert_eq!(e.code(), "rate_limited");
        assert!(e.is_retryable());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));

        let e = ApiError::from_status(503, "upstream down", None);
        assert_eq!(e.code(), "server_error");
        assert!(e.is_retryable());
        assert!(e.to_string().contains("upstream down"));

        let e = ApiError::from_status(
            401,
            r#"{"error":{"message":"bad key","type":"auth"}}"#,
            None,
        );
        assert_eq!(e.code(), "http_error");
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("bad key (auth)"));
    }

    #[test]
    fn context_length_from_400() {
        for body in [
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#,
            r#"{"error":"too many tokens in prompt"}"#,
            "the request exceeds the available context size, try increasing it",
        ] {
            let e = ApiError::from_status(400, body, None);
            assert_eq!(e.code(), "context_length_exceeded", "{body}");
            assert!(!e.is_retryable());
        }
        let e = ApiError::from_status(400, r#"{"error":{"message":"bad role"}}"#, None);
        assert_eq!(e.code(), "http_error");
    }

    #[test]
    fn retry_reasons_are_short_and_human() {
        let http = |status| ApiError::Http {
            status,
            message: "whatever the body said".into(),
            retry_after: None,
        };
        let cases: Vec<(ApiError, &str)> = vec![
            (http(429), "429 rate limited"),
            (http(503), "HTTP 503"),
            (http(500), "HTTP 500"),
            (
                ApiError::Connect(
                    "error sending request: client error (Connect): tcp connect error: \
                     Connection refused (os error 111)"
                        .into(),
                ),
                "connection refused",
            ),
            (
                ApiError::Connect(format!("{CONNECTION_LOST}: reset")),
                "connection lost",
            ),
            (ApiError::Connect("dns error".into()), "connection failed"),
            (
                ApiError::Idle {
                    after: Duration::from_secs(30),
                    streaming: true,
                },
                "stream idle for 30 s",
            ),
            (
                ApiError::Idle {
                    after: Duration::from_millis(1500),
                    streaming: false,
                },
                "no response for 1.5 s",
            ),
            (ApiError::Timeout("connect".into()), "timed out"),
            (
                ApiError::Stream {
                    message: "overloaded".into(),
                },
                "stream error: overloaded",
            ),
            (ApiError::Truncated, "stream ended early"),
            (
                ApiError::Overloaded {
                    message: "Overloaded".into(),
                    retry_after: None,
                },
                "provider overloaded",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.retry_reason(), want, "{err:?}");
        }
    }

    #[test]
    fn durations_read_as_people_say_them() {
        for (d, want) in [
            (Duration::from_millis(250), "250 ms"),
            (Duration::from_secs(1), "1 s"),
            (Duration::from_millis(1500), "1.5 s"),
            (Duration::from_millis(7960), "8 s"),
            (Duration::from_secs(30), "30 s"),
        ] {
            assert_eq!(human_duration(d), want);
        }
    }

    #[test]
    fn idle_timeouts_are_retryable_timeouts() {
        let e = ApiError::Idle {
            after: Duration::from_secs(30),
            streaming: true,
        };
        assert!(e.is_retryable());
        assert_eq!(e.code(), "timeout");
        assert_eq!(
            e.to_string(),
            "LLM endpoint timed out: no data from the LLM endpoint for 30s"
        );
    }

    #[test]
    fn not_configured_says_how() {
        let e = ApiError::NotConfigured {
            missing: "base_url".into(),
        };
        let text = e.to_string();
        assert!(text.contains("AMBER_BASE_URL"));
        assert!(text.contains("[provider]"));
        assert_eq!(e.code(), "not_configured");
    }
}
