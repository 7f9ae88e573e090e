//! Durable sessions: kill -9 the real daemon after a turn, mid-stream, mid-tool, and at
//! random moments in a loop; after each restart every durable event a client had received
//! is replayed exactly, the context is consistent, and the session takes new prompts.

use std::collections::BTreeMap;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{
    Events, connect, done, messages, new_session, prompt_turn, spawn, within,
};
use serde_json::{Value, json};

/// Every durable event received on `events` until the connection drops, by seq.
async fn drain_until_gone(events: &mut Events, seen: &mut BTreeMap<u64, Value>) {
    while let Ok(event) = events.try_next().await {
        if let Some(seq) = event["seq"].as_u64() {
            seen.insert(seq, event);
        }
    }
}

/// The whole durable history after a restart, checked against what was seen before.
async fn replay_matches(
    daemon: &TestDaemon,
    session: &str,
    seen: &BTreeMap<u64, Value>,
) -> Vec<Value> {
    let client = connect(daemon).await;
    let mut events = Events::subscribe(&client, session, Some(0)).await;
    let replay = events.until("synced").await;
    let durable: Vec<&Value> = replay.iter().filter(|e| e["seq"].is_u64()).collect();
    let seqs: Vec<u64> = durable.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "gap or duplicate"
    );
    for (seq, event) in seen {
        let replayed = durable
            .get(*seq as usize - 1)
            .unwrap_or_else(|| panic!("event {seq} was received but is missing after restart"));
        assert_eq!(*replayed, event, "event {seq} changed");
    }
    assert_eq!(replay.last().unwrap()["lastSeq"], seqs.len() as u64);
    replay
}

/// Every assistant tool call in the context is answered, in order, before anything else.
fn assert_consistent(messages: &[amber_proto::Message]) {
    let mut i = 0;
    while i < messages.len() {
        let calls = &messages[i].tool_calls;
        for (k, call) in calls.iter().enumerate() {
            let answer = messages
                .get(i + 1 + k)
                .expect("a tool call without its result");
            assert_eq!(
                answer.tool_call_id.as_deref(),
                Some(call.id.as_str()),
                "{messages:?}"
            );
        }
        i += 1 + calls.len();
    }
}

