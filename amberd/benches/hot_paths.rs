//! Criterion micro-benchmarks of the daemon's hot paths (run by hand, never in CI), through
//! the public APIs of amberd and amber-llm only:
//!
//! - `llm`: decoding one streamed chat-completions chunk (`Dialect::decode_event`), folding
//!   split tool-call deltas (`ToolCallAccumulator`), and a whole 20,000-chunk reply through
//!   `LlmClient::stream_chat` from an in-process axum endpoint (HTTP, UTF-8, SSE framing,
//!   chunk decoding, delta callbacks);
//! - `context`: `Context::push` (each push seals an FNV-1a link), `verify` and `snapshot`
//!   of a 1,000-message context;
//! - `fanout`: `EventHub::publish` of `message_delta`s to 1 and 10 subscriber queues, drained
//!   as they go (keeping up) or after the burst (lagging: deltas coalesce);
//! - `bm25`: ranking a query against a warm index of a generated 2,000-file tree.
//!
//! ```sh
//! cargo bench -p amberd --bench hot_paths                  # all, ~1 min
//! cargo bench -p amberd --bench hot_paths -- fanout --quick
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use amber_llm::{
    ChatRequest, LlmClient, LlmSettings, StreamEvent, ToolCallAccumulator, ToolCallDelta,
    make_dialect,
};
use amber_proto::{EventKind, Message, ToolCall};
use amber_store::context::Context;
use amber_tools::search::semantic::tokenize::query_terms;
use amber_tools::search::semantic::{Bm25Index, MAX_HITS_PER_FILE, WHOLE_IDENT_BOOST};
use amber_tools::search::walk::{WalkSpec, threads};
use amberd::session::hub::EventHub;
use axum::body::{Body, Bytes};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const STREAM_CHUNKS: usize = 20_000;

/// The `data:` payload of content chunk `i`, as an OpenAI-compatible server sends it.
fn content_chunk(i: usize) -> String {
    json!({
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "bench", "choices": [{"index": 0, "delta": {"content": format!("w{i} ")}, "finish_reason": null}],
    })
    .to_string()
}

/// The SSE frames of a 20k-chunk reply, each a separate body chunk.
fn stream_frames() -> Arc<Vec<Bytes>> {
    let mut frames = vec![Bytes::from(format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    ))];
    frames
        .extend((0..STREAM_CHUNKS).map(|i| Bytes::from(format!("data: {}\n\n", content_chunk(i)))));
    frames.push(Bytes::from(format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    )));
    Arc::new(frames)
}

fn llm(c: &mut Criterion) {
    let mut g = c.benchmark_group("llm");
    let dialect = make_dialect("openai");
    let chunks: Vec<String> = (0..1000).map(content_chunk).collect();
    g.throughput(Throughput::Elements(chunks.len() as u64));
    g.bench_function("decode_event/1000_content_chunks", |b| {
        b.iter(|| {
            for data in &chunks {
                black_box(dialect.decode_event("", data).unwrap());
            }
        });
    });
    // As a stream reads them: the stream's decoder remembers the chunk shape across events.
    g.bench_function("decode_stream_event/1000_content_chunks", |b| {
        b.iter(|| {
            let mut decoder = dialect.stream();
            for data in &chunks {
                black_box(decoder.decode("", data).unwrap());
            }
        });
    });

    // Three parallel calls, each with ~1 KiB of arguments in 16-char pieces.
    let arguments =
        json!({"path": "src/lib.rs", "content": "fn main() {}\n".repeat(80)}).to_string();
    let pieces: Vec<String> = arguments
        .as_bytes()
        .chunks(16)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let mut deltas = Vec::new();
    for index in 0..3 {
        deltas.push(ToolCallDelta {
            index: Some(index),
            id: Some(format!("call_{index}")),
            name: Some("write".into()),
            arguments: Some(String::new()),
        });
    }
    for piece in &pieces {
        for index in 0..3 {
            deltas.push(ToolCallDelta {
                index: Some(index),
                arguments: Some(piece.clone()),
                ..ToolCallDelta::default()
            });
        }
    }
    g.throughput(Throughput::Elements(deltas.len() as u64));
    g.bench_function("accumulate/3_calls_split_in_16_char_pieces", |b| {
        b.iter_batched(
            || deltas.clone(),
            |deltas| {
                let mut acc = ToolCallAccumulator::new();
                for d in deltas {
                    acc.push(d);
                }
                black_box(acc.finish())
            },
            BatchSize::SmallInput,
        );
    });

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let frames = stream_frames();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let frames = frames.clone();
            async move {
                let items: Vec<Result<Bytes, std::convert::Infallible>> =
                    frames.iter().cloned().map(Ok).collect();
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(futures::stream::iter(items)))
                    .unwrap()
            }
        }),
    );
    rt.spawn(async move { axum::serve(listener, app).await });
    let client = LlmClient::new(LlmSettings {
        base_url: Some(format!("http://{addr}/v1")),
        model: "bench".into(),
        ..LlmSettings::default()
    })
    .unwrap();
    let request = ChatRequest {
        model: "bench".into(),
        messages: vec![Message::user("count")],
        tools: Vec::new(),
        response_format: None,
        cache_key: None,
        max_tokens: None,
    };
    let cancel = CancellationToken::new();
    g.throughput(Throughput::Elements(STREAM_CHUNKS as u64));
    g.sample_size(10);
    // Awaited on a runtime worker, as in the daemon; the request itself runs on the LLM I/O
    // thread either way.
    g.bench_function("stream_chat/20k_chunks_from_local_endpoint", |b| {
        b.iter(|| {
            let (client, request, cancel) = (client.clone(), request.clone(), cancel.clone());
            let (reply, streamed) = rt
                .block_on(rt.spawn(async move {
                    let mut streamed = String::new();
                    let reply = client
                        .stream_chat(&request, &cancel, &mut |event| {
                            if let StreamEvent::TextDelta(t) = event {
                                streamed.push_str(&t);
                            }
                        })
                        .await;
                    (reply, streamed)
                }))
                .unwrap();
            let reply = reply.unwrap();
            // Deltas may be merged per burst; the text may not change.
            assert_eq!(streamed, reply.text);
            assert!(reply.text.ends_with(&format!("w{} ", STREAM_CHUNKS - 1)));
            black_box(reply)
        });
    });
    g.finish();
}

