//! A scripted OpenAI-compatible chat-completions endpoint ([`MockLlm`]) for tests and benchmarks:
//! every `POST /v1/chat/completions` is recorded and answered with the next [`MockTurn`] of the
//! script. Runs on the caller's tokio runtime ([`MockLlm::start`]) or on its own thread
//! ([`MockLlm::start_blocking`]).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::chat::{self as render, Ctx, Step};

/// One scripted answer of the mock endpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum MockTurn {
    /// Streamed as content deltas of about 8 chars each; `finish_reason: "stop"`.
    Text(String),
    /// Exactly these content deltas; `finish_reason: "stop"`.
    Chunks(Vec<String>),
    /// `reasoning_content` deltas, then content deltas; `finish_reason: "stop"`.
    Reasoning { reasoning: String, text: String },
    /// Tool calls, arguments split across several chunks; `finish_reason: "tool_calls"`.
    ToolCalls(Vec<MockToolCall>),
    /// Content deltas, then tool calls; `finish_reason: "tool_calls"`.
    TextAndToolCalls {
        text: String,
        calls: Vec<MockToolCall>,
    },
    /// A non-200 answer (429, 500, 400…) with this body and, when set, a `Retry-After` header.
    Status {
        code: u16,
        retry_after: Option<u64>,
        body: String,
    },
    /// Wait `ms` before answering with `then` (the request is recorded at once).
    Delay { ms: u64, then: Box<MockTurn> },
    /// These content deltas with `interval_ms` between each, then a normal end.
    Slow {
        chunks: Vec<String>,
        interval_ms: u64,
    },
    /// These content deltas, then the connection is closed mid-body: no `finish_reason`, no
    /// usage chunk, no `[DONE]`, no terminating HTTP chunk.
    Drop { chunks: Vec<String> },
    /// This exact body text (for recorded provider quirks), sent as `text/event-stream`.
    Raw(String),
}

impl MockTurn {
    /// A `Text` turn.
    pub fn text(text: impl Into<String>) -> MockTurn {
        MockTurn::Text(text.into())
    }

    /// A `ToolCalls` turn with one call (generated id).
    pub fn tool_call(name: impl Into<String>, arguments: &Value) -> MockTurn {
        MockTurn::ToolCalls(vec![MockToolCall::new(name, arguments)])
    }
}

/// One tool call of a scripted turn.
#[derive(Debug, Clone, PartialEq)]
pub struct MockToolCall {
    /// The call id; `None` generates `call_<request number>_<index>`.
    pub id: Option<String>,
    /// The tool name the model "chose".
    pub name: String,
    /// The raw JSON text of the arguments (need not be valid JSON, for bad-argument tests).
    pub arguments: String,
}

impl MockToolCall {
    /// A call with a generated id and `arguments` serialized as JSON.
    pub fn new(name: impl Into<String>, arguments: &Value) -> MockToolCall {
        MockToolCall {
            id: None,
            name: name.into(),
            arguments: arguments.to_string(),
        }
    }
}

/// One request the mock received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// Request path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers, names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The JSON body; a body that is not JSON is kept as a JSON string of its text.
    pub body: Value,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Answers a request when the script is empty (see [`MockLlm::set_responder`]).
pub type Responder = Arc<dyn Fn(&Value) -> MockTurn + Send + Sync>;

#[derive(Default)]
struct Inner {
    script: VecDeque<MockTurn>,
    responder: Option<Responder>,
    requests: Vec<RecordedRequest>,
    interrupted: usize,
    /// Requests inside a `Delay` right now, and the most there ever were at once.
    delaying: usize,
    max_delaying: usize,
}

