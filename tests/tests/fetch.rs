//! End-to-end: the `fetch` tool through the real daemon, against a local HTTP server —
//! absent unless `[tools] fetch = true`; HTML as markdown, the size cap and a redirect loop
//! as the model sees them; 127.0.0.1 refused without `fetch_allow_private`; in write mode a
//! host asks once (`host:NAME`) and `allow_session` covers it, another host asks again; a
//! `host` rule allows without asking; read mode reaches only the hosts a rule allows. A
//! hostile page cannot hurt the daemon: nesting hundreds of thousands deep comes back
//! shortened with a note while the daemon and its other sessions go on, and
//! `session/cancel` during a slow conversion ends the turn at once.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Decision, Mode};
use amber_tests::daemon::{DaemonOptions, TestDaemon};
use amber_tests::steps::{
    Events, FAST_RETRIES, done, new_session, of_type, offered_tools, prompt_turn, spawn_config,
    stop_reason,
};
use amber_tests::tool_calls::{
    call, calls, connect_approver, envelope_for, next_approval, request_id, respond, result_of,
};
use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const PAGE: &str = "<!doctype html><html><head><title>Guide</title>\
                    <script>tracking()</script></head><body><h1>Install</h1>\
                    <p>Run <code>cargo add amber</code>, then see <a href=\"/docs\">the docs</a>.</p>\
                    <ul><li>fast</li><li>small</li></ul></body></html>";

/// A local server: `/page` (HTML), `/long` (10 000 bytes of text), `/loop-a` ⇄ `/loop-b`.
/// Its port.
async fn serve() -> u16 {
    let app = Router::new()
        .route(
            "/page",
            get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }),
        )
        .route(
            "/long",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/plain")],
                    "0123456789".repeat(1000),
                )
                    .into_response()
            }),
        )
        .route("/loop-a", get(|| async { Redirect::temporary("/loop-b") }))
        .route("/loop-b", get(|| async { Redirect::temporary("/loop-a") }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

fn fetch(id: &str, args: Value) -> MockTurn {
    calls(vec![call(id, "fetch", &args)])
}

fn config(tools: &str, rules: &str) -> String {
    format!("{FAST_RETRIES}[tools]\n{tools}\n{rules}")
}

const ALLOW_LOOPBACK_HOST: &str =
    "[[rules]]\ntool = \"fetch\"\nhost = \"127.0.0.1\"\ndecision = \"allow\"\n";

#[tokio::test(flavor = "multi_thread")]
async fn fetch_is_offered_only_when_the_config_turns_it_on() {
    let mock = MockLlm::start(vec![MockTurn::text("ok"), done()]).await;
    let daemon = spawn_config(&mock, FAST_RETRIES);
    let listed = daemon.rpc_ok("tool/list", json!({}));
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"read") && !names.contains(&"fetch"),
        "{names:?}"
    );
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "hi").await;
    let offered = offered_tools(&mock.requests()[0]);
    assert!(!offered.iter().any(|t| t == "fetch"), "{offered:?}");

    let on = MockLlm::start(vec![MockTurn::text("ok"), done()]).await;
    let daemon = spawn_config(&on, &config("fetch = true", ""));
    let listed = daemon.rpc_ok("tool/list", json!({}));
    let row = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fetch")
        .cloned()
        .unwrap_or_else(|| panic!("fetch not listed: {listed}"));
    assert_eq!(row["source"], "builtin", "{row}");
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "hi").await;
    let offered = offered_tools(&on.requests()[0]);
    assert!(offered.iter().any(|t| t == "fetch"), "{offered:?}");
}

