//! The server ([`MockLlm`], started through [`MockLlmBuilder`]): axum on `127.0.0.1`, serving
//! `POST /v1/chat/completions`, `POST /v1/responses` and `POST /v1/messages` (Anthropic; each
//! also without the `/v1`) and
//! `GET /v1/models`. Each request is recorded, then answered from the first source that has
//! an answer: the script's next turn, the responder, the conversations; else 500
//! `mock script exhausted`. A script's turn is rendered for its request; a conversation's
//! answers were rendered at start, so the bench's hot path only picks, records and streams.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use serde_json::{Value, json};

use crate::conversation::{Answer, Api, Conversation, Conversations};
use crate::ctx::Ctx;
use crate::error::MockError;
use crate::record::RecordedRequest;
use crate::reply::{self, Body, Reply};
use crate::turn::MockTurn;
use crate::{chat, fault, messages, responses, stream};

/// Answers a request when the script is empty (see [`MockLlm::set_responder`]).
pub type Responder = Arc<dyn Fn(&Value) -> MockTurn + Send + Sync>;

/// The model named when a request names none, in `/v1/models` and in pre-rendered answers.
const DEFAULT_MODEL: &str = "mock-model";

/// What changes while serving.
#[derive(Default)]
struct Inner {
    script: VecDeque<MockTurn>,
    responder: Option<Responder>,
    records: Vec<RecordedRequest>,
    interrupted: usize,
    /// Requests waiting out a delay right now, and the most there ever were at once.
    delaying: usize,
    max_delaying: usize,
}

/// Everything the handlers share.
pub(crate) struct Shared {
    state: Mutex<Inner>,
    conversations: Option<Conversations>,
    model: String,
    default_delay: Duration,
    /// Whether records keep headers and bodies (not only times).
    keep_requests: bool,
}

/// Where a request's answer comes from.
enum Source<'a> {
    Turn(MockTurn),
    Responder(Responder),
    Rendered(&'a Answer),
    Exhausted,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the state half-updated: keep serving.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a streamed answer the client abandoned.
    pub(crate) fn count_interrupted(&self) {
        self.lock().interrupted += 1;
    }

    /// Completes record `index` once its answer was handed over (`last_byte`: `None` if cut).
    pub(crate) fn complete(&self, index: usize, times: Vec<Instant>, last_byte: Option<Instant>) {
        if let Some(record) = self.lock().records.get_mut(index) {
            record.content_times = times;
            record.last_byte = last_byte;
        }
    }

    /// Waits `delay`, counted as a request in a delay.
    async fn wait(&self, delay: Duration) {
        if delay.is_zero() {
            return;
        }
        {
            let mut state = self.lock();
            state.delaying += 1;
            state.max_delaying = state.max_delaying.max(state.delaying);
        }
        tokio::time::sleep(delay).await;
        self.lock().delaying -= 1;
    }

    /// Records `record` and takes the answer's source: the script's next turn, the responder,
    /// else the conversations' answer. The record's index too.
    fn take<'a>(
        &'a self,
        api: Api,
        request: &Value,
        mut record: RecordedRequest,
    ) -> (Source<'a>, usize) {
        // Pure: chosen outside the lock, so concurrent requests do not queue behind it.
        let conversation = self.conversations.as_ref().map(|c| c.answer(api, request));
        let mut state = self.lock();
        let source = if let Some(turn) = state.script.pop_front() {
            Source::Turn(turn)
        } else if let Some(responder) = state.responder.clone() {
            Source::Responder(responder)
        } else if let Some((answer, name)) = conversation {
            record.conversation = name.map(str::to_owned);
            Source::Rendered(answer)
        } else {
            Source::Exhausted
        };
        state.records.push(record);
        (source, state.records.len() - 1)
    }
}

/// How the server is run.
enum Runner {
    /// Serving on the caller's runtime.
    Task(tokio::task::JoinHandle<()>),
    /// Serving on a thread of its own.
    Thread {
        shutdown: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

/// A scripted OpenAI-compatible endpoint on `127.0.0.1:<ephemeral>` (or
/// [`MockLlmBuilder::listen`]). Stops when dropped.
///
/// With [`MockLlm::start`] it is served by the caller's runtime: a `#[tokio::test]` that also
/// blocks its thread (e.g. waiting on a child process) needs `flavor = "multi_thread"`, or
/// [`MockLlm::start_blocking`].
pub struct MockLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    runner: Runner,
}

/// How to start a [`MockLlm`]: its sources of answers, address, model and recording.
pub struct MockLlmBuilder {
    script: Vec<MockTurn>,
    conversations: Vec<Conversation>,
    listen: SocketAddr,
    model: String,
    default_delay: Duration,
    keep_requests: bool,
}

impl MockLlmBuilder {
    /// Turns answered in order, one per request.
    pub fn script(mut self, turns: impl IntoIterator<Item = MockTurn>) -> Self {
        self.script.extend(turns);
        self
    }

