//! `LlmPool`: name resolution (`[providers.NAME]`, then the provider lookup, then an
//! error), the default provider's quirks, caching and invalidation, dialect factories, and
//! one request end to end against a local endpoint (axum) to see quirks and headers on the
//! wire.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::openai::OpenAiDialect;
use super::provider::bundled_lookup;
use super::test_support::{env, tables};
use super::{
    ChatRequest, Dialect, DialectFactory, LlmPool, MaxTokensField, Message, NOT_CONFIGURED,
    ProviderLookup, ProviderSpec, Quirks, all_presets, bundled_providers, preset,
};

/// A pool over the provider tables of `toml`, resolving names through `lookup`.
fn pool_with(
    toml: &str,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    lookup: ProviderLookup,
) -> LlmPool {
    let t = tables(toml);
    LlmPool::new(&t.provider, &t.providers, env, lookup)
}

fn pool(toml: &str, vars: &'static [(&'static str, &'static str)]) -> LlmPool {
    pool_with(toml, &env(vars), bundled_lookup())
}

#[test]
fn pool_is_send_sync_and_clone() {
    fn check<T: Send + Sync + Clone>() {}
    check::<LlmPool>();
}

#[test]
fn unconfigured_default_reports_how_to_configure() {
    let p = pool("", &[]);
    assert_eq!(p.client(None).unwrap_err(), NOT_CONFIGURED);
    assert_eq!(p.client(Some("  ")).unwrap_err(), NOT_CONFIGURED);
    assert_eq!(p.client(Some("Default")).unwrap_err(), NOT_CONFIGURED);
    assert_eq!(p.context_window(None), 128_000);
    assert_eq!(p.default_model(None), "gpt-4o-mini");
    let names = p.names();
    assert_eq!(names.len(), all_presets().len());
    assert!(names.contains(&"openrouter".to_owned()));
}

#[test]
fn default_provider_quirks_follow_its_flavor() {
    // OPENAI_API_KEY alone: OpenAI itself, with OpenAI's quirks.
    let c = pool("", &[("OPENAI_API_KEY", "sk")]).client(None).unwrap();
    assert_eq!(
        c.settings().base_url.as_deref(),
        Some("https://api.openai.com/v1")
    );
    assert_eq!(
        c.settings().quirks.max_tokens_field,
        MaxTokensField::MaxCompletionTokens
    );
    // The default `openai` flavor pointed at another server: generic quirks.
    let c = pool("", &[("AMBER_BASE_URL", "http://127.0.0.1:9/v1")])
        .client(None)
        .unwrap();
    assert_eq!(c.settings().quirks, Quirks::GENERIC);
    // An explicit flavor brings its preset's quirks and endpoint.
    let c = pool("", &[("AMBER_FLAVOR", "groq"), ("GROQ_API_KEY", "g")])
        .client(None)
        .unwrap();
    let s = c.settings();
    assert_eq!(s.quirks, preset("groq").unwrap().quirks);
    assert_eq!(
        s.base_url.as_deref(),
        Some("https://api.groq.com/openai/v1")
    );
    assert_eq!(s.api_key.as_deref(), Some("g"));
    // `[provider]` overrides quirks and adds headers.
    let c = pool(
        "[provider]\nflavor = \"groq\"\ninclude_usage = true\nmax_tokens_field = \"max_tokens\"\n\
         headers = { X-A = \"1\" }\nmax_retries = 7\n",
        &[],
    )
    .client(None)
    .unwrap();
    let s = c.settings();
    assert!(s.quirks.include_usage);
    assert_eq!(s.quirks.max_tokens_field, MaxTokensField::MaxTokens);
    assert_eq!(s.extra_headers, vec![("X-A".to_owned(), "1".to_owned())]);
    assert_eq!(s.max_retries, 7);
}

#[test]
fn structured_output_follows_the_preset_and_the_settings() {
    // A generic OpenAI-compatible server takes `response_format`; DeepSeek does not.
    let generic = pool("", &[("AMBER_BASE_URL", "http://127.0.0.1:9/v1")]);
    assert!(generic.client(None).unwrap().structured_output());
    let deepseek = pool(
        "",
        &[("AMBER_FLAVOR", "deepseek"), ("DEEPSEEK_API_KEY", "d")],
    );
    assert!(!deepseek.client(None).unwrap().structured_output());
    // `structured_output` in the settings wins either way.
    let off = pool(
        "[provider]\nstructured_output = false\n[providers.ds]\nflavor = \"deepseek\"\n\
         structured_output = true\n",
        &[
            ("AMBER_BASE_URL", "http://127.0.0.1:9/v1"),
            ("DEEPSEEK_API_KEY", "d"),
        ],
    );
    assert!(!off.client(None).unwrap().structured_output());
    assert!(off.client(Some("ds")).unwrap().structured_output());
}

