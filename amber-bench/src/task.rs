//! One scenario task through amber-client and the daemon: a new session, its subscribers,
//! the prompt, and what each subscriber saw until `turn_completed` — with the receive time
//! of every `message_delta`, so relay latency and lost or reordered text can be checked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use amber_client::{Client, ClientError, ConnectOptions, RawEventStream};
use amber_proto::{EventKind, SessionInfo, SessionNewParams, StopReason, ToolStatus};
use futures::StreamExt;

use crate::error::BenchError;
use crate::scenario::{Scenario, Workspace};

/// Longest a task may run before it counts as failed.
const TASK_TIMEOUT: Duration = Duration::from_secs(120);

/// What one subscriber saw of a turn.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// Each `message_delta`: when it arrived, and the reply's length in bytes after it.
    pub deltas: Vec<(Instant, usize)>,
    /// The concatenated deltas per item.
    pub streamed: HashMap<String, String>,
    /// `message_completed` texts per item.
    pub completed: Vec<(String, String)>,
    /// Each `tool_call_completed`: status and `durationMs`.
    pub tools: Vec<(ToolStatus, u64)>,
    /// Each completed tool call that was seen starting: `tool_call_started` received →
    /// `tool_call_completed` received, with its status.
    pub tool_walls: Vec<(ToolStatus, Duration)>,
    /// The output of the first tool call that did not end `ok` (for notes).
    pub first_tool_failure: Option<String>,
    pub stop: Option<StopReason>,
    pub error: Option<String>,
    pub completed_at: Option<Instant>,
}

impl Observed {
    /// Completed messages whose text differs from the concatenation of their deltas (text
    /// lost, duplicated or reordered on the way).
    pub(crate) fn mismatches(&self) -> usize {
        self.completed
            .iter()
            .filter(|(item, text)| self.streamed.get(item).is_some_and(|s| s != text))
            .count()
    }

    pub(crate) fn first_delta(&self) -> Option<Instant> {
        self.deltas.first().map(|(t, _)| *t)
    }

    pub(crate) fn ok(&self) -> bool {
        self.stop == Some(StopReason::EndTurn)
    }

    /// Tool calls that completed with status `ok`.
    pub(crate) fn tools_ok(&self) -> usize {
        self.tools
            .iter()
            .filter(|(status, _)| *status == ToolStatus::Ok)
            .count()
    }

    /// How the turn ended, for error notes: `stop Error: connect: …`.
    pub(crate) fn outcome(&self) -> String {
        let stop = self
            .stop
            .map_or_else(|| "none".to_owned(), |s| format!("{s:?}"));
        format!("stop {stop}: {}", self.error.as_deref().unwrap_or(""))
    }
}

/// One finished task.
#[derive(Debug)]
pub(crate) struct TaskRun {
    /// `session/new` + subscribing.
    pub setup: Duration,
    /// Prompt sent → `turn_completed` received by the first subscriber.
    pub total: Duration,
    /// One per subscriber.
    pub observed: Vec<Observed>,
}

/// Connection options of the harness's clients.
pub(crate) fn connect_options(socket: &Path) -> ConnectOptions {
    ConnectOptions {
        socket: Some(socket.to_owned()),
        autostart: false,
        ..ConnectOptions::new("amber-bench", env!("CARGO_PKG_VERSION"))
    }
}

/// A fresh workspace for a run: the generated tree, or a new temp dir with the scenario's files.
pub(crate) fn workspace(
    scenario: &Scenario,
    scratch: &Path,
    tree: Option<&Path>,
    tag: &str,
) -> Result<String, BenchError> {
    let dir: PathBuf = match scenario.workspace {
        Workspace::Tree => tree
            .ok_or_else(|| BenchError::Failed(format!("{}: no generated tree", scenario.name)))?
            .to_owned(),
        Workspace::Temp => {
            let dir = scratch.join(format!("{}-{tag}", scenario.name));
            for (path, content) in &scenario.files {
                let file = dir.join(path);
                if let Some(parent) = file.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(BenchError::io(format!("create {}", parent.display())))?;
                }
                std::fs::write(&file, content)
                    .map_err(BenchError::io(format!("write {}", file.display())))?;
            }
            std::fs::create_dir_all(&dir)
                .map_err(BenchError::io(format!("create {}", dir.display())))?;
            dir
        }
    };
    let abs = std::fs::canonicalize(&dir)
        .map_err(BenchError::io(format!("resolve {}", dir.display())))?;
    abs.into_os_string()
        .into_string()
        .map_err(|p| BenchError::Failed(format!("workspace path is not UTF-8: {p:?}")))
}