#[derive(Default)]
struct Shared {
    inner: Mutex<Inner>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave `Inner` half-updated: keep serving.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

enum Runner {
    /// Serving on the caller's runtime.
    Task(tokio::task::JoinHandle<()>),
    /// Serving on a thread of its own.
    Thread {
        shutdown: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

/// A scripted OpenAI-compatible endpoint on `127.0.0.1:<ephemeral>`. Stops when dropped.
///
/// With [`MockLlm::start`] it is served by the caller's runtime: a `#[tokio::test]` that also
/// blocks its thread (e.g. waiting on a child process) needs `flavor = "multi_thread"`, or
/// [`MockLlm::start_blocking`].
pub struct MockLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    runner: Runner,
}

impl MockLlm {
    /// Binds and starts serving on the current tokio runtime.
    pub async fn start(script: Vec<MockTurn>) -> MockLlm {
        let shared = Arc::new(Shared::default());
        shared.lock().script.extend(script);
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("mock llm: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("mock llm: local_addr");
        let app = router(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        MockLlm {
            addr,
            shared,
            runner: Runner::Task(task),
        }
    }

    /// Binds and starts serving on a background thread with its own runtime (for synchronous
    /// tests and binaries). Usable from inside or outside a runtime.
    pub fn start_blocking(script: Vec<MockTurn>) -> MockLlm {
        let shared = Arc::new(Shared::default());
        shared.lock().script.extend(script);
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (shutdown, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let app = router(shared.clone());
        let thread = std::thread::Builder::new()
            .name("mock-llm".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("mock llm: build runtime");
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                        .await
                        .expect("mock llm: bind 127.0.0.1:0");
                    let addr = listener.local_addr().expect("mock llm: local_addr");
                    let _ = addr_tx.send(addr);
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = shutdown_rx => {}
                    }
                });
                rt.shutdown_timeout(Duration::from_secs(1));
            })
            .expect("mock llm: spawn thread");
        let addr = addr_rx
            .recv()
            .expect("mock llm: server thread died before binding");
        MockLlm {
            addr,
            shared,
            runner: Runner::Thread {
                shutdown: Some(shutdown),
                thread: Some(thread),
            },
        }
    }

    /// The OpenAI-style base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers every request that finds the script empty by calling `responder` with the
    /// request body — a stateless scenario for benchmarks and long-running manual checks.
    pub fn set_responder(&self, responder: impl Fn(&Value) -> MockTurn + Send + Sync + 'static) {
        self.shared.lock().responder = Some(Arc::new(responder));
    }

    /// Appends turns to the script.
    pub fn push(&self, turns: impl IntoIterator<Item = MockTurn>) {
        self.shared.lock().script.extend(turns);
    }

    /// Every chat-completions request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        let inner = self.shared.lock();
        inner.requests.iter().map(|r| r.body.clone()).collect()
    }

    /// Every chat-completions request received (path, headers, body), in order.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// How many chat-completions requests were received.
    pub fn request_count(&self) -> usize {
        self.shared.lock().requests.len()
    }

    /// How many scripted turns are still unconsumed.
    pub fn remaining(&self) -> usize {
        self.shared.lock().script.len()
    }

    /// How many streamed answers the client abandoned before their scripted end (e.g. a
    /// cancelled `Slow` turn). Scripted `Drop`s do not count.
    pub fn interrupted_streams(&self) -> usize {
        self.shared.lock().interrupted
    }

    /// The most requests that were waiting in a `Delay` turn at the same moment: > 1 shows
    /// the client had requests in flight concurrently.
    pub fn max_concurrent_delays(&self) -> usize {
        self.shared.lock().max_delaying
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        match &mut self.runner {
            Runner::Task(task) => task.abort(),
            Runner::Thread { shutdown, thread } => {
                if let Some(tx) = shutdown.take() {
                    let _ = tx.send(());
                }
                if let Some(thread) = thread.take() {
                    let _ = thread.join();
                }
            }
        }
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .fallback(fallback)
        // Requests carry whatever the session's context holds (a 17 MiB tool call included);
        // axum's default 2 MB cap would cut such a request off.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(shared)
}

async fn models() -> Response {
    axum::Json(json!({
        "object": "list",
        "data": [{"id": "mock-model", "object": "model", "owned_by": "amber-tests"}],
    }))
    .into_response()
}

async fn fallback(method: Method, uri: Uri) -> Response {
    let msg = format!("mock llm: no route for {method} {uri}");
    (StatusCode::NOT_FOUND, msg).into_response()
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let recorded = RecordedRequest {
        path: uri.path().to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
                (k.as_str().to_owned(), v)
            })
            .collect(),
        body: parsed
            .clone()
            .unwrap_or_else(|| Value::String(String::from_utf8_lossy(&body).into_owned())),
    };
    let (turn, request_no) = {
        let mut inner = shared.lock();
        inner.requests.push(recorded);
        let request_no = inner.requests.len();
        if parsed.is_none() {
            drop(inner);
            let msg = "mock llm: request body is not JSON";
            return (StatusCode::BAD_REQUEST, msg).into_response();
        }
        let turn = inner.script.pop_front().or_else(|| {
            let responder = inner.responder.clone()?;
            parsed.as_ref().map(|body| responder(body))
        });
        (turn, request_no)
    };
    let Some(mut turn) = turn else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "mock script exhausted").into_response();
    };
    while let MockTurn::Delay { ms, then } = turn {
        {
            let mut inner = shared.lock();
            inner.delaying += 1;
            inner.max_delaying = inner.max_delaying.max(inner.delaying);
        }
        tokio::time::sleep(Duration::from_millis(ms)).await;
        shared.lock().delaying -= 1;
        turn = *then;
    }
    let request = parsed.unwrap_or_default();
    let ctx = Ctx {
        id: format!("chatcmpl-mock-{request_no}"),
        model: request["model"].as_str().unwrap_or("mock-model").to_owned(),
        include_usage: request["stream_options"]["include_usage"].as_bool() == Some(true),
        prompt_tokens: (body.len() as u64).div_ceil(4).max(1),
        request_no,
    };
    answer(
        &shared,
        &turn,
        &ctx,
        request["stream"].as_bool() == Some(true),
    )
    .await
}