#[test]
fn named_preset_provider() {
    let p = pool(
        "[provider]\nmax_retries = 2\n",
        &[("OPENROUTER_API_KEY", "or-key"), ("OPENAI_API_KEY", "sk")],
    );
    let c = p.client(Some("openrouter")).unwrap();
    let s = c.settings();
    let pr = preset("openrouter").unwrap();
    assert_eq!(s.flavor, "openrouter");
    assert_eq!(s.base_url.as_deref(), Some(pr.base_url));
    assert_eq!(s.api_key.as_deref(), Some("or-key"));
    assert_eq!(s.model, pr.default_model);
    assert_eq!(s.quirks, pr.quirks);
    assert_eq!(s.max_retries, 2, "transport knobs come from [provider]");
    assert_eq!(s.max_reply_bytes, crate::DEFAULT_MAX_REPLY_BYTES);
    assert_eq!(p.context_window(Some("openrouter")), pr.context_window);
    assert_eq!(p.default_model(Some("openrouter")), pr.default_model);
    // Case and aliases resolve through the lookup.
    let c = p.client(Some("llama.cpp")).unwrap();
    assert_eq!(
        c.settings().base_url.as_deref(),
        Some("http://127.0.0.1:8080/v1")
    );
    assert_eq!(c.settings().api_key, None);
}

#[test]
fn the_reply_bound_is_read_from_provider_for_every_provider() {
    let p = pool(
        "[provider]\nmax_reply_bytes = 1048576\n",
        &[("OPENROUTER_API_KEY", "or-key")],
    );
    for name in ["openrouter", "llama.cpp"] {
        let c = p.client(Some(name)).unwrap();
        assert_eq!(c.settings().max_reply_bytes, 1 << 20, "{name}");
    }
}

#[test]
fn tables_override_presets_and_define_new_providers() {
    let p = pool(
        r#"
[providers.openrouter]
model = "anthropic/claude-sonnet-4"
base_url = "https://proxy.example/api/v1"
context_window = 200000
headers = { X-Title = "mine" }

[providers.gpu]
flavor = "vllm"
base_url = "http://gpu:8000/v1"
model = "Qwen/Qwen3-32B"
max_tokens = 1024
max_tokens_field = "max_completion_tokens"

[providers.bare]
base_url = "http://bare:1/v1"

[providers.nourl]
flavor = "something-new"
"#,
        &[("VLLM_API_KEY", "v"), ("OPENAI_API_KEY", "sk")],
    );
    let c = p.client(Some("openrouter")).unwrap();
    let s = c.settings();
    assert_eq!(s.model, "anthropic/claude-sonnet-4");
    assert_eq!(s.base_url.as_deref(), Some("https://proxy.example/api/v1"));
    assert_eq!(s.extra_headers, vec![("X-Title".into(), "mine".into())]);
    assert_eq!(s.quirks, preset("openrouter").unwrap().quirks);
    assert_eq!(p.context_window(Some("openrouter")), 200_000);

    let c = p.client(Some("gpu")).unwrap();
    let s = c.settings();
    assert_eq!(s.flavor, "vllm");
    assert_eq!(
        s.api_key.as_deref(),
        Some("v"),
        "the vllm preset's key variable"
    );
    assert_eq!(s.max_tokens, Some(1024));
    assert_eq!(
        s.quirks.max_tokens_field,
        MaxTokensField::MaxCompletionTokens
    );
    assert_eq!(p.context_window(Some("gpu")), 32_768);
    assert_eq!(p.default_model(Some("gpu")), "Qwen/Qwen3-32B");

    // No flavor, no preset: nothing of OpenAI's is inherited, its key least of all.
    let c = p.client(Some("bare")).unwrap();
    let s = c.settings();
    assert_eq!(s.api_key, None);
    assert_eq!(s.quirks, Quirks::GENERIC);
    assert_eq!(s.model, "");
    assert_eq!(p.context_window(Some("bare")), 128_000);

    let err = p.client(Some("nourl")).unwrap_err();
    assert!(err.contains("provider `nourl` has no base_url"), "{err}");
    assert!(p.names().contains(&"gpu".to_owned()));
    // `check` refuses what `client` refuses, and accepts what it builds.
    for name in ["nourl", "nope"] {
        assert_eq!(
            p.check(Some(name)).unwrap_err(),
            p.client(Some(name)).unwrap_err()
        );
    }
    for name in ["gpu", "bare"] {
        assert_eq!(p.check(Some(name)), Ok(()), "{name}");
    }
}

