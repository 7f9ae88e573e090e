//! `fetch` against a local server (axum on 127.0.0.1, reached with `allow_private`): HTML
//! as markdown, text and raw, the size cap, redirects (followed, looping, too many, to
//! another host), binary content refused, private addresses refused by default, a status
//! that is not success, bad arguments; a deeply nested page shortened with a note, the
//! deadline covering the conversion, and a cancel ending the call while it converts.

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde_json::json;

use super::*;

const PAGE: &str = "<!doctype html><html><head><title>Doc</title><script>var x=1;</script>\
                    </head><body><h1>Hello</h1><p>A <a href=\"/next\">link</a>.</p></body></html>";

fn typed(content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body.into()).into_response()
}

/// A server on 127.0.0.1; its base URL, `http://127.0.0.1:PORT`.
async fn serve() -> String {
    let app = Router::new()
        .route(
            "/page",
            get(|| async { typed("text/html; charset=utf-8", PAGE) }),
        )
        .route(
            "/long",
            get(|| async { typed("text/plain", "x".repeat(10_000)) }),
        )
        .route(
            "/json",
            get(|| async { typed("application/json", "{\"a\":1}") }),
        )
        .route(
            "/png",
            get(|| async { typed("image/png", vec![0x89, b'P', b'N', b'G', 0]) }),
        )
        .route(
            "/latin1",
            get(|| async { typed("text/plain; charset=iso-8859-1", b"caf\xe9".to_vec()) }),
        )
        .route(
            "/missing",
            get(|| async { (StatusCode::NOT_FOUND, "no such page") }),
        )
        .route("/to-page", get(|| async { Redirect::temporary("/page") }))
        .route("/loop-a", get(|| async { Redirect::temporary("/loop-b") }))
        .route("/loop-b", get(|| async { Redirect::temporary("/loop-a") }))
        .route(
            "/chain/{n}",
            get(
                |axum::extract::Path(n): axum::extract::Path<u32>| async move {
                    Redirect::temporary(&format!("/chain/{}", n + 1))
                },
            ),
        )
        .route(
            "/deep",
            get(|| async {
                typed(
                    "text/html",
                    format!(
                        "{}sentinel{}",
                        "<div><ul><li>".repeat(50_000),
                        "</li></ul></div>".repeat(50_000)
                    ),
                )
            }),
        )
        .route(
            "/paragraphs",
            get(|| async { typed("text/html", "<p>word</p>".repeat(20_000)) }),
        )
        .route(
            "/elsewhere",
            get(|| async { Redirect::permanent("https://docs.rs/serde") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn tool(allow_private: bool, max_bytes: usize) -> FetchTool {
    FetchTool::new(FetchSettings {
        allow_private,
        max_bytes,
        timeout: Duration::from_secs(10),
    })
}

async fn fetch(tool: &FetchTool, args: Value) -> ToolOutcome {
    tool.call(args, &ToolContext::new("/nonexistent", "c1"))
        .await
}

async fn local(args: Value) -> ToolOutcome {
    fetch(&tool(true, 1 << 20), args).await
}

#[tokio::test]
async fn html_comes_back_as_markdown_text_or_raw_under_a_header() {
    let base = serve().await;
    let url = format!("{base}/page");
    let md = local(json!({"url": url})).await;
    assert_eq!(md.status, amber_proto::ToolStatus::Ok, "{}", md.output);
    assert!(
        md.output.starts_with(&format!(
            "URL: {url}\nStatus: 200 OK\nContent-Type: text/html; charset=utf-8\n\n"
        )),
        "{}",
        md.output
    );
    assert!(md.output.contains("# Hello"), "{}", md.output);
    assert!(md.output.contains("[link](/next)"), "{}", md.output);
    assert!(!md.output.contains("var x"), "{}", md.output);

    let text = local(json!({"url": url, "format": "text"})).await;
    assert!(text.output.contains("Hello\n"), "{}", text.output);
    assert!(!text.output.contains("# Hello"), "{}", text.output);
    let raw = local(json!({"url": url, "format": "raw"})).await;
    assert!(raw.output.ends_with(PAGE), "{}", raw.output);
}

#[tokio::test]
async fn the_body_is_cut_at_max_bytes_capped_by_the_ceiling() {
    let base = serve().await;
    let url = format!("{base}/long");
    let cut = local(json!({"url": url, "max_bytes": 100})).await;
    assert!(
        cut.output
            .contains("Note: the body was cut at 100 bytes (max_bytes)"),
        "{}",
        cut.output
    );
    assert!(
        cut.output.ends_with(&format!("\n\n{}", "x".repeat(100))),
        "{}",
        cut.output
    );
    // The call asks for more than the ceiling: the ceiling wins.
    let capped = fetch(&tool(true, 50), json!({"url": url, "max_bytes": 5000})).await;
    assert!(
        capped.output.contains("cut at 50 bytes"),
        "{}",
        capped.output
    );
    assert!(capped.output.ends_with(&format!("\n\n{}", "x".repeat(50))));
    // Whole bodies carry no note.
    let whole = local(json!({"url": format!("{base}/json")})).await;
    assert!(!whole.output.contains("Note:"), "{}", whole.output);
    assert!(whole.output.ends_with("\n\n{\"a\":1}"), "{}", whole.output);
}

#[tokio::test]
async fn redirects_are_followed_on_the_host_and_loops_and_long_chains_fail() {
    let base = serve().await;
    let followed = local(json!({"url": format!("{base}/to-page")})).await;
    assert!(
        followed.output.starts_with(&format!("URL: {base}/page\n")),
        "{}",
        followed.output
    );
    assert!(
        followed
            .output
            .contains(&format!("Redirected from: {base}/to-page (1 redirect)")),
        "{}",
        followed.output
    );

    let looped = local(json!({"url": format!("{base}/loop-a")})).await;
    assert_eq!(looped.status, amber_proto::ToolStatus::Error);
    assert!(
        looped.output.starts_with("redirect loop: ")
            && looped
                .output
                .ends_with(&format!("{base}/loop-a → {base}/loop-b → {base}/loop-a")),
        "{}",
        looped.output
    );

    let long = local(json!({"url": format!("{base}/chain/0")})).await;
    assert!(
        long.output.starts_with("too many redirects (more than 5)")
            && long.output.ends_with(&format!("{base}/chain/6")),
        "{}",
        long.output
    );

    let off = local(json!({"url": format!("{base}/elsewhere")})).await;
    assert_eq!(off.status, amber_proto::ToolStatus::Ok);
    assert!(
        off.output.contains("Status: 308 Permanent Redirect")
            && off.output.contains("Location: https://docs.rs/serde")
            && off.output.contains("another host (docs.rs)"),
        "{}",
        off.output
    );
}

#[tokio::test]
async fn binary_content_is_refused_with_its_type_and_other_text_passes() {
    let base = serve().await;
    let png = local(json!({"url": format!("{base}/png")})).await;
    assert_eq!(png.status, amber_proto::ToolStatus::Error);
    assert!(
        png.output
            .contains("refused: `image/png` is binary content"),
        "{}",
        png.output
    );

    let decoded = local(json!({"url": format!("{base}/latin1")})).await;
    assert!(decoded.output.ends_with("\n\ncafé"), "{}", decoded.output);
    let raw = local(json!({"url": format!("{base}/latin1"), "format": "raw"})).await;
    assert!(raw.output.contains("is not UTF-8"), "{}", raw.output);
    assert!(!raw.output.contains('\u{fffd}'), "{}", raw.output);

    let missing = local(json!({"url": format!("{base}/missing")})).await;
    assert_eq!(missing.status, amber_proto::ToolStatus::Error);
    assert!(
        missing.output.contains("Status: 404 Not Found")
            && missing.output.ends_with("no such page"),
        "{}",
        missing.output
    );
}

#[tokio::test]
async fn private_addresses_are_refused_unless_allowed_literal_or_resolved() {
    let base = serve().await;
    let strict = tool(false, 1 << 20);
    let literal = fetch(&strict, json!({"url": format!("{base}/page")})).await;
    assert_eq!(literal.status, amber_proto::ToolStatus::Error);
    assert!(
        literal
            .output
            .contains("refused: 127.0.0.1 is a loopback address")
            && literal.output.contains("fetch_allow_private"),
        "{}",
        literal.output
    );
    let port = base.rsplit(':').next().unwrap();
    let named = fetch(
        &strict,
        json!({"url": format!("http://localhost:{port}/page")}),
    )
    .await;
    assert!(
        named.output.contains("refused: localhost resolves to")
            && named.output.contains("a loopback address"),
        "{}",
        named.output
    );
    for url in [
        "http://[::1]/",
        "http://169.254.169.254/latest",
        "http://0x7f.1/",
        "http://[::ffff:10.0.0.1]/",
    ] {
        let refused = fetch(&strict, json!({ "url": url })).await;
        assert!(
            refused.output.starts_with("refused: "),
            "{url}: {}",
            refused.output
        );
    }
}

#[tokio::test]
async fn bad_arguments_are_clear_errors() {
    let t = tool(false, 100);
    for (args, says) in [
        (json!({}), "missing required field `url`"),
        (json!({"url": "ftp://docs.rs/x"}), "only http and https"),
        (json!({"url": "file:///etc/passwd"}), "only http and https"),
        (json!({"url": "docs.rs"}), "not a valid URL"),
        (
            json!({"url": "https://docs.rs", "format": "pdf"}),
            "`format` must be",
        ),
        (
            json!({"url": "https://docs.rs", "max_bytes": 0}),
            "at least 1",
        ),
    ] {
        let out = fetch(&t, args.clone()).await;
        assert_eq!(out.status, amber_proto::ToolStatus::Error, "{args}");
        assert!(out.output.contains(says), "{args}: {}", out.output);
    }
}

#[tokio::test]
async fn a_deeply_nested_page_comes_back_shortened_with_a_note() {
    let base = serve().await;
    for format in ["markdown", "text"] {
        let out = local(json!({"url": format!("{base}/deep"), "format": format})).await;
        assert_eq!(out.status, amber_proto::ToolStatus::Ok, "{format}");
        assert!(
            out.output.contains(
                "Note: the page nests elements deeper than 256; what lies deeper is shown as \
                 plain text, without its structure.\n"
            ),
            "{format}: {}",
            &out.output[..out.output.len().min(600)]
        );
        assert!(out.output.contains("sentinel"), "{format}");
    }
}

/// The test hook slows the conversion down: `pause` after each chunk.
fn slow(timeout: Duration, pause: Duration) -> FetchTool {
    let mut tool = FetchTool::new(FetchSettings {
        allow_private: true,
        max_bytes: 1 << 20,
        timeout,
    });
    tool.convert_pause = Some(pause);
    tool
}

#[tokio::test]
async fn the_time_limit_covers_the_conversion_and_keeps_what_was_converted() {
    let base = serve().await;
    let tool = slow(Duration::from_millis(1500), Duration::from_millis(400));
    let started = Instant::now();
    let out = fetch(&tool, json!({"url": format!("{base}/paragraphs")})).await;
    let took = started.elapsed();
    assert!(took < Duration::from_millis(1500 + 1000), "{took:?}");
    assert_eq!(out.status, amber_proto::ToolStatus::Ok, "{}", out.output);
    assert!(
        out.output.contains(
            "Note: converting the page reached the time limit (1500 ms, `[tools] \
             fetch_timeout_ms`); the converted part is shown, the rest is not.\n"
        ),
        "{}",
        &out.output[..out.output.len().min(600)]
    );
    let words = out.output.matches("word").count();
    assert!(words > 0 && words < 20_000, "{words}");
}

#[tokio::test]
async fn a_cancel_ends_the_call_at_once_while_the_page_converts() {
    let base = serve().await;
    let tool = slow(Duration::from_secs(60), Duration::from_secs(5));
    let ctx = ToolContext::new("/nonexistent", "c1");
    let cancel = ctx.cancel.clone();
    let call = tool.call(json!({"url": format!("{base}/paragraphs")}), &ctx);
    let cancelled_at = tokio::spawn(async move {
        // The loopback fetch takes milliseconds; then the conversion pauses 5 s a chunk.
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
        Instant::now()
    });
    let out = call.await;
    let returned = Instant::now();
    let cancelled_at = cancelled_at.await.unwrap();
    assert_eq!(out.status, amber_proto::ToolStatus::Error);
    assert_eq!(
        out.output,
        "[cancelled] the turn was cancelled while the page was being converted"
    );
    assert!(
        returned.duration_since(cancelled_at) < Duration::from_millis(300),
        "{:?}",
        returned.duration_since(cancelled_at)
    );
}

/// Not fetch's own: the other parsers the daemon feeds untrusted nesting (LLM tool-call
/// arguments, MCP results and RPC as JSON; workspace configuration as TOML) keep their
/// recursion limits as this build configures them — a feature turning serde_json's off
/// (`unbounded_depth`) would make this test overflow instead of pass.
#[test]
fn json_and_toml_refuse_deep_nesting_as_the_daemon_builds_them() {
    let deep_json = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let err = serde_json::from_str::<Value>(&deep_json).unwrap_err();
    assert!(
        err.to_string().contains("recursion limit exceeded"),
        "{err}"
    );
    let err = serde_json::from_slice::<Value>(deep_json.as_bytes()).unwrap_err();
    assert!(
        err.to_string().contains("recursion limit exceeded"),
        "{err}"
    );
    let shallow = format!("{}{}", "[".repeat(100), "]".repeat(100));
    assert!(serde_json::from_str::<Value>(&shallow).is_ok());

    let deep_toml = format!("a = {}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(toml::from_str::<toml::Value>(&deep_toml).is_err());
    let deep_tables = format!("a = {}1{}", "{b = ".repeat(100_000), "}".repeat(100_000));
    assert!(toml::from_str::<toml::Value>(&deep_tables).is_err());
}
