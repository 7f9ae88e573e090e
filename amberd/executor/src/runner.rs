//! `amber-exec runner`: a machine of a fleet. It dials out to amberd (the same TLS
//! WebSocket as an executor that dials in, with its pool's token), says who it is, and
//! **pulls** work: it asks for sessions only while it has room, and amberd gives it only
//! what it asked for. Each session it is given gets a fresh clone for a workspace, an
//! executor of its own (its own sandbox, jobs and checkpoints) and a connection of its own,
//! on which amberd speaks the executor protocol exactly as to any executor.
//!
//! A session's connection that drops is dialled again while the runner holds the session;
//! the session is dropped (its processes killed, its workspace removed) when amberd closes
//! it or says, in a heartbeat's answer, that the runner no longer holds it. SIGTERM drains:
//! no more polls, and after `--grace` the heartbeat asks amberd to move the sessions still
//! here; the runner exits once it holds none.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use amber_proto::sync::Locked;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::dial::{self, Dial, DialError};
use crate::executor::{Executor, ExecutorOptions};
use crate::publish::Publisher;
use crate::runner_wire::{
    self, Assignment, Failure, HeartbeatParams, HeartbeatResult, HelloParams, HelloResult,
    PollParams, PollResult, method,
};
use crate::wire::{Frame, RpcError};

/// The longest wait between two dials of the control connection.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// The longest line amberd's answers may take here.
const MAX_ANSWER_BYTES: usize = 4 << 20;
/// How long an answer other than a poll's may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// How the runner was started.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// amberd's listener, the pool's token and the TLS roots; the headers are the runner's.
    pub dial: Dial,
    pub pool: String,
    pub id: String,
    /// `--label`s; `os`, `arch` and `pool` are added.
    pub labels: BTreeMap<String, String>,
    pub capacity: u32,
    /// Where sessions' workspaces may be made (amberd names each one inside it).
    pub workspaces: PathBuf,
    /// The runner's own state (hidden from every command).
    pub state_dir: PathBuf,
    /// The pool's token file: masked in every command's sandbox.
    pub token_file: PathBuf,
    /// How each session's executor is made.
    pub executor: ExecutorOptions,
    /// After SIGTERM: how long running sessions may go on before they are moved.
    pub grace: Duration,
}

/// Why the runner stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error(transparent)]
    Dial(#[from] DialError),
    #[error("amberd refused this runner: {0}")]
    Refused(String),
}

/// What the runner counts, for its metrics.
#[derive(Debug, Default)]
pub struct RunnerCounts {
    pub assigned: AtomicU64,
    pub failed: AtomicU64,
    pub released: AtomicU64,
}

/// One session held here.
struct Slot {
    cancel: CancellationToken,
    workspace: PathBuf,
    /// Which assignment made it: a newer one of the same session replaces it.
    number: u64,
}

/// The runner's state.
pub struct Runner {
    options: RunnerOptions,
    slots: Mutex<HashMap<String, Slot>>,
    /// A slot was freed, or the runner started draining: a waiting poll loop looks again.
    changed: Notify,
    /// Workspaces that could not be made, until a heartbeat's answer acknowledged them.
    failures: Mutex<Vec<Failure>>,
    /// Something to tell amberd now (a failure): the heartbeat goes at once.
    urgent: Notify,
    draining: AtomicBool,
    /// Past the grace: the heartbeat asks amberd to move every session here.
    parking: AtomicBool,
    /// Numbers the assignments.
    next_slot: AtomicU64,
    pub counts: RunnerCounts,
}

impl Runner {
    pub fn new(options: RunnerOptions) -> Arc<Self> {
        Arc::new(Self {
            options,
            slots: Mutex::new(HashMap::new()),
            changed: Notify::new(),
            failures: Mutex::new(Vec::new()),
            urgent: Notify::new(),
            draining: AtomicBool::new(false),
            parking: AtomicBool::new(false),
            next_slot: AtomicU64::new(1),
            counts: RunnerCounts::default(),
        })
    }

    /// The sessions held here now.
    pub fn running(&self) -> Vec<String> {
        let mut running: Vec<String> = self.slots.locked().keys().cloned().collect();
        running.sort();
        running
    }