    /// Conversations answered statelessly once the script is empty (see [`Conversation`]);
    /// their turns are rendered now, so answering them costs no rendering.
    pub fn conversations(mut self, conversations: impl IntoIterator<Item = Conversation>) -> Self {
        self.conversations.extend(conversations);
        self
    }

    /// The address to bind (default `127.0.0.1:0`: any free port).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// The model of `/v1/models`, of pre-rendered answers and of answers to requests naming
    /// none (default `mock-model`).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The model latency of every answer that has no `Delay` of its own (default none).
    pub fn default_delay(mut self, delay: Duration) -> Self {
        self.default_delay = delay;
        self
    }

    /// Records keep only path, conversation and times, not headers or bodies: for long runs
    /// that never look at requests.
    pub fn timings_only(mut self) -> Self {
        self.keep_requests = false;
        self
    }

    fn shared(self) -> Arc<Shared> {
        let conversations = (!self.conversations.is_empty())
            .then(|| Conversations::render(self.conversations, &self.model));
        Arc::new(Shared {
            state: Mutex::new(Inner {
                script: self.script.into(),
                ..Inner::default()
            }),
            conversations,
            model: self.model,
            default_delay: self.default_delay,
            keep_requests: self.keep_requests,
        })
    }

    /// Binds and starts serving on the current tokio runtime.
    pub async fn start(self) -> Result<MockLlm, MockError> {
        let listen = self.listen;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|source| MockError::Bind {
                addr: listen,
                source,
            })?;
        let addr = listener
            .local_addr()
            .map_err(MockError::io("read the endpoint's address"))?;
        let shared = self.shared();
        let task = tokio::spawn(serve(listener, router(shared.clone())));
        Ok(MockLlm {
            addr,
            shared,
            runner: Runner::Task(task),
        })
    }

