//! Recorded SSE fixtures (`fixtures/*.sse`) fed through the client's own decode path
//! (`read_sse`), each one split into odd-sized byte pieces — mid-line and mid-UTF-8 —
//! and required to decode identically at every split.

use std::time::Duration;

use amber_proto::{ToolCall, Usage};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::limits::ReplyLimits;
use super::openai::OpenAiDialect;
use super::sse::read_sse;
use super::{ApiError, ChatResponse, Dialect, StreamEvent};

pub(crate) type Outcome = (Result<ChatResponse, ApiError>, Vec<StreamEvent>);

/// Cut `bytes` into pieces whose sizes cycle through `sizes`.
fn pieces(bytes: &[u8], sizes: &[usize]) -> Vec<Result<Vec<u8>, std::io::Error>> {
    let mut out = Vec::new();
    let (mut at, mut k) = (0, 0);
    while at < bytes.len() {
        let n = sizes[k % sizes.len()].min(bytes.len() - at);
        out.push(Ok(bytes[at..at + n].to_vec()));
        at += n;
        k += 1;
    }
    out
}

/// `body` through `read_sse` with this idle timeout: the outcome and every event.
async fn read_body<S, B>(body: S, dialect: &dyn Dialect, idle: Duration) -> Outcome
where
    S: futures::Stream<Item = Result<B, std::io::Error>> + Send,
    B: AsRef<[u8]>,
{
    let mut events = Vec::new();
    let mut sink = |e: StreamEvent| events.push(e);
    let limits = ReplyLimits::default();
    let r = read_sse(
        body,
        dialect,
        idle,
        limits,
        &CancellationToken::new(),
        &mut sink,
    )
    .await;
    (r, events)
}

async fn run_split(dialect: &dyn Dialect, text: &str, sizes: &[usize]) -> Outcome {
    let body = futures::stream::iter(pieces(text.as_bytes(), sizes));
    read_body(body, dialect, Duration::from_secs(5)).await
}

async fn decode(text: &str) -> Outcome {
    decode_with(&OpenAiDialect, text).await
}

/// Decode `text` whole and split many ways; every way must agree. Returns the outcome.
pub(crate) async fn decode_with(dialect: &dyn Dialect, text: &str) -> Outcome {
    let whole = run_split(dialect, text, &[usize::MAX]).await;
    let reference = format!("{whole:?}");
    let splits: &[&[usize]] = &[
        &[1],
        &[2],
        &[3],
        &[5, 1, 7],
        &[13],
        &[64, 3],
        &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
    ];
    for sizes in splits {
        let got = run_split(dialect, text, sizes).await;
        assert_eq!(format!("{got:?}"), reference, "split sizes {sizes:?}");
    }
    whole
}

pub(crate) fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

pub(crate) fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

#[tokio::test]
async fn text_basic() {
    let (r, events) = decode(include_str!("../fixtures/text_basic.sse")).await;
    let r = r.unwrap();
    assert_eq!(r.text, "Hello, wörld 🌍");
    assert_eq!(text_of(&events), r.text);
    // The body was in hand at once: one burst, one delta.
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        r.usage,
        Some(Usage {
            cache_write_tokens: 0,
            cost_usd: None,
            prompt_tokens: 12,
            completion_tokens: 4,
            cached_tokens: 0,
            total_tokens: 16
        })
    );
    assert!(r.tool_calls.is_empty());
}

/// A body that arrives one SSE event at a time, the reader waiting before each.
async fn decode_paced(text: &str) -> Outcome {
    let pieces: Vec<Result<String, std::io::Error>> = text
        .split_inclusive("\n\n")
        .map(|p| Ok(p.to_owned()))
        .collect();
    let body = futures::stream::iter(pieces).then(|piece| async move {
        tokio::task::yield_now().await;
        piece
    });
    read_body(body, &OpenAiDialect, Duration::from_secs(5)).await
}

#[tokio::test]
async fn chunks_that_arrive_apart_are_forwarded_apart() {
    let (r, events) = decode_paced(include_str!("../fixtures/text_basic.sse")).await;
    assert_eq!(r.unwrap().text, "Hello, wörld 🌍");
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.len(), 3, "empty content is not emitted: {deltas:?}");
    assert_eq!(deltas.concat(), "Hello, wörld 🌍");
}

