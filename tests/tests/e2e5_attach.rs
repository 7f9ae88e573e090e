//! End-to-end: attaching in the middle of a streaming reply. `synced` carries the text the
//! new subscriber missed (`inProgress`), and the live deltas continue exactly where it ends,
//! so prefix + deltas == the completed message.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::e2e::{Events, connect, done, new_session, spawn, within};

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
