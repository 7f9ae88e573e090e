//! `LlmClient` against a scripted local OpenAI-compatible endpoint (axum): success, retry on
//! 429 with `Retry-After`, exhausted retries on 5xx, no retry once text was streamed,
//! context-length 400, buffered JSON replies, connect failures and prompt cancellation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

/// One `llm` module, so the test names (`llm::…`) stay those this suite had in amberd.
mod llm {
    use std::collections::VecDeque;
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use amber_llm::{ApiError, ChatRequest, LlmClient, LlmSettings, StreamEvent, ToolSpec};
    use amber_proto::Message;
    use axum::Router;
    use axum::body::Body;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::Response;
    use axum::routing::post;
    use bytes::Bytes;
    use futures::StreamExt;
    use tokio_util::sync::CancellationToken;

    /// One scripted reply of the mock endpoint.
    enum Reply {
        Sse(String),
        /// Send this, then keep the connection open without a byte more.
        SseThenHang(String),
        Status(u16, Vec<(&'static str, &'static str)>, String),
        Json(String),
    }

    #[derive(Default)]
    struct Mock {
        script: Mutex<VecDeque<Reply>>,
        requests: Mutex<Vec<(HeaderMap, String)>>,
    }

    impl Mock {
        fn hits(&self) -> usize {
            self.requests.lock().unwrap().len()
        }
    }

