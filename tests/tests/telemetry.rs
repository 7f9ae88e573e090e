//! OpenTelemetry traces (`[telemetry] otlp_endpoint`): a turn with a tool call reaches a
//! collector (an OTLP/HTTP receiver the test runs on loopback) as a `turn` span and a child
//! `tool bash` span, with ids and outcomes and nothing of the prompt or the arguments.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{Events, FAST_RETRIES, connect, eventually, new_session, spawn_config};
use amber_tests::tool_calls::bash;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// A collector on loopback: every `POST /v1/traces` body, as JSON.
async fn collector() -> (u16, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
    let kept = Arc::clone(&bodies);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let kept = Arc::clone(&kept);
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut path = String::new();
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if path.is_empty() {
                            path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                        }
                        if let Some(value) =
                            line.to_ascii_lowercase().strip_prefix("content-length:")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0u8; length];
                    if stream.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    if path == "/v1/traces" {
                        kept.lock()
                            .unwrap()
                            .push(serde_json::from_slice(&body).unwrap());
                    }
                    let _ = stream
                        .get_mut()
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}")
                        .await;
                }
            });
        }
    });
    (port, bodies)
}

/// Every span the collector received.
fn spans(bodies: &[Value]) -> Vec<Value> {
    bodies
        .iter()
        .flat_map(|b| b["resourceSpans"].as_array().cloned().unwrap_or_default())
        .flat_map(|r| r["scopeSpans"].as_array().cloned().unwrap_or_default())
        .flat_map(|s| s["spans"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn attribute<'a>(span: &'a Value, key: &str) -> &'a str {
    span["attributes"]
        .as_array()
        .and_then(|all| all.iter().find(|a| a["key"] == key))
        .and_then(|a| a["value"]["stringValue"].as_str())
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_and_its_tool_call_are_exported_as_spans_without_their_content() {
    let (port, bodies) = collector().await;
    let mock = MockLlm::start(vec![
        bash("c1", "echo SECRET-ARGUMENT-456"),
        MockTurn::text("done"),
        MockTurn::text("DONE"),
    ])
    .await;
    let daemon = spawn_config(
        &mock,
        &format!("{FAST_RETRIES}\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\n"),
    );
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, Some(amber_proto::Mode::Yolo)).await;
    let mut events = Events::live(&client, &session).await;
    client
        .session_prompt(&session, "SECRET-PROMPT-123 run it")
        .await
        .unwrap();
    events.turn().await;
    eventually("the spans are exported", Duration::from_secs(15), || {
        let all = spans(&bodies.lock().unwrap());
        all.iter().any(|s| s["name"] == "turn") && all.iter().any(|s| s["name"] == "tool bash")
    })
    .await;
    let all = spans(&bodies.lock().unwrap());
    let turn = all.iter().find(|s| s["name"] == "turn").unwrap();
    let tool = all.iter().find(|s| s["name"] == "tool bash").unwrap();
    assert_eq!(tool["traceId"], turn["traceId"]);
    assert_eq!(tool["parentSpanId"], turn["spanId"]);
    assert_eq!(attribute(turn, "amber.session.id"), session);
    assert_eq!(attribute(turn, "amber.stop_reason"), "end_turn");
    assert_eq!(attribute(turn, "amber.model"), "mock-model");
    assert_eq!(attribute(tool, "amber.tool.outcome"), "ok");
    assert_eq!(turn["status"]["code"], 1);
    let start: u64 = turn["startTimeUnixNano"].as_str().unwrap().parse().unwrap();
    let end: u64 = turn["endTimeUnixNano"].as_str().unwrap().parse().unwrap();
    assert!(end >= start);
    let sent = serde_json::to_string(&*bodies.lock().unwrap()).unwrap();
    assert!(
        !sent.contains("SECRET-PROMPT"),
        "the prompt left amberd: {sent}"
    );
    assert!(
        !sent.contains("SECRET-ARGUMENT"),
        "an argument left amberd: {sent}"
    );
}
