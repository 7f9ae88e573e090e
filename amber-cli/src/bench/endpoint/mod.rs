//! The embedded scripted OpenAI-compatible endpoint: axum on its own thread and runtime (so
//! the harness's clients never delay it), `POST /v1/chat/completions` (and `/v1/responses`,
//! for `--compare` clients) answered from the scenarios with pre-rendered SSE frames, zero
//! model latency unless asked.
//!
//! Every request is recorded with monotonic times taken in this process — received, each
//! content frame handed to the server, last frame handed over — so the harness can subtract
//! the endpoint's share from an end-to-end time and measure relay latency against the
//! moment a content byte left (the clients run in the same process, on the same clock).

pub mod render;
pub mod responses;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use serde_json::{Value, json};

use crate::error::BenchError;
use crate::scenario::Scenario;
use render::{Choice, Frame, Rendered};

/// One chat-completions request as the endpoint saw it.
#[derive(Debug, Clone)]
pub struct Record {
    /// The scenario it was answered from (`None`: unknown conversation).
    pub scenario: Option<String>,
    pub received: Instant,
    /// When each content frame was handed to the server, in order.
    pub content_times: Vec<Instant>,
    /// When the last frame was handed to the server; `None` if the stream did not finish.
    pub last_byte: Option<Instant>,
}

impl Record {
    /// Request received → last byte handed over: the endpoint's share of a model request.
    pub fn endpoint_time(&self) -> Option<Duration> {
        self.last_byte.map(|t| t.duration_since(self.received))
    }
}

/// Every answer of one API, pre-rendered.
struct Answers {
    turns: Vec<Vec<Rendered>>,
    confirm: Rendered,
    finished: Rendered,
    unknown: Rendered,
}

impl Answers {
    fn new(
        scenarios: &[Scenario],
        turn: fn(&crate::scenario::Turn, usize) -> Rendered,
        text: fn(&str) -> Rendered,
    ) -> Answers {
        Answers {
            turns: scenarios
                .iter()
                .map(|s| {
                    s.turns
                        .iter()
                        .enumerate()
                        .map(|(i, t)| turn(t, i))
                        .collect()
                })
                .collect(),
            confirm: text("DONE"),
            finished: text("Done."),
            unknown: text("amber-bench: no scenario matches this conversation."),
        }
    }

    fn pick(&self, choice: Choice) -> (&Rendered, Option<usize>) {
        match choice {
            Choice::Turn { scenario, step } => (&self.turns[scenario][step], Some(scenario)),
            Choice::Finished { scenario } => (&self.finished, Some(scenario)),
            Choice::Confirm => (&self.confirm, None),
            Choice::Unknown => (&self.unknown, None),
        }
    }
}

/// The two wire APIs served.
#[derive(Clone, Copy)]
enum Api {
    ChatCompletions,
    Responses,
}

struct Shared {
    prompts: Vec<(String, usize)>,
    names: Vec<String>,
    chat: Answers,
    responses: Answers,
    default_delay_ms: u64,
    records: Mutex<Vec<Record>>,
}

