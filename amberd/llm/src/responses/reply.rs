//! What a Responses API reply means, streamed or whole: its usage, its finish reason, the
//! reasoning item kept for the next request, the typed error of a failed response, and the
//! whole (`stream: false`) response object read into one `ChunkDelta`.

use amber_proto::{ReasoningItem, Usage};
use serde_json::Value;

use super::REASONING_FORMAT;
use crate::accumulate::ToolCallDelta;
use crate::decode::ChunkDelta;
use crate::error::{ApiError, clip, error_message_from_value};

/// `usage` of a response: input, output and cached input tokens.
pub(super) fn usage(v: &Value) -> Option<Usage> {
    if !v.is_object() {
        return None;
    }
    let n = |v: &Value, key: &str| v.get(key).and_then(Value::as_u64).unwrap_or(0);
    let prompt_tokens = n(v, "input_tokens");
    let completion_tokens = n(v, "output_tokens");
    let cached_tokens = v
        .get("input_tokens_details")
        .map_or(0, |d| n(d, "cached_tokens"));
    let total = n(v, "total_tokens");
    Some(Usage {
        cost_usd: None,
        prompt_tokens,
        completion_tokens,
        cached_tokens,
        cache_write_tokens: 0,
        total_tokens: if total == 0 {
            prompt_tokens.saturating_add(completion_tokens)
        } else {
            total
        },
    })
}

/// The finish reason of a finished response: `length` when it stopped at
/// `max_output_tokens`, `content_filter` when filtered, else `tool_calls` when it made
/// calls and `stop` when it did not.
pub(super) fn finish_reason(response: &Value, made_calls: bool) -> String {
    if response.get("status").and_then(Value::as_str) == Some("incomplete") {
        let reason = response
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str);
        return match reason {
            Some("content_filter") => "content_filter".to_owned(),
            // `max_output_tokens`, and any reason a newer API adds: the reply is cut short.
            _ => "length".to_owned(),
        };
    }
    if made_calls { "tool_calls" } else { "stop" }.to_owned()
}

/// A `reasoning` output item, kept verbatim (encrypted content included) so the next
/// request can send it back; `None` without `encrypted_content`, which a stateless
/// (`store: false`) request cannot refer to.
pub(super) fn reasoning_item(item: &Value) -> Option<ReasoningItem> {
    item.get("encrypted_content")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())?;
    Some(ReasoningItem {
        format: REASONING_FORMAT.to_owned(),
        data: item.to_string(),
    })
}

/// The summary (or, failing that, the reasoning text) of a `reasoning` item.
pub(super) fn reasoning_text(item: &Value) -> Option<String> {
    let parts = |key: &str| -> String {
        item.get(key)
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n\n")
            })
            .unwrap_or_default()
    };
    let summary = parts("summary");
    let text = if summary.is_empty() {
        parts("content")
    } else {
        summary
    };
    (!text.is_empty()).then_some(text)
}

/// The text of a `message` output item's parts of `kind` (`output_text` keeps it in
/// `text`, `refusal` in `refusal`).
fn message_parts(item: &Value, kind: &str, key: &str) -> Option<String> {
    let text: String = item
        .get("content")
        .and_then(Value::as_array)?
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some(kind))
        .filter_map(|p| p.get(key).and_then(Value::as_str))
        .collect();
    (!text.is_empty()).then_some(text)
}

/// The answer text of a `message` output item.
pub(super) fn message_text(item: &Value) -> Option<String> {
    message_parts(item, "output_text", "text")
}

/// What a `message` output item says instead of an answer (its `refusal` parts).
pub(super) fn message_refusal(item: &Value) -> Option<String> {
    message_parts(item, "refusal", "refusal")
}

/// A `function_call` output item as one whole tool-call fragment.
pub(super) fn function_call(item: &Value, index: usize) -> ToolCallDelta {
    let s = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_owned);
    ToolCallDelta {
        index: Some(index),
        id: s("call_id").or_else(|| s("id")),
        name: s("name"),
        arguments: s("arguments"),
    }
}