/// A conversation of `n` messages shaped like real traffic: prompt, call, 2 KiB result, reply.
fn conversation(n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| match i % 4 {
            0 => Message::user(format!("Fix the failing test number {i} in src/lib.rs.")),
            1 => Message::assistant(
                "",
                vec![ToolCall {
                    id: format!("call_{i}"),
                    name: "read".into(),
                    arguments: json!({"path": "src/lib.rs", "offset": i}).to_string(),
                }],
            ),
            2 => Message::tool(
                format!("call_{}", i - 1),
                "    let x = compute(y);\n".repeat(90),
            ),
            _ => Message::assistant(
                "The test failed because the offset was off by one. ".repeat(10),
                Vec::new(),
            ),
        })
        .collect()
}

fn context(c: &mut Criterion) {
    let mut g = c.benchmark_group("context");
    let messages = conversation(1000);
    g.throughput(Throughput::Elements(messages.len() as u64));
    g.bench_function("push/1000_messages", |b| {
        b.iter_batched(
            || messages.clone(),
            |messages| {
                let mut ctx = Context::new();
                for m in messages {
                    ctx.push(m);
                }
                black_box(ctx)
            },
            BatchSize::SmallInput,
        );
    });
    let mut ctx = Context::new();
    for m in messages {
        ctx.push(m);
    }
    g.bench_function("verify/1000_messages", |b| b.iter(|| ctx.verify().unwrap()));
    g.bench_function("snapshot/1000_messages", |b| {
        b.iter(|| black_box(ctx.snapshot()))
    });
    g.finish();
}

fn delta(i: usize) -> EventKind {
    EventKind::MessageDelta {
        item_id: "item_1".into(),
        delta: format!("w{i} "),
    }
}

fn fanout(c: &mut Criterion) {
    let mut g = c.benchmark_group("fanout");
    const EVENTS: usize = 1000;
    g.throughput(Throughput::Elements(EVENTS as u64));
    for subscribers in [1usize, 10] {
        let setup = || {
            let hub = EventHub::new("bench-session".into(), 8192);
            let live: Vec<_> = (0..subscribers).map(|_| hub.subscribe(None).live).collect();
            (hub, live)
        };
        g.bench_function(format!("keeping_up/{subscribers}_subscribers"), |b| {
            b.iter_batched(
                setup,
                |(hub, mut live)| {
                    for i in 0..EVENTS {
                        hub.publish(Some("turn_1"), delta(i));
                        drain(&mut live);
                    }
                },
                BatchSize::SmallInput,
            );
        });
        g.bench_function(format!("lagging/{subscribers}_subscribers"), |b| {
            b.iter_batched(
                setup,
                |(hub, mut live)| {
                    for i in 0..EVENTS {
                        hub.publish(Some("turn_1"), delta(i));
                    }
                    drain(&mut live);
                },
                BatchSize::SmallInput,
            );
        });
    }
    g.finish();
}

/// Takes every queued event of every subscriber.
fn drain(live: &mut [amberd::session::hub::Live]) {
    for rx in live {
        while let Some(Ok(wire)) = rx.try_recv() {
            black_box(wire);
        }
    }
}

const WORDS: &[&str] = &[
    "parse", "config", "value", "reader", "buffer", "token", "stream", "handler", "request",
    "session", "index", "query", "cache", "store", "event", "client", "server", "socket", "frame",
    "message", "decode", "record",
];

/// 2,000 small Rust-like files of identifiers in camelCase and snake_case.
fn tree(root: &std::path::Path) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut word = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        WORDS[(state % WORDS.len() as u64) as usize]
    };
    for i in 0..2000 {
        let dir = root.join(format!("m{:02}", i / 100));
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = String::new();
        for _ in 0..12 {
            let (a, b, c) = (word(), word(), word());
            text.push_str(&format!(
                "pub fn {a}_{b}({c}: &str) -> {}{} {{ {c}.len() }}\n",
                a.to_uppercase(),
                b
            ));
        }
        std::fs::write(dir.join(format!("f{i}.rs")), text).unwrap();
    }
}

fn bm25(c: &mut Criterion) {
    let mut g = c.benchmark_group("bm25");
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let spec = WalkSpec {
        workspace: dir.path().to_path_buf(),
        root: dir.path().to_path_buf(),
        glob: None,
    };
    let mut index = Bm25Index::new();
    index.refresh(&spec, threads(), &AtomicBool::new(false));
    for query in [
        "parse config value",
        "SessionHandler",
        "decode_record frame socket",
    ] {
        let terms = query_terms(query, WHOLE_IDENT_BOOST);
        g.bench_function(format!("rank/2000_files/{query}"), |b| {
            b.iter(|| black_box(index.search(&terms, 20, MAX_HITS_PER_FILE)));
        });
    }
    g.bench_function("query_terms", |b| {
        b.iter(|| black_box(query_terms("decode_record frame socket", WHOLE_IDENT_BOOST)))
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = llm, context, fanout, bm25
}
criterion_main!(benches);