#[test]
fn unknown_provider_lists_the_known_ones() {
    let p = pool("[providers.mine]\nbase_url = \"http://m/v1\"\n", &[]);
    let err = p.client(Some("nope")).unwrap_err();
    assert!(err.starts_with("unknown provider `nope`; known: "), "{err}");
    assert!(err.contains("mine") && err.contains("groq"), "{err}");
    // Unknown names fall back to the default's window and model.
    assert_eq!(p.context_window(Some("nope")), 128_000);
    assert_eq!(p.default_model(Some("nope")), "gpt-4o-mini");
}

#[test]
fn with_no_providers_the_known_list_has_no_dangling_separator() {
    let p = pool_with("", &env(&[]), Arc::new(|_: &str| None));
    assert_eq!(
        p.selection("nope").unwrap_err(),
        "unknown provider `nope`; known: default"
    );
    let err = p.client(Some("nope")).unwrap_err();
    assert!(!err.ends_with(": "), "{err}");
    assert!(
        err.ends_with("known: none (is the `providers` plugin disabled?)"),
        "{err}"
    );
}

/// A lookup over the bundled providers that counts its calls.
fn counting_lookup() -> (ProviderLookup, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let inner = bundled_lookup();
    let counter = calls.clone();
    let lookup: ProviderLookup = Arc::new(move |name: &str| {
        counter.fetch_add(1, Ordering::SeqCst);
        inner(name)
    });
    (lookup, calls)
}

#[test]
fn clients_are_cached_until_invalidated() {
    let (lookup, calls) = counting_lookup();
    let p = pool_with("", &env(&[]), lookup);
    let a = p.client(Some("groq")).unwrap();
    let resolved_with = calls.load(Ordering::SeqCst);
    let b = p.client(Some("groq")).unwrap();
    assert!(a.same_client(&b));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        resolved_with,
        "served from cache"
    );
    assert!(!a.same_client(&p.client(Some("deepseek")).unwrap()));

    let shared = p.clone();
    shared.invalidate();
    let c = p.client(Some("groq")).unwrap();
    assert!(!a.same_client(&c), "rebuilt after invalidate");
    assert!(calls.load(Ordering::SeqCst) > resolved_with);
    assert!(c.same_client(&p.client(Some("groq")).unwrap()));
}

#[test]
fn concurrent_first_use_shares_one_client() {
    let p = pool("", &[]);
    let clients: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| p.client(Some("mistral")).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let cached = p.client(Some("mistral")).unwrap();
    let shared = clients.iter().filter(|c| c.same_client(&cached)).count();
    // Racing builders may lose, but every later caller gets the cached one.
    assert!(shared >= 1);
}

/// A dialect only a provider's factory can produce.
struct Echo;
impl Dialect for Echo {
    fn name(&self) -> &'static str {
        "echo"
    }
    fn endpoint(&self, base_url: &str) -> String {
        OpenAiDialect.endpoint(base_url)
    }
    fn headers(&self, key: Option<&str>) -> Result<http::HeaderMap, super::ApiError> {
        OpenAiDialect.headers(key)
    }
    fn body(&self, req: &ChatRequest, s: &super::LlmSettings) -> Value {
        OpenAiDialect.body(req, s)
    }
    fn stream(&self) -> Box<dyn super::StreamDecoder> {
        OpenAiDialect.stream()
    }
    fn decode_response(&self, b: &str) -> Result<super::ChunkDelta, super::ApiError> {
        OpenAiDialect.decode_response(b)
    }
}

fn echo() -> Arc<dyn Dialect> {
    Arc::new(Echo)
}

#[test]
fn provider_dialect_factories_are_used() {
    let mut specs = bundled_providers();
    specs.push(ProviderSpec {
        name: "echo".into(),
        flavor: "echo".into(),
        presets: vec![super::Preset {
            name: "echo",
            flavor: "echo",
            base_url: "http://echo:1/v1",
            ..*preset("vllm").unwrap()
        }],
        dialect: Some(echo as DialectFactory),
    });
    let lookup: ProviderLookup =
        Arc::new(move |name: &str| specs.iter().find(|s| s.name == name).cloned());
    let p = pool_with(
        "[provider]\nflavor = \"echo\"\nbase_url = \"http://d/v1\"\n\
         [providers.other]\nflavor = \"echo\"\nbase_url = \"http://o/v1\"\n\
         [providers.plain]\nflavor = \"groq\"\n",
        &env(&[]),
        lookup,
    );
    assert_eq!(p.client(Some("echo")).unwrap().dialect().name(), "echo");
    assert_eq!(p.client(Some("other")).unwrap().dialect().name(), "echo");
    assert_eq!(p.client(None).unwrap().dialect().name(), "echo");
    assert_eq!(p.client(Some("plain")).unwrap().dialect().name(), "openai");
}

