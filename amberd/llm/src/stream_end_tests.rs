//! Where a reply ends, for each of the three dialects: at its final event, whatever the body
//! does after it (a proxy may hold the connection open), and at its size bound — an endless
//! stream of text, reasoning or tool-call arguments, one delta larger than any event may be,
//! and a line that never ends — having read about the bound and no more.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::anthropic::AnthropicDialect;
use super::limits::{Oversized, ReplyLimits};
use super::openai::OpenAiDialect;
use super::responses::ResponsesDialect;
use super::sse::read_sse;
use super::{ApiError, ChatResponse, Dialect, StreamEvent};

/// An idle timeout no test reaches: a reader that waited for it would miss [`DEADLINE`].
const NEVER: Duration = Duration::from_secs(3600);
/// What a reply that needs no waiting gets, generously (a loaded machine included).
const DEADLINE: Duration = Duration::from_secs(60);
/// Size of the body pieces the tests feed.
const PIECE: usize = 16 * 1024;

type Body = futures::stream::BoxStream<'static, Result<Vec<u8>, std::io::Error>>;

/// `body` read to the end of its reply: the outcome, the text and reasoning forwarded, and
/// how many body bytes were taken.
async fn read(
    dialect: &dyn Dialect,
    body: Body,
    limits: ReplyLimits,
) -> (Result<ChatResponse, ApiError>, usize, usize) {
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    let body = body.inspect(move |piece| {
        if let Ok(bytes) = piece {
            counter.fetch_add(bytes.len(), Ordering::Relaxed);
        }
    });
    let mut forwarded = 0;
    let mut sink = |e: StreamEvent| {
        if let StreamEvent::TextDelta(t) | StreamEvent::ReasoningDelta(t) = e {
            forwarded += t.len();
        }
    };
    let cancel = CancellationToken::new();
    let reply = read_sse(body, dialect, NEVER, limits, &cancel, &mut sink);
    let reply = tokio::time::timeout(DEADLINE, reply)
        .await
        .unwrap_or_else(|_| panic!("{}: the reply did not end", dialect.name()));
    (reply, forwarded, pulled.load(Ordering::Relaxed))
}

/// `head`, then nothing ever again: a connection held open.
fn held(head: &str) -> Body {
    let head = Ok(head.as_bytes().to_vec());
    futures::stream::iter([head])
        .chain(futures::stream::pending())
        .boxed()
}

/// `head`, then `event` again and again.
fn endless(head: &str, event: String) -> Body {
    let head = Ok(head.as_bytes().to_vec());
    let event = event.into_bytes();
    futures::stream::iter([head])
        .chain(futures::stream::repeat_with(move || Ok(event.clone())))
        .boxed()
}

/// `head`, then `x` in pieces forever: one string (and line) that never ends.
fn unending_line(head: &str) -> Body {
    let head = Ok(head.as_bytes().to_vec());
    futures::stream::iter([head])
        .chain(futures::stream::repeat_with(|| Ok(vec![b'x'; PIECE])))
        .boxed()
}

#[tokio::test]
async fn each_dialect_s_final_event_ends_the_reply_though_the_body_is_held_open() {
    let cases: [(&dyn Dialect, &str, &str); 4] = [
        (
            &OpenAiDialect,
            include_str!("../fixtures/text_basic.sse"),
            "Hello, wörld 🌍",
        ),
        (
            &AnthropicDialect,
            include_str!("../fixtures/anthropic/text.sse"),
            "",
        ),
        (
            &ResponsesDialect,
            include_str!("../fixtures/responses/text.sse"),
            "Hello, wörld 🌍\n\"quoted\"",
        ),
        (
            &ResponsesDialect,
            include_str!("../fixtures/responses/incomplete.sse"),
            "",
        ),
    ];
    for (dialect, fixture, text) in cases {
        let (reply, _, _) = read(dialect, held(fixture), ReplyLimits::default()).await;
        let reply = reply.unwrap_or_else(|e| panic!("{}: {e}", dialect.name()));
        assert!(reply.finish_reason.is_some(), "{}", dialect.name());
        assert!(reply.usage.is_some(), "{}: usage is read", dialect.name());
        if !text.is_empty() {
            assert_eq!(reply.text, text);
        }
    }
}

