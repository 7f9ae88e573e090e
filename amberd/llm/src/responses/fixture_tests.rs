//! Recorded Responses API streams (`fixtures/responses/*.sse`, written from the published
//! event shapes) through the client's own decode path, each split many ways (mid-line,
//! mid-UTF-8) and required to decode identically at every split.

use amber_proto::Usage;
use serde_json::Value;

use super::ResponsesDialect;
use crate::fixture_tests::{Outcome, call, decode_with, text_of};
use crate::{ApiError, StreamEvent};

async fn decode(text: &str) -> Outcome {
    decode_with(&ResponsesDialect, text).await
}

fn reasoning_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ReasoningDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn text_streams_and_completes_with_usage() {
    let (r, events) = decode(include_str!("../../fixtures/responses/text.sse")).await;
    let r = r.unwrap();
    // The `.done` events repeat the text: it is not doubled.
    assert_eq!(r.text, "Hello, wörld 🌍\n\"quoted\"");
    assert_eq!(text_of(&events), r.text);
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert!(r.tool_calls.is_empty());
    assert!(r.reasoning_items.is_empty());
    assert_eq!(
        r.usage,
        Some(Usage {
            cost_usd: None,
            prompt_tokens: 37,
            completion_tokens: 9,
            cached_tokens: 0,
            cache_write_tokens: 0,
            total_tokens: 46,
        })
    );
}

#[tokio::test]
async fn several_calls_interleaved_with_arguments_split_anywhere() {
    let (r, events) = decode(include_str!("../../fixtures/responses/parallel_calls.sse")).await;
    let r = r.unwrap();
    assert_eq!(text_of(&events), "Three things at once.");
    assert_eq!(
        r.tool_calls,
        vec![
            // Split mid-key, mid-escape (`\` | `n`), around multibyte characters.
            call(
                "call_write",
                "write",
                r#"{"path":"src/主.rs","content":"fn main() {}\n// 🦀 ünïcode\u00e9"}"#
            ),
            // Interleaved with the first; escaped quotes and backslashes split.
            call("call_bash", "bash", r#"{"command":"echo \"hi\" \\ done"}"#),
            // No argument pieces at all: the done item carries them.
            call("call_read", "read", r#"{"path":"README.md"}"#),
        ]
    );
    for c in &r.tool_calls {
        serde_json::from_str::<Value>(&c.arguments).unwrap();
    }
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.usage.map(|u| u.total_tokens), Some(908));
}

#[tokio::test]
async fn reasoning_summary_streams_and_the_encrypted_item_is_kept() {
    let (r, events) = decode(include_str!("../../fixtures/responses/reasoning.sse")).await;
    let r = r.unwrap();
    assert_eq!(r.reasoning, "**Reading the task** first.\n\nThen answer.");
    assert_eq!(reasoning_of(&events), r.reasoning);
    assert_eq!(r.text, "Answer: 42");
    assert_eq!(r.reasoning_items.len(), 1);
    let item = &r.reasoning_items[0];
    assert_eq!(item.format, "openai-responses");
    let data: Value = serde_json::from_str(&item.data).unwrap();
    assert_eq!(data["type"], "reasoning");
    assert_eq!(data["id"], "rs_think");
    assert_eq!(
        data["encrypted_content"],
        "gAAAAABoX-3nc2VjcmV0LXJlYXNvbmluZy1ibG9i=="
    );
    assert_eq!(data["summary"][1]["text"], "Then answer.");
    // Cached input tokens are reported as such.
    let usage = r.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.cached_tokens), (4096, 3840));
    assert_eq!(usage.total_tokens, 4306);
}

#[tokio::test]
async fn an_error_event_mid_stream_fails_after_the_text_so_far() {
    let (r, events) = decode(include_str!(
        "../../fixtures/responses/error_mid_stream.sse"
    ))
    .await;
    let err = r.unwrap_err();
    assert!(matches!(err, ApiError::Stream { .. }), "{err:?}");
    assert!(err.to_string().contains("server had an error"), "{err}");
    assert!(err.is_retryable());
    assert_eq!(text_of(&events), "partial ");
}

#[tokio::test]
async fn a_failed_response_over_the_window_is_context_length_exceeded() {
    let (r, _) = decode(include_str!("../../fixtures/responses/failed_context.sse")).await;
    let err = r.unwrap_err();
    assert!(
        matches!(err, ApiError::ContextLengthExceeded { .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn a_failed_response_rate_limited_is_a_retryable_429() {
    let (r, _) = decode(include_str!("../../fixtures/responses/rate_limited.sse")).await;
    let err = r.unwrap_err();
    assert_eq!(err.code(), "rate_limited");
    assert!(err.is_retryable());
    assert!(err.to_string().contains("Rate limit reached"), "{err}");
}

#[tokio::test]
async fn a_stream_cut_before_completed_is_truncated() {
    let (r, events) = decode(include_str!("../../fixtures/responses/cut.sse")).await;
    assert!(matches!(r, Err(ApiError::Truncated)), "{r:?}");
    assert_eq!(text_of(&events), "partial answer");
}

#[tokio::test]
async fn incomplete_at_max_output_tokens_finishes_with_length() {
    let (r, _) = decode(include_str!("../../fixtures/responses/incomplete.sse")).await;
    let r = r.unwrap();
    assert_eq!(r.text, "The list goes on and");
    assert_eq!(r.finish_reason.as_deref(), Some("length"));
    assert_eq!(r.usage.map(|u| u.completion_tokens), Some(16));
}