#[test]
fn infos_list_the_default_first() {
    let p = pool(
        "[provider]\nbase_url = \"http://d/v1\"\nmodel = \"m\"\n[providers.gpu]\nflavor = \"vllm\"\n",
        &[],
    );
    let infos = p.infos();
    assert_eq!(infos.len(), 1 + p.names().len());
    let d = &infos[0];
    assert!(d.default);
    assert_eq!(
        (
            d.name.as_str(),
            d.base_url.as_deref(),
            d.default_model.as_str()
        ),
        ("default", Some("http://d/v1"), "m")
    );
    let gpu = infos.iter().find(|i| i.name == "gpu").unwrap();
    assert!(!gpu.default);
    assert_eq!(gpu.flavor, "vllm");
    assert_eq!(gpu.base_url.as_deref(), Some("http://127.0.0.1:8000/v1"));
    assert_eq!(gpu.context_window, 32_768);
    assert_eq!(infos.iter().filter(|i| i.default).count(), 1);
}

#[test]
fn a_catalog_names_registry_providers() {
    let p = pool("[providers.mine]\nbase_url = \"http://m/v1\"\n", &[]);
    p.set_catalog(Arc::new(|| vec!["zeta".to_owned(), "alpha".to_owned()]));
    assert_eq!(p.names(), vec!["alpha", "mine", "zeta"]);
}

#[derive(Default)]
struct Seen {
    requests: Mutex<Vec<(HeaderMap, Value)>>,
}

async fn record(State(seen): State<Arc<Seen>>, headers: HeaderMap, body: String) -> Response {
    let body = serde_json::from_str(&body).unwrap();
    seen.requests.lock().unwrap().push((headers, body));
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(include_str!("../fixtures/flavors/mistral.sse")))
        .unwrap()
}

#[tokio::test]
async fn quirks_and_headers_reach_the_wire() {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(record))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let toml = format!(
        "[providers.mistral]\nbase_url = \"http://{addr}/v1\"\nmax_tokens = 99\n\
         headers = {{ X-Team = \"core\" }}\n"
    );
    let p = pool_with(
        &toml,
        &env(&[("MISTRAL_API_KEY", "m-key")]),
        bundled_lookup(),
    );
    let client = p.client(Some("mistral")).unwrap();
    let req = ChatRequest {
        model: String::new(),
        messages: vec![Message::user("hi")],
        tools: vec![],
        response_format: None,
        cache_key: None,
        max_tokens: None,
    };
    let reply = client
        .stream_chat(&req, &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(reply.tool_calls.len(), 2);

    let requests = seen.requests.lock().unwrap();
    let (headers, body) = &requests[0];
    assert_eq!(headers["authorization"], "Bearer m-key");
    assert_eq!(headers["x-team"], "core");
    assert_eq!(body["model"], "mistral-large-latest");
    assert_eq!(body["max_tokens"], 99);
    assert!(body.get("stream_options").is_none(), "{body}");
}

/// A config file edit reaches every clone of the pool: the default endpoint, the named
/// tables and the context windows are the new ones, and no client of the old settings is
/// handed out again.
#[test]
fn reconfigure_replaces_the_settings_for_every_clone() {
    let p = pool(
        "[provider]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"old\"\n",
        &[],
    );
    let clone = p.clone();
    let before = p.client(None).unwrap();
    assert_eq!(before.settings().model, "old");
    let t = tables(
        "[provider]\nbase_url = \"http://127.0.0.1:2/v1\"\nmodel = \"new\"\ncontext_window = 9000\n\
         [providers.local]\nbase_url = \"http://127.0.0.1:3/v1\"\nmodel = \"l\"\n",
    );
    p.reconfigure(&t.provider, &t.providers, &env(&[]));
    let after = clone.client(None).unwrap();
    assert_eq!(after.settings().model, "new");
    assert_eq!(
        after.settings().base_url.as_deref(),
        Some("http://127.0.0.1:2/v1")
    );
    assert_eq!(clone.endpoint().model, "new");
    assert_eq!(clone.context_window(None), 9000);
    assert_eq!(clone.client(Some("local")).unwrap().settings().model, "l");
    // Back to nothing configured: the how-to message again.
    let empty = tables("");
    p.reconfigure(&empty.provider, &empty.providers, &env(&[]));
    assert_eq!(clone.client(None).unwrap_err(), NOT_CONFIGURED);
}