/// With a `host` rule for 127.0.0.1 nothing asks: the page as markdown, a cut body, a loop.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_rule_fetches_without_asking_html_as_markdown_cut_bodies_and_loops() {
    let port = serve().await;
    let base = format!("http://127.0.0.1:{port}");
    let mock = MockLlm::start(vec![
        calls(vec![
            call("page", "fetch", &json!({"url": format!("{base}/page")})),
            call(
                "long",
                "fetch",
                &json!({"url": format!("{base}/long"), "max_bytes": 25}),
            ),
            call("loop", "fetch", &json!({"url": format!("{base}/loop-a")})),
        ]),
        MockTurn::text("Read it."),
        done(),
    ])
    .await;
    let daemon = spawn_config(
        &mock,
        &config(
            "fetch = true\nfetch_allow_private = true",
            ALLOW_LOOPBACK_HOST,
        ),
    );
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Write)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "read the guide").await;
    assert_eq!(stop_reason(&turn), "end_turn");
    assert!(
        of_type(&turn, "approval_requested").is_empty(),
        "a host rule allows without asking: {turn:#?}"
    );

    let page = envelope_for(&mock, "page");
    assert_eq!(page["status"], "ok", "{page}");
    let text = page["output"].as_str().unwrap();
    assert!(
        text.starts_with(&format!(
            "URL: {base}/page\nStatus: 200 OK\nContent-Type: text/html; charset=utf-8\n"
        )),
        "{text}"
    );
    for part in [
        "# Install",
        "`cargo add amber`",
        "[the docs](/docs)",
        "fast",
    ] {
        assert!(text.contains(part), "{part} missing: {text}");
    }
    assert!(
        !text.contains("tracking()") && !text.contains("<h1>"),
        "{text}"
    );

    let (status, long) = result_of(&turn, "long");
    assert_eq!(status, "ok", "{long}");
    assert!(
        long.contains("Note: the body was cut at 25 bytes (max_bytes)"),
        "{long}"
    );
    assert!(long.ends_with("\n\n0123456789012345678901234"), "{long}");

    let (status, looped) = result_of(&turn, "loop");
    assert_eq!(status, "error");
    assert!(
        looped.starts_with("redirect loop: ")
            && looped.contains(&format!("{base}/loop-a → {base}/loop-b → {base}/loop-a")),
        "{looped}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn loopback_is_refused_without_fetch_allow_private() {
    let port = serve().await;
    let mock = MockLlm::start(vec![
        fetch(
            "local",
            json!({"url": format!("http://127.0.0.1:{port}/page")}),
        ),
        fetch(
            "named",
            json!({"url": format!("http://localhost:{port}/page")}),
        ),
        MockTurn::text("Could not."),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config("fetch = true", ""));
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "fetch it").await;
    let (status, output) = result_of(&turn, "local");
    assert_eq!(status, "error");
    assert!(
        output.contains("127.0.0.1 is a loopback address")
            && output.contains("fetch_allow_private"),
        "{output}"
    );
    let (status, output) = result_of(&turn, "named");
    assert_eq!(status, "error");
    assert!(
        output.contains("localhost resolves to") && output.contains("loopback"),
        "{output}"
    );
}

/// Write mode asks once per host; `allow_session` covers that host's later fetches, and a
/// different host asks again with its own scope.
#[tokio::test(flavor = "multi_thread")]
async fn write_mode_asks_once_per_host_and_allow_session_covers_it() {
    let port = serve().await;
    let mock = MockLlm::start(vec![
        fetch(
            "first",
            json!({"url": format!("http://127.0.0.1:{port}/page")}),
        ),
        fetch(
            "again",
            json!({"url": format!("http://127.0.0.1:{port}/long")}),
        ),
        fetch(
            "other",
            json!({"url": format!("http://localhost:{port}/page")}),
        ),
        MockTurn::text("Done."),
        done(),
    ])
    .await;
    let daemon = spawn_config(
        &mock,
        &config("fetch = true\nfetch_allow_private = true", ""),
    );
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Write)).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "read both").await.unwrap();

    let (_, ask) = next_approval(&mut events).await;
    assert_eq!(ask["callId"], "first", "{ask}");
    assert_eq!(ask["tool"], "fetch");
    assert_eq!(ask["scope"], "host:127.0.0.1", "{ask}");
    let rid = request_id(&ask);
    assert!(
        respond(&client, &sid, &rid, Decision::AllowSession)
            .await
            .unwrap()
    );

    let (between, ask) = next_approval(&mut events).await;
    assert_eq!(
        ask["callId"], "other",
        "the second fetch of 127.0.0.1 asked again: {ask}"
    );
    assert_eq!(ask["scope"], "host:localhost", "{ask}");
    assert_eq!(result_of(&between, "first").0, "ok");
    assert_eq!(result_of(&between, "again").0, "ok");
    let rid = request_id(&ask);
    assert!(respond(&client, &sid, &rid, Decision::Deny).await.unwrap());
    let rest = events.turn().await;
    assert_eq!(stop_reason(&rest), "end_turn");
    assert_eq!(result_of(&rest, "other").0, "denied");
    // allow_session wrote nothing to disk.
    assert!(!daemon.workspace.join(".amber/rules.toml").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn read_mode_fetches_only_the_hosts_a_rule_allows() {
    let port = serve().await;
    let mock = MockLlm::start(vec![
        calls(vec![
            call(
                "listed",
                "fetch",
                &json!({"url": format!("http://127.0.0.1:{port}/page"), "format": "text"}),
            ),
            call(
                "unlisted",
                "fetch",
                &json!({"url": format!("http://localhost:{port}/page")}),
            ),
        ]),
        MockTurn::text("Read what I could."),
        done(),
    ])
    .await;
    let daemon = spawn_config(
        &mock,
        &config(
            "fetch = true\nfetch_allow_private = true",
            ALLOW_LOOPBACK_HOST,
        ),
    );
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Read)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "read").await;
    assert!(of_type(&turn, "approval_requested").is_empty(), "{turn:#?}");
    let (status, text) = result_of(&turn, "listed");
    assert_eq!(status, "ok", "{text}");
    assert!(
        text.contains("Install\n") && !text.contains("# Install"),
        "{text}"
    );
    let (status, reason) = result_of(&turn, "unlisted");
    assert_eq!(status, "denied");
    assert!(
        reason.contains("read mode") && reason.contains("localhost"),
        "{reason}"
    );
}

