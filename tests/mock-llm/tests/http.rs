//! The mock over real HTTP (a bare HTTP/1.0 client, so the body ends with the connection):
//! stateless conversations with their records' times, the Responses API, the default model
//! latency. The chat-completions script itself is tested through the end-to-end kit
//! (`tests/tests/mock_llm.rs`).

use std::error::Error;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use amber_mock_llm::{Conversation, MockLlm, MockToolCall, MockTurn};
use serde_json::{Value, json};

type Result<T = ()> = std::result::Result<T, Box<dyn Error>>;

/// POSTs `body` to `path`; the status line and the body of the answer.
fn post(addr: SocketAddr, path: &str, body: &Value) -> Result<(String, String)> {
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer k\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(addr)?;
    stream.write_all(request.as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or("no end of the response head")?;
    let status = head.lines().next().unwrap_or_default().to_owned();
    Ok((status, body.to_owned()))
}

/// The content deltas of a chat-completions SSE body, concatenated.
fn chat_text(body: &str) -> String {
    body.split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

fn chat(messages: Value) -> Value {
    json!({"model": "ignored", "stream": true, "stream_options": {"include_usage": true},
        "messages": messages})
}

#[test]
fn conversations_are_answered_from_the_request_and_timed() -> Result {
    let prompt = "list the files, then say so";
    let mock = MockLlm::builder()
        .conversations([Conversation {
            name: "files".into(),
            prompt: prompt.into(),
            turns: vec![
                MockTurn::tool_call("bash", &json!({"command": "ls"})),
                MockTurn::Chunks(vec!["Listed ".into(), "them.".into()]),
            ],
        }])
        .model("bench-model")
        .timings_only()
        .start_blocking()?;
    let first =
        json!([{"role": "system", "content": "rules"}, {"role": "user", "content": prompt}]);
    let (status, body) = post(mock.addr(), "/v1/chat/completions", &chat(first))?;
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.contains(r#""name":"bash""#), "{body}");
    assert!(body.contains(r#""id":"call_0_0""#), "{body}");
    assert!(body.contains(r#""model":"bench-model""#), "{body}");

    let second = json!([
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": null, "tool_calls": []},
        {"role": "tool", "content": "a b"},
    ]);
    let (_, body) = post(mock.addr(), "/chat/completions", &chat(second))?;
    assert_eq!(chat_text(&body), "Listed them.");
    let confirm = json!([{"role": "user", "content": "Are you finished with the task? Say DONE."}]);
    let (_, body) = post(mock.addr(), "/v1/chat/completions", &chat(confirm))?;
    assert_eq!(chat_text(&body), "DONE");

    let records = mock.recorded_since(1);
    assert_eq!(records.len(), 2);
    let reply = &records[0];
    assert_eq!(reply.conversation.as_deref(), Some("files"));
    assert_eq!(reply.path, "/chat/completions");
    assert_eq!((reply.body.clone(), reply.headers.len()), (Value::Null, 0));
    assert_eq!(reply.content_times.len(), 2);
    let last = reply.last_byte.ok_or("the answer did not finish")?;
    assert!(
        reply
            .content_times
            .iter()
            .all(|t| *t >= reply.received && *t <= last)
    );
    assert!(reply.endpoint_time().is_some());
    assert_eq!(
        records[1].conversation, None,
        "the confirm prompt is no conversation's"
    );
    Ok(())
}

#[test]
fn the_responses_api_streams_items_and_completes() -> Result {
    let mock = MockLlm::start_blocking(vec![MockTurn::ChunksAndToolCalls {
        chunks: vec!["on ".into(), "it".into()],
        calls: vec![MockToolCall::new("bash", &json!({"command": "ls"}))],
    }]);
    let request = json!({"model": "m", "stream": true,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "go"}]}]});
    let (status, body) = post(mock.addr(), "/v1/responses", &request)?;
    assert!(status.contains(" 200 "), "{status}");
    let kinds: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(kinds.last(), Some(&"response.completed"));
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "response.output_text.delta")
            .count(),
        2
    );
    assert!(body.contains(r#""call_id":"call_1_0""#), "{body}");
    assert_eq!(mock.recorded()[0].header("authorization"), Some("Bearer k"));
    Ok(())
}

#[test]
fn the_default_delay_waits_for_turns_without_their_own() -> Result {
    let mock = MockLlm::builder()
        .script([
            MockTurn::text("late"),
            MockTurn::Delay {
                ms: 0,
                then: Box::new(MockTurn::text("own delay")),
            },
        ])
        .default_delay(Duration::from_millis(500))
        .start_blocking()?;
    let request = chat(json!([{"role": "user", "content": "x"}]));
    let started = Instant::now();
    let (_, body) = post(mock.addr(), "/v1/chat/completions", &request)?;
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(chat_text(&body), "late");
    let started = Instant::now();
    let (_, body) = post(mock.addr(), "/v1/chat/completions", &request)?;
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(chat_text(&body), "own delay");
    assert_eq!(mock.max_concurrent_delays(), 1);
    Ok(())
}