#[tokio::test]
async fn keepalive_comments() {
    let (r, events) = decode(include_str!("../fixtures/keepalive_comments.sse")).await;
    assert_eq!(r.unwrap().text, "AB");
    assert_eq!(text_of(&events), "AB");
}

#[tokio::test]
async fn tool_call_missing_index() {
    let (r, _) = decode(include_str!("../fixtures/tool_call_missing_index.sse")).await;
    let r = r.unwrap();
    assert_eq!(
        r.tool_calls,
        vec![call("call_abc", "read_file", r#"{"path":"README.md"}"#)]
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.text, "");
}

#[tokio::test]
async fn tool_call_whole_chunk() {
    let (r, events) = decode(include_str!("../fixtures/tool_call_whole_chunk.sse")).await;
    let r = r.unwrap();
    assert!(events.is_empty());
    assert_eq!(
        r.tool_calls,
        vec![call("call_whole", "bash", r#"{"command":"ls -la"}"#)]
    );
    assert_eq!(r.usage.map(|u| u.total_tokens), Some(59));
}

#[tokio::test]
async fn tool_call_split_args() {
    let (r, _) = decode(include_str!("../fixtures/tool_call_split_args.sse")).await;
    let expected = include_str!("../fixtures/tool_call_split_args.expected.json").trim_end();
    let r = r.unwrap();
    assert_eq!(
        r.tool_calls,
        vec![call("call_split", "write_file", expected)]
    );
    let parsed: serde_json::Value = serde_json::from_str(&r.tool_calls[0].arguments).unwrap();
    assert_eq!(parsed["path"], "src/主.rs");
}

#[tokio::test]
async fn parallel_tool_calls() {
    let (r, _) = decode(include_str!("../fixtures/parallel_tool_calls.sse")).await;
    assert_eq!(
        r.unwrap().tool_calls,
        vec![
            call("call_0a", "read_file", r#"{"path":"a.rs"}"#),
            call("call_1b", "search", r#"{"q":"fn main"}"#),
            call("call_2c", "bash", r#"{"command":"pwd"}"#),
        ]
    );
}

#[tokio::test]
async fn reasoning_fields() {
    let (r, events) = decode(include_str!("../fixtures/reasoning.sse")).await;
    let r = r.unwrap();
    assert_eq!(r.reasoning, "Let me think. Still thinking.");
    assert_eq!(r.text, "Answer: 42");
    // One burst: the reasoning chunks merge, in order, before the text.
    assert_eq!(
        events,
        vec![
            StreamEvent::ReasoningDelta("Let me think. Still thinking.".into()),
            StreamEvent::TextDelta("Answer: 42".into()),
        ]
    );
    let (_, paced) = decode_paced(include_str!("../fixtures/reasoning.sse")).await;
    assert_eq!(
        paced,
        vec![
            StreamEvent::ReasoningDelta("Let me ".into()),
            StreamEvent::ReasoningDelta("think.".into()),
            StreamEvent::ReasoningDelta(" Still thinking.".into()),
            StreamEvent::TextDelta("Answer: 42".into()),
        ]
    );
}

#[tokio::test]
async fn usage_only_final_chunk_with_cached_tokens() {
    let (r, _) = decode(include_str!("../fixtures/usage_only_final.sse")).await;
    assert_eq!(
        r.unwrap().usage,
        Some(Usage {
            cache_write_tokens: 0,
            cost_usd: None,
            prompt_tokens: 1000,
            completion_tokens: 20,
            cached_tokens: 768,
            total_tokens: 1020
        })
    );
}

#[tokio::test]
async fn error_object_in_200_stream() {
    let (r, events) = decode(include_str!("../fixtures/error_in_stream.sse")).await;
    let err = r.unwrap_err();
    assert!(matches!(err, ApiError::Stream { .. }), "{err:?}");
    assert!(err.to_string().contains("overloaded"));
    assert_eq!(err.code(), "stream_error");
    assert!(events.is_empty());
}

#[tokio::test]
async fn context_length_error_in_stream() {
    let (r, _) = decode(include_str!("../fixtures/context_length_in_stream.sse")).await;
    assert_eq!(r.unwrap_err().code(), "context_length_exceeded");
}

#[tokio::test]
async fn truncated_mid_event() {
    let (r, events) = decode(include_str!("../fixtures/truncated_mid_event.sse")).await;
    assert!(matches!(r, Err(ApiError::Truncated)), "{r:?}");
    assert_eq!(text_of(&events), "partial");
}

#[tokio::test]
async fn truncated_at_event_boundary() {
    let (r, events) = decode(include_str!("../fixtures/truncated_at_boundary.sse")).await;
    let err = r.unwrap_err();
    assert_eq!(err.code(), "stream_truncated");
    assert_eq!(text_of(&events), "partial answer");
}

#[tokio::test]
async fn finish_reason_without_done_is_fine() {
    let (r, _) = decode(include_str!("../fixtures/finish_without_done.sse")).await;
    let r = r.unwrap();
    assert_eq!(r.text, "done");
    assert_eq!(r.usage.map(|u| u.total_tokens), Some(6));
}

#[tokio::test]
async fn missing_tool_call_ids_are_synthesised() {
    let (r, _) = decode(include_str!("../fixtures/missing_tool_call_id.sse")).await;
    assert_eq!(
        r.unwrap().tool_calls,
        vec![
            call("call_0", "list_dir", "{}"),
            call("call_1", "read_file", r#"{"path":"x"}"#),
        ]
    );
}

#[tokio::test]
async fn crlf_and_missing_space_and_final_blank_line() {
    let (r, _) = decode(include_str!("../fixtures/crlf_no_space.sse")).await;
    let r = r.unwrap();
    assert_eq!(r.text, "crlf ok");
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn transport_error_before_finish_is_connect_after_finish_is_ignored() {
    let text = include_str!("../fixtures/truncated_at_boundary.sse");
    let items = vec![
        Ok(text.as_bytes().to_vec()),
        Err(std::io::Error::other("connection reset")),
    ];
    let (r, _) = read_body(
        futures::stream::iter(items),
        &OpenAiDialect,
        Duration::from_secs(5),
    )
    .await;
    let err = r.unwrap_err();
    assert_eq!(err.code(), "connect");
    assert!(err.to_string().contains("connection reset"));

    let text = include_str!("../fixtures/finish_without_done.sse");
    let items = vec![
        Ok(text.as_bytes().to_vec()),
        Err(std::io::Error::other("connection reset")),
    ];
    let (r, _) = read_body(
        futures::stream::iter(items),
        &OpenAiDialect,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(r.unwrap().text, "done");
}

#[tokio::test]
async fn idle_timeout_between_chunks() {
    let first = include_str!("../fixtures/truncated_at_boundary.sse")
        .as_bytes()
        .to_vec();
    let body = futures::stream::iter(vec![Ok::<_, std::io::Error>(first)])
        .chain(futures::stream::pending());
    let (r, _) = read_body(body, &OpenAiDialect, Duration::from_millis(50)).await;
    assert_eq!(r.unwrap_err().code(), "timeout");
}

#[tokio::test]
async fn idle_timeout_counts_from_the_last_chunk_not_the_start() {
    // Five chunks 30 ms apart: 150 ms in all, never 50 ms without data.
    let text = include_str!("../fixtures/text_basic.sse");
    let pieces: Vec<String> = text.split_inclusive("\n\n").map(str::to_owned).collect();
    let body = futures::stream::iter(pieces).then(|piece| async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok::<_, std::io::Error>(piece)
    });
    let (r, events) = read_body(body, &OpenAiDialect, Duration::from_millis(50)).await;
    assert_eq!(r.unwrap().text, "Hello, wörld 🌍");
    assert_eq!(events.len(), 3, "a slow stream is forwarded chunk by chunk");
}

#[tokio::test]
async fn cancel_while_waiting_for_data() {
    let body = futures::stream::pending::<Result<Vec<u8>, std::io::Error>>();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        trigger.cancel();
    });
    let mut sink = |_: StreamEvent| {};
    let r = read_sse(
        body,
        &OpenAiDialect,
        Duration::from_secs(60),
        ReplyLimits::default(),
        &cancel,
        &mut sink,
    )
    .await;
    assert!(matches!(r, Err(ApiError::Cancelled)));
}
