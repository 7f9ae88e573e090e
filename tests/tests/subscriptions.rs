//! End-to-end: session subscriptions over real connections.
//!
//! - Event fan-out to several subscribers, `afterSeq` replay and the `synced` marker, over
//!   real amber-client connections.
//! - Attaching in the middle of a streaming reply: `synced` carries the text the new
//!   subscriber missed (`inProgress`), and the live deltas continue exactly where it ends, so
//!   prefix + deltas == the completed message.
//! - Slow subscribers: they never slow the session; while they lag, deltas are coalesced so
//!   no text is lost or reordered; one that overflows its buffer with durable events is
//!   dropped with a `lagged` close reason and loses nothing durable when it resubscribes with
//!   `afterSeq`.

use std::time::Duration;

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, durable, eventually, new_session, of_type, prompt_turn,
    seqs, spawn, spawn_config, stop_reason, within,
};
use jsonrpsee::client_transport::ws::{Url, WsTransportClientBuilder};
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::{Value, json};

fn script() -> Vec<MockTurn> {
    vec![
        MockTurn::tool_call("write", &json!({"path": "a.txt", "content": "a"})),
        MockTurn::text("Wrote a.txt for you."),
        done(),
    ]
}

/// Reads a subscription's replay: every event before `synced`, and `synced.lastSeq`.
async fn replay(events: &mut Events) -> (Vec<Value>, u64) {
    let mut got = events.until("synced").await;
    let synced = got.pop().unwrap();
    assert!(
        synced.get("seq").is_none(),
        "synced is not durable: {synced}"
    );
    (got, synced["lastSeq"].as_u64().expect("synced.lastSeq"))
}

