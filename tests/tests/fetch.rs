//! End-to-end: the `fetch` tool through the real daemon, against a local HTTP server —
//! absent unless `[tools] fetch = true`; HTML as markdown, the size cap and a redirect loop
//! as the model sees them; 127.0.0.1 refused without `fetch_allow_private`; in write mode a
//! host asks once (`host:NAME`) and `allow_session` covers it, another host asks again; a
//! `host` rule allows without asking; read mode reaches only the hosts a rule allows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Decision, Mode};
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