/// The error object of an `error` event or a failed response → typed error. Context
/// overflow becomes `ContextLengthExceeded` (so the agent compacts), a rate limit the 429
/// it stands for, anything else a retryable stream error.
pub(super) fn failure(error: Option<&Value>, raw: &str) -> ApiError {
    let message = error
        .and_then(error_message_from_value)
        .unwrap_or_else(|| clip(raw));
    let code = error
        .and_then(|e| e.get("code").or_else(|| e.get("type")))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if matches!(code, "rate_limit_exceeded" | "rate_limit_error") {
        return ApiError::Http {
            status: 429,
            message,
            retry_after: None,
        };
    }
    ApiError::from_stream_error(message, raw)
}

/// A whole response object (`stream: false`, or a server that ignored `stream`).
pub(super) fn decode_response(body: &str) -> Result<ChunkDelta, ApiError> {
    let body = body.trim();
    let response: Value = serde_json::from_str(body)
        .map_err(|e| ApiError::Decode(format!("{e} in response {}", clip(body))))?;
    if response.get("status").and_then(Value::as_str) == Some("failed")
        || (response.get("error").is_some_and(|e| !e.is_null()) && response.get("output").is_none())
    {
        return Err(failure(response.get("error"), body));
    }
    let mut out = ChunkDelta::default();
    let mut text = String::new();
    let mut refusal = String::new();
    let mut reasoning: Vec<String> = Vec::new();
    for item in response
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                text.extend(message_text(item));
                refusal.extend(message_refusal(item));
            }
            Some("reasoning") => {
                reasoning.extend(reasoning_text(item));
                out.reasoning_items.extend(reasoning_item(item));
            }
            Some("function_call") => {
                let index = out.tool_calls.len();
                out.tool_calls.push(function_call(item, index));
            }
            _ => {}
        }
    }
    out.text = (!text.is_empty()).then_some(text);
    out.refusal = (!refusal.is_empty()).then_some(refusal);
    out.reasoning = (!reasoning.is_empty()).then(|| reasoning.join("\n\n"));
    out.usage = response.get("usage").and_then(usage);
    out.finish_reason = Some(finish_reason(&response, !out.tool_calls.is_empty()));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_whole_response_reads_text_reasoning_calls_and_usage() {
        let body = json!({
            "id": "resp_1", "object": "response", "status": "completed",
            "output": [
                {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc",
                 "summary": [{"type": "summary_text", "text": "Think."}]},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Hi"}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "read",
                 "arguments": "{\"path\":\"a\"}"},
            ],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                      "input_tokens_details": {"cached_tokens": 4}},
        });
        let d = decode_response(&body.to_string()).unwrap();
        assert_eq!(d.text.as_deref(), Some("Hi"));
        assert_eq!(d.reasoning.as_deref(), Some("Think."));
        assert_eq!(d.tool_calls[0].id.as_deref(), Some("call_a"));
        assert_eq!(d.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(d.usage.unwrap().cached_tokens, 4);
        let item: Value = serde_json::from_str(&d.reasoning_items[0].data).unwrap();
        assert_eq!(item["encrypted_content"], "enc");
    }

    #[test]
    fn a_failed_whole_response_is_an_error() {
        let body = json!({"status": "failed", "error": {"code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model."}});
        let err = decode_response(&body.to_string()).unwrap_err();
        assert_eq!(err.code(), "context_length_exceeded");
    }

    #[test]
    fn failures_are_typed_by_code() {
        let rate = json!({"code": "rate_limit_exceeded", "message": "slow down"});
        let e = failure(Some(&rate), &rate.to_string());
        assert_eq!(e.code(), "rate_limited");
        assert!(e.is_retryable());
        let server = json!({"code": "server_error", "message": "oops"});
        let e = failure(Some(&server), &server.to_string());
        assert_eq!(e.code(), "stream_error");
        assert!(e.is_retryable());
    }

    #[test]
    fn incomplete_at_max_output_tokens_is_length() {
        let r = json!({"status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"}});
        assert_eq!(finish_reason(&r, true), "length");
        assert_eq!(
            finish_reason(&json!({"status": "completed"}), true),
            "tool_calls"
        );
        assert_eq!(
            finish_reason(&json!({"status": "completed"}), false),
            "stop"
        );
    }
}