fn verify_ok(daemon: &TestDaemon, session: &str) {
    let report = daemon.rpc_ok("session/verify", json!({ "sessionId": session }));
    assert_eq!(report["ok"], true, "{report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_after_a_turn_then_replay_is_exact_and_the_session_continues() {
    let mock = MockLlm::start(vec![
        MockTurn::tool_call("write", &json!({"path": "a.txt", "content": "one"})),
        MockTurn::text("wrote it"),
        done(),
        MockTurn::text("still here"),
        done(),
    ])
    .await;
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "write a file").await;
    let seen: BTreeMap<u64, Value> = turn
        .iter()
        .filter_map(|e| e["seq"].as_u64().map(|s| (s, e.clone())))
        .collect();

    daemon.kill(libc::SIGKILL);
    daemon.wait_exit(Duration::from_secs(5)).expect("killed");
    daemon.restart();
    replay_matches(&daemon, &session, &seen).await;
    verify_ok(&daemon, &session);

    let listed = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(listed["sessions"][0]["sessionId"], session.as_str());
    let client = connect(&daemon).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "are you there?").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
    // The new request carries the whole history, tool pair included.
    let last = mock.requests().last().unwrap().clone();
    let text = last.to_string();
    assert!(
        text.contains("write a file") && text.contains("wrote it"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_mid_stream_ends_the_turn_as_interrupted() {
    let slow = MockTurn::Slow {
        chunks: (0..50).map(|i| format!("word{i} ")).collect(),
        interval_ms: 40,
    };
    let mock = MockLlm::start(vec![slow, MockTurn::text("fresh start"), done()]).await;
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    within("prompt", client.session_prompt(&session, "talk slowly"))
        .await
        .unwrap();
    let mut seen = BTreeMap::new();
    let mut deltas = 0;
    while deltas < 3 {
        let event = events.next().await;
        if let Some(seq) = event["seq"].as_u64() {
            seen.insert(seq, event.clone());
        }
        deltas += usize::from(event["type"] == "message_delta");
    }
    let turn_id = seen[&1]["turnId"].clone();

    daemon.kill(libc::SIGKILL);
    daemon.wait_exit(Duration::from_secs(5)).expect("killed");
    drain_until_gone(&mut events, &mut seen).await;
    daemon.restart();
    let replay = replay_matches(&daemon, &session, &seen).await;
    let ended = replay
        .iter()
        .find(|e| e["type"] == "turn_completed" && e["turnId"] == turn_id)
        .expect("the interrupted turn was ended");
    assert_eq!(ended["stopReason"], "error");
    assert_eq!(ended["error"]["code"], "interrupted");
    let got = daemon.rpc_ok("session/get", json!({ "sessionId": session }));
    assert_eq!(got["session"]["state"], "idle");

    let client = connect(&daemon).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "again").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
    assert!(
        mock.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("talk slowly")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_mid_tool_leaves_a_consistent_context() {
    let mock = MockLlm::start(vec![
        MockTurn::tool_call("bash", &json!({"command": "echo started; sleep 20"})),
        MockTurn::text("recovered"),
        done(),
    ])
    .await;
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    within(
        "prompt",
        client.session_prompt(&session, "run the long job"),
    )
    .await
    .unwrap();
    let mut seen = BTreeMap::new();
    loop {
        let event = events.next().await;
        if let Some(seq) = event["seq"].as_u64() {
            seen.insert(seq, event.clone());
        }
        if event["type"] == "tool_output_delta" {
            break;
        }
    }
    daemon.kill(libc::SIGKILL);
    daemon.wait_exit(Duration::from_secs(5)).expect("killed");
    drain_until_gone(&mut events, &mut seen).await;
    daemon.restart();
    let replay = replay_matches(&daemon, &session, &seen).await;
    verify_ok(&daemon, &session);
    // The call the crash cut off ends (error, interrupted) before the turn does.
    let call = seen
        .values()
        .find(|e| e["type"] == "tool_call_started")
        .expect("the call started before the kill");
    let closed = replay
        .iter()
        .position(|e| e["type"] == "tool_call_completed" && e["callId"] == call["callId"])
        .expect("the interrupted call is closed after restart");
    assert_eq!(replay[closed]["status"], "error");
    assert!(
        replay[closed]["output"]
            .as_str()
            .unwrap()
            .starts_with("[interrupted]"),
        "{}",
        replay[closed]
    );
    let ended = replay
        .iter()
        .position(|e| e["type"] == "turn_completed")
        .expect("the interrupted turn ends");
    assert!(closed < ended, "the call closes before the turn ends");
    assert_eq!(replay[ended]["error"]["code"], "interrupted");
    // It reports what its calls used before the crash, as a finished turn would.
    let spent: u64 = replay[..ended]
        .iter()
        .filter(|e| e["type"] == "usage" && e["turnId"] == replay[ended]["turnId"])
        .map(|e| e["usage"]["totalTokens"].as_u64().unwrap())
        .sum();
    assert!(spent > 0);
    assert_eq!(replay[ended]["usage"]["totalTokens"].as_u64(), Some(spent));

    let client = connect(&daemon).await;
    let got = within("get", client.session_get(&session)).await.unwrap();
    assert_consistent(&got.messages);
    // The metadata was last saved before the turn; the log knows its usage and title.
    let usage = seen
        .values()
        .rev()
        .find(|e| e["type"] == "usage")
        .expect("the first request's usage was reported");
    let total: amber_proto::Usage = serde_json::from_value(usage["total"].clone()).unwrap();
    assert!(total.total_tokens > 0);
    assert_eq!(got.session.usage, total);
    assert_eq!(got.session.title, "run the long job");
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "what happened?").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
    // What the model is sent after the crash has no half tool-call pair either.
    let sent: Vec<amber_proto::Message> = messages(mock.requests().last().unwrap())
        .iter()
        .map(|m| amber_proto::Message {
            role: serde_json::from_value(m["role"].clone()).unwrap(),
            content: m["content"].as_str().unwrap_or("").to_owned(),
            tool_calls: m["tool_calls"]
                .as_array()
                .map(|calls| {
                    calls
                        .iter()
                        .map(|c| amber_proto::ToolCall {
                            id: c["id"].as_str().unwrap().to_owned(),
                            name: c["function"]["name"].as_str().unwrap().to_owned(),
                            arguments: c["function"]["arguments"].as_str().unwrap().to_owned(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            tool_call_id: m["tool_call_id"].as_str().map(str::to_owned),
            reasoning_items: Vec::new(),
        })
        .collect();
    assert_consistent(&sent);
}

/// A session that keeps working: one tool call after another, each answered after a
/// short pause, so kills land in streams, tool runs and store writes alike.
fn busy_responder(request: &Value) -> MockTurn {
    let msgs = request["messages"].as_array().cloned().unwrap_or_default();
    let tools_done = msgs.iter().filter(|m| m["role"] == "tool").count();
    let last = msgs.last().cloned().unwrap_or_default();
    if last["content"]
        .as_str()
        .is_some_and(|c| c.contains("Are you finished"))
    {
        return MockTurn::text("DONE");
    }
    if tools_done >= 6 && last["role"] == "tool" {
        return MockTurn::text("finished the batch");
    }
    let step = MockTurn::tool_call(
        "bash",
        &json!({"command": format!("echo step {tools_done} >> steps.log; sleep 0.0{}", tools_done % 9)}),
    );
    MockTurn::Delay {
        ms: 5 + fastrand_ms(tools_done),
        then: Box::new(step),
    }
}

fn fastrand_ms(seed: usize) -> u64 {
    (seed as u64 * 37 + 11) % 40
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_kills_at_random_moments_lose_nothing_a_client_received() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(busy_responder);
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    drop(client);
    let mut seen: BTreeMap<u64, Value> = BTreeMap::new();
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    for round in 0..20 {
        let client = connect(&daemon).await;
        // Subscribe from the last seq seen, so the replay seam is exercised every round.
        let after = seen.keys().last().copied().unwrap_or(0);
        let mut events = Events::subscribe(&client, &session, Some(after)).await;
        let replay = events.until("synced").await;
        for event in replay.iter().filter(|e| e["seq"].is_u64()) {
            seen.insert(event["seq"].as_u64().unwrap(), event.clone());
        }
        let state = within("get", client.session_get(&session)).await.unwrap();
        if state.session.state == amber_proto::SessionState::Idle {
            within(
                "prompt",
                client.session_prompt(&session, &format!("round {round}")),
            )
            .await
            .unwrap();
        }
        // Let it work for a random while, collecting what arrives.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let pause = Duration::from_millis(20 + rng % 180);
        let collect = async {
            loop {
                let event = events.next().await;
                if let Some(seq) = event["seq"].as_u64() {
                    seen.insert(seq, event);
                }
            }
        };
        let _ = tokio::time::timeout(pause, collect).await;
        daemon.kill(libc::SIGKILL);
        daemon.wait_exit(Duration::from_secs(5)).expect("killed");
        drain_until_gone(&mut events, &mut seen).await;
        daemon.restart();
    }
    assert!(
        seen.len() > 20,
        "the session barely worked: {} events",
        seen.len()
    );
    replay_matches(&daemon, &session, &seen).await;
    verify_ok(&daemon, &session);
    let client = connect(&daemon).await;
    let got = within("get", client.session_get(&session)).await.unwrap();
    assert_consistent(&got.messages);
    assert_eq!(got.session.state, amber_proto::SessionState::Idle);
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_sessions_unload_and_come_back_on_use() {
    let mock = MockLlm::start(vec![
        MockTurn::text("first"),
        done(),
        MockTurn::text("second"),
        done(),
    ])
    .await;
    let config = "[sessions]\nidle_unload_secs = 1\n";
    let daemon = amber_tests::steps::spawn_config(&mock, config);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    prompt_turn(&client, &mut events, &session, "hello").await;
    drop(events);
    drop(client);

    let unloaded = || {
        let status = daemon.rpc_ok("daemon/status", json!({}));
        status["sessions"] == 1 && status["sessionsLoaded"] == 0
    };
    amber_tests::steps::eventually(
        "the idle session to unload",
        Duration::from_secs(15),
        unloaded,
    )
    .await;
    // Listing and reading do not need it in memory... but reading loads it again.
    let listed = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(listed["sessions"][0]["sessionId"], session.as_str());
    let got = daemon.rpc_ok("session/get", json!({ "sessionId": session }));
    assert!(got["messages"].to_string().contains("hello"), "{got}");
    let client = connect(&daemon).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "still there?").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
    assert!(
        mock.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("first")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn todos_and_usage_survive_a_crash() {
    let todos = json!({"todos": [
        {"id": "1", "text": "read the code", "status": "done"},
        {"id": "2", "text": "fix the bug", "status": "in_progress"},
    ]});
    let mock = MockLlm::start(vec![
        MockTurn::tool_call("todowrite", &todos),
        MockTurn::text("planned"),
        done(),
    ])
    .await;
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    prompt_turn(&client, &mut events, &session, "plan it").await;
    let before = daemon.rpc_ok("session/get", json!({ "sessionId": session }));
    assert!(before["session"]["usage"]["totalTokens"].as_u64().unwrap() > 0);

    daemon.kill(libc::SIGKILL);
    daemon.wait_exit(Duration::from_secs(5)).expect("killed");
    daemon.restart();
    let after = daemon.rpc_ok("session/get", json!({ "sessionId": session }));
    assert_eq!(after["todos"], before["todos"]);
    assert_eq!(after["todos"][1]["status"], "in_progress");
    assert_eq!(after["session"]["usage"], before["session"]["usage"]);
    assert_eq!(after["session"]["title"], "plan it");
    assert_eq!(after["messages"], before["messages"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_verify_reports_the_first_broken_link() {
    let mock = MockLlm::start(vec![MockTurn::text("hello there"), done()]).await;
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    prompt_turn(&client, &mut events, &session, "greet me").await;
    drop(events);
    drop(client);

    let verify = |daemon: &TestDaemon| {
        daemon
            .cli()
            .args(["--no-autostart", "sessions", "verify", &session])
            .output()
            .expect("amber-cli runs")
    };
    let ok = verify(&daemon);
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    assert!(String::from_utf8_lossy(&ok.stdout).contains("chain intact"));

    // Tamper with a persisted message (and fix up its CRC so only the chain can tell).
    daemon.kill(libc::SIGTERM);
    daemon.wait_exit(Duration::from_secs(5)).expect("stopped");
    let log = daemon.session_log(&session);
    let text = std::fs::read_to_string(&log).unwrap();
    let tampered: Vec<String> = text
        .lines()
        .map(|line| {
            let (_, payload) = line.split_once(' ').unwrap();
            if payload.contains("\"greet me\"") {
                let payload = payload.replace("greet me", "greet ME");
                format!("{:08x} {payload}", crc32(payload.as_bytes()))
            } else {
                line.to_owned()
            }
        })
        .collect();
    assert_ne!(
        tampered.join("\n") + "\n",
        text,
        "the message was not found in the log"
    );
    std::fs::write(&log, tampered.join("\n") + "\n").unwrap();
    daemon.restart();
    let broken = verify(&daemon);
    let stdout = String::from_utf8_lossy(&broken.stdout);
    assert_eq!(broken.status.code(), Some(1), "{broken:?}");
    assert!(stdout.contains("broken at message 1"), "{stdout}");
}

/// CRC-32 (IEEE), as the store frames its records.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[tokio::test(flavor = "multi_thread")]
async fn replay_reaches_back_into_the_store_past_what_memory_keeps() {
    let calls: Vec<MockTurn> = (0..4)
        .map(|i| MockTurn::tool_call("bash", &json!({ "command": format!("echo {i}") })))
        .collect();
    let mut script = calls;
    script.extend([MockTurn::text("done with the echoes"), done()]);
    let mock = MockLlm::start(script).await;
    // Only the newest 3 durable events stay in memory.
    let config = "[sessions]\nmemory_events = 3\n";
    let daemon = amber_tests::steps::spawn_config(&mock, config);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "echo four times").await;
    let seen: BTreeMap<u64, Value> = turn
        .iter()
        .filter_map(|e| e["seq"].as_u64().map(|s| (s, e.clone())))
        .collect();
    assert!(seen.len() > 10, "{}", seen.len());
    // On the same, live daemon: a replay from 0 and one from the middle are exact.
    replay_matches(&daemon, &session, &seen).await;
    let mut from_middle = Events::subscribe(&client, &session, Some(4)).await;
    let replay = from_middle.until("synced").await;
    let seqs: Vec<u64> = replay.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, (5..=seen.len() as u64).collect::<Vec<_>>());
    for event in replay.iter().filter(|e| e["seq"].is_u64()) {
        assert_eq!(event, &seen[&event["seq"].as_u64().unwrap()]);
    }
}
