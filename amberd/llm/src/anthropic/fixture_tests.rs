//! Recorded Messages API streams (`fixtures/anthropic/*.sse`, written from the published
//! event format) through the client's own read loop, whole and split at every odd size —
//! mid-line, mid-escape, mid-UTF-8 — each split required to decode the same.

use amber_proto::{ReasoningItem, Usage};
use serde_json::{Value, json};

use super::AnthropicDialect;
use crate::fixture_tests::{Outcome, call, decode_with, text_of};
use crate::{ApiError, Dialect, StreamEvent};

async fn decode(text: &str) -> Outcome {
    decode_with(&AnthropicDialect, text).await
}

fn usage(prompt: u64, completion: u64, cached: u64, written: u64) -> Usage {
    Usage {
        cost_usd: None,
        prompt_tokens: prompt,
        completion_tokens: completion,
        cached_tokens: cached,
        cache_write_tokens: written,
        total_tokens: prompt + completion,
    }
}

#[tokio::test]
async fn text_with_multibyte_and_a_ping() {
    let (r, events) = decode(include_str!("../../fixtures/anthropic/text.sse")).await;
    let r = r.unwrap();
    assert_eq!(r.text, "Hello, wörld 🌍");
    assert_eq!(text_of(&events), r.text);
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    // Input from `message_start`, output from `message_delta`.
    assert_eq!(r.usage, Some(usage(25, 12, 0, 0)));
    assert!(r.tool_calls.is_empty() && r.reasoning_items.is_empty());
}

#[tokio::test]
async fn several_tool_calls_with_arguments_split_anywhere() {
    let (r, events) = decode(include_str!("../../fixtures/anthropic/tool_calls.sse")).await;
    let r = r.unwrap();
    assert_eq!(text_of(&events), "Let me look.");
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    let bash_args = concat!(
        r#"{"command": "printf \"a\"#,
        r"\\b\",
        r#""\\n\u00"#,
        r#"e9\""}"#
    );
    assert_eq!(
        r.tool_calls,
        vec![
            call("toolu_01A", "read", r#"{"path": "src/主.rs"}"#),
            call("toolu_01B", "bash", bash_args),
            // A call whose input never came has empty arguments: `{}`.
            call("toolu_01C", "todowrite", "{}"),
        ]
    );
    let parsed: Value = serde_json::from_str(&r.tool_calls[1].arguments).unwrap();
    assert!(parsed["command"].as_str().unwrap().ends_with("\\né\""));
    // A cache read counts in the prompt, as OpenAI counts it.
    assert_eq!(r.usage, Some(usage(6000, 87, 4800, 0)));
}

#[tokio::test]
async fn thinking_streams_as_reasoning_and_completes_into_items_with_the_signature() {
    let (r, events) = decode(include_str!("../../fixtures/anthropic/thinking.sse")).await;
    let r = r.unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::ReasoningDelta("The user wants a sum. 2 + 2 = 4.".into()),
            StreamEvent::TextDelta("The answer is 4.".into()),
        ]
    );
    assert_eq!(r.reasoning, "The user wants a sum. 2 + 2 = 4.");
    assert_eq!(r.reasoning_items.len(), 2);
    let thinking: Value = serde_json::from_str(&r.reasoning_items[0].data).unwrap();
    assert_eq!(
        thinking,
        json!({"type": "thinking", "thinking": "The user wants a sum. 2 + 2 = 4.",
               "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"})
    );
    assert_eq!(
        r.reasoning_items[1],
        ReasoningItem {
            format: "anthropic".into(),
            data: r#"{"data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP","type":"redacted_thinking"}"#.into(),
        }
    );
    assert!(r.reasoning_items.iter().all(|i| i.format == "anthropic"));
    // A cache write counts in the prompt and is reported on its own.
    assert_eq!(r.usage, Some(usage(2078, 41, 0, 2048)));
}

#[tokio::test]
async fn an_overloaded_error_event_mid_stream_is_a_retryable_overload() {
    let (r, events) = decode(include_str!("../../fixtures/anthropic/overloaded.sse")).await;
    let err = r.unwrap_err();
    assert!(matches!(err, ApiError::Overloaded { .. }), "{err:?}");
    assert!(err.is_retryable());
    assert_eq!(err.code(), "overloaded");
    // What came before the error was forwarded (so the client will not retry this one).
    assert_eq!(text_of(&events), "Partial");

    let (r, events) = decode(include_str!(
        "../../fixtures/anthropic/overloaded_first.sse"
    ))
    .await;
    assert!(matches!(r, Err(ApiError::Overloaded { .. })), "{r:?}");
    assert!(events.is_empty());
}

#[tokio::test]
async fn a_prompt_too_long_error_event_is_context_overflow() {
    let (r, _) = decode(include_str!("../../fixtures/anthropic/prompt_too_long.sse")).await;
    let err = r.unwrap_err();
    assert_eq!(err.code(), "context_length_exceeded");
    assert!(err.to_string().contains("210000 tokens > 200000"));
}

#[tokio::test]
async fn a_stream_cut_before_message_stop_is_truncated() {
    let (r, events) = decode(include_str!("../../fixtures/anthropic/cut.sse")).await;
    assert!(matches!(r, Err(ApiError::Truncated)), "{r:?}");
    assert_eq!(text_of(&events), "partial answer");
}

#[tokio::test]
async fn unknown_events_and_blocks_are_skipped_and_max_tokens_is_length() {
    let (r, _) = decode(include_str!(
        "../../fixtures/anthropic/max_tokens_unknown_events.sse"
    ))
    .await;
    let r = r.unwrap();
    assert_eq!(r.text, "Truncated");
    assert_eq!(r.finish_reason.as_deref(), Some("length"));
    assert!(r.tool_calls.is_empty(), "{:?}", r.tool_calls);
}

#[test]
fn a_whole_message_decodes_like_its_stream() {
    let body = json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "Plan.", "signature": "sig"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {"path": "a"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 90,
                  "cache_creation_input_tokens": 0},
    });
    let d = AnthropicDialect.decode_response(&body.to_string()).unwrap();
    assert_eq!(d.text.as_deref(), Some("Reading."));
    assert_eq!(d.reasoning.as_deref(), Some("Plan."));
    assert_eq!(d.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(d.usage, Some(usage(100, 5, 90, 0)));
    assert_eq!(d.tool_calls.len(), 1);
    assert_eq!(
        d.tool_calls[0].arguments.as_deref(),
        Some(r#"{"path":"a"}"#)
    );
    let item: Value = serde_json::from_str(&d.reasoning_items[0].data).unwrap();
    assert_eq!(item["signature"], "sig");

    let error = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let err = AnthropicDialect.decode_response(error).unwrap_err();
    assert_eq!(err.code(), "overloaded");
}