/// One dialect's stream of one kind of content: the events before it, and one event
/// carrying `{}` as its piece (a JSON string's contents).
struct Flood {
    dialect: &'static dyn Dialect,
    part: &'static str,
    head: &'static str,
    event: &'static str,
}

const FLOODS: &[Flood] = &[
    Flood {
        dialect: &OpenAiDialect,
        part: "text",
        head: "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        event: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"{}\"}}]}\n\n",
    },
    Flood {
        dialect: &OpenAiDialect,
        part: "reasoning",
        head: "",
        event: "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"{}\"}}]}\n\n",
    },
    Flood {
        dialect: &OpenAiDialect,
        part: "arguments",
        head: "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"bash\",\"arguments\":\"\"}}]}}]}\n\n",
        event: "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n",
    },
    Flood {
        dialect: &AnthropicDialect,
        part: "text",
        head: "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        event: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"{}\"}}\n\n",
    },
    Flood {
        dialect: &AnthropicDialect,
        part: "reasoning",
        head: "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
        event: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"{}\"}}\n\n",
    },
    Flood {
        dialect: &AnthropicDialect,
        part: "arguments",
        head: "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"c\",\"name\":\"bash\",\"input\":{}}}\n\n",
        event: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
    },
    Flood {
        dialect: &ResponsesDialect,
        part: "text",
        head: "",
        event: "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"{}\"}\n\n",
    },
    Flood {
        dialect: &ResponsesDialect,
        part: "reasoning",
        head: "",
        event: "data: {\"type\":\"response.reasoning_summary_text.delta\",\"output_index\":0,\"summary_index\":0,\"delta\":\"{}\"}\n\n",
    },
    Flood {
        dialect: &ResponsesDialect,
        part: "arguments",
        head: "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"bash\",\"arguments\":\"\"}}\n\n",
        event: "data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,\"delta\":\"{}\"}\n\n",
    },
];

#[tokio::test]
async fn an_endless_stream_of_any_part_ends_at_the_reply_bound() {
    let limits = ReplyLimits::new(256 * 1024);
    let piece = "think ".repeat(700); // 4200 bytes a delta
    for flood in FLOODS {
        let what = format!("{} {}", flood.dialect.name(), flood.part);
        let body = endless(flood.head, flood.event.replace("{}", &piece));
        let (reply, forwarded, pulled) = read(flood.dialect, body, limits).await;
        let err = reply.expect_err(&what);
        assert!(
            matches!(
                err,
                ApiError::ReplyTooLarge {
                    what: Oversized::Reply,
                    ..
                }
            ),
            "{what}: {err}"
        );
        assert!(!err.is_retryable(), "{what}");
        assert!(forwarded <= limits.reply, "{what}: forwarded {forwarded}");
        // The bound plus the events' framing, and at most one burst more.
        assert!(
            pulled < 2 * limits.reply + 512 * 1024,
            "{what}: read {pulled}"
        );
    }
}

#[tokio::test]
async fn one_delta_larger_than_an_event_may_be_ends_at_the_event_bound() {
    let limits = ReplyLimits::new(256 * 1024);
    for flood in FLOODS {
        let what = format!("{} {}", flood.dialect.name(), flood.part);
        let (open, _) = flood.event.split_once("{}").expect("a piece placeholder");
        let head = format!("{}{open}", flood.head);
        let (reply, _, pulled) = read(flood.dialect, unending_line(&head), limits).await;
        let err = reply.expect_err(&what);
        assert!(
            matches!(
                err,
                ApiError::ReplyTooLarge {
                    what: Oversized::Event,
                    ..
                }
            ),
            "{what}: {err}"
        );
        assert!(
            pulled <= limits.event + head.len() + PIECE,
            "{what}: read {pulled}"
        );
    }
}