async fn answer(shared: &Arc<Shared>, turn: &MockTurn, ctx: &Ctx, stream: bool) -> Response {
    match turn {
        MockTurn::Status {
            code,
            retry_after,
            body,
        } => {
            let status = StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let content_type = if serde_json::from_str::<Value>(body).is_ok() {
                "application/json"
            } else {
                "text/plain; charset=utf-8"
            };
            let mut response = (status, body.clone()).into_response();
            let h = response.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            if let Some(secs) = retry_after {
                h.insert(header::RETRY_AFTER, HeaderValue::from(*secs));
            }
            response
        }
        MockTurn::Raw(_) => event_stream(shared, render::stream_steps(turn, ctx)),
        _ if stream => event_stream(shared, render::stream_steps(turn, ctx)),
        MockTurn::Drop { .. } => {
            // Non-streaming truncation: half of the JSON object, then the connection closes.
            let text = render::completion_json(turn, ctx).to_string();
            let half = text.len() / 2;
            let steps = vec![
                Step::Data(Bytes::from(text.as_bytes()[..half].to_vec())),
                Step::Sleep(render::FLUSH_PAUSE),
                Step::Abort,
            ];
            with_type(body_from_steps(shared, steps), "application/json")
        }
        MockTurn::Slow {
            chunks,
            interval_ms,
        } => {
            let pauses = chunks.len().saturating_sub(1) as u64;
            tokio::time::sleep(Duration::from_millis(interval_ms * pauses)).await;
            axum::Json(render::completion_json(turn, ctx)).into_response()
        }
        _ => axum::Json(render::completion_json(turn, ctx)).into_response(),
    }
}

fn event_stream(shared: &Arc<Shared>, steps: Vec<Step>) -> Response {
    let mut response = with_type(body_from_steps(shared, steps), "text/event-stream");
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn with_type(body: Body, content_type: &'static str) -> Response {
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Counts a streamed answer as interrupted if it is dropped before its scripted end.
struct EndGuard {
    shared: Arc<Shared>,
    finished: bool,
}

impl EndGuard {
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.lock().interrupted += 1;
        }
    }
}

fn body_from_steps(shared: &Arc<Shared>, steps: Vec<Step>) -> Body {
    let guard = EndGuard {
        shared: shared.clone(),
        finished: false,
    };
    let state = (VecDeque::from(steps), guard);
    let stream = futures::stream::unfold(state, |(mut steps, mut guard)| async move {
        loop {
            match steps.pop_front() {
                Some(Step::Sleep(pause)) => tokio::time::sleep(pause).await,
                Some(Step::Data(bytes)) => return Some((Ok(bytes), (steps, guard))),
                Some(Step::Abort) => {
                    guard.finish();
                    steps.clear();
                    let err = std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "mock llm: scripted connection drop",
                    );
                    return Some((Err(err), (steps, guard)));
                }
                None => {
                    guard.finish();
                    return None;
                }
            }
        }
    });
    Body::from_stream(stream)
}
