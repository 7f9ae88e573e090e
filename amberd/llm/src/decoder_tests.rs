//! The `Dialect::stream` seam: each decoder owns the state of its own stream. Two recorded
//! streams decoded interleaved, by two decoders from one dialect, read event for event as
//! each reads alone (and one decoder shared between them would not: the pairs exercise
//! state that spans events); the reader makes one decoder per stream, not per event; and
//! an event read on its own (`Dialect::decode_event`) reads as a fresh stream's first.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::header::HeaderMap;
use tokio_util::sync::CancellationToken;

use super::anthropic::AnthropicDialect;
use super::decode::{ChunkDelta, Decoded};
use super::dialect::{Dialect, StreamDecoder};
use super::limits::ReplyLimits;
use super::openai::OpenAiDialect;
use super::responses::ResponsesDialect;
use super::sse::read_sse;
use super::sse_decoder::SseDecoder;
use super::{ApiError, ChatRequest, LlmSettings};

/// The (event, data) pairs of an SSE text, in order.
fn events(text: &str) -> Vec<(String, String)> {
    let mut sse = SseDecoder::default();
    sse.feed(text.as_bytes());
    sse.finish();
    let mut out = Vec::new();
    while let Some(e) = sse.next_event().unwrap() {
        out.push((e.event.to_owned(), e.data.to_owned()));
    }
    assert!(out.len() > 3, "{text}");
    out
}

/// What each event decodes to, as comparable text.
type Readings = Vec<String>;

fn read(decoder: &mut dyn StreamDecoder, (event, data): &(String, String)) -> String {
    format!("{:?}", decoder.decode(event, data))
}

/// Each stream through a decoder of its own.
fn alone(dialect: &dyn Dialect, stream: &[(String, String)]) -> Readings {
    let mut decoder = dialect.stream();
    stream.iter().map(|e| read(decoder.as_mut(), e)).collect()
}

/// Both streams, one event of each in turn, read by `read(stream number, event)`.
fn interleaved(
    a: &[(String, String)],
    b: &[(String, String)],
    mut read: impl FnMut(usize, &(String, String)) -> String,
) -> [Readings; 2] {
    let mut out = [Vec::new(), Vec::new()];
    for i in 0..a.len().max(b.len()) {
        for (k, stream) in [a, b].into_iter().enumerate() {
            if let Some(e) = stream.get(i) {
                out[k].push(read(k, e));
            }
        }
    }
    out
}

/// Streams `a` and `b` interleaved read as each alone, with a decoder each; with
/// `spans_events`, one decoder for both must read them otherwise (the pair exercises state
/// that spans events, so sharing it would show).
fn check_pair(dialect: &dyn Dialect, a: &str, b: &str, spans_events: bool) {
    let (a, b) = (events(a), events(b));
    let expected = [alone(dialect, &a), alone(dialect, &b)];
    let mut two = [dialect.stream(), dialect.stream()];
    let got = interleaved(&a, &b, |k, e| read(two[k].as_mut(), e));
    assert_eq!(got, expected, "{}", dialect.name());
    if spans_events {
        let mut one = dialect.stream();
        let shared = interleaved(&a, &b, |_, e| read(one.as_mut(), e));
        assert_ne!(
            shared,
            expected,
            "{}: the pair tests nothing",
            dialect.name()
        );
    }
}

#[test]
fn two_streams_of_one_dialect_decoded_interleaved_share_no_state() {
    check_pair(
        &OpenAiDialect,
        include_str!("../fixtures/text_basic.sse"),
        include_str!("../fixtures/tool_call_split_args.sse"),
        false,
    );
    check_pair(
        &AnthropicDialect,
        include_str!("../fixtures/anthropic/thinking.sse"),
        include_str!("../fixtures/anthropic/tool_calls.sse"),
        true,
    );
    check_pair(
        &ResponsesDialect,
        include_str!("../fixtures/responses/parallel_calls.sse"),
        include_str!("../fixtures/responses/reasoning.sse"),
        true,
    );
}

/// Chat completions, counting the decoders it makes.
struct Counting(Arc<AtomicUsize>);

impl Dialect for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn endpoint(&self, base_url: &str) -> String {
        OpenAiDialect.endpoint(base_url)
    }
    fn headers(&self, key: Option<&str>) -> Result<HeaderMap, ApiError> {
        OpenAiDialect.headers(key)
    }
    fn body(&self, req: &ChatRequest, settings: &LlmSettings) -> serde_json::Value {
        OpenAiDialect.body(req, settings)
    }
    fn stream(&self) -> Box<dyn StreamDecoder> {
        self.0.fetch_add(1, Ordering::Relaxed);
        OpenAiDialect.stream()
    }
    fn decode_response(&self, body: &str) -> Result<ChunkDelta, ApiError> {
        OpenAiDialect.decode_response(body)
    }
}

#[tokio::test]
async fn the_reader_makes_one_decoder_per_stream() {
    let made = Arc::new(AtomicUsize::new(0));
    let dialect = Counting(made.clone());
    let text = include_str!("../fixtures/tool_call_split_args.sse");
    // One body piece per byte: many reads, many events.
    let pieces: Vec<Result<Vec<u8>, std::io::Error>> = text.bytes().map(|b| Ok(vec![b])).collect();
    let reply = read_sse(
        futures::stream::iter(pieces),
        &dialect,
        Duration::from_secs(5),
        ReplyLimits::default(),
        &CancellationToken::new(),
        &mut |_| {},
    )
    .await
    .unwrap();
    assert!(!reply.tool_calls.is_empty());
    assert_eq!(made.load(Ordering::Relaxed), 1);
}

#[test]
fn an_event_read_on_its_own_reads_as_a_fresh_stream_s_first() {
    let stop = r#"{"type":"message_stop"}"#;
    assert_eq!(
        AnthropicDialect.decode_event("message_stop", stop).unwrap(),
        Decoded::Done
    );
    let delta = r#"{"type":"response.output_text.delta","output_index":0,"delta":"hi"}"#;
    let Decoded::Chunk(d) = ResponsesDialect.decode_event("", delta).unwrap() else {
        panic!("a chunk expected");
    };
    assert_eq!(d.text.as_deref(), Some("hi"));
}
