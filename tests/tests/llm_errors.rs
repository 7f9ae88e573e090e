//! End-to-end: what a client sees when the LLM endpoint misbehaves (retryable statuses,
//! exhausted retries, a stream cut mid-way, no endpoint at all), and that the session stays
//! usable afterwards. A retry wait is visible: before each wait the daemon sends a live
//! `retrying {attempt, maxAttempts, delayMs, reason}` event (a 429 with `Retry-After`, a
//! stream that went silent past the idle timeout), `amber-cli run` prints it on stderr, and it
//! is never stored or replayed.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{
    Events, connect, done, new_session, of_type, prompt_turn, run_bounded, spawn, spawn_config,
    stop_reason,
};
use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};

fn status(code: u16, retry_after: Option<u64>) -> MockTurn {
    MockTurn::Status {
        code,
        retry_after,
        body: format!(r#"{{"error":{{"message":"scripted {code}","type":"server_error"}}}}"#),
    }
}

/// The turn's single `error` event and its `turn_completed` error object.
fn turn_error(turn: &[Value]) -> (Value, Value) {
    assert_eq!(stop_reason(turn), "error", "{turn:#?}");
    let errors = of_type(turn, "error");
    assert_eq!(errors.len(), 1, "one error event: {turn:#?}");
    let completed = turn.last().unwrap()["error"].clone();
    assert!(completed["code"].as_str().is_some_and(|c| !c.is_empty()));
    assert!(completed["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(errors[0]["code"], completed["code"]);
    assert_eq!(errors[0]["message"], completed["message"]);
    (errors[0].clone(), completed)
}

/// A follow-up prompt in the same session completes normally.
async fn assert_usable(
    mock: &MockLlm,
    client: &amber_client::Client,
    events: &mut Events,
    sid: &str,
) {
    mock.push([MockTurn::text("Back to normal."), done()]);
    let before = mock.request_count();
    let turn = prompt_turn(client, events, sid, "try again").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert_eq!(
        of_type(&turn, "message_completed")[0]["text"],
        "Back to normal."
    );
    assert_eq!(mock.request_count(), before + 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn retryable_status_is_retried_then_succeeds() {
    let mock = MockLlm::start(vec![
        status(429, Some(0)),
        status(500, None),
        MockTurn::text("Made it."),
        done(),
    ])
    .await;
    // Two retries allowed here; the default test config allows one.
    let config = "[provider]\nmax_retries = 2\nretry_base_ms = 10\nretry_max_ms = 50\n";
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: config.into(),
        env: Vec::new(),
    });
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello").await;

    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert!(of_type(&turn, "error").is_empty());
    assert_eq!(of_type(&turn, "message_completed")[0]["text"], "Made it.");
    // 429, 500, the answer, the confirm: every attempt reached the endpoint.
    assert_eq!(mock.request_count(), 4);
    let requests = mock.requests();
    assert_eq!(requests[0], requests[2], "a retry resends the same request");
}

#[tokio::test(flavor = "multi_thread")]
async fn exhausted_retries_end_the_turn_with_an_error_and_the_session_stays_usable() {
    // FAST_RETRIES: one retry, so two 500s exhaust it.
    let mock = MockLlm::start(vec![status(500, None), status(500, None)]).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello").await;

    let (error, completed) = turn_error(&turn);
    assert_eq!(error["retryable"], true, "a 500 is retryable: {error}");
    assert!(
        completed["message"].as_str().unwrap().contains("500"),
        "the message names the status: {completed}"
    );
    assert_eq!(mock.request_count(), 2, "one try plus one retry");
    assert!(of_type(&turn, "message_completed").is_empty());

    // The session is idle again and keeps working.
    let info = client.session_get(&sid).await.unwrap().session;
    assert_eq!(serde_json::to_value(info.state).unwrap(), "idle");
    assert_usable(&mock, &client, &mut events, &sid).await;
    // The failed call left nothing in the context but the prompt.
    let got = client.session_get(&sid).await.unwrap();
    let contents: Vec<_> = got.messages.iter().map(|m| m.content.as_str()).collect();
    assert!(contents.contains(&"hello"));
    assert!(contents.contains(&"Back to normal."));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_non_retryable_status_fails_at_once() {
    let mock = MockLlm::start(vec![status(400, None)]).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello").await;
    let (error, _) = turn_error(&turn);
    assert_eq!(error["retryable"], false, "{error}");
    assert_eq!(mock.request_count(), 1, "a 400 is not retried");
    assert_usable(&mock, &client, &mut events, &sid).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_refusal_names_the_url_model_and_key_variable_and_what_to_check() {
    // (the provider's answer, what the error must say beyond the status)
    let table: &[(u16, &str, &[&str])] = &[
        (
            401,
            r#"{"error":{"message":"invalid api key"}}"#,
            &["the key from AMBER_API_KEY", "the key was refused"],
        ),
        (
            404,
            r#"{"error":{"message":"no such route"}}"#,
            &["endpoint or the model was not found", "/v1"],
        ),
        (
            400,
            r#"{"error":{"message":"model `mock-model` does not exist"}}"#,
            &["refused the model", "AMBER_MODEL"],
        ),
    ];
    for (code, body, says) in table {
        let mock = MockLlm::start(vec![MockTurn::Status {
            code: *code,
            retry_after: None,
            body: (*body).into(),
        }])
        .await;
        let daemon = spawn(&mock);
        let client = connect(&daemon).await;
        let sid = new_session(&client, &daemon, None).await;
        let mut events = Events::live(&client, &sid).await;
        let turn = prompt_turn(&client, &mut events, &sid, "hi").await;
        let (_, completed) = turn_error(&turn);
        let message = completed["message"].as_str().unwrap();
        let url = mock.base_url();
        for needle in [url.as_str(), "model `mock-model`"]
            .iter()
            .chain(says.iter())
        {
            assert!(
                message.contains(needle),
                "{code}: no {needle:?} in {message}"
            );
        }
        assert!(!message.contains("test-key"), "never the key: {message}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_cut_mid_way_is_an_error_turn_and_the_session_stays_usable() {
    let mock = MockLlm::start(vec![MockTurn::Drop {
        chunks: vec!["Half an ".into(), "answ".into()],
    }])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello").await;

    turn_error(&turn);
    // Deltas already streamed are not retried (the client saw them), and no message
    // is completed from half an answer.
    assert_eq!(mock.request_count(), 1);
    assert!(!of_type(&turn, "message_delta").is_empty());
    assert!(of_type(&turn, "message_completed").is_empty());
    assert_usable(&mock, &client, &mut events, &sid).await;
    let got = client.session_get(&sid).await.unwrap();
    assert!(
        got.messages.iter().all(|m| !m.content.contains("Half an")),
        "a cut stream must not enter the context"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_endpoint_configured_fails_the_turn_with_a_how_to() {
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello").await;

    let (error, completed) = turn_error(&turn);
    let message = completed["message"].as_str().unwrap();
    assert!(message.contains("AMBER_BASE_URL"), "{message}");
    assert_eq!(error["retryable"], false);
    // The daemon is still fine and the session still accepts prompts.
    let turn = prompt_turn(&client, &mut events, &sid, "again").await;
    assert_eq!(stop_reason(&turn), "error");
    assert!(client.daemon_status().await.is_ok());
}

// Retry waits, visible to clients.

/// Retry-After is honoured up to `retry_max_ms`, so a 1 s wait stays 1 s.
const RETRY_CONFIG: &str = "[provider]\nmax_retries = 2\nretry_base_ms = 10\nretry_max_ms = 5000\n";

fn rate_limited() -> MockTurn {
    MockTurn::Status {
        code: 429,
        retry_after: Some(1),
        body: r#"{"error":{"message":"slow down","type":"rate_limit"}}"#.into(),
    }
}

fn position(turn: &[Value], ty: &str) -> usize {
    turn.iter()
        .position(|e| e["type"] == ty)
        .unwrap_or_else(|| panic!("no {ty} in {turn:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limited_request_announces_its_wait_with_a_live_retrying_event() {
    let mock = MockLlm::start(vec![rate_limited(), MockTurn::text("Made it."), done()]).await;
    let daemon = spawn_config(&mock, RETRY_CONFIG);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello").await;

    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let retrying = of_type(&turn, "retrying");
    assert_eq!(retrying.len(), 1, "one wait, one event: {turn:#?}");
    let event = retrying[0];
    assert_eq!(event["attempt"], 1, "{event}");
    assert_eq!(event["maxAttempts"], 2, "{event}");
    assert_eq!(event["delayMs"], 1000, "Retry-After: 1 → {event}");
    assert_eq!(event["reason"], "429 rate limited", "{event}");
    assert!(event.get("seq").is_none(), "live, not durable: {event}");
    assert_eq!(event["sessionId"], json!(sid));
    assert!(event["turnId"].is_string(), "{event}");
    // Sent before the wait: ahead of everything the retried request produced.
    assert!(position(&turn, "retrying") < position(&turn, "message_delta"));
    assert_eq!(mock.request_count(), 3, "429, the answer, the confirm");

    // Never stored: a replay of the whole session has no trace of it.
    let mut replay = Events::subscribe(&client, &sid, Some(0)).await;
    let replayed = replay.until("synced").await;
    assert!(of_type(&replayed, "retrying").is_empty(), "{replayed:#?}");
    assert!(!of_type(&replayed, "turn_completed").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_gone_silent_is_retried_with_a_retrying_event() {
    // The first answer opens its stream and then says nothing for longer than the idle timeout.
    let silent = MockTurn::Slow {
        chunks: vec![String::new(), "too late".into()],
        interval_ms: 5_000,
    };
    let mock = MockLlm::start(vec![silent, MockTurn::text("Made it."), done()]).await;
    let config = "[provider]\nmax_retries = 1\nretry_base_ms = 10\nretry_max_ms = 50\nidle_timeout_ms = 400\n";
    let daemon = spawn_config(&mock, config);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello").await;

    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let retrying = of_type(&turn, "retrying");
    assert_eq!(retrying.len(), 1, "{turn:#?}");
    assert_eq!(
        retrying[0]["reason"], "stream idle for 400 ms",
        "{}",
        retrying[0]
    );
    assert_eq!(retrying[0]["attempt"], 1);
    assert_eq!(retrying[0]["maxAttempts"], 1);
    assert!(retrying[0]["delayMs"].as_u64().unwrap() <= 50);
    assert_eq!(of_type(&turn, "message_completed")[0]["text"], "Made it.");
}

#[tokio::test(flavor = "multi_thread")]
async fn amber_cli_run_prints_the_retry_wait_on_stderr() {
    let mock = MockLlm::start(vec![rate_limited(), MockTurn::text("Made it."), done()]).await;
    let daemon = spawn_config(&mock, RETRY_CONFIG);
    let mut cmd = daemon.cli();
    cmd.args(["run", "--no-autostart", "hello"]);
    let (code, stdout, stderr) = tokio::task::spawn_blocking(move || run_bounded(cmd))
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("Made it."), "{stdout}");
    assert!(
        stderr.contains("retrying in 1.0s: 429 rate limited (retry 1 of 2)"),
        "the wait is announced on stderr: {stderr}"
    );

    // `--json` prints it as an event line like any other.
    mock.push([rate_limited(), MockTurn::text("Again."), done()]);
    let mut cmd = daemon.cli();
    cmd.args(["run", "--json", "--no-autostart", "hello"]);
    let (code, stdout, stderr) = tokio::task::spawn_blocking(move || run_bounded(cmd))
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    let retrying: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "retrying")
        .collect();
    assert_eq!(retrying.len(), 1, "{stdout}");
    assert_eq!(retrying[0]["reason"], "429 rate limited");
}

/// Compaction's own requests (classify, extract) announce their waits too: a manual
/// `session/compact` whose classify request is rate limited sends `retrying` before it
/// completes.
#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limited_compaction_request_announces_its_wait() {
    const CLASSIFY: &str =
        r#"{"classification": [{"id": 1, "class": "prune"}, {"id": 2, "class": "prune"}]}"#;
    const EXTRACT: &str = r#"{"memories": ["the user prefers tea"], "skills": []}"#;
    let mock = MockLlm::start(vec![
        MockTurn::text("first answer"),
        done(),
        MockTurn::text("second answer"),
        done(),
        rate_limited(),
        MockTurn::text(CLASSIFY),
        MockTurn::text(EXTRACT),
    ])
    .await;
    let daemon = spawn_config(&mock, RETRY_CONFIG);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    for prompt in ["I like tea", "tell me more"] {
        let turn = prompt_turn(&client, &mut events, &sid, prompt).await;
        assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    }
    let _: Value = client
        .call("session/compact", json!({ "sessionId": sid }))
        .await
        .expect("session/compact");
    let during = events.until("compaction_completed").await;
    let retrying = of_type(&during, "retrying");
    assert_eq!(retrying.len(), 1, "{during:#?}");
    assert_eq!(retrying[0]["reason"], "429 rate limited", "{}", retrying[0]);
    assert_eq!(retrying[0]["delayMs"], 1000, "{}", retrying[0]);
    assert!(position(&during, "compaction_started") < position(&during, "retrying"));
}