/// Runs `scenario` once in a new session. `subscribers` empty: `client` itself subscribes;
/// otherwise each of them does (and `client` only prompts).
pub(crate) async fn run(
    client: &Client,
    subscribers: &[Client],
    scenario: &Scenario,
    cwd: String,
) -> Result<TaskRun, BenchError> {
    let params = SessionNewParams {
        cwd,
        ..SessionNewParams::default()
    };
    run_with(client, subscribers, scenario, &params)
        .await
        .map(|(run, _)| run)
}

/// [`run`] in a session made with `params`; also the session as `session/new` answered.
pub(crate) async fn run_with(
    client: &Client,
    subscribers: &[Client],
    scenario: &Scenario,
    params: &SessionNewParams,
) -> Result<(TaskRun, SessionInfo), BenchError> {
    let started = Instant::now();
    let info = client.session_new(params).await?;
    let session = info.session_id.clone();
    let created = started.elapsed();
    let mut run = run_in(client, subscribers, scenario, &session).await?;
    run.setup += created;
    Ok((run, info))
}

/// Runs `scenario` once in the existing idle session `session`.
pub(crate) async fn run_in(
    client: &Client,
    subscribers: &[Client],
    scenario: &Scenario,
    session: &str,
) -> Result<TaskRun, BenchError> {
    let started = Instant::now();
    let session = session.to_owned();
    let mut streams = Vec::new();
    if subscribers.is_empty() {
        streams.push(client.subscribe_raw(&session, None).await?);
    }
    for sub in subscribers {
        streams.push(sub.subscribe_raw(&session, None).await?);
    }
    let setup = started.elapsed();
    let readers: Vec<_> = streams
        .into_iter()
        .map(|s| tokio::spawn(tokio::time::timeout(TASK_TIMEOUT, read_turn(s))))
        .collect();
    let prompted = Instant::now();
    client.session_prompt(&session, &scenario.prompt).await?;
    let mut observed = Vec::with_capacity(readers.len());
    for reader in readers {
        let seen = reader
            .await
            .map_err(|e| BenchError::Failed(format!("a subscriber task failed: {e}")))?
            .map_err(|_| {
                BenchError::Failed(format!("{}: no turn_completed in 120 s", scenario.name))
            })??;
        observed.push(seen);
    }
    let total = observed
        .first()
        .and_then(|o| o.completed_at)
        .map_or(Duration::ZERO, |t| t.duration_since(prompted));
    Ok(TaskRun {
        setup,
        total,
        observed,
    })
}

/// Follows one subscription until the first `turn_completed` (each session runs one turn).
async fn read_turn(mut events: RawEventStream) -> Result<Observed, ClientError> {
    let mut seen = Observed::default();
    let mut length = 0usize;
    let mut tools_started: HashMap<String, Instant> = HashMap::new();
    while let Some(item) = events.next().await {
        let now = Instant::now();
        let Some(event) = item?.event else { continue };
        match event.kind {
            EventKind::MessageDelta { item_id, delta } => {
                length += delta.len();
                seen.deltas.push((now, length));
                seen.streamed.entry(item_id).or_default().push_str(&delta);
            }
            EventKind::MessageCompleted { item_id, text, .. } => {
                seen.completed.push((item_id, text));
            }
            EventKind::ToolCallStarted { call_id, .. } => {
                tools_started.insert(call_id, now);
            }
            EventKind::ToolCallCompleted {
                call_id,
                status,
                output,
                duration_ms,
                ..
            } => {
                seen.tools.push((status, duration_ms));
                if let Some(at) = tools_started.remove(&call_id) {
                    seen.tool_walls.push((status, now.duration_since(at)));
                }
                if status != ToolStatus::Ok && seen.first_tool_failure.is_none() {
                    seen.first_tool_failure = Some(output);
                }
            }
            EventKind::TurnCompleted {
                stop_reason, error, ..
            } => {
                seen.stop = Some(stop_reason);
                seen.error = error.map(|e| format!("{}: {}", e.code, e.message));
                seen.completed_at = Some(now);
                break;
            }
            _ => {}
        }
    }
    // Dropping the stream unsubscribes in the background; no need to wait for it.
    Ok(seen)
}
