//! Prompts sent while a turn runs queue and run in order, each as its own turn, and the
//! later turn sees the earlier one's history.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a panic is the failure report.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::e2e::{Events, connect, done, messages, new_session, spawn, within};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn prompts_sent_during_a_turn_queue_and_run_in_order() {
    let slow = MockTurn::Slow {
        chunks: vec!["first ".into(), "answer".into()],
        interval_ms: 150,
    };
    let mock = MockLlm::start(vec![slow, done(), MockTurn::text("second answer"), done()]).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;

    let first = within("prompt 1", client.session_prompt(&session, "one"))
        .await
        .unwrap();
    let second = within("prompt 2", client.session_prompt(&session, "two"))
        .await
        .unwrap();
    assert_ne!(first.turn_id, second.turn_id);
    let state = within("session/get", client.session_get(&session))
        .await
        .unwrap();
    assert_eq!(state.session.state, amber_proto::SessionState::Running);

    let turn1 = events.turn().await;
    let turn2 = events.turn().await;
    // Each prompt was queued, durably and in order, when it was accepted: the second one's
    // `prompt_queued` arrives while the first turn runs.
    let queued: Vec<(&Value, &Value)> = turn1
        .iter()
        .chain(&turn2)
        .filter(|e| e["type"] == "prompt_queued")
        .map(|e| (&e["turnId"], &e["prompt"]))
        .collect();
    assert_eq!(
        queued,
        [
            (&json!(first.turn_id), &json!("one")),
            (&json!(second.turn_id), &json!("two"))
        ]
    );
    assert_eq!(turn1[0]["type"], "prompt_queued", "{turn1:?}");
    let without_queueing = |turn: Vec<Value>| -> Vec<Value> {
        turn.into_iter()
            .filter(|e| e["type"] != "prompt_queued")
            .collect()
    };
    let (turn1, turn2) = (without_queueing(turn1), without_queueing(turn2));
    for (turn, id, prompt, text) in [
        (&turn1, &first.turn_id, "one", "first answer"),
        (&turn2, &second.turn_id, "two", "second answer"),
    ] {
        assert_eq!(turn[0]["type"], "turn_started", "{turn:?}");
        assert_eq!(turn[0]["prompt"], prompt);
        assert!(turn.iter().all(|e| e["turnId"] == id.as_str()), "{turn:?}");
        let completed = turn
            .iter()
            .find(|e| e["type"] == "message_completed")
            .unwrap();
        assert_eq!(completed["text"], text);
        assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
    }

    // The second turn's first request carries the whole first exchange.
    let requests = mock.requests();
    let contents: Vec<String> = messages(&requests[2])
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect();
    let one = contents
        .iter()
        .position(|c| c == "one")
        .expect("first prompt");
    let answer = contents
        .iter()
        .position(|c| c == "first answer")
        .expect("first reply");
    let two = contents
        .iter()
        .position(|c| c == "two")
        .expect("second prompt");
    assert!(one < answer && answer < two, "{contents:?}");
    let idle = within("session/get", client.session_get(&session))
        .await
        .unwrap();
    assert_eq!(idle.session.state, amber_proto::SessionState::Idle);
}