    /// Binds and starts serving on a thread of its own, with its own runtime (so neither a
    /// synchronous caller nor a busy runtime of the caller's can delay it). Usable from inside
    /// or outside a runtime.
    pub fn start_blocking(self) -> Result<MockLlm, MockError> {
        let listen = self.listen;
        let listener = std::net::TcpListener::bind(listen).map_err(|source| MockError::Bind {
            addr: listen,
            source,
        })?;
        listener
            .set_nonblocking(true)
            .map_err(MockError::io("make the endpoint's listener non-blocking"))?;
        let addr = listener
            .local_addr()
            .map_err(MockError::io("read the endpoint's address"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(MockError::io("build the endpoint's runtime"))?;
        let listener = {
            let _runtime = runtime.enter();
            tokio::net::TcpListener::from_std(listener)
                .map_err(MockError::io("register the endpoint's listener"))?
        };
        let shared = self.shared();
        let app = router(shared.clone());
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("mock-llm".into())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        () = serve(listener, app) => {}
                        _ = stop => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(MockError::io("spawn the endpoint's thread"))?;
        Ok(MockLlm {
            addr,
            shared,
            runner: Runner::Thread {
                shutdown: Some(shutdown),
                thread: Some(thread),
            },
        })
    }
}

impl MockLlm {
    /// A builder with no script, no conversations, `127.0.0.1:0`, model `mock-model`.
    pub fn builder() -> MockLlmBuilder {
        MockLlmBuilder {
            script: Vec::new(),
            conversations: Vec::new(),
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            model: DEFAULT_MODEL.to_owned(),
            default_delay: Duration::ZERO,
            keep_requests: true,
        }
    }

    /// Serves `script` on the current tokio runtime.
    ///
    /// # Panics
    /// If no local port can be bound: this is the tests' constructor, and a panic their report.
    pub async fn start(script: Vec<MockTurn>) -> MockLlm {
        match MockLlm::builder().script(script).start().await {
            Ok(mock) => mock,
            Err(e) => panic!("mock llm: {e}"),
        }
    }

    /// Serves `script` on a thread of its own (for synchronous tests and binaries).
    ///
    /// # Panics
    /// If no local port can be bound, or the thread cannot start.
    pub fn start_blocking(script: Vec<MockTurn>) -> MockLlm {
        match MockLlm::builder().script(script).start_blocking() {
            Ok(mock) => mock,
            Err(e) => panic!("mock llm: {e}"),
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

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        let state = self.shared.lock();
        state.records.iter().map(|r| r.body.clone()).collect()
    }

    /// Every request received (path, headers, body, times), in order.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.shared.lock().records.clone()
    }

    /// The requests received after the first `mark` (a [`MockLlm::request_count`] taken
    /// earlier), in order.
    pub fn recorded_since(&self, mark: usize) -> Vec<RecordedRequest> {
        let state = self.shared.lock();
        state
            .records
            .get(mark..)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    }

    /// How many requests were received.
    pub fn request_count(&self) -> usize {
        self.shared.lock().records.len()
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

async fn serve(listener: tokio::net::TcpListener, app: Router) {
    // Without TCP_NODELAY, Nagle's algorithm holds small SSE frames back until the client's
    // delayed ACK (~40 ms): latency of the mock, not of its client. Providers stream with it.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let _ = axum::serve(listener, app).await;
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/chat/completions", post(chat_completions))
        .route("/v1/responses", post(responses_api))
        .route("/responses", post(responses_api))
        .route("/v1/messages", post(messages_api))
        .route("/messages", post(messages_api))
        .route("/v1/models", get(models))
        .fallback(fallback)
        // Requests carry whatever the session's context holds (a 17 MiB tool call included);
        // axum's default 2 MB cap would cut such a request off.
        .layer(DefaultBodyLimit::disable())
        .with_state(shared)
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(json!({
        "object": "list",
        "data": [{"id": shared.model, "object": "model", "owned_by": "amber-mock-llm"}],
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
    answer(shared, Api::ChatCompletions, &uri, &headers, body).await
}

async fn responses_api(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(shared, Api::Responses, &uri, &headers, body).await
}

async fn messages_api(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(shared, Api::Messages, &uri, &headers, body).await
}

/// One request: record it, take its answer, wait out the model latency, send the reply.
async fn answer(
    shared: Arc<Shared>,
    api: Api,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let received = Instant::now();
    let parsed = serde_json::from_slice::<Value>(&body);
    let record = RecordedRequest {
        path: uri.path().to_owned(),
        headers: if shared.keep_requests {
            header_pairs(headers)
        } else {
            Vec::new()
        },
        body: match (&parsed, shared.keep_requests) {
            (_, false) => Value::Null,
            (Ok(request), true) => request.clone(),
            (Err(_), true) => Value::String(String::from_utf8_lossy(&body).into_owned()),
        },
        conversation: None,
        received,
        content_times: Vec::new(),
        last_byte: None,
    };
    let Ok(request) = parsed else {
        shared.lock().records.push(record);
        let msg = "mock llm: request body is not JSON";
        return (StatusCode::BAD_REQUEST, msg).into_response();
    };
    let stream = request["stream"].as_bool() == Some(true);
    let include_usage = request["stream_options"]["include_usage"].as_bool() == Some(true);
    let (source, index) = shared.take(api, &request, record);
    let model = request["model"].as_str().unwrap_or(&shared.model);
    let ctx_for = |index: usize| Ctx::for_request(index + 1, model, body.len());
    let (delay, reply) = match source {
        Source::Turn(turn) => render(api, &turn, &ctx_for(index), stream),
        Source::Responder(responder) => render(api, &responder(&request), &ctx_for(index), stream),
        Source::Rendered(answer) => (answer.delay, answer.reply(api, stream).clone()),
        Source::Exhausted => {
            return (StatusCode::INTERNAL_SERVER_ERROR, "mock script exhausted").into_response();
        }
    };
    drop(request);
    shared.wait(delay.unwrap_or(shared.default_delay)).await;
    send(shared, index, reply, include_usage).await
}

/// Headers as (lowercased name, value) pairs, in arrival order.
fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(k, v)| {
            let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
            (k.as_str().to_owned(), v)
        })
        .collect()
}

/// A script's `turn` rendered in `ctx`: its delay and its reply.
fn render(api: Api, turn: &MockTurn, ctx: &Ctx, stream: bool) -> (Option<Duration>, Reply) {
    let reply = match api {
        Api::ChatCompletions => chat::render(turn, ctx, stream),
        Api::Responses => responses::render(turn, ctx, stream),
        Api::Messages => messages::render(turn, ctx, stream),
    };
    (turn.split_delay().0, fault::apply(turn, reply))
}

/// Sends `reply` as the answer recorded at `index`.
async fn send(shared: Arc<Shared>, index: usize, reply: Reply, include_usage: bool) -> Response {
    if !reply.pause.is_zero() {
        tokio::time::sleep(reply.pause).await;
    }
    let body = match reply.body {
        Body::Whole(bytes) => {
            shared.complete(index, Vec::new(), Some(Instant::now()));
            axum::body::Body::from(bytes)
        }
        Body::Steps { steps, content } => {
            stream::body(shared, index, steps, content, include_usage)
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = reply.status;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(reply.content_type),
    );
    if reply.content_type == reply::EVENT_STREAM {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    if let Some(secs) = reply.retry_after {
        h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}
