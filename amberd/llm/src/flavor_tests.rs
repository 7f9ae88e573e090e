//! Per-flavor recorded streams (`fixtures/flavors/<flavor>.sse`) decoded through the
//! flavor's own dialect (split many ways, like every fixture), the liberal reasoning and
//! usage decoding they rely on, and the request each preset produces: max-tokens field,
//! `stream_options`, extra headers.

use amber_proto::Usage;
use serde_json::json;

use super::decode::Decoded;
use super::fixture_tests::{call, decode_with, text_of};
use super::{
    ChatRequest, ChatResponse, LlmSettings, Message, StreamEvent, all_presets, make_dialect, preset,
};

async fn stream(flavor: &str, text: &str) -> (ChatResponse, Vec<StreamEvent>) {
    let dialect = make_dialect(flavor);
    let (r, events) = decode_with(dialect.as_ref(), text).await;
    (r.unwrap(), events)
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

fn usage(prompt: u64, completion: u64, cached: u64, total: u64) -> Option<Usage> {
    Some(Usage {
        cache_write_tokens: 0,
        cost_usd: None,
        prompt_tokens: prompt,
        completion_tokens: completion,
        cached_tokens: cached,
        total_tokens: total,
    })
}

#[tokio::test]
async fn openai_stream() {
    let (r, events) = stream("openai", include_str!("../fixtures/flavors/openai.sse")).await;
    assert_eq!(r.text, "I'll read it.");
    assert_eq!(text_of(&events), r.text);
    assert_eq!(r.reasoning, "");
    assert_eq!(
        r.tool_calls,
        vec![call(
            "call_DdmO9pD3xa9XTPNJ32zg2hcA",
            "read",
            r#"{"path":"Cargo.toml"}"#
        )]
    );
    assert_eq!(r.usage, usage(1117, 46, 1024, 1163));
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn openrouter_stream() {
    let (r, events) = stream(
        "openrouter",
        include_str!("../fixtures/flavors/openrouter.sse"),
    )
    .await;
    // `reasoning` and `reasoning_details` carry the same text: counted once.
    assert_eq!(r.reasoning, "The user wants a haiku.");
    assert_eq!(reasoning_of(&events), r.reasoning);
    assert_eq!(r.text, "Autumn moonlight—\na worm digs silently");
    assert!(r.tool_calls.is_empty());
    assert_eq!(r.usage, usage(14, 31, 0, 45));
    // The usage chunk's `finish_reason: null` does not erase the real one.
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn ollama_stream_without_usage() {
    // Recorded from a server that ignores `stream_options`: no usage at all is fine.
    let (r, _) = stream("ollama", include_str!("../fixtures/flavors/ollama.sse")).await;
    assert_eq!(r.reasoning, "Need the file list. Use bash.");
    assert_eq!(r.text, "");
    assert_eq!(
        r.tool_calls,
        vec![call("call_y3ldsn2j", "bash", r#"{"command":"ls"}"#)]
    );
    assert_eq!(r.usage, None);
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn vllm_stream() {
    let (r, _) = stream("vllm", include_str!("../fixtures/flavors/vllm.sse")).await;
    assert_eq!(r.reasoning, "Check main.rs first.");
    assert_eq!(r.text, "");
    assert_eq!(
        r.tool_calls,
        vec![call(
            "chatcmpl-tool-5c1b3f9e8a7d4e2f",
            "read",
            r#"{"path": "src/main.rs"}"#
        )]
    );
    assert_eq!(r.usage, usage(312, 39, 0, 351));
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn llamacpp_stream_with_timings() {
    let (r, events) = stream("llamacpp", include_str!("../fixtures/flavors/llamacpp.sse")).await;
    assert_eq!(r.reasoning, "Simple greeting.");
    assert_eq!(r.text, "Hello!");
    assert_eq!(
        events.first(),
        Some(&StreamEvent::ReasoningDelta("Simple greeting.".into()))
    );
    // Cached tokens come from `timings.cache_n`.
    assert_eq!(r.usage, usage(25, 9, 20, 34));
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn lmstudio_stream() {
    let (r, _) = stream("lmstudio", include_str!("../fixtures/flavors/lmstudio.sse")).await;
    assert_eq!(r.reasoning, "User wants a search.");
    assert_eq!(
        r.tool_calls,
        vec![call("365174485", "search", r#"{"pattern":"fn main"}"#)]
    );
    assert_eq!(r.usage, usage(120, 30, 0, 150));
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn groq_stream_with_x_groq_usage() {
    let (r, _) = stream("groq", include_str!("../fixtures/flavors/groq.sse")).await;
    assert_eq!(r.reasoning, "Run the tests.");
    assert_eq!(
        r.tool_calls,
        vec![call("call_7x2bq4", "bash", r#"{"command":"cargo test"}"#)]
    );
    assert_eq!(r.usage, usage(230, 41, 0, 271));
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn deepseek_stream_with_cache_hits() {
    let (r, events) = stream("deepseek", include_str!("../fixtures/flavors/deepseek.sse")).await;
    assert_eq!(r.reasoning, "9.11 vs 9.8: compare decimals.");
    assert_eq!(r.text, "9.8 is larger.");
    // One burst: one delta per kind, reasoning first.
    assert_eq!(
        events,
        vec![
            StreamEvent::ReasoningDelta("9.11 vs 9.8: compare decimals.".into()),
            StreamEvent::TextDelta("9.8 is larger.".into()),
        ]
    );
    assert_eq!(r.usage, usage(100, 60, 64, 160));
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn together_stream() {
    let (r, _) = stream("together", include_str!("../fixtures/flavors/together.sse")).await;
    assert_eq!(r.text, "Hi there!");
    assert_eq!(r.reasoning, "");
    assert!(r.tool_calls.is_empty());
    assert_eq!(r.usage, usage(40, 3, 32, 43));
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn mistral_stream_thinking_parts_and_calls_without_index() {
    let (r, _) = stream("mistral", include_str!("../fixtures/flavors/mistral.sse")).await;
    assert_eq!(r.reasoning, "Both files are needed.");
    assert_eq!(r.text, "Reading both files.");
    assert_eq!(
        r.tool_calls,
        vec![
            call("D681PevKs", "read", r#"{"path": "a.rs"}"#),
            call("Kx9QmT2vB", "read", r#"{"path": "b.rs"}"#),
        ]
    );
    assert_eq!(r.usage, usage(210, 52, 0, 262));
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
}

fn reasoning_in(data: &str) -> Option<String> {
    match make_dialect("openai")
        .decode_event("message", data)
        .unwrap()
    {
        Decoded::Chunk(d) => d.reasoning,
        other => panic!("{other:?}"),
    }
}

#[test]
fn reasoning_strings_objects_and_arrays() {
    let chunk = |delta: serde_json::Value| json!({"choices": [{"delta": delta}]}).to_string();
    let cases = [
        (json!({"reasoning": "s"}), Some("s")),
        (json!({"reasoning": {"text": "obj"}}), Some("obj")),
        (
            json!({"reasoning": {"content": [{"text": "a"}, {"text": "b"}]}}),
            Some("ab"),
        ),
        (
            json!({"reasoning": null, "reasoning_details": [
                {"type": "reasoning.summary", "summary": "S"},
                {"type": "reasoning.encrypted", "data": "opaque"}]}),
            Some("S"),
        ),
        (
            json!({"reasoning": "", "reasoning_content": "rc"}),
            Some("rc"),
        ),
        (json!({"thinking": "t"}), Some("t")),
        (
            json!({"reasoning_details": [{"type": "reasoning.encrypted", "data": "x"}]}),
            None,
        ),
        (json!({"content": "just text"}), None),
    ];
    for (delta, want) in cases {
        assert_eq!(
            reasoning_in(&chunk(delta.clone())).as_deref(),
            want,
            "{delta}"
        );
    }
}

#[test]
fn buffered_response_with_reasoning_content() {
    let body = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"42",
        "reasoning_content":"think"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,"prompt_cache_hit_tokens":3}}"#;
    let d = make_dialect("deepseek").decode_response(body).unwrap();
    assert_eq!(d.text.as_deref(), Some("42"));
    assert_eq!(d.reasoning.as_deref(), Some("think"));
    assert_eq!(d.usage, usage(5, 2, 3, 7));
}

fn settings_for(name: &str) -> LlmSettings {
    let p = preset(name).unwrap();
    LlmSettings {
        flavor: p.flavor.into(),
        base_url: Some(p.base_url.into()),
        model: p.default_model.into(),
        max_tokens: Some(256),
        quirks: p.quirks,
        ..LlmSettings::default()
    }
}

/// (preset, max-tokens field, `stream_options` sent, extra headers)
const REQUEST_SHAPES: &[(&str, &str, bool, &[&str])] = &[
    ("openai", "max_completion_tokens", true, &[]),
    (
        "openrouter",
        "max_tokens",
        true,
        &["http-referer", "x-title"],
    ),
    ("ollama", "max_tokens", true, &[]),
    ("vllm", "max_tokens", true, &[]),
    ("llamacpp", "max_tokens", true, &[]),
    ("lmstudio", "max_tokens", true, &[]),
    ("groq", "max_completion_tokens", false, &[]),
    ("deepseek", "max_tokens", true, &[]),
    ("together", "max_tokens", false, &[]),
    ("mistral", "max_tokens", false, &[]),
    ("fireworks", "max_tokens", false, &[]),
    ("xai", "max_tokens", true, &[]),
    // The Responses API's cap; it has no `stream_options`.
    ("openai-responses", "max_output_tokens", false, &[]),
];

#[test]
fn request_shape_per_flavor() {
    // The Anthropic preset's requests are another shape: they have their own tests.
    let chat_presets = all_presets()
        .iter()
        .filter(|p| make_dialect(p.flavor).name() != "anthropic")
        .count();
    assert_eq!(REQUEST_SHAPES.len(), chat_presets, "a preset untested");
    let req = ChatRequest {
        model: String::new(),
        messages: vec![Message::user("hi")],
        tools: vec![],
        response_format: None,
        cache_key: None,
        max_tokens: None,
    };
    for &(name, field, include_usage, headers) in REQUEST_SHAPES {
        let settings = settings_for(name);
        let dialect = make_dialect(&settings.flavor);
        let body = dialect.body(&req, &settings);
        assert_eq!(body[field], 256, "{name}");
        let other = if field != "max_completion_tokens" {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        assert!(body.get(other).is_none(), "{name}: {body}");
        match include_usage {
            true => assert_eq!(
                body["stream_options"],
                json!({"include_usage": true}),
                "{name}"
            ),
            false => assert!(body.get("stream_options").is_none(), "{name}"),
        }
        assert_eq!(body["stream"], true, "{name}");
        assert_eq!(
            body.get("model").is_some(),
            !settings.model.is_empty(),
            "{name}: an empty default model is omitted"
        );

        let h = dialect.request_headers(&settings).unwrap();
        for header in headers {
            assert!(h.contains_key(*header), "{name}: {header}");
        }
        // content-type and accept, nothing else without a key.
        assert_eq!(h.len(), 2 + headers.len(), "{name}: {h:?}");
        let path = if dialect.name() == "openai-responses" {
            "responses"
        } else {
            "chat/completions"
        };
        assert_eq!(
            dialect.endpoint(settings.base_url.as_deref().unwrap()),
            format!("{}/{path}", preset(name).unwrap().base_url)
        );
    }
}

#[test]
fn no_max_tokens_means_neither_field() {
    let req = ChatRequest {
        model: String::new(),
        messages: vec![],
        tools: vec![],
        response_format: None,
        cache_key: None,
        max_tokens: None,
    };
    for p in all_presets() {
        let dialect = make_dialect(p.flavor);
        // The Messages API requires `max_tokens`: that dialect always sends it.
        if dialect.name() != "openai" {
            continue;
        }
        let settings = LlmSettings {
            max_tokens: None,
            ..settings_for(p.name)
        };
        let body = dialect.body(&req, &settings);
        assert!(body.get("max_tokens").is_none(), "{}", p.name);
        assert!(body.get("max_completion_tokens").is_none(), "{}", p.name);
    }
}

#[test]
fn openrouter_attribution_headers() {
    let h = make_dialect("openrouter")
        .request_headers(&LlmSettings {
            api_key: Some("sk-or".into()),
            ..settings_for("openrouter")
        })
        .unwrap();
    assert_eq!(
        h.get("http-referer").unwrap(),
        "https://github.com/amber-agent/amber"
    );
    assert_eq!(h.get("x-title").unwrap(), "amber");
    assert_eq!(h.get("authorization").unwrap(), "Bearer sk-or");
}

/// A request's own cap goes out in every flavor's field, and never raises the settings'.
#[test]
fn request_cap_is_the_lower_of_request_and_settings() {
    let cases: &[(Option<u32>, Option<u32>, u32)] = &[
        // request, settings → sent
        (Some(32), None, 32),
        (Some(32), Some(256), 32),
        (Some(512), Some(256), 256),
    ];
    for p in all_presets() {
        let dialect = make_dialect(p.flavor);
        for &(request_cap, settings_cap, sent) in cases {
            let req = ChatRequest {
                model: "m".into(),
                messages: vec![Message::user("hi")],
                tools: vec![],
                response_format: None,
                cache_key: None,
                max_tokens: request_cap,
            };
            let settings = LlmSettings {
                max_tokens: settings_cap,
                ..settings_for(p.name)
            };
            let body = dialect.body(&req, &settings);
            let field = ["max_tokens", "max_completion_tokens", "max_output_tokens"]
                .into_iter()
                .find(|f| body.get(*f).is_some())
                .unwrap_or_else(|| panic!("{}: no cap in {body}", p.name));
            assert_eq!(
                body[field], sent,
                "{}: {request_cap:?}/{settings_cap:?}",
                p.name
            );
        }
    }
}
