//! End-to-end: event fan-out to several subscribers, `afterSeq` replay and the `synced`
//! marker, over real amber-client connections.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::e2e::{
    Events, connect, done, durable, new_session, of_type, prompt_turn, seqs, spawn, stop_reason,
    within,
};
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
