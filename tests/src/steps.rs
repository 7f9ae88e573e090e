//! Steps every end-to-end suite takes: spawning a daemon against a [`MockLlm`], connecting
//! amber-client, collecting a session's events as raw JSON, picking apart the requests the mock
//! received, and running a client binary with a deadline.

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use amber_client::{Client, ConnectOptions, RawEventStream};
use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Mode, SessionNewParams};
use futures::StreamExt;
use serde_json::Value;

use crate::{DaemonOptions, TestDaemon};

/// Upper bound for any single awaited event or call; generous so a loaded CI box never flakes.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// Provider settings that keep failing requests fast (one retry, ~10 ms backoff).
pub const FAST_RETRIES: &str =
    "[provider]\nmax_retries = 1\nretry_base_ms = 10\nretry_max_ms = 50\n";

/// A daemon against `mock` with [`FAST_RETRIES`].
pub fn spawn(mock: &MockLlm) -> TestDaemon {
    spawn_config(mock, FAST_RETRIES)
}

/// A daemon against `mock` with this whole `config.toml`.
pub fn spawn_config(mock: &MockLlm, config_toml: &str) -> TestDaemon {
    TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: config_toml.to_owned(),
        env: Vec::new(),
    })
}

/// The scripted answer to the silent confirm turn.
pub fn done() -> MockTurn {
    MockTurn::text("DONE")
}

/// An initialized amber-client connection to `daemon` (no autostart).
pub async fn connect(daemon: &TestDaemon) -> Client {
    connect_socket(&daemon.socket).await
}

/// An initialized amber-client connection to the daemon at `socket` (no autostart).
pub async fn connect_socket(socket: &Path) -> Client {
    let mut opts = ConnectOptions::new("amber-tests", "0");
    opts.socket = Some(socket.to_owned());
    opts.autostart = false;
    within("connect", Client::connect(opts))
        .await
        .expect("connect to amberd")
}

/// A new session in the daemon's workspace; `None` keeps the default mode.
pub async fn new_session(client: &Client, daemon: &TestDaemon, mode: Option<Mode>) -> String {
    let params = SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode,
        environment: crate::daemon::test_environment(),
        ..SessionNewParams::default()
    };
    within("session/new", client.session_new(&params))
        .await
        .expect("session/new")
        .session_id
}

/// Awaits `fut`, panicking with `what` after [`EVENT_TIMEOUT`].
pub async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    tokio::time::timeout(EVENT_TIMEOUT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out after {EVENT_TIMEOUT:?} waiting for {what}"))
}

/// Polls `cond` every 10 ms until it holds; panics with `what` after `timeout`.
pub async fn eventually(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One subscription's events, as the JSON objects the daemon sent.
pub struct Events {
    stream: RawEventStream,
}

impl Events {
    /// Subscribes without `afterSeq` and consumes the initial `synced` event.
    pub async fn live(client: &Client, session_id: &str) -> Events {
        let mut events = Events::subscribe(client, session_id, None).await;
        let first = events.next().await;
        assert_eq!(first["type"], "synced", "first event: {first}");
        events
    }

    /// Subscribes; nothing is consumed.
    pub async fn subscribe(client: &Client, session_id: &str, after_seq: Option<u64>) -> Events {
        let stream = within(
            "session/subscribe",
            client.subscribe_raw(session_id, after_seq),
        )
        .await
        .expect("session/subscribe");
        Events { stream }
    }

    /// The next event; panics on timeout or when the subscription ends.
    pub async fn next(&mut self) -> Value {
        match self.try_next().await {
            Ok(event) => event,
            Err(reason) => panic!("subscription ended: {reason}"),
        }
    }

    /// The next event, or why the subscription ended. Panics on timeout.
    pub async fn try_next(&mut self) -> Result<Value, String> {
        match within("the next session event", self.stream.next()).await {
            Some(Ok(raw)) => Ok(serde_json::from_str(raw.json()).expect("event is JSON")),
            Some(Err(err)) => Err(err.to_string()),
            None => Err("stream ended".into()),
        }
    }

    /// Events up to and including the first of type `ty`.
    pub async fn until(&mut self, ty: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let event = self.next().await;
            let last = event["type"] == ty;
            seen.push(event);
            if last {
                return seen;
            }
        }
    }

    /// Events up to and including the next `turn_completed`.
    pub async fn turn(&mut self) -> Vec<Value> {
        self.until("turn_completed").await
    }
}