/// Nested past the converter's depth cap in several shapes, under `fetch_max_bytes`'s
/// default of 1 MiB.
fn hostile_page() -> String {
    let shapes = [
        ("<div>", "</div>", 30_000),
        ("<table><tr><td>", "</td></tr></table>", 8_000),
        ("<ul><li>", "</li></ul>", 8_000),
        ("<blockquote><b><i>", "", 8_000),
    ];
    let mut page = String::new();
    for (open, close, depth) in shapes {
        page.push_str(&open.repeat(depth));
        page.push_str("sentinel ");
        page.push_str(&close.repeat(depth));
    }
    page
}

/// `/deep` (the hostile page) and `/paragraphs` (20 000 short paragraphs, noting that it
/// was served). Its port.
async fn serve_hostile(served: Arc<AtomicBool>) -> u16 {
    let app = Router::new()
        .route(
            "/deep",
            get(|| async { ([(header::CONTENT_TYPE, "text/html")], hostile_page()) }),
        )
        .route(
            "/paragraphs",
            get(move || async move {
                served.store(true, Ordering::SeqCst);
                (
                    [(header::CONTENT_TYPE, "text/html")],
                    "<p>word</p>".repeat(20_000),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deeply_nested_page_comes_back_shortened_and_the_daemon_goes_on() {
    assert!(hostile_page().len() < 1 << 20);
    let port = serve_hostile(Arc::default()).await;
    let url = format!("http://127.0.0.1:{port}/deep");
    let mock = MockLlm::start(vec![
        calls(vec![
            call("md", "fetch", &json!({"url": url})),
            call("text", "fetch", &json!({"url": url, "format": "text"})),
        ]),
        MockTurn::text("Read it."),
        done(),
        MockTurn::text("Second session."),
        done(),
    ])
    .await;
    let mut daemon = spawn_config(
        &mock,
        &config(
            "fetch = true\nfetch_allow_private = true",
            ALLOW_LOOPBACK_HOST,
        ),
    );
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Write)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "read the page").await;
    assert_eq!(stop_reason(&turn), "end_turn");
    for id in ["md", "text"] {
        let (status, output) = result_of(&turn, id);
        assert_eq!(status, "ok", "{id}: {}", &output[..output.len().min(500)]);
        assert!(
            output.contains(
                "Note: the page nests elements deeper than 256; what lies deeper is shown as \
                 plain text, without its structure."
            ),
            "{id}: {}",
            &output[..output.len().min(500)]
        );
        assert_eq!(output.matches("sentinel").count(), 4, "{id}");
    }

    // The daemon is up, and another session works.
    assert_eq!(daemon.wait_exit(Duration::ZERO), None, "amberd exited");
    let other = new_session(&client, &daemon, Some(Mode::Write)).await;
    let mut other_events = Events::live(&client, &other).await;
    let turn = prompt_turn(&client, &mut other_events, &other, "hello").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn session_cancel_during_a_slow_conversion_ends_the_turn_at_once() {
    let served = Arc::new(AtomicBool::new(false));
    let port = serve_hostile(Arc::clone(&served)).await;
    let mock = MockLlm::start(vec![
        fetch(
            "slow",
            json!({"url": format!("http://127.0.0.1:{port}/paragraphs")}),
        ),
        MockTurn::text("unused"),
    ])
    .await;
    // Each 16 KiB chunk of the conversion then takes a minute.
    let mut daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: config(
            "fetch = true\nfetch_allow_private = true",
            ALLOW_LOOPBACK_HOST,
        ),
        env: vec![("AMBER_TEST_FETCH_CONVERT_PAUSE_MS".into(), "60000".into())],
    });
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Write)).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "read").await.unwrap();
    let started = Instant::now();
    while !served.load(Ordering::SeqCst) {
        assert!(started.elapsed() < Duration::from_secs(30), "never fetched");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The body reaches the daemon in milliseconds; the first chunk then converts and the
    // conversion pauses.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cancelled_at = Instant::now();
    assert!(client.session_cancel(&sid).await.unwrap().cancelled);
    let rest = events.turn().await;
    let waited = cancelled_at.elapsed();
    assert_eq!(stop_reason(&rest), "cancelled", "{rest:#?}");
    assert!(waited < Duration::from_secs(3), "cancel took {waited:?}");
    let (status, output) = result_of(&rest, "slow");
    assert_ne!(status, "ok");
    assert_eq!(
        output,
        "[cancelled] the turn was cancelled while the page was being converted"
    );
    assert_eq!(mock.request_count(), 1, "no LLM call after the cancel");

    // The daemon is up and the session takes the next prompt.
    assert_eq!(daemon.wait_exit(Duration::ZERO), None, "amberd exited");
    mock.push([MockTurn::text("Still here."), done()]);
    let turn = prompt_turn(&client, &mut events, &sid, "again").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
}
