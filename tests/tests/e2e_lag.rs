//! A subscriber that cannot keep up is dropped with a clear close reason, never slows the
//! session, and loses nothing durable when it resubscribes with `afterSeq`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a panic is the failure report.

use amber_tests::e2e::{Events, FAST_RETRIES, connect, done, new_session, spawn_config, within};
use amber_tests::{MockLlm, MockTurn};
use jsonrpsee::client_transport::ws::{Url, WsTransportClientBuilder};
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::{Value, json};

const CHUNKS: usize = 30_000;

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

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_subscriber_is_dropped_with_a_reason_and_catches_up_with_after_seq() {
    let pieces: Vec<String> = (0..CHUNKS).map(|i| format!("{} ", i % 10)).collect();
    let full_text: String = pieces.concat();
    let mock = MockLlm::start(vec![MockTurn::Chunks(pieces), done()]).await;
    // The default subscriber buffer (8192 events): the stalled subscriber overflows it, the
    // reading one does not.
    let daemon = spawn_config(&mock, FAST_RETRIES);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut fast = Events::live(&client, &session).await;

    // The slow subscriber: a raw WebSocket that subscribes and then stops reading.
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
    tx.send(init.to_string()).await.unwrap();
    assert!(next_frame(&mut rx).await["result"].is_object());
    let sub = json!({"jsonrpc": "2.0", "id": 2, "method": "session/subscribe",
        "params": {"sessionId": session}});
    tx.send(sub.to_string()).await.unwrap();
    let subscribed = next_frame(&mut rx).await;
    assert!(!subscribed["result"].is_null(), "{subscribed}");

    // The turn runs to the end for the fast subscriber while the slow one reads nothing.
    within(
        "session/prompt",
        client.session_prompt(&session, "stream a lot"),
    )
    .await
    .unwrap();
    let events = fast.turn().await;
    let last = events.last().unwrap();
    assert_eq!(last["stopReason"], "end_turn", "{last}");
    let streamed: String = events
        .iter()
        .filter(|e| e["type"] == "message_delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(
        streamed, full_text,
        "the fast subscriber lost or reordered text"
    );

    // Now the slow one drains its socket and finds the close reason at the end.
    let mut close = None;
    for _ in 0..(CHUNKS + 100) {
        let frame = next_frame(&mut rx).await;
        if let Some(error) = frame["params"].get("error") {
            close = Some(error.clone());
            break;
        }
    }
    let close = close.expect("the lagging subscription was never closed");
    assert_eq!(close["code"], "lagged", "{close}");
    assert!(
        close["message"].as_str().unwrap().contains("afterSeq"),
        "{close}"
    );
    let after = close["lastSeq"]
        .as_u64()
        .expect("lastSeq in the close reason");

    // Resubscribing with afterSeq replays every durable event it missed, then synced.
    let mut again = Events::subscribe(&client, &session, Some(after)).await;
    let replay = again.until("synced").await;
    let seqs: Vec<u64> = replay.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs.first(), Some(&(after + 1)), "{replay:?}");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let completed = replay
        .iter()
        .find(|e| e["type"] == "message_completed")
        .expect("message_completed replayed");
    assert_eq!(completed["text"], full_text);
    assert_eq!(replay[replay.len() - 2]["type"], "turn_completed");
}