#[tokio::test(flavor = "multi_thread")]
async fn two_subscribers_see_identical_durable_events() {
    let mock = MockLlm::start(script()).await;
    let daemon = spawn(&mock);
    let first = connect(&daemon).await;
    let second = connect(&daemon).await;
    let sid = new_session(&first, &daemon, None).await;
    let mut a = Events::live(&first, &sid).await;
    let mut b = Events::live(&second, &sid).await;

    let turn_a = prompt_turn(&first, &mut a, &sid, "write a").await;
    let turn_b = within("the second subscriber's turn", b.turn()).await;
    assert_eq!(stop_reason(&turn_a), "end_turn");
    let (durable_a, durable_b) = (durable(&turn_a), durable(&turn_b));
    assert!(durable_a.len() >= 8, "{turn_a:#?}");
    assert_eq!(
        durable_a, durable_b,
        "durable events differ between subscribers"
    );
    // Live deltas reach both as well: the same text (a subscriber may get them merged).
    let streamed = |t: &[Value]| -> String {
        of_type(t, "message_delta")
            .iter()
            .map(|d| d["delta"].as_str().unwrap())
            .collect()
    };
    assert_eq!(streamed(&turn_a), "Wrote a.txt for you.");
    assert_eq!(streamed(&turn_a), streamed(&turn_b));

    // A third connection that arrives later and a prompt sent from the second client.
    let third = connect(&daemon).await;
    let mut c = Events::live(&third, &sid).await;
    mock.push([MockTurn::text("Second answer."), done()]);
    let turn_b2 = prompt_turn(&second, &mut b, &sid, "again").await;
    let turn_a2 = a.turn().await;
    let turn_c2 = c.turn().await;
    assert_eq!(durable(&turn_a2), durable(&turn_b2));
    assert_eq!(durable(&turn_c2), durable(&turn_b2));
    // Seqs continue across turns without a gap.
    let all: Vec<u64> = seqs(&turn_a).into_iter().chain(seqs(&turn_a2)).collect();
    assert_eq!(all, (1..=all.len() as u64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread")]
async fn after_seq_replays_exactly_the_later_durable_events_then_synced() {
    let mock = MockLlm::start(script()).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut live = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut live, &sid, "write a").await;
    let recorded = durable(&turn);
    let last = *seqs(&turn).last().unwrap();
    assert_eq!(
        client.session_get(&sid).await.unwrap().last_seq,
        last,
        "session/get agrees on lastSeq"
    );

    for after in [0, 1, 2, last - 1, last, last + 10] {
        let other = connect(&daemon).await;
        let mut events = Events::subscribe(&other, &sid, Some(after)).await;
        let (replayed, last_seq) = replay(&mut events).await;
        let expected: Vec<Value> = recorded
            .iter()
            .filter(|e| e["seq"].as_u64().unwrap() > after)
            .cloned()
            .collect();
        assert_eq!(replayed, expected, "replay after {after}");
        assert_eq!(last_seq, last);
    }

    // Replay then live, without a gap or a duplicate at the seam.
    let mut resumed = Events::subscribe(&client, &sid, Some(last - 2)).await;
    let (replayed, _) = replay(&mut resumed).await;
    assert_eq!(replayed.len(), 2);
    mock.push([MockTurn::text("More."), done()]);
    let next = prompt_turn(&client, &mut resumed, &sid, "more").await;
    assert_eq!(next[0]["type"], "prompt_queued");
    assert_eq!(next[0]["seq"], last + 1);
    assert_eq!(next[1]["type"], "turn_started");
    assert_eq!(live.turn().await.len(), next.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn without_after_seq_only_synced_then_live() {
    let mock = MockLlm::start(script()).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut first = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut first, &sid, "write a").await;
    let last = *seqs(&turn).last().unwrap();

    let late = connect(&daemon).await;
    let mut events = Events::subscribe(&late, &sid, None).await;
    let synced = events.next().await;
    assert_eq!(
        synced["type"], "synced",
        "no replay without afterSeq: {synced}"
    );
    assert_eq!(synced["lastSeq"], last);
    assert_eq!(synced["sessionId"], sid.as_str());

    mock.push([MockTurn::text("Live now."), done()]);
    client.session_prompt(&sid, "go on").await.unwrap();
    let next = events.turn().await;
    assert_eq!(next[0]["type"], "prompt_queued");
    assert_eq!(next[0]["seq"], last + 1);
    assert_eq!(next[1]["type"], "turn_started");
    assert_eq!(next[1]["prompt"], "go on");
    assert_eq!(stop_reason(&next), "end_turn");

    // A subscription to an unknown session is refused with -32001.
    let err = late
        .subscribe_raw("no-such-session", None)
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), Some(-32001), "{err}");
}

// Attaching mid-reply.

#[tokio::test(flavor = "multi_thread")]
async fn a_subscriber_joining_mid_reply_gets_the_missed_text_then_the_rest_without_overlap() {
    let chunks: Vec<String> = (0..40).map(|i| format!("part{i} ")).collect();
    let full: String = chunks.concat();
    let mock = MockLlm::start(vec![
        MockTurn::Slow {
            chunks: chunks.clone(),
            interval_ms: 25,
        },
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut first = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "stream").await.unwrap();
    // Wait until some of the reply has streamed, then attach a second client.
    let mut seen = 0;
    while seen < 5 {
        let event = first.next().await;
        if event["type"] == "message_delta" {
            seen += 1;
        }
    }
    let late = connect(&daemon).await;
    let mut second = Events::subscribe(&late, &sid, Some(0)).await;
    let mut replayed = Vec::new();
    let synced = loop {
        let event = second.next().await;
        if event["type"] == "synced" {
            break event;
        }
        replayed.push(event);
    };
    assert!(
        replayed.iter().any(|e| e["type"] == "turn_started"),
        "{replayed:?}"
    );
    let items = synced["inProgress"]
        .as_array()
        .expect("inProgress while streaming");
    assert_eq!(items.len(), 1, "{synced}");
    assert_eq!(items[0]["kind"], "message");
    let mut text = items[0]["text"].as_str().unwrap().to_owned();
    assert!(!text.is_empty() && full.starts_with(&text), "{text:?}");
    let completed = within("message_completed", async {
        loop {
            let event = second.next().await;
            match event["type"].as_str().unwrap() {
                "message_delta" => text.push_str(event["delta"].as_str().unwrap()),
                "message_completed" => break event,
                _ => {}
            }
        }
    })
    .await;
    assert_eq!(completed["text"], full.as_str());
    assert_eq!(
        text, full,
        "missed prefix + live deltas == the whole reply, no overlap"
    );

    second.until("turn_completed").await;
    // After the turn, a new subscriber has nothing in progress.
    let mut third = Events::subscribe(&late, &sid, None).await;
    let synced = third.next().await;
    assert_eq!(synced["type"], "synced");
    assert!(synced.get("inProgress").is_none(), "{synced}");
}

// Slow subscribers.

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