    pub fn capacity(&self) -> u32 {
        self.options.capacity
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    fn free(&self) -> u32 {
        let held = u32::try_from(self.slots.locked().len()).unwrap_or(u32::MAX);
        self.options.capacity.saturating_sub(held)
    }

    fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.options.labels.clone();
        labels.insert("os".to_owned(), std::env::consts::OS.to_owned());
        labels.insert("arch".to_owned(), std::env::consts::ARCH.to_owned());
        labels.insert("pool".to_owned(), self.options.pool.clone());
        labels
    }

    fn dial_as(&self, session: Option<&str>) -> Dial {
        let mut dial = self.options.dial.clone();
        dial.headers = vec![
            (runner_wire::POOL_HEADER, self.options.pool.clone()),
            (runner_wire::RUNNER_HEADER, self.options.id.clone()),
        ];
        if let Some(session) = session {
            dial.headers
                .push((runner_wire::SESSION_HEADER, session.to_owned()));
        }
        dial
    }

    /// Serves amberd until `stop` (SIGTERM) has drained it, or a refusal that cannot change.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) -> Result<(), RunnerError> {
        let drained = CancellationToken::new();
        tokio::spawn(Arc::clone(&self).drain_on(stop, drained.clone()));
        let control_dial = self.dial_as(None);
        let mut backoff = Duration::from_millis(200);
        loop {
            if drained.is_cancelled() {
                return Ok(());
            }
            let connected = tokio::select! {
                connected = dial::connect_once(&control_dial) => connected,
                () = drained.cancelled() => return Ok(()),
            };
            match connected {
                Ok(ws) => {
                    backoff = Duration::from_millis(200);
                    match Arc::clone(&self).serve_control(ws, &drained).await {
                        Err(RunnerError::Refused(why)) => return Err(RunnerError::Refused(why)),
                        Err(err) => tracing::warn!("the control connection ended: {err}"),
                        Ok(()) => tracing::info!("the control connection ended; dialling again"),
                    }
                }
                Err(err @ DialError::Url(_)) => return Err(err.into()),
                Err(err) => tracing::warn!("cannot reach amberd: {err}"),
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = drained.cancelled() => return Ok(()),
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// On `stop`: no more work; after the grace the sessions still here are asked to move;
    /// `drained` once none is left.
    async fn drain_on(self: Arc<Self>, stop: CancellationToken, drained: CancellationToken) {
        stop.cancelled().await;
        tracing::info!(
            sessions = self.slots.locked().len(),
            grace_secs = self.options.grace.as_secs(),
            "draining: taking no more work"
        );
        self.draining.store(true, Ordering::SeqCst);
        self.changed.notify_waiters();
        self.urgent.notify_waiters();
        let grace = tokio::time::sleep(self.options.grace);
        tokio::pin!(grace);
        loop {
            if self.slots.locked().is_empty() {
                break;
            }
            let changed = self.changed.notified();
            tokio::select! {
                () = changed => {}
                () = &mut grace, if !self.parking.load(Ordering::SeqCst) => {
                    tracing::info!("the grace ran out: asking amberd to move the sessions left");
                    self.parking.store(true, Ordering::SeqCst);
                    self.urgent.notify_waiters();
                }
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
        tracing::info!("drained");
        drained.cancel();
    }

    /// One control connection: hello, then heartbeats beside polls, until it drops.
    async fn serve_control(
        self: Arc<Self>,
        ws: dial::Stream,
        drained: &CancellationToken,
    ) -> Result<(), RunnerError> {
        let (reader, writer) = crate::ws_lines::bridge(ws);
        let control = Control::start(reader, writer);
        let hello = HelloParams {
            protocol_version: crate::wire::PROTOCOL_VERSION,
            runner: self.options.id.clone(),
            pool: self.options.pool.clone(),
            labels: self.labels(),
            capacity: self.options.capacity,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            hostname: crate::executor::hostname(),
            running: self.running(),
        };
        let answer: HelloResult = match control.call(method::HELLO, &hello, ANSWER_TIMEOUT).await {
            Ok(answer) => answer,
            Err(err) if err.code == runner_wire::code::REFUSED => {
                return Err(RunnerError::Refused(err.message));
            }
            Err(err) => {
                tracing::warn!("hello went unanswered: {err}");
                return Ok(());
            }
        };
        tracing::info!(
            runner = %self.options.id,
            pool = %self.options.pool,
            capacity = self.options.capacity,
            "connected to amberd"
        );
        self.release(&answer.release).await;
        let beat = Duration::from_secs(answer.heartbeat_secs.max(1));
        let heart = tokio::spawn(Arc::clone(&self).heartbeats(Arc::clone(&control), beat));
        let polled = Arc::clone(&self).polls(Arc::clone(&control));
        tokio::select! {
            () = polled => {}
            () = control.lost.cancelled() => {}
            () = drained.cancelled() => {}
        }
        heart.abort();
        control.lost.cancel();
        Ok(())
    }

    /// Asks for work whenever there is room, until the connection drops; draining, it asks
    /// no more (the heartbeats go on).
    async fn polls(self: Arc<Self>, control: Arc<Control>) {
        loop {
            if control.lost.is_cancelled() {
                return;
            }
            if self.draining() {
                control.lost.cancelled().await;
                return;
            }
            let free = self.free();
            if free == 0 {
                let changed = self.changed.notified();
                tokio::select! {
                    () = changed => {}
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                continue;
            }
            let wait = Duration::from_secs(runner_wire::POLL_WAIT_SECS + 10);
            let answer: PollResult =
                match control.call(method::POLL, &PollParams { free }, wait).await {
                    Ok(answer) => answer,
                    Err(err) => {
                        tracing::warn!("a poll went unanswered: {err}");
                        control.lost.cancel();
                        return;
                    }
                };
            for assignment in answer.assign {
                self.take(assignment);
            }
        }
    }

    /// Beats every `beat`, or at once when something is urgent; takes the answer's
    /// releases.
    async fn heartbeats(self: Arc<Self>, control: Arc<Control>, beat: Duration) {
        loop {
            let failed = self.failures.locked().clone();
            let params = HeartbeatParams {
                running: self.running(),
                draining: self.draining(),
                park: if self.parking.load(Ordering::SeqCst) {
                    self.running()
                } else {
                    Vec::new()
                },
                failed: failed.clone(),
            };
            match control
                .call::<_, HeartbeatResult>(method::HEARTBEAT, &params, ANSWER_TIMEOUT)
                .await
            {
                Ok(answer) => {
                    self.failures
                        .locked()
                        .retain(|f| !failed.iter().any(|sent| sent.session == f.session));
                    self.release(&answer.release).await;
                }
                Err(err) => {
                    tracing::warn!("a heartbeat went unanswered: {err}");
                    control.lost.cancel();
                    return;
                }
            }
            let urgent = self.urgent.notified();
            tokio::select! {
                () = urgent => {}
                () = tokio::time::sleep(beat) => {}
            }
        }
    }

    /// Takes a session amberd gave: its workspace, its executor, its connection.
    fn take(self: &Arc<Self>, assignment: Assignment) {
        let session = assignment.session.clone();
        let valid_session = !session.is_empty()
            && session.len() <= 128
            && session
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        // amberd names the workspace; it must be a child of ours named for the session.
        let inside = assignment.workspace.parent() == Some(self.options.workspaces.as_path())
            && assignment.workspace.file_name() == Some(std::ffi::OsStr::new(&session));
        if !valid_session || !inside {
            tracing::warn!(%session, workspace = %assignment.workspace.display(), "refusing an assignment outside --workspaces");
            self.fail(
                &session,
                format!(
                    "the runner's workspaces are in {}: it cannot make {}",
                    self.options.workspaces.display(),
                    assignment.workspace.display()
                ),
            );
            return;
        }
        let cancel = CancellationToken::new();
        let number = self.next_slot.fetch_add(1, Ordering::Relaxed);
        let held = {
            let mut slots = self.slots.locked();
            // Given again (amberd released it, then queued it again): the new assignment
            // is the truth, with a fresh workspace; what the old one still holds goes.
            let old = slots.insert(
                session.clone(),
                Slot {
                    cancel: cancel.clone(),
                    workspace: assignment.workspace.clone(),
                    number,
                },
            );
            if let Some(old) = old {
                old.cancel.cancel();
            }
            slots.len()
        };
        self.counts.assigned.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            %session,
            repo = %assignment.repo,
            git_ref = %assignment.git_ref,
            held,
            capacity = self.options.capacity,
            "assigned"
        );
        tokio::spawn(Arc::clone(self).hold(assignment, cancel, number));
    }

    fn fail(&self, session: &str, reason: String) {
        self.counts.failed.fetch_add(1, Ordering::Relaxed);
        self.failures.locked().push(Failure {
            session: session.to_owned(),
            reason,
        });
        self.urgent.notify_waiters();
    }

    /// Holds one session: clones, then serves its connection (dialling again after a
    /// drop) until amberd closes the session or releases it here.
    async fn hold(self: Arc<Self>, assignment: Assignment, cancel: CancellationToken, number: u64) {
        let session = assignment.session.clone();
        let cloned = tokio::select! {
            cloned = crate::provision::clone_into(&assignment.repo, &assignment.git_ref, &assignment.workspace) => cloned,
            () = cancel.cancelled() => return,
        };
        let publisher = match cloned {
            Ok(()) if assignment.push => tokio::select! {
                kept = self.publisher_of(&assignment) => kept,
                () = cancel.cancelled() => return,
            },
            Ok(()) => Ok(None),
            Err(err) => Err(err.to_string()),
        };
        let publisher = match publisher {
            Ok(publisher) => publisher,
            Err(err) => {
                tracing::warn!(%session, "cannot make the workspace: {err}");
                self.fail(&session, err);
                self.forget(&session, number).await;
                return;
            }
        };
        let executor = Executor::new(
            uuid::Uuid::new_v4().to_string(),
            format!(
                "{}{}",
                uuid::Uuid::new_v4().simple(),
                uuid::Uuid::new_v4().simple()
            ),
            vec![self.options.state_dir.clone()],
            ExecutorOptions {
                // Every other session's workspace, and the pool's token, are out of reach.
                masked: vec![
                    self.options.workspaces.clone(),
                    self.options.token_file.clone(),
                ],
                publisher,
                ..self.options.executor.clone()
            },
        );
        let dial = self.dial_as(Some(&session));
        let mut backoff = Duration::from_millis(100);
        loop {
            let connected = tokio::select! {
                connected = dial::connect_once(&dial) => connected,
                () = cancel.cancelled() => break,
            };
            match connected {
                Ok(ws) => {
                    backoff = Duration::from_millis(100);
                    tokio::select! {
                        () = dial::serve(Arc::clone(&executor), ws) => {}
                        () = cancel.cancelled() => break,
                    }
                    if executor.was_closed(&session) {
                        tracing::info!(%session, "amberd closed the session");
                        break;
                    }
                }
                Err(err) => tracing::debug!(%session, "cannot reach amberd: {err}"),
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = cancel.cancelled() => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        executor.shut_down().await;
        self.forget(&session, number).await;
    }

    /// Where a session's pristine copy of its clone is kept: in the runner's state, which
    /// no command sees.
    fn pristine_of(&self, session: &str) -> PathBuf {
        self.options
            .state_dir
            .join("pristine")
            .join(format!("{session}.git"))
    }

    /// Keeps a pristine copy of a fresh clone, to push the session's result from.
    async fn publisher_of(&self, assignment: &Assignment) -> Result<Option<Publisher>, String> {
        let absolute = |path: &std::path::Path| {
            std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))
        };
        let workspace = assignment
            .workspace
            .canonicalize()
            .map_err(|e| format!("{}: {e}", assignment.workspace.display()))?;
        let pristine = absolute(&self.pristine_of(&assignment.session))?;
        crate::publish::keep_pristine(&workspace, &pristine)
            .await
            .map_err(|e| format!("cannot keep the clone to push from: {e}"))?;
        Ok(Some(Publisher {
            repo: assignment.repo.clone(),
            workspace,
            pristine,
        }))
    }

    /// Drops sessions amberd no longer has here.
    async fn release(&self, sessions: &[String]) {
        for session in sessions {
            let cancel = self.slots.locked().get(session).map(|s| s.cancel.clone());
            if let Some(cancel) = cancel {
                tracing::info!(%session, "released by amberd");
                cancel.cancel();
            }
        }
    }

    /// Assignment `number` of `session` ended: its slot is free again and its workspace
    /// goes (unless a newer assignment of the session took the slot over).
    async fn forget(&self, session: &str, number: u64) {
        let slot = {
            let mut slots = self.slots.locked();
            match slots.get(session) {
                Some(slot) if slot.number == number => slots.remove(session),
                _ => None,
            }
        };
        if let Some(slot) = slot {
            self.counts.released.fetch_add(1, Ordering::Relaxed);
            for dir in [slot.workspace, self.pristine_of(session)] {
                if let Err(err) = tokio::fs::remove_dir_all(&dir).await
                    && err.kind() != std::io::ErrorKind::NotFound
                {
                    tracing::warn!(%session, dir = %dir.display(), "cannot remove: {err}");
                }
            }
        }
        self.changed.notify_waiters();
    }
}

/// The control connection's client end: requests out, their answers matched by id.
struct Control {
    outbox: mpsc::UnboundedSender<Vec<u8>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>,
    next: AtomicU64,
    lost: CancellationToken,
}

impl Control {
    fn start<R, W>(reader: R, writer: W) -> Arc<Self>
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (outbox, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
        let control = Arc::new(Self {
            outbox,
            pending: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            lost: CancellationToken::new(),
        });
        let lost = control.lost.clone();
        tokio::spawn(async move {
            let mut writer = writer;
            loop {
                let line = tokio::select! {
                    line = outgoing.recv() => line,
                    () = lost.cancelled() => None,
                };
                let Some(line) = line else { break };
                if writer.write_all(&line).await.is_err() || writer.flush().await.is_err() {
                    break;
                }
            }
            lost.cancel();
        });
        let reading = Arc::clone(&control);
        tokio::spawn(async move {
            let mut reader = BufReader::new(reader);
            let mut line = Vec::new();
            loop {
                line.clear();
                let read = tokio::select! {
                    read = crate::connection::read_line(&mut reader, &mut line, MAX_ANSWER_BYTES) => read,
                    () = reading.lost.cancelled() => break,
                };
                if !matches!(read, Ok(true)) {
                    break;
                }
                let Ok(frame) = serde_json::from_slice::<Frame>(&line) else {
                    continue;
                };
                let Some(id) = frame.id.as_ref().and_then(Value::as_u64) else {
                    continue;
                };
                if let Some(waiting) = reading.pending.locked().remove(&id) {
                    let _ = waiting.send(match frame.error {
                        Some(err) => Err(err),
                        None => Ok(frame.result.unwrap_or(Value::Null)),
                    });
                }
            }
            reading.lost.cancel();
            reading.pending.locked().clear();
        });
        control
    }

    async fn call<P: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
        timeout: Duration,
    ) -> Result<T, RpcError> {
        let gone = || RpcError::new(crate::wire::code::SESSION_GONE, "the connection dropped");
        let params = serde_json::to_value(params)
            .map_err(|e| RpcError::new(crate::wire::code::INVALID_PARAMS, e.to_string()))?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.locked().insert(id, tx);
        let line = crate::wire::line_of(&Frame::request(id, method, params));
        if self.lost.is_cancelled() || self.outbox.send(line).is_err() {
            self.pending.locked().remove(&id);
            return Err(gone());
        }
        let answer = tokio::select! {
            answer = tokio::time::timeout(timeout, rx) => answer.map(Result::ok),
            () = self.lost.cancelled() => Ok(None),
        };
        self.pending.locked().remove(&id);
        match answer {
            Ok(Some(Ok(value))) => serde_json::from_value(value).map_err(|e| {
                RpcError::new(
                    crate::wire::code::INVALID_PARAMS,
                    format!("amberd answered `{method}` oddly: {e}"),
                )
            }),
            Ok(Some(Err(err))) => Err(err),
            Ok(None) => Err(gone()),
            Err(_) => Err(RpcError::new(
                crate::wire::code::SESSION_GONE,
                format!("amberd did not answer `{method}` within {timeout:?}"),
            )),
        }
    }
}
