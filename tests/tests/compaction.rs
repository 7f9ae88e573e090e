//! Compaction through the real daemon: a manual `session/compact` that succeeds (memories
//! after the system prompt, a saved skill, the extract request replaying the classify
//! request as a prefix, both starting with the session's head like every turn's request), one that fails (context untouched), and one triggered by the
//! provider rejecting a request for its length (compact, then retry once).

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{
    Events, connect, done, messages, new_session, prompt_turn, spawn, within,
};
use serde_json::{Value, json};

const CLASSIFY: &str =
    r#"{"classification": [{"id": 1, "class": "prune"}, {"id": 2, "class": "prune"}]}"#;
const EXTRACT: &str = r#"{"memories": ["the user prefers tea"], "skills": [{"name": "brew", "description": "how to brew tea", "body": "Steep for three minutes."}]}"#;

fn history() -> Vec<MockTurn> {
    vec![
        MockTurn::text("first answer"),
        done(),
        MockTurn::text("second answer"),
        done(),
    ]
}

async fn two_turns(
    mock: &MockLlm,
) -> (
    amber_tests::TestDaemon,
    amber_client::Client,
    String,
    Events,
) {
    let daemon = spawn(mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    for prompt in ["I like tea, remember that", "tell me more"] {
        let turn = prompt_turn(&client, &mut events, &session, prompt).await;
        assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
    }
    (daemon, client, session, events)
}

/// `session/get` of `session`.
async fn get(client: &amber_client::Client, session: &str) -> amber_proto::SessionGetResult {
    within("get", client.session_get(session)).await.unwrap()
}

/// `session/compact` of `session`.
async fn compact(
    client: &amber_client::Client,
    session: &str,
) -> Result<Value, amber_client::ClientError> {
    within(
        "session/compact",
        client.call("session/compact", json!({ "sessionId": session })),
    )
    .await
}

/// The tokens of these `usage` events together.
fn tokens(spent: &[&Value]) -> u64 {
    spent
        .iter()
        .map(|u| u["totalTokens"].as_u64().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn manual_compaction_keeps_memories_saves_skills_and_shares_the_request_prefix() {
    let mut script = history();
    script.extend([MockTurn::text(CLASSIFY), MockTurn::text(EXTRACT)]);
    script.extend([MockTurn::text("third answer"), done()]);
    let mock = MockLlm::start(script).await;
    let (daemon, client, session, mut events) = two_turns(&mock).await;
    let before = get(&client, &session).await;

    let result = compact(&client, &session).await.expect("session/compact");
    assert!(result["tokensBefore"].as_u64().unwrap() > 0, "{result}");
    let started = events.until("compaction_started").await;
    assert!(started.last().unwrap()["tokensBefore"].is_u64());
    let during = events.until("compaction_completed").await;
    // The classify and extract requests are accounted like any call: a `usage` event each
    // (the mock reports usage), and the session total grows by exactly their sum.
    let spent = usage_events(&during);
    assert_eq!(spent.len(), 2, "{during:#?}");
    let total = get(&client, &session).await.session.usage;
    let spent_tokens = tokens(&spent);
    assert!(spent_tokens > 0, "{spent:?}");
    assert_eq!(
        total.total_tokens,
        before.session.usage.total_tokens + spent_tokens,
        "{spent:?}"
    );
    assert_eq!(spent[1]["total"]["totalTokens"], total.total_tokens);

    // The extract request replays the classify request as a content-identical prefix.
    let requests = mock.requests();
    let classify = messages(&requests[4]);
    let extract = messages(&requests[5]);
    assert!(extract.len() > classify.len());
    assert_eq!(&extract[..classify.len()], &classify[..]);
    // Both start with the head of the session's turns: one cached prefix for all.
    assert_eq!(classify[0], messages(&requests[0])[0]);
    assert_eq!(classify[0]["role"], "system");

    // The rebuilt context: system prompt, then the memories, the pruned turns gone.
    let after = get(&client, &session).await;
    assert_eq!(after.messages[0], before.messages[0]);
    assert!(
        after.messages[1].content.contains("the user prefers tea"),
        "{:?}",
        after.messages
    );
    assert!(after.messages.len() < before.messages.len());

    // The next prompt carries the compacted context; the skill is saved for the workspace.
    let turn = prompt_turn(&client, &mut events, &session, "and now?").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
    let next = mock.requests()[6].clone();
    assert!(next.to_string().contains("the user prefers tea"));
    let skill = walk(&daemon.dir.path().join("data"))
        .into_iter()
        .find(|p| p.ends_with("brew/SKILL.md"))
        .expect("the extracted skill was saved under the data dir");
    assert!(
        std::fs::read_to_string(skill)
            .unwrap()
            .contains("Steep for three minutes.")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_compaction_leaves_the_context_untouched() {
    let mut script = history();
    script.push(MockTurn::text("this is not JSON at all"));
    let mock = MockLlm::start(script).await;
    let (_daemon, client, session, mut events) = two_turns(&mock).await;
    let before = get(&client, &session).await;

    let err = compact(&client, &session)
        .await
        .expect_err("compaction must fail");
    assert!(err.to_string().contains("compaction"), "{err}");
    let failed = events.until("compaction_failed").await;
    assert!(
        failed.last().unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("parse")
    );
    let after = get(&client, &session).await;
    assert_eq!(after.messages, before.messages);
    // The classify request that was answered still cost tokens: accounted.
    let spent = usage_events(&failed);
    assert_eq!(spent.len(), 1, "{failed:#?}");
    let spent_tokens = tokens(&spent);
    assert!(spent_tokens > 0, "{spent:?}");
    assert_eq!(
        after.session.usage.total_tokens,
        before.session.usage.total_tokens + spent_tokens,
        "{spent:?}"
    );
}

/// The `usage` events among `events`, each checked to carry the last call's numbers both
/// at the top level and under `usage`.
fn usage_events(events: &[Value]) -> Vec<&Value> {
    let found: Vec<&Value> = events.iter().filter(|e| e["type"] == "usage").collect();
    for event in &found {
        for key in [
            "promptTokens",
            "completionTokens",
            "cachedTokens",
            "totalTokens",
        ] {
            assert!(event[key].is_u64(), "{key} missing: {event}");
            assert_eq!(event[key], event["usage"][key], "{event}");
        }
        assert!(event["seq"].is_u64(), "usage is durable: {event}");
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn a_context_length_rejection_compacts_and_retries_once() {
    let mut script = history();
    script.extend([
        MockTurn::Status {
            code: 400,
            retry_after: None,
            body: r#"{"error": {"message": "This model's maximum context length is 8192 tokens", "code": "context_length_exceeded"}}"#.into(),
        },
        MockTurn::text(CLASSIFY),
        MockTurn::text(EXTRACT),
        MockTurn::text("answer after compaction"),
        done(),
    ]);
    let mock = MockLlm::start(script).await;
    let (_daemon, client, session, mut events) = two_turns(&mock).await;
    let turn = prompt_turn(&client, &mut events, &session, "one more thing").await;
    let types: Vec<&str> = turn.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let at = |ty: &str| {
        types
            .iter()
            .position(|t| *t == ty)
            .unwrap_or_else(|| panic!("no {ty}: {types:?}"))
    };
    let started = at("compaction_started");
    let completed = at("compaction_completed");
    let message = at("message_completed");
    assert!(started < completed && completed < message, "{types:?}");
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
    // The turn's usage counts its compaction requests too: classify, extract, the answer
    // and the confirm exchange, one `usage` event each.
    let spent = usage_events(&turn);
    assert_eq!(spent.len(), 4, "{turn:#?}");
    assert_eq!(
        turn.last().unwrap()["usage"]["totalTokens"],
        tokens(&spent),
        "{spent:?}"
    );
    // The retried request is smaller than the rejected one.
    let requests = mock.requests();
    let rejected = requests[4].to_string().len();
    let retried = requests[7].to_string().len();
    assert!(retried < rejected, "{retried} >= {rejected}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}