#[tokio::test]
async fn a_whole_delta_over_the_reply_bound_ends_the_reply_before_it_is_kept() {
    let limits = ReplyLimits::new(256 * 1024);
    let huge = "x".repeat(limits.reply + 1);
    for flood in FLOODS {
        let what = format!("{} {}", flood.dialect.name(), flood.part);
        let body = held(&format!(
            "{}{}",
            flood.head,
            flood.event.replace("{}", &huge)
        ));
        let (reply, forwarded, _) = read(flood.dialect, body, limits).await;
        let err = reply.expect_err(&what);
        assert_eq!(err.code(), "reply_too_large", "{what}");
        assert_eq!(forwarded, 0, "{what}: nothing of it was forwarded");
    }
}

/// Events built from a counter, forever: each one new to the stream.
fn counting(event: impl Fn(usize) -> String + Send + 'static) -> Body {
    let mut n = 0;
    futures::stream::repeat_with(move || {
        n += 1;
        Ok(event(n).into_bytes())
    })
    .boxed()
}

#[tokio::test]
async fn an_endless_stream_of_empty_tool_calls_ends_at_the_reply_bound() {
    let limits = ReplyLimits::new(256 * 1024);
    let body = counting(|n| {
        format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{n}}}]}}}}]}}\n\n"
        )
    });
    let (reply, _, _) = read(&OpenAiDialect, body, limits).await;
    let err = reply.unwrap_err();
    assert_eq!(err.code(), "reply_too_large", "{err}");
}

#[tokio::test]
async fn items_numbered_past_any_reply_s_end_the_stream() {
    let cases: [(&dyn Dialect, Body); 3] = [
        (
            &AnthropicDialect,
            counting(|n| {
                format!(
                    "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{n},\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n"
                )
            }),
        ),
        (
            &ResponsesDialect,
            counting(|n| {
                format!(
                    "data: {{\"type\":\"response.output_text.delta\",\"output_index\":{n},\"delta\":\"\"}}\n\n"
                )
            }),
        ),
        (
            &ResponsesDialect,
            counting(|n| {
                format!(
                    "data: {{\"type\":\"response.output_item.added\",\"output_index\":{n},\"item\":{{\"type\":\"function_call\",\"call_id\":\"c{n}\",\"name\":\"\"}}}}\n\n"
                )
            }),
        ),
    ];
    for (dialect, body) in cases {
        let (reply, _, _) = read(dialect, body, ReplyLimits::default()).await;
        let err = reply.unwrap_err();
        assert!(
            matches!(err.code(), "decode" | "reply_too_large"),
            "{}: {err}",
            dialect.name()
        );
        assert!(!err.is_retryable(), "{}", dialect.name());
    }
}

#[tokio::test]
async fn an_endless_stream_of_keep_alives_ends_at_the_wire_bound() {
    let limits = ReplyLimits::new(64 * 1024);
    let cases: [(&dyn Dialect, &str); 3] = [
        (&OpenAiDialect, ": keep-alive\n\n"),
        (
            &AnthropicDialect,
            "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        ),
        (
            &ResponsesDialect,
            "data: {\"type\":\"response.in_progress\",\"response\":{}}\n\n",
        ),
    ];
    for (dialect, ping) in cases {
        let (reply, _, pulled) = read(dialect, endless("", ping.repeat(64)), limits).await;
        let err = reply.unwrap_err();
        assert!(
            matches!(
                err,
                ApiError::ReplyTooLarge {
                    what: Oversized::Stream,
                    ..
                }
            ),
            "{}: {err}",
            dialect.name()
        );
        assert!(
            pulled <= limits.wire + 64 * ping.len(),
            "{}",
            dialect.name()
        );
    }
}

#[tokio::test]
async fn an_endless_thinking_signature_ends_at_the_reply_bound() {
    let limits = ReplyLimits::new(64 * 1024);
    let head = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n";
    let piece = "s".repeat(4096);
    let event = format!(
        "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"signature_delta\",\"signature\":\"{piece}\"}}}}\n\n"
    );
    let (reply, _, pulled) = read(&AnthropicDialect, endless(head, event), limits).await;
    assert_eq!(reply.unwrap_err().code(), "reply_too_large");
    assert!(pulled < 2 * limits.reply, "read {pulled}");
}