/// Sends `text` as a prompt and collects the turn's events (through `turn_completed`).
pub async fn prompt_turn(
    client: &Client,
    events: &mut Events,
    session_id: &str,
    text: &str,
) -> Vec<Value> {
    within("session/prompt", client.session_prompt(session_id, text))
        .await
        .expect("session/prompt");
    events.turn().await
}

/// A yolo session with `sandbox` (as `session/new` takes it; `None`: the config's) that runs
/// `batch` — `(call id, command)` pairs, side by side in one turn — and returns the turn's
/// events.
pub async fn run_batch(
    daemon: &TestDaemon,
    mock: &MockLlm,
    sandbox: Option<Value>,
    batch: &[(&str, String)],
) -> Vec<Value> {
    let client = connect(daemon).await;
    let params = SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode: Some(Mode::Yolo),
        sandbox: sandbox.map(|s| serde_json::from_value(s).expect("a sandbox request")),
        ..SessionNewParams::default()
    };
    let sid = within("session/new", client.session_new(&params))
        .await
        .expect("session/new")
        .session_id;
    let mut events = Events::live(&client, &sid).await;
    mock.push([
        crate::tool_calls::calls(
            batch
                .iter()
                .map(|(id, cmd)| {
                    crate::tool_calls::call(id, "bash", &serde_json::json!({ "command": cmd }))
                })
                .collect(),
        ),
        MockTurn::text("Ran."),
        done(),
    ]);
    prompt_turn(&client, &mut events, &sid, "run").await
}

/// The `type` of each event.
pub fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?"))
        .collect()
}

/// The events of type `ty`.
pub fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// The durable events (those with a `seq`).
pub fn durable(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.get("seq").is_some_and(|s| !s.is_null()))
        .cloned()
        .collect()
}

/// The `seq`s of the durable events.
pub fn seqs(events: &[Value]) -> Vec<u64> {
    durable(events)
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq is a number"))
        .collect()
}

/// The last event, which must be `turn_completed`; returns its `stopReason`.
pub fn stop_reason(events: &[Value]) -> &str {
    let last = events.last().expect("no events");
    assert_eq!(last["type"], "turn_completed", "last event: {last}");
    last["stopReason"].as_str().expect("stopReason is a string")
}

/// Names of the tools a recorded request offered the model (empty when it sent none).
pub fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The `messages` of a recorded chat-completions request.
pub fn messages(request: &Value) -> &Vec<Value> {
    request["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("request without messages: {request}"))
}

/// The `tool` messages of a request, in order.
pub fn tool_messages(request: &Value) -> Vec<&Value> {
    messages(request)
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect()
}

/// The parsed `{status, output}` envelope of a tool message.
pub fn envelope(tool_message: &Value) -> Value {
    let content = tool_message["content"]
        .as_str()
        .unwrap_or_else(|| panic!("tool message content is not a string: {tool_message}"));
    serde_json::from_str(content)
        .unwrap_or_else(|e| panic!("tool result is not a JSON envelope ({e}): {content}"))
}

/// `text` without the `<system-reminder>` tail amberd appends to the last user message of
/// a request (on the copy it sends; the stored context never has it).
pub fn without_tail(text: &str) -> &str {
    text.split("\n\n<system-reminder>").next().unwrap_or(text)
}

/// The last message of a request.
pub fn last_message(request: &Value) -> &Value {
    messages(request).last().expect("request has no messages")
}

/// How long [`run_bounded`] lets a child process run.
pub const PROCESS_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `cmd` (stdin from /dev/null) to completion; SIGKILLs it and panics after
/// [`PROCESS_TIMEOUT`]. Returns the exit code (`None` if a signal ended it), stdout, stderr.
pub fn run_bounded(cmd: std::process::Command) -> (Option<i32>, String, String) {
    run_bounded_with_stdin(cmd, std::process::Stdio::null())
}

/// Like [`run_bounded`], with `stdin` as the child's standard input.
pub fn run_bounded_with_stdin(
    mut cmd: std::process::Command,
    stdin: std::process::Stdio,
) -> (Option<i32>, String, String) {
    use std::process::Stdio;
    let child = cmd
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(output) = rx.recv_timeout(PROCESS_TIMEOUT) else {
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is our un-reaped child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        panic!("{cmd:?} did not finish within {PROCESS_TIMEOUT:?}");
    };
    let output = output.expect("wait for child");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `git ARGS` in `dir` with a fixed identity and default branch (no user config needed);
/// it must succeed.
pub fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .status()
        .expect("run git");
    assert!(status.success(), "git {args:?}");
}