    async fn chat(State(mock): State<Arc<Mock>>, headers: HeaderMap, body: String) -> Response {
        mock.requests.lock().unwrap().push((headers, body));
        let reply = mock.script.lock().unwrap().pop_front();
        let builder = Response::builder();
        match reply {
            Some(Reply::Sse(text)) => builder
                .header("content-type", "text/event-stream")
                .body(Body::from(text)),
            Some(Reply::SseThenHang(text)) => {
                let first = futures::stream::iter([Ok::<_, Infallible>(Bytes::from(text))]);
                builder
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(first.chain(futures::stream::pending())))
            }
            Some(Reply::Status(code, headers, body)) => {
                let mut b = builder.status(StatusCode::from_u16(code).unwrap());
                for (k, v) in headers {
                    b = b.header(k, v);
                }
                b.body(Body::from(body))
            }
            Some(Reply::Json(body)) => builder
                .header("content-type", "application/json")
                .body(Body::from(body)),
            None => builder.status(500).body(Body::from("script exhausted")),
        }
        .unwrap()
    }

    /// Start the mock; returns it and a base URL (`http://127.0.0.1:PORT/v1/`).
    async fn serve(script: Vec<Reply>) -> (Arc<Mock>, String) {
        let mock = Arc::new(Mock {
            script: Mutex::new(script.into()),
            ..Mock::default()
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(mock.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (mock, format!("http://{addr}/v1/"))
    }

    fn settings(base_url: &str) -> LlmSettings {
        LlmSettings {
            base_url: Some(base_url.to_owned()),
            api_key: Some("sk-test".into()),
            model: "test-model".into(),
            retry_base: Duration::from_millis(1),
            idle_timeout: Duration::from_secs(10),
            ..LlmSettings::default()
        }
    }

    fn request() -> ChatRequest {
        ChatRequest {
            model: String::new(),
            messages: vec![Message::system("be brief"), Message::user("hi")],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "Read a file".into(),
                parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            }],
            response_format: None,
            cache_key: None,
            max_tokens: None,
        }
    }

    fn sse(chunks: &[serde_json::Value], done: bool) -> String {
        let mut out: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        if done {
            out.push_str("data: [DONE]\n\n");
        }
        out
    }

    fn hello_stream() -> String {
        sse(
            &[
                serde_json::json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]}),
                serde_json::json!({"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]}),
                serde_json::json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}}),
            ],
            true,
        )
    }

    async fn run(
        client: &LlmClient,
        cancel: &CancellationToken,
    ) -> (Result<amber_llm::ChatResponse, ApiError>, Vec<StreamEvent>) {
        let mut events = Vec::new();
        let mut sink = |e: StreamEvent| events.push(e);
        let r = client.stream_chat(&request(), cancel, &mut sink).await;
        (r, events)
    }

    #[tokio::test]
    async fn streams_a_reply_and_sends_an_openai_request() {
        let (mock, base) = serve(vec![Reply::Sse(hello_stream())]).await;
        let client = LlmClient::new(settings(&base)).unwrap();
        let (r, events) = run(&client, &CancellationToken::new()).await;
        let r = r.unwrap();
        assert_eq!(r.text, "Hello");
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!(r.usage.unwrap().total_tokens, 9);
        // Chunks that arrive together are forwarded as one delta: how many depends on
        // timing, the text in order does not.
        let text: String = events
            .iter()
            .map(|e| match e {
                StreamEvent::TextDelta(t) => t.as_str(),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(text, "Hello");

        let requests = mock.requests.lock().unwrap();
        let (headers, body) = &requests[0];
        assert_eq!(headers["authorization"], "Bearer sk-test");
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["messages"][1]["content"], "hi");
        assert_eq!(body["tools"][0]["function"]["name"], "read_file");
    }

    #[tokio::test]
    async fn retries_429_honouring_retry_after() {
        let (mock, base) = serve(vec![
            Reply::Status(
                429,
                vec![("retry-after", "1")],
                r#"{"error":{"message":"slow down","type":"rate_limit"}}"#.into(),
            ),
            Reply::Sse(hello_stream()),
        ])
        .await;
        let client = LlmClient::new(settings(&base)).unwrap();
        let started = Instant::now();
        let (r, events) = run(&client, &CancellationToken::new()).await;
        assert_eq!(r.unwrap().text, "Hello");
        assert!(started.elapsed() >= Duration::from_secs(1));
        assert_eq!(mock.hits(), 2);
        match &events[0] {
            StreamEvent::Retrying {
                attempt,
                max_attempts,
                delay,
                reason,
                error,
            } => {
                assert_eq!(*attempt, 1);
                assert_eq!(*max_attempts, settings(&base).max_retries);
                assert_eq!(*delay, Duration::from_secs(1));
                assert_eq!(reason, "429 rate limited");
                assert!(error.contains("slow down"), "{error}");
            }
            other => panic!("expected Retrying, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn retry_after_is_capped_by_retry_max() {
        let (_mock, base) = serve(vec![
            Reply::Status(429, vec![("retry-after", "3600")], String::new()),
            Reply::Sse(hello_stream()),
        ])
        .await;
        let client = LlmClient::new(LlmSettings {
            retry_max: Duration::from_millis(20),
            ..settings(&base)
        })
        .unwrap();
        let (r, events) = run(&client, &CancellationToken::new()).await;
        assert!(r.is_ok());
        assert!(matches!(
            events[0],
            StreamEvent::Retrying { delay, .. } if delay == Duration::from_millis(20)
        ));
    }

    #[tokio::test]
    async fn server_errors_exhaust_retries() {
        let script = (0..5)
            .map(|_| Reply::Status(500, vec![], "boom".into()))
            .collect();
        let (mock, base) = serve(script).await;
        let client = LlmClient::new(LlmSettings {
            max_retries: 3,
            ..settings(&base)
        })
        .unwrap();
        let (r, events) = run(&client, &CancellationToken::new()).await;
        let err = r.unwrap_err();
        assert_eq!(err.code(), "server_error");
        assert!(err.is_retryable());
        assert_eq!(mock.hits(), 4);
        let attempts: Vec<u32> = events
            .iter()
            .map(|e| match e {
                StreamEvent::Retrying { attempt, .. } => *attempt,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(attempts, vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn context_length_400_is_not_retried() {
        let (mock, base) = serve(vec![Reply::Status(
            400,
            vec![],
            r#"{"error":{"message":"This model's maximum context length is 4096 tokens","code":"context_length_exceeded"}}"#.into(),
        )])
        .await;
        let client = LlmClient::new(settings(&base)).unwrap();
        let (r, events) = run(&client, &CancellationToken::new()).await;
        assert_eq!(r.unwrap_err().code(), "context_length_exceeded");
        assert_eq!(mock.hits(), 1);
        assert!(events.is_empty());
    }

    #[tokio::test]
    async fn other_4xx_fails_immediately() {
        let (mock, base) = serve(vec![Reply::Status(401, vec![], "bad key".into())]).await;
        let client = LlmClient::new(settings(&base)).unwrap();
        let (r, _) = run(&client, &CancellationToken::new()).await;
        let err = r.unwrap_err();
        assert!(matches!(err, ApiError::Http { status: 401, .. }), "{err:?}");
        assert_eq!(err.code(), "http_error");
        assert_eq!(mock.hits(), 1);
    }

    #[tokio::test]
    async fn no_retry_after_text_was_streamed() {
        let cut = sse(
            &[serde_json::json!({"choices": [{"index": 0, "delta": {"content": "half"}}]})],
            false,
        );
        let (mock, base) = serve(vec![Reply::Sse(cut), Reply::Sse(hello_stream())]).await;
        let client = LlmClient::new(settings(&base)).unwrap();
        let (r, events) = run(&client, &CancellationToken::new()).await;
        assert!(matches!(r, Err(ApiError::Truncated)), "{r:?}");
        assert_eq!(events, vec![StreamEvent::TextDelta("half".into())]);
        assert_eq!(mock.hits(), 1);
    }

    #[tokio::test]
    async fn error_in_stream_before_text_is_retried() {
        let err = "data: {\"error\":{\"message\":\"overloaded\"}}\n\n".to_owned();
        let (mock, base) = serve(vec![Reply::Sse(err), Reply::Sse(hello_stream())]).await;
        let client = LlmClient::new(settings(&base)).unwrap();
        let (r, events) = run(&client, &CancellationToken::new()).await;
        assert_eq!(r.unwrap().text, "Hello");
        assert!(matches!(
            events[0],
            StreamEvent::Retrying { attempt: 1, .. }
        ));
        assert_eq!(mock.hits(), 2);
    }

    #[tokio::test]
    async fn buffered_json_reply_is_accepted() {
        let body = serde_json::json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "reading",
                "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
        });
        let (_mock, base) = serve(vec![Reply::Json(body.to_string())]).await;
        let client = LlmClient::new(settings(&base)).unwrap();
        let (r, events) = run(&client, &CancellationToken::new()).await;
        let r = r.unwrap();
        assert_eq!(r.text, "reading");
        assert_eq!(r.tool_calls[0].name, "read_file");
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(events, vec![StreamEvent::TextDelta("reading".into())]);
    }

    #[tokio::test]
    async fn connection_refused_is_retried_then_reported() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let client = LlmClient::new(LlmSettings {
            max_retries: 2,
            ..settings(&format!("http://{addr}/v1"))
        })
        .unwrap();
        let (r, events) = run(&client, &CancellationToken::new()).await;
        assert_eq!(r.unwrap_err().code(), "connect");
        assert_eq!(events.len(), 2);
    }

    #[tokio::test]
    async fn cancel_mid_stream_returns_promptly() {
        let first = sse(
            &[serde_json::json!({"choices": [{"index": 0, "delta": {"content": "thinking"}}]})],
            false,
        );
        let (_mock, base) = serve(vec![Reply::SseThenHang(first)]).await;
        let client = LlmClient::new(LlmSettings {
            idle_timeout: Duration::from_secs(60),
            ..settings(&base)
        })
        .unwrap();
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let cancelled_at = Arc::new(Mutex::new(None));
        let stamp = cancelled_at.clone();
        let mut sink = move |e: StreamEvent| {
            if matches!(e, StreamEvent::TextDelta(_)) {
                *stamp.lock().unwrap() = Some(Instant::now());
                trigger.cancel();
            }
        };
        let r = client.stream_chat(&request(), &cancel, &mut sink).await;
        let returned = Instant::now();
        assert!(matches!(r, Err(ApiError::Cancelled)), "{r:?}");
        let at = cancelled_at.lock().unwrap().expect("a text delta arrived");
        assert!(returned - at < Duration::from_millis(200));
    }

    #[tokio::test]
    async fn cancel_during_backoff_sleep() {
        let (_mock, base) = serve(vec![Reply::Status(
            503,
            vec![("retry-after", "30")],
            String::new(),
        )])
        .await;
        let client = LlmClient::new(settings(&base)).unwrap();
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let mut sink = move |e: StreamEvent| {
            if matches!(e, StreamEvent::Retrying { .. }) {
                trigger.cancel();
            }
        };
        let started = Instant::now();
        let r = client.stream_chat(&request(), &cancel, &mut sink).await;
        assert!(matches!(r, Err(ApiError::Cancelled)), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_reply_ends_at_done_though_the_server_holds_the_connection() {
        // The connection stays open after `[DONE]`: the reply does not wait for its end,
        // and the next request gets a connection of its own.
        let (mock, base) = serve(vec![
            Reply::SseThenHang(hello_stream()),
            Reply::SseThenHang(hello_stream()),
        ])
        .await;
        let client = LlmClient::new(LlmSettings {
            idle_timeout: Duration::from_secs(3600),
            ..settings(&base)
        })
        .unwrap();
        for _ in 0..2 {
            let reply = tokio::time::timeout(
                Duration::from_secs(60),
                run(&client, &CancellationToken::new()),
            )
            .await
            .expect("the reply ends at [DONE]");
            assert_eq!(reply.0.unwrap().text, "Hello");
        }
        assert_eq!(mock.hits(), 2);
    }

    #[tokio::test]
    async fn a_json_body_past_the_bound_is_reply_too_large_and_not_retried() {
        let text = "x".repeat(4 << 20);
        let body = serde_json::json!({
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": text}}],
        });
        let (mock, base) = serve(vec![
            Reply::Json(body.to_string()),
            Reply::Sse(hello_stream()),
        ])
        .await;
        // The reply may be 1 MiB; a body 2 MiB and more.
        let client = LlmClient::new(LlmSettings {
            max_reply_bytes: 1 << 20,
            ..settings(&base)
        })
        .unwrap();
        let (r, events) = run(&client, &CancellationToken::new()).await;
        let err = r.unwrap_err();
        assert_eq!(err.code(), "reply_too_large", "{err}");
        assert!(err.to_string().contains("max_reply_bytes"), "{err}");
        assert!(events.is_empty(), "{events:?}");
        assert_eq!(mock.hits(), 1, "not retried");

        // Under the event bound but over the reply's: the same error, from the reply.
        let text = "x".repeat((1 << 20) + 1);
        let body = serde_json::json!({
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": text}}],
        });
        let (_mock, base) = serve(vec![Reply::Json(body.to_string())]).await;
        let client = LlmClient::new(LlmSettings {
            max_reply_bytes: 1 << 20,
            ..settings(&base)
        })
        .unwrap();
        let (r, _) = run(&client, &CancellationToken::new()).await;
        let err = r.unwrap_err();
        assert!(err.to_string().contains("the reply"), "{err}");
    }
}
