//! Slow subscribers: they never slow the session; while they lag, deltas are coalesced so no
//! text is lost or reordered; one that overflows its buffer with durable events is dropped
//! with a `lagged` close reason and loses nothing durable when it resubscribes with
//! `afterSeq`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a panic is the failure report.

use std::time::Duration;

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::e2e::{
    Events, FAST_RETRIES, connect, done, eventually, new_session, spawn_config, within,
};
use jsonrpsee::client_transport::ws::{Url, WsTransportClientBuilder};
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::{Value, json};

/// A raw WebSocket subscriber that reads only when the test says so.
struct Stalled<S, R> {
    _tx: S,
    rx: R,
}

async fn stalled_subscriber(
    daemon: &TestDaemon,
    session: &str,
) -> Stalled<impl TransportSenderT, impl TransportReceiverT<Error: std::fmt::Debug>> {
    let stream = tokio::net::UnixStream::connect(&daemon.socket)
        .await
        .unwrap();
    let url = Url::parse("ws://localhost/").unwrap();
    let (mut tx, mut rx) = WsTransportClientBuilder::default()
        .build_with_stream(url, stream)
        .await
        .expect("websocket handshake");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientInfo": {"name": "slow", "version": "0"}}});
    let _ = tx.send(init.to_string()).await;
    assert!(next_frame(&mut rx).await["result"].is_object());
    let sub = json!({"jsonrpc": "2.0", "id": 2, "method": "session/subscribe",
        "params": {"sessionId": session}});
    let _ = tx.send(sub.to_string()).await;
    let subscribed = next_frame(&mut rx).await;
    assert!(!subscribed["result"].is_null(), "{subscribed}");
    Stalled { _tx: tx, rx }
}

async fn next_frame(rx: &mut impl TransportReceiverT<Error: std::fmt::Debug>) -> Value {
    loop {
        match within("a websocket frame", rx.receive())
            .await
            .expect("frame")
        {
            ReceivedMessage::Text(text) => return serde_json::from_str(&text).unwrap(),
            ReceivedMessage::Bytes(bytes) => return serde_json::from_slice(&bytes).unwrap(),
            ReceivedMessage::Pong => {}
        }
    }
}

fn session_state(daemon: &TestDaemon, session: &str) -> String {
    let got = daemon.rpc_ok("session/get", json!({"sessionId": session}));
    got["session"]["state"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_subscriber_gets_every_delta_coalesced_in_order() {
    const CHUNKS: usize = 30_000;
    let pieces: Vec<String> = (0..CHUNKS).map(|i| format!("{} ", i % 10)).collect();
    let full_text: String = pieces.concat();
    let mock = MockLlm::start(vec![MockTurn::Chunks(pieces), done()]).await;
    let daemon = spawn_config(&mock, FAST_RETRIES);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut fast = Events::live(&client, &session).await;
    let mut stalled = stalled_subscriber(&daemon, &session).await;

    // The turn runs to the end for the reading subscriber while the stalled one reads nothing.
    within(
        "session/prompt",
        client.session_prompt(&session, "stream a lot"),
    )
    .await
    .unwrap();
    let events = fast.turn().await;
    assert_eq!(events.last().unwrap()["stopReason"], "end_turn");
    let streamed: String = events
        .iter()
        .filter(|e| e["type"] == "message_delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, full_text, "the reading subscriber lost text");

    // Now the stalled one drains: all the text, in order, in fewer (merged) deltas.
    let mut text = String::new();
    let mut deltas = 0;
    loop {
        let frame = next_frame(&mut stalled.rx).await;
        assert!(frame["params"].get("error").is_none(), "closed: {frame}");
        let event = &frame["params"]["result"];
        match event["type"].as_str() {
            Some("message_delta") => {
                deltas += 1;
                text.push_str(event["delta"].as_str().unwrap());
            }
            Some("turn_completed") => break,
            _ => {}
        }
    }
    assert_eq!(
        text, full_text,
        "the stalled subscriber lost or reordered text"
    );
    assert!(deltas < CHUNKS, "nothing was coalesced ({deltas} deltas)");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscriber_overflowing_with_durable_events_is_dropped_and_replays_with_after_seq() {
    // A fast stream's deltas are forwarded at most once per millisecond, merged in between;
    // the paced text (~1 MB) fills the socket by bytes, but under load the relay merges more
    // and the WebSocket's 1024-message queue may still take it all. What makes the overflow
    // certain are durable events, never merged: 1,200 parallel `read` calls are 2,400 of them.
    let chunks: Vec<String> = (0..2_500)
        .map(|i| format!("{i:>6}{}", "x".repeat(394)))
        .collect();
    let calls: Vec<MockToolCall> = (0..1_200)
        .map(|i| {
            MockToolCall::new(
                "read",
                &json!({"path": "lag.txt", "offset": i + 1, "limit": 1}),
            )
        })
        .collect();
    let mock = MockLlm::start(vec![
        MockTurn::Slow {
            chunks,
            interval_ms: 1,
        },
        done(),
        MockTurn::ToolCalls(calls),
        MockTurn::text("finished"),
        done(),
    ])
    .await;
    let config = format!("{FAST_RETRIES}[server]\nsubscriber_buffer = 16\n");
    let daemon = spawn_config(&mock, &config);
    let lines: String = (1..=1_300).map(|i| format!("line {i}\n")).collect();
    std::fs::write(daemon.workspace.join("lag.txt"), lines).unwrap();
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut stalled = stalled_subscriber(&daemon, &session).await;

    // The session finishes both turns although one subscriber reads nothing.
    for prompt in ["write", "go"] {
        within("session/prompt", client.session_prompt(&session, prompt))
            .await
            .unwrap();
        eventually("the turn to finish", Duration::from_secs(30), || {
            session_state(&daemon, &session) == "idle"
        })
        .await;
    }

    let mut close = None;
    for _ in 0..20_000 {
        let frame = next_frame(&mut stalled.rx).await;
        if let Some(error) = frame["params"].get("error") {
            close = Some(error.clone());
            break;
        }
    }
    let close = close.expect("the overflowing subscription was never closed");
    assert_eq!(close["code"], "lagged", "{close}");
    assert!(
        close["message"].as_str().unwrap().contains("afterSeq"),
        "{close}"
    );
    let after = close["lastSeq"]
        .as_u64()
        .expect("lastSeq in the close reason");
    assert!(daemon.log().contains("cannot keep up"));

    // Resubscribing with afterSeq replays every durable event it missed, then synced.
    let mut again = Events::subscribe(&client, &session, Some(after)).await;
    let replay = again.until("synced").await;
    let seqs: Vec<u64> = replay.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs.first(), Some(&(after + 1)), "{replay:?}");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let completed = replay
        .iter()
        .filter(|e| e["type"] == "tool_call_completed")
        .count();
    assert!(completed > 0, "{replay:?}");
    assert_eq!(replay[replay.len() - 2]["type"], "turn_completed");
    assert_eq!(replay.last().unwrap()["lastSeq"], *seqs.last().unwrap());
}
