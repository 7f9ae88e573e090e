//! End-to-end: what a client sees when the LLM endpoint misbehaves (retryable statuses,
//! exhausted retries, a stream cut mid-way, no endpoint at all), and that the session stays
//! usable afterwards.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::e2e::{
    Events, connect, done, new_session, of_type, prompt_turn, spawn, stop_reason,
};
use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::Value;

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