impl Shared {
    fn records(&self) -> MutexGuard<'_, Vec<Record>> {
        // A panic elsewhere cannot leave a half-written record: keep serving.
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The running endpoint. Stops when dropped.
pub struct Endpoint {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Endpoint {
    /// Renders every scenario's turns and starts serving on `listen` (port 0: any free port).
    pub fn start(
        scenarios: &[Scenario],
        listen: SocketAddr,
        default_delay_ms: u64,
    ) -> Result<Endpoint, BenchError> {
        let shared = Arc::new(Shared {
            prompts: scenarios
                .iter()
                .map(|s| (s.prompt.clone(), s.turns.len()))
                .collect(),
            names: scenarios.iter().map(|s| s.name.clone()).collect(),
            chat: Answers::new(scenarios, render::render, render::render_text),
            responses: Answers::new(scenarios, responses::render, responses::render_text),
            default_delay_ms,
            records: Mutex::new(Vec::new()),
        });
        let listener = std::net::TcpListener::bind(listen).map_err(BenchError::io(format!(
            "bind the scripted endpoint to {listen}"
        )))?;
        listener
            .set_nonblocking(true)
            .map_err(BenchError::io("make the endpoint's listener non-blocking"))?;
        let addr = listener
            .local_addr()
            .map_err(BenchError::io("read the endpoint's address"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(BenchError::io("build the endpoint's runtime"))?;
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let app = router(shared.clone());
        let thread = std::thread::Builder::new()
            .name("bench-endpoint".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    // Without TCP_NODELAY, Nagle's algorithm holds small SSE frames back
                    // until the daemon's delayed ACK (~40 ms): latency of the endpoint, not
                    // of amber. Providers' servers stream with it set.
                    let listener = listener.tap_io(|tcp| {
                        let _ = tcp.set_nodelay(true);
                    });
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = stop => {}
                    }
                });
            })
            .map_err(BenchError::io("spawn the endpoint's thread"))?;
        Ok(Endpoint {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many requests were recorded so far (a mark for [`Endpoint::records_since`]).
    pub fn mark(&self) -> usize {
        self.shared.records().len()
    }

    /// The requests recorded after `mark`.
    pub fn records_since(&self, mark: usize) -> Vec<Record> {
        let records = self.shared.records();
        records
            .get(mark..)
            .map(<[Record]>::to_vec)
            .unwrap_or_default()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        .route("/v1/responses", post(responses_api))
        .route("/responses", post(responses_api))
        .route("/v1/models", get(models))
        .with_state(shared)
}

async fn models() -> Response {
    axum::Json(json!({"object": "list", "data": [{"id": "amber-bench", "object": "model"}]}))
        .into_response()
}

async fn chat(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    answer(shared, body, Api::ChatCompletions).await
}

async fn responses_api(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    answer(shared, body, Api::Responses).await
}

async fn answer(shared: Arc<Shared>, body: Bytes, api: Api) -> Response {
    let received = Instant::now();
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "amber-bench: the body is not JSON").into_response();
    };
    let prompts: Vec<(&str, usize)> = shared
        .prompts
        .iter()
        .map(|(p, n)| (p.as_str(), *n))
        .collect();
    let (answer, scenario) = match api {
        Api::ChatCompletions => shared.chat.pick(render::choose(&request, &prompts)),
        Api::Responses => shared.responses.pick(responses::choose(&request, &prompts)),
    };
    let answer = answer.clone();
    let index = {
        let mut records = shared.records();
        records.push(Record {
            scenario: scenario.map(|i| shared.names[i].clone()),
            received,
            content_times: Vec::new(),
            last_byte: None,
        });
        records.len() - 1
    };
    let delay = answer.delay_ms.unwrap_or(shared.default_delay_ms);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    if request["stream"].as_bool() != Some(true) {
        if let Some(record) = shared.records().get_mut(index) {
            record.last_byte = Some(Instant::now());
        }
        return typed(Body::from(answer.json), "application/json");
    }
    let interval = answer.interval_ms.map(Duration::from_millis);
    let body = stream_body(shared.clone(), index, answer.frames, interval);
    let mut response = typed(body, "text/event-stream");
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn typed(body: Body, content_type: &'static str) -> Response {
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The frames as a body stream, timing each content frame. The record is completed as the
/// last frame is handed over (not when the stream is polled once more): by then the client
/// may already have the whole answer and be reading the record.
fn stream_body(
    shared: Arc<Shared>,
    index: usize,
    frames: Arc<[Frame]>,
    interval: Option<Duration>,
) -> Body {
    let times = Vec::with_capacity(frames.iter().filter(|f| f.content).count());
    let state = (shared, frames, 0usize, times);
    let stream =
        futures::stream::unfold(state, move |(shared, frames, at, mut times)| async move {
            let frame = frames.get(at)?;
            if let Some(pause) = interval
                && frame.content
                && !times.is_empty()
            {
                tokio::time::sleep(pause).await;
            }
            let now = Instant::now();
            if frame.content {
                times.push(now);
            }
            if at + 1 == frames.len()
                && let Some(record) = shared.records().get_mut(index)
            {
                record.content_times = std::mem::take(&mut times);
                record.last_byte = Some(now);
            }
            let bytes = frame.bytes.clone();
            Some((
                Ok::<_, std::convert::Infallible>(bytes),
                (shared, frames, at + 1, times),
            ))
        });
    Body::from_stream(stream)
}
