//! Tests of the test kit's scripted OpenAI-compatible endpoint, driven by a plain HTTP client.

use std::time::Duration;

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    // reqwest is built with `rustls-no-provider`: a client needs a process-wide provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

fn request(stream: bool, include_usage: bool, content: &str) -> Value {
    let mut body = json!({
        "model": "mock-model",
        "messages": [{"role": "user", "content": content}],
        "stream": stream,
    });
    if include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

async fn post(mock: &MockLlm, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{}/chat/completions", mock.base_url()))
        .header("content-type", "application/json")
        .header("authorization", "Bearer test-key")
        .body(body.to_string())
        .send()
        .await
        .expect("send request to mock")
}

/// The `data:` payloads of an SSE body, in order.
fn data_lines(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

/// Parsed JSON chunks (everything but `[DONE]`).
fn chunks(body: &str) -> Vec<Value> {
    data_lines(body)
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).expect("chunk is JSON"))
        .collect()
}

fn content_deltas(chunks: &[Value], field: &str) -> Vec<String> {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"][field].as_str())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn finish_reasons(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["finish_reason"].as_str())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn text_turn_streams_deltas_usage_and_done() {
    let text = "Hello from the scripted model, streamed in pieces.";
    let mock = MockLlm::start(vec![MockTurn::text(text)]).await;
    let response = post(&mock, &request(true, true, "hi")).await;
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let body = response.text().await.unwrap();

    let lines = data_lines(&body);
    assert_eq!(lines.last().map(String::as_str), Some("[DONE]"), "{body}");
    let chunks = chunks(&body);
    let deltas = content_deltas(&chunks, "content");
    assert!(
        deltas.len() > 3,
        "text should arrive in several deltas: {deltas:?}"
    );
    assert_eq!(deltas.concat(), text);
    assert_eq!(finish_reasons(&chunks), vec!["stop"]);
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(chunks[0]["model"], "mock-model");

    let usage_chunk = chunks.last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]), "{usage_chunk}");
    let usage = &usage_chunk["usage"];
    let (p, c) = (
        usage["prompt_tokens"].as_u64().unwrap(),
        usage["completion_tokens"].as_u64().unwrap(),
    );
    assert!(p > 0 && c > 0);
    assert_eq!(usage["total_tokens"].as_u64(), Some(p + c));
}

#[tokio::test]
async fn no_usage_chunk_unless_asked() {
    let mock = MockLlm::start(vec![MockTurn::text("hi")]).await;
    let body = post(&mock, &request(true, false, "x"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        chunks(&body).iter().all(|c| c.get("usage").is_none()),
        "{body}"
    );
    assert_eq!(data_lines(&body).last().map(String::as_str), Some("[DONE]"));
}

#[tokio::test]
async fn tool_calls_turn_splits_arguments() {
    let args = json!({"path": "src/main.rs", "content": "fn main() { println!(\"hi\"); }"});
    let mock = MockLlm::start(vec![MockTurn::ToolCalls(vec![
        MockToolCall {
            id: Some("call_abc".into()),
            name: "write".into(),
            arguments: args.to_string(),
        },
        MockToolCall::new("read", &json!({"path": "README.md"})),
    ])])
    .await;
    let body = post(&mock, &request(true, true, "go"))
        .await
        .text()
        .await
        .unwrap();
    let chunks = chunks(&body);
    assert_eq!(finish_reasons(&chunks), vec!["tool_calls"]);
    assert_eq!(data_lines(&body).last().map(String::as_str), Some("[DONE]"));

    // Reassemble the calls the way a client must: by index.
    let mut calls: Vec<(String, String, String, usize)> = Vec::new();
    for chunk in &chunks {
        let Some(deltas) = chunk["choices"][0]["delta"]["tool_calls"].as_array() else {
            continue;
        };
        for delta in deltas {
            let index = delta["index"].as_u64().unwrap() as usize;
            if calls.len() <= index {
                calls.resize(index + 1, Default::default());
            }
            let call = &mut calls[index];
            if let Some(id) = delta["id"].as_str() {
                call.0 = id.to_owned();
            }
            if let Some(name) = delta["function"]["name"].as_str() {
                call.1 = name.to_owned();
            }
            if let Some(part) = delta["function"]["arguments"].as_str() {
                call.2.push_str(part);
                call.3 += usize::from(!part.is_empty());
            }
        }
    }
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].0.as_str(), calls[0].1.as_str()),
        ("call_abc", "write")
    );
    assert_eq!(serde_json::from_str::<Value>(&calls[0].2).unwrap(), args);
    assert!(calls[0].3 > 2, "arguments should span several chunks");
    assert_eq!(calls[1].1, "read");
    assert!(!calls[1].0.is_empty() && calls[1].0 != "call_abc");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[1].2).unwrap(),
        json!({"path": "README.md"})
    );
}

#[tokio::test]
async fn reasoning_then_text() {
    let mock = MockLlm::start(vec![MockTurn::Reasoning {
        reasoning: "thinking hard about it".into(),
        text: "answer".into(),
    }])
    .await;
    let body = post(&mock, &request(true, false, "q"))
        .await
        .text()
        .await
        .unwrap();
    let chunks = chunks(&body);
    assert_eq!(
        content_deltas(&chunks, "reasoning_content").concat(),
        "thinking hard about it"
    );
    assert_eq!(content_deltas(&chunks, "content").concat(), "answer");
    let first_content = chunks
        .iter()
        .position(|c| c["choices"][0]["delta"]["content"] == "answer");
    let last_reasoning = chunks
        .iter()
        .rposition(|c| c["choices"][0]["delta"]["reasoning_content"].is_string());
    assert!(last_reasoning < first_content);
}

