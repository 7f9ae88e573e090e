//! End-to-end: a retry wait of the LLM request is visible. Before each wait the daemon sends a
//! live `retrying {attempt, maxAttempts, delayMs, reason}` event (a 429 with `Retry-After`, a
//! stream that went silent past the idle timeout), `amber-cli run` prints it on stderr, and it
//! is never stored or replayed.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::e2e::{
    Events, connect, done, new_session, of_type, prompt_turn, run_bounded, spawn_config,
    stop_reason,
};
use serde_json::{Value, json};

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