#[tokio::test]
async fn requests_are_recorded_in_order_and_push_extends_the_script() {
    let mock = MockLlm::start(vec![MockTurn::text("one")]).await;
    mock.push([MockTurn::Chunks(vec!["t".into(), "wo".into()])]);
    assert_eq!(mock.remaining(), 2);
    let first = post(&mock, &request(true, false, "first"))
        .await
        .text()
        .await
        .unwrap();
    let second = post(&mock, &request(true, false, "second"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(content_deltas(&chunks(&first), "content").concat(), "one");
    assert_eq!(content_deltas(&chunks(&second), "content"), vec!["t", "wo"]);

    assert_eq!(mock.request_count(), 2);
    let requests = mock.requests();
    assert_eq!(requests[0]["messages"][0]["content"], "first");
    assert_eq!(requests[1]["messages"][0]["content"], "second");
    let recorded = mock.recorded();
    assert_eq!(recorded[0].path, "/v1/chat/completions");
    assert_eq!(recorded[0].header("Authorization"), Some("Bearer test-key"));
    assert_eq!(mock.remaining(), 0);
}

#[tokio::test]
async fn status_429_carries_retry_after() {
    let body = r#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#;
    let mock = MockLlm::start(vec![MockTurn::Status {
        code: 429,
        retry_after: Some(7),
        body: body.into(),
    }])
    .await;
    let response = post(&mock, &request(true, true, "x")).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(response.text().await.unwrap(), body);
}

#[tokio::test]
async fn drop_closes_without_finish_or_done() {
    let mock = MockLlm::start(vec![MockTurn::Drop {
        chunks: vec!["par".into(), "tial".into()],
    }])
    .await;
    let mut response = post(&mock, &request(true, true, "x")).await;
    assert_eq!(response.status(), 200);
    let mut received = String::new();
    let outcome = loop {
        match response.chunk().await {
            Ok(Some(bytes)) => received.push_str(&String::from_utf8_lossy(&bytes)),
            Ok(None) => break "clean end",
            Err(_) => break "error",
        }
    };
    assert_eq!(
        outcome, "error",
        "the connection should be cut mid-body: {received}"
    );
    assert!(!received.contains("[DONE]"), "{received}");
    let chunks = chunks(&received);
    assert_eq!(content_deltas(&chunks, "content"), vec!["par", "tial"]);
    assert!(finish_reasons(&chunks).is_empty());
    assert_eq!(
        mock.interrupted_streams(),
        0,
        "a scripted drop is not a client hang-up"
    );
}

#[tokio::test]
async fn exhausted_script_answers_500() {
    let mock = MockLlm::start(vec![]).await;
    let response = post(&mock, &request(true, false, "x")).await;
    assert_eq!(response.status(), 500);
    assert_eq!(response.text().await.unwrap(), "mock script exhausted");
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn non_streaming_requests_get_a_chat_completion() {
    let mock = MockLlm::start(vec![
        MockTurn::text("plain answer"),
        MockTurn::tool_call("bash", &json!({"command": "ls"})),
    ])
    .await;
    let response = post(&mock, &request(false, false, "x")).await;
    assert_eq!(response.headers()["content-type"], "application/json");
    let v: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["content"], "plain answer");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert!(v["usage"]["total_tokens"].as_u64().unwrap() > 0);

    let v: Value = serde_json::from_str(
        &post(&mock, &request(false, false, "y"))
            .await
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let call = &v["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "bash");
    assert_eq!(
        serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"command": "ls"})
    );
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn raw_body_is_sent_verbatim() {
    let raw = ": keep-alive\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n";
    let mock = MockLlm::start(vec![MockTurn::Raw(raw.into())]).await;
    let body = post(&mock, &request(true, true, "x"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(body, raw);
}

#[tokio::test]
async fn delay_and_slow_take_their_time() {
    let mock = MockLlm::start(vec![
        MockTurn::Delay {
            ms: 150,
            then: Box::new(MockTurn::text("late")),
        },
        MockTurn::Slow {
            chunks: vec!["a".into(), "b".into(), "c".into()],
            interval_ms: 100,
        },
    ])
    .await;
    let started = std::time::Instant::now();
    let body = post(&mock, &request(true, false, "x"))
        .await
        .text()
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(content_deltas(&chunks(&body), "content").concat(), "late");

    let started = std::time::Instant::now();
    let body = post(&mock, &request(true, false, "x"))
        .await
        .text()
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        content_deltas(&chunks(&body), "content"),
        vec!["a", "b", "c"]
    );
}

#[tokio::test]
async fn client_hanging_up_on_a_slow_stream_is_counted() {
    let mock = MockLlm::start(vec![MockTurn::Slow {
        chunks: (0..50).map(|i| format!("c{i}")).collect(),
        interval_ms: 50,
    }])
    .await;
    let mut response = post(&mock, &request(true, false, "x")).await;
    let _first = response.chunk().await.unwrap();
    drop(response);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while mock.interrupted_streams() == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(mock.interrupted_streams(), 1);
}

#[test]
fn start_blocking_serves_without_a_caller_runtime() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("sync")]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let body = rt.block_on(async {
        post(&mock, &request(true, false, "x"))
            .await
            .text()
            .await
            .unwrap()
    });
    assert_eq!(content_deltas(&chunks(&body), "content").concat(), "sync");
    assert_eq!(mock.request_count(), 1);
    drop(mock);
}
