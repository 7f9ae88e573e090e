//! amberd's link to one executor: the relay process it talks through (`amber-exec --stdio`,
//! perhaps behind `ssh`), requests and their answers, and each job's output routed to the
//! call waiting for it. A link that drops is attached again to the same executor (`--attach
//! ID` with its token) and every job's missed output read back from its last delivered
//! number; an executor that is gone for good fails its running jobs, and the next call
//! starts a new one.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use amber_exec::child::{ChildInput, ChildSpec, Unsandboxed};
use amber_exec::containment::SpawnSandbox;
use amber_executor::wire::{
    self, Frame, InitializeParams, InitializeResult, JobDone, JobOutput, JobParams, JobReadParams,
    JobReadResult, NetworkConnectionNote, RpcError, SessionOpenParams, SessionOpenResult, code,
    method, notification,
};
use amber_proto::sync::Locked;
use amber_proto::{EnvironmentInfo, EnvironmentState, EventKind, ExecutorInfo};
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::spec::Launch;
use super::stream::{Delivery, JobStream};

/// How long a request waits for its answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one attempt to attach again waits for the executor to dial in again.
const DIAL_IN_RETRY: Duration = Duration::from_secs(2);
/// The length a kept stderr line is cut to.
const STDERR_LINE_CHARS: usize = 300;
/// The stderr lines of the relay (ssh's complaints) kept for an error message.
const STDERR_LINES: usize = 8;

/// What a waiting call receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JobEvent {
    Output(String),
    Done(JobDone),
    /// The executor is gone for good: the call cannot finish.
    Gone(String),
}

struct JobEntry {
    /// The session whose call it is.
    session: String,
    stream: JobStream,
    events: mpsc::UnboundedSender<JobEvent>,
}

/// One connection: through a relay process, or one an executor dialled in.
struct Conn {
    outbox: mpsc::UnboundedSender<Frame>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>,
    lost: CancellationToken,
    stderr: Arc<Mutex<Vec<String>>>,
    _child: Mutex<Option<tokio::process::Child>>,
}

/// The two directions of a connection.
type Reader = Box<dyn tokio::io::AsyncRead + Send + Unpin>;
type Writer = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;

impl Conn {
    fn stderr_tail(&self) -> String {
        self.stderr.locked().join(" / ")
    }
}

/// The link to one executor: of one session (an executor amberd starts), or of every session
/// on an executor that dials in.
pub(crate) struct ExecutorLink {
    spec: String,
    launch: Launch,
    /// The environment of the relay process (`ssh` needs the user's agent and home, never a
    /// provider key).
    env: Vec<(OsString, OsString)>,
    conn: Mutex<Option<Arc<Conn>>>,
    /// Held while connecting or attaching again: calls wait for the outcome.
    connecting: tokio::sync::Mutex<()>,
    /// The executor's id and attach token, once one answered.
    attach: Mutex<Option<(String, String)>>,
    /// What `session/open` was given for each session, to open them again on a new executor
    /// or after attaching.
    opened: Mutex<BTreeMap<String, SessionOpenParams>>,
    jobs: Mutex<HashMap<String, JobEntry>>,
    info: Mutex<EnvironmentInfo>,
    /// Where its `environment_*` events go: each session's, once it exists.
    notify: Mutex<Vec<(String, Notify)>>,
    /// What each session does on a new executor that replaced a gone one (on every new
    /// one, for a fleet session's link), before any call reaches it, in their order (a
    /// fleet session's setup, then its checkpoint restored).
    arrivals: Mutex<Vec<(String, u8, Arrival)>>,
    /// Asked to give its executor up (a fleet session's runner is gone): an attempt to
    /// attach again stops.
    abandoning: AtomicBool,
    /// A new executor that answered an attempt to attach again (a fleet session's next
    /// runner dialled in for it): the next connection starts on it.
    fresh: Mutex<Option<(Arc<Conn>, InitializeResult)>>,
    /// Told when a call needs a new executor and none is there (a fleet session parked
    /// by its runner is queued again).
    wanted: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
    /// Calls under way (waiting for a connection or an answer): the link is in use.
    in_flight: AtomicU64,
    /// Held while the arrival hooks run: calls wait for them.
    arriving: tokio::sync::RwLock<()>,
    /// Where executors that dial in wait to be claimed (`executor:NAME` with `dial_in`).
    dial_ins: Option<Arc<super::dial_in::DialIns>>,
    /// The executor's machine, as it last introduced itself.
    machine: Mutex<Option<wire::MachineFacts>>,
    next_id: AtomicU64,
    closed: AtomicBool,
}

impl std::fmt::Debug for ExecutorLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorLink")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

type Notify = Box<dyn Fn(EventKind) + Send + Sync>;

/// A session's hook on a new executor that replaced a gone one: given the connection (its
/// calls go straight there), it returns how many files it restored, if any.
pub(crate) type Arrival = Arc<dyn Fn(Direct) -> BoxFuture<'static, Option<u64>> + Send + Sync>;

/// Requests on one connection, bypassing the link's connecting and waiting: for an arrival
/// hook, which runs while every other call waits.
#[derive(Clone)]
pub(crate) struct Direct {
    conn: Arc<Conn>,
    link: Arc<ExecutorLink>,
}

impl Direct {
    pub(crate) async fn call<T: serde::Serialize>(
        &self,
        method: &str,
        params: &T,
    ) -> Result<Value, RpcError> {
        request(&self.conn, &self.link.next_id, method, params).await
    }

    /// [`ExecutorLink::capture`] on this connection.
    pub(crate) async fn capture(
        &self,
        session: &str,
        command: &str,
        timeout: Duration,
    ) -> Result<Captured, String> {
        self.link
            .capture_with(session, command, timeout, |method, params| {
                let direct = self.clone();
                Box::pin(async move { direct.call(method, &params).await })
            })
            .await
    }
}

/// What a captured command printed, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Captured {
    pub output: String,
    pub exit_code: Option<i32>,
}

impl ExecutorLink {
    /// A link not connected yet. `dial_ins`: where an executor that dials in is claimed.
    pub(crate) fn new(
        spec: String,
        launch: Launch,
        env: Vec<(OsString, OsString)>,
        dial_ins: Option<Arc<super::dial_in::DialIns>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            info: Mutex::new(EnvironmentInfo {
                spec: spec.clone(),
                state: EnvironmentState::Connecting,
                executor: None,
                reason: None,
                fleet: None,
            }),
            spec,
            launch,
            env,
            conn: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            attach: Mutex::new(None),
            opened: Mutex::new(BTreeMap::new()),
            jobs: Mutex::new(HashMap::new()),
            notify: Mutex::new(Vec::new()),
            arrivals: Mutex::new(Vec::new()),
            abandoning: AtomicBool::new(false),
            fresh: Mutex::new(None),
            wanted: Mutex::new(None),
            in_flight: AtomicU64::new(0),
            arriving: tokio::sync::RwLock::new(()),
            dial_ins,
            machine: Mutex::new(None),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
        })
    }

    /// Sends its events to `notify` (session `session`'s) from now on.
    pub(crate) fn bind(&self, session: &str, notify: Notify) {
        let mut all = self.notify.locked();
        all.retain(|(s, _)| s != session);
        all.push((session.to_owned(), notify));
    }

    /// Runs `arrival` for session `session` whenever a new executor replaces a gone one,
    /// after the hooks of a lower `order` (one hook per session and order).
    pub(crate) fn on_arrival(&self, session: &str, order: u8, arrival: Arrival) {
        let mut all = self.arrivals.locked();
        all.retain(|(s, o, _)| s != session || *o != order);
        all.push((session.to_owned(), order, arrival));
        all.sort_by_key(|(_, o, _)| *o);
    }

    /// Calls `wanted` whenever a call needs a new executor and none is there.
    pub(crate) fn when_wanted(&self, wanted: Arc<dyn Fn() + Send + Sync>) {
        *self.wanted.locked() = Some(wanted);
    }

    /// Gives the executor up now (its runner is gone): running calls fail, an attempt to
    /// attach again stops, and the next call waits for a new executor.
    pub(crate) fn abandon(&self, reason: &str) {
        self.abandoning.store(true, Ordering::SeqCst);
        if let Some(dial_ins) = &self.dial_ins
            && let Some(name) = self.launch.dial_in()
        {
            dial_ins.discard(name);
        }
        self.fresh.locked().take();
        if let Some(conn) = self.conn.locked().take() {
            conn.lost.cancel();
        }
        self.give_up(reason.to_owned());
    }

    /// Session `session` leaves its executor (a fleet session released by its runner
    /// while idle): closed there, which frees the runner's slot, and the connection let go;
    /// what the session is bound to here stays, and it opens again on whichever executor
    /// comes next.
    pub(crate) async fn leave(&self, session: &str, state: EnvironmentState) {
        let _connecting = self.connecting.lock().await;
        let conn = self.conn.locked().take();
        if let Some(conn) = conn {
            let params = wire::SessionParams {
                session: session.to_owned(),
            };
            let _ = request(&conn, &self.next_id, method::SESSION_CLOSE, &params).await;
            conn.lost.cancel();
        }
        *self.attach.locked() = None;
        self.fresh.locked().take();
        // A connection its runner dialled again meanwhile leads to what was just closed.
        if let Some(dial_ins) = &self.dial_ins
            && let Some(name) = self.launch.dial_in()
        {
            dial_ins.discard(name);
        }
        self.set_state(state, None, None);
    }

    /// `kind` to session `session` alone (an executor's note about one of its sessions).
    fn emit_to(&self, session: &str, kind: EventKind) {
        for (bound, notify) in self.notify.locked().iter() {
            if bound == session {
                notify(kind.clone());
            }
        }
    }

    fn emit(&self, kind: EventKind) {
        for (_, notify) in self.notify.locked().iter() {
            notify(kind.clone());
        }
    }

    /// What to open on the first connection (a session loaded from the store).
    pub(crate) fn remember(&self, params: SessionOpenParams) {
        self.closed.store(false, Ordering::SeqCst);
        self.opened.locked().insert(params.session.clone(), params);
    }

    /// The link's state as `SessionInfo.environment` shows it.
    pub(crate) fn info(&self) -> EnvironmentInfo {
        self.info.locked().clone()
    }

    /// Connects if needed and opens the session there; remembered for every later
    /// connection.
    pub(crate) async fn open(
        self: &Arc<Self>,
        params: SessionOpenParams,
    ) -> Result<SessionOpenResult, String> {
        self.remember(params.clone());
        let conn = self.connection().await?;
        let value = request(&conn, &self.next_id, method::SESSION_OPEN, &params)
            .await
            .map_err(|e| e.message)?;
        serde_json::from_value(value).map_err(|e| format!("the executor answered oddly: {e}"))
    }

    /// Session `session` is gone: the executor closes it (killing its processes). With no
    /// session left the connection goes too (an executor amberd started then stops).
    pub(crate) async fn close(&self, session: &str) {
        let was_open = self.opened.locked().remove(session).is_some();
        self.notify.locked().retain(|(s, _)| s != session);
        self.arrivals.locked().retain(|(s, _, _)| s != session);
        let ended: Vec<JobEntry> = {
            let mut jobs = self.jobs.locked();
            let ids: Vec<String> = jobs
                .iter()
                .filter(|(_, e)| e.session == session)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| jobs.remove(id)).collect()
        };
        for job in ended {
            let _ = job
                .events
                .send(JobEvent::Gone("the session was closed".to_owned()));
        }
        let conn = self.conn.locked().clone();
        if let (Some(conn), true) = (conn, was_open) {
            let params = wire::SessionParams {
                session: session.to_owned(),
            };
            let _ = request(&conn, &self.next_id, method::SESSION_CLOSE, &params).await;
        }
        if self.opened.locked().is_empty() {
            self.closed.store(true, Ordering::SeqCst);
            self.conn.locked().take();
        }
    }

    /// Registers job `id` of `session`: its output and outcome arrive on the returned
    /// channel.
    pub(crate) fn register(&self, id: &str, session: &str) -> mpsc::UnboundedReceiver<JobEvent> {
        let (events, rx) = mpsc::unbounded_channel();
        self.jobs.locked().insert(
            id.to_owned(),
            JobEntry {
                session: session.to_owned(),
                stream: JobStream::default(),
                events,
            },
        );
        rx
    }

    /// Forgets job `id` here only.
    fn forget_job(&self, id: &str) {
        self.jobs.locked().remove(id);
    }

    /// Forgets job `id` here and on the executor (its outcome arrived, or nobody waits).
    pub(crate) fn release(self: &Arc<Self>, id: &str, cancel: bool) {
        self.jobs.locked().remove(id);
        let Some(conn) = self.conn.locked().clone() else {
            return;
        };
        let id = id.to_owned();
        let link = Arc::clone(self);
        tokio::spawn(async move {
            let params = JobParams { job: id };
            if cancel {
                let _ = request(&conn, &link.next_id, method::JOB_CANCEL, &params).await;
            }
            let _ = request(&conn, &link.next_id, method::JOB_RELEASE, &params).await;
        });
    }

    /// Whether a call is under way or a job waits for its outcome (a fleet session in use
    /// outside a turn, by a rewind, is not idle).
    pub(crate) fn busy(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) > 0 || !self.jobs.locked().is_empty()
    }

    /// Sends a request on the live connection, connecting first if needed.
    pub(crate) async fn call<T: serde::Serialize>(
        self: &Arc<Self>,
        method: &str,
        params: &T,
    ) -> Result<Value, RpcError> {
        let _in_flight = InFlight::new(&self.in_flight);
        let conn = self
            .connection()
            .await
            .map_err(|e| RpcError::new(code::SESSION_GONE, e))?;
        request(&conn, &self.next_id, method, params).await
    }

    /// The live connection: the current one, or a new executor when there is none (the
    /// first call, or the last executor is gone). Waits while the link attaches again, and
    /// while a new executor's arrival hooks run.
    async fn connection(self: &Arc<Self>) -> Result<Arc<Conn>, String> {
        let connecting = self.connecting.lock().await;
        let (conn, replaced) = self.connect_locked().await?;
        if !replaced {
            drop(connecting);
            // A new executor's hooks may be running: calls wait for them.
            drop(self.arriving.read().await);
            return Ok(conn);
        }
        // Taken before the connecting lock goes: no call reaches the new executor before
        // its hooks ran.
        let arriving = self.arriving.write().await;
        drop(connecting);
        let hooks: Vec<Arrival> = self
            .arrivals
            .locked()
            .iter()
            .map(|(_, _, hook)| Arc::clone(hook))
            .collect();
        let direct = Direct {
            conn: Arc::clone(&conn),
            link: Arc::clone(self),
        };
        let mut restored = None;
        for hook in hooks {
            if let Some(files) = hook(direct.clone()).await {
                restored = Some(restored.unwrap_or(0) + files);
            }
        }
        drop(arriving);
        self.emit(EventKind::EnvironmentConnected {
            environment: self.info(),
            restored_files: restored,
        });
        Ok(conn)
    }

    /// The connecting part of [`Self::connection`], under its lock. Returns the connection
    /// and whether it is a new executor that replaced a gone one (its hooks are due; its
    /// `environment_connected` is the caller's to emit).
    async fn connect_locked(self: &Arc<Self>) -> Result<(Arc<Conn>, bool), String> {
        if self.closed.load(Ordering::SeqCst) {
            return Err("the session was closed".to_owned());
        }
        if let Some(conn) = self
            .conn
            .locked()
            .clone()
            .filter(|c| !c.lost.is_cancelled())
        {
            return Ok((conn, false));
        }
        if self.info.locked().state == EnvironmentState::Lost {
            return Err(self
                .info
                .locked()
                .reason
                .clone()
                .unwrap_or_else(|| "the executor is out of reach".to_owned()));
        }
        // The executor the session ran on before amberd restarted, if it still runs.
        let known = self.attach.locked().clone();
        let known_id = known.clone();
        // An executor answered before: the one amberd attached to (perhaps before it
        // restarted), or one that is gone for good.
        let had_one = known.is_some() || self.info.locked().state == EnvironmentState::Gone;
        let mut attached = None;
        let mut fresh = None;
        if let Some((id, token)) = known_id {
            match self.reach(Some((&id, token))).await {
                Ok(found) if found.1.executor_id == id => attached = Some(found),
                Ok(other) => {
                    // Another executor dialled in under this name: it starts afresh.
                    tracing::info!(spec = %self.spec, "the session's executor was replaced");
                    attached = None;
                    fresh = Some(other);
                }
                Err(err) => {
                    tracing::info!(spec = %self.spec, "the session's executor is gone ({err}); starting a new one");
                }
            }
        }
        let waiting = self
            .fresh
            .locked()
            .take()
            .filter(|(conn, _)| !conn.lost.is_cancelled());
        let (conn, hello) = match (attached, fresh.or(waiting)) {
            (Some(found), _) | (None, Some(found)) => found,
            (None, None) => {
                // Someone must bring an executor (a parked fleet session queues itself).
                let wanted = self.wanted.locked().clone();
                if let Some(wanted) = wanted {
                    wanted();
                }
                self.reach(None).await?
            }
        };
        // The executor it ran on, dialled in again (a runner after amberd restarted).
        let resumed = known
            .as_ref()
            .is_some_and(|(id, _)| *id == hello.executor_id);
        // The session ran on an executor before, and that one is gone (a fleet session's
        // hooks run on its first one too: its setup).
        let replaced = !resumed && (had_one || self.launch.hooks_on_first);
        self.abandoning.store(false, Ordering::SeqCst);
        *self.attach.locked() = Some((hello.executor_id.clone(), hello.token.clone()));
        *self.machine.locked() = Some(hello.machine.clone());
        *self.conn.locked() = Some(Arc::clone(&conn));
        let reopen: Vec<SessionOpenParams> = self.opened.locked().values().cloned().collect();
        for params in reopen {
            request(&conn, &self.next_id, method::SESSION_OPEN, &params)
                .await
                .map_err(|e| e.message)?;
        }
        let info = self.set_state(
            EnvironmentState::Connected,
            Some(executor_info(&hello)),
            None,
        );
        match (resumed, replaced) {
            (true, _) => self.emit(EventKind::EnvironmentResumed {
                environment: info,
                replayed_chunks: 0,
            }),
            (false, false) => self.emit(EventKind::EnvironmentConnected {
                environment: info,
                restored_files: None,
            }),
            (false, true) => {}
        }
        Ok((conn, replaced))
    }

    /// Connects now (a session loaded again attaches to its executor at once, so that what
    /// runs there keeps an owner).
    pub(crate) async fn connect(self: &Arc<Self>) -> Result<(), String> {
        self.connection().await.map(|_| ())
    }

    /// The executor's machine, once one answered.
    pub(crate) fn machine(&self) -> Option<wire::MachineFacts> {
        self.machine.locked().clone()
    }

    /// Runs `command` there as a process of `session` (its sandbox, its environment) and
    /// returns its output, or why it could not; killed after `timeout`.
    pub(crate) async fn capture(
        self: &Arc<Self>,
        session: &str,
        command: &str,
        timeout: Duration,
    ) -> Result<String, String> {
        self.capture_with(session, command, timeout, |method, params| {
            let link = Arc::clone(self);
            Box::pin(async move { link.call(method, &params).await })
        })
        .await
        .map(|captured| captured.output)
    }

    /// Runs `command` as a process of `session`, its spawn sent through `send`.
    async fn capture_with<'a>(
        &'a self,
        session: &str,
        command: &str,
        timeout: Duration,
        send: impl Fn(&'static str, Value) -> BoxFuture<'a, Result<Value, RpcError>>,
    ) -> Result<Captured, String> {
        let job = uuid::Uuid::new_v4().to_string();
        let mut events = self.register(&job, session);
        let params = wire::ProcessSpawnParams {
            session: session.to_owned(),
            job: job.clone(),
            command: command.to_owned(),
            cwd: None,
            stdin: false,
            unsandboxed: false,
        };
        let params = serde_json::to_value(&params).map_err(|e| e.to_string())?;
        if let Err(err) = send(method::PROCESS_SPAWN, params).await {
            self.forget_job(&job);
            return Err(err.message);
        }
        let mut output = String::new();
        let ran = tokio::time::timeout(timeout, async {
            while let Some(event) = events.recv().await {
                match event {
                    JobEvent::Output(text) => output.push_str(&text),
                    JobEvent::Done(done) => return Ok(done),
                    JobEvent::Gone(reason) => return Err(reason),
                }
            }
            Err("the link closed".to_owned())
        })
        .await;
        let cancel = ran.is_err();
        let release = serde_json::to_value(JobParams { job: job.clone() }).unwrap_or(Value::Null);
        self.forget_job(&job);
        if cancel {
            let _ = send(method::JOB_CANCEL, release.clone()).await;
        }
        let _ = send(method::JOB_RELEASE, release).await;
        match ran {
            Ok(Ok(done)) => Ok(Captured {
                output,
                exit_code: done.exit.as_ref().and_then(|e| e.code),
            }),
            Ok(Err(reason)) => Err(reason),
            Err(_) => Err(format!("no answer within {timeout:?}")),
        }
    }

    /// The executor to attach to first: the one the session ran on before a restart.
    pub(crate) fn resume_from(&self, id: String, token: String) {
        *self.attach.locked() = Some((id, token));
    }

    /// The running executor's id and attach token, for the session's metadata.
    pub(crate) fn attach_info(&self) -> Option<(String, String)> {
        self.attach.locked().clone()
    }

    /// Reaches the executor — a new one, or the one `attach` names (its id and token) — and
    /// says `initialize`: through a relay process amberd starts, or on the connection an
    /// executor of this name dialled in with.
    async fn reach(
        self: &Arc<Self>,
        attach: Option<(&str, String)>,
    ) -> Result<(Arc<Conn>, InitializeResult), String> {
        let token = attach.as_ref().map(|(_, token)| token.clone());
        match (self.launch.dial_in(), &self.dial_ins) {
            (Some(name), Some(dial_ins)) => {
                let wait = match attach {
                    // Attaching again: the caller's loop bounds the wait.
                    Some(_) => DIAL_IN_RETRY,
                    None => self.launch.dial_wait,
                };
                let (reader, writer) = dial_ins.take(name, wait).await?;
                self.handshake(reader, writer, None, None, token).await
            }
            (Some(name), None) => Err(format!("executor `{name}` dials in, and nothing listens")),
            (None, _) => {
                let argv = match attach {
                    Some((id, _)) => self.launch.attach(id),
                    None => self.launch.start(),
                };
                self.spawn(&argv, token).await
            }
        }
    }

    /// Starts `argv` (a relay) and says `initialize` through it.
    async fn spawn(
        self: &Arc<Self>,
        argv: &[String],
        token: Option<String>,
    ) -> Result<(Arc<Conn>, InitializeResult), String> {
        let Some((program, args)) = argv.split_first() else {
            return Err("no executor command".to_owned());
        };
        // The user's own configuration names where the session's tools run; the executor
        // sandboxes each command itself.
        let mut cmd = ChildSpec::new(
            program,
            SpawnSandbox::Unsandboxed(Unsandboxed::configured_by_user()),
        )
        .args(args)
        .envs(self.env.iter().cloned())
        .stdin(ChildInput::Piped)
        .tokio_command()
        .map_err(|e| format!("cannot start `{program}`: {e}"))?;
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start `{program}`: {e}"))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(format!("`{program}` has no pipes"));
        };
        self.handshake(
            Box::new(stdout),
            Box::new(stdin),
            Some(child),
            Some(stderr),
            token,
        )
        .await
    }

    /// Starts reading and writing a connection and says `initialize` on it.
    async fn handshake(
        self: &Arc<Self>,
        reader: Reader,
        writer: Writer,
        child: Option<tokio::process::Child>,
        stderr: Option<tokio::process::ChildStderr>,
        token: Option<String>,
    ) -> Result<(Arc<Conn>, InitializeResult), String> {
        let (outbox, outgoing) = mpsc::unbounded_channel();
        let conn = Arc::new(Conn {
            outbox,
            pending: Mutex::new(HashMap::new()),
            lost: CancellationToken::new(),
            stderr: Arc::new(Mutex::new(Vec::new())),
            _child: Mutex::new(child),
        });
        tokio::spawn(write_frames(writer, outgoing, conn.lost.clone()));
        if let Some(stderr) = stderr {
            tokio::spawn(keep_stderr(stderr, Arc::clone(&conn.stderr)));
        }
        tokio::spawn(Arc::clone(self).read_frames(reader, Arc::clone(&conn)));
        let params = InitializeParams {
            protocol_version: wire::PROTOCOL_VERSION,
            client: format!("amberd {}", env!("CARGO_PKG_VERSION")),
            token,
        };
        match request(&conn, &self.next_id, method::INITIALIZE, &params).await {
            Ok(value) => {
                let hello: InitializeResult = serde_json::from_value(value)
                    .map_err(|e| format!("the executor answered oddly: {e}"))?;
                // Its id goes into the command line that attaches again (over ssh, read by a
                // shell there) and its token back to it: only the forms an executor makes.
                let token_ok = !hello.token.is_empty()
                    && hello.token.len() <= 128
                    && hello.token.bytes().all(|b| b.is_ascii_alphanumeric());
                if !amber_executor::state_dir::valid_id(&hello.executor_id) || !token_ok {
                    conn.lost.cancel();
                    return Err(
                        "the executor answered with an id or token it could not have made"
                            .to_owned(),
                    );
                }
                Ok((conn, hello))
            }
            Err(err) => {
                conn.lost.cancel();
                // Its stderr says why (ssh's refusal, a missing program).
                tokio::time::sleep(Duration::from_millis(50)).await;
                let tail = conn.stderr_tail();
                Err(if tail.is_empty() {
                    err.message
                } else {
                    format!("{} ({tail})", err.message)
                })
            }
        }
    }

    /// Reads one connection's frames until it ends, then attaches again unless the link
    /// was closed or the connection replaced.
    async fn read_frames(self: Arc<Self>, reader: Reader, conn: Arc<Conn>) {
        let mut reader = BufReader::new(reader);
        let mut line = Vec::new();
        loop {
            line.clear();
            // Bounded: an executor on another host is not trusted to size amberd's memory.
            let read = tokio::select! {
                read = amber_executor::connection::read_line(
                    &mut reader,
                    &mut line,
                    amber_executor::connection::MAX_ANSWER_BYTES,
                ) => read,
                () = conn.lost.cancelled() => break,
            };
            match read {
                Ok(true) => {}
                Ok(false) => break,
                Err(err) => {
                    tracing::warn!(spec = %self.spec, "dropping the link: {err}");
                    break;
                }
            }
            let Ok(frame) = serde_json::from_slice::<Frame>(&line) else {
                tracing::warn!(spec = %self.spec, "the executor sent a line that is not JSON-RPC");
                continue;
            };
            self.route(&conn, frame);
        }
        conn.lost.cancel();
        for (_, waiting) in conn.pending.locked().drain() {
            let _ = waiting.send(Err(RpcError::new(code::SESSION_GONE, "the link dropped")));
        }
        let current = self
            .conn
            .locked()
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, &conn));
        if current && !self.closed.load(Ordering::SeqCst) {
            let tail = conn.stderr_tail();
            tokio::spawn(self.recover(tail));
        }
    }

    fn route(&self, conn: &Conn, frame: Frame) {
        match (frame.id, frame.method.as_deref()) {
            (Some(id), None) => {
                let Some(id) = id.as_u64() else {
                    return;
                };
                if let Some(waiting) = conn.pending.locked().remove(&id) {
                    let answer = match frame.error {
                        Some(err) => Err(err),
                        None => Ok(frame.result.unwrap_or(Value::Null)),
                    };
                    let _ = waiting.send(answer);
                }
            }
            (None, Some(notification::JOB_OUTPUT)) => {
                if let Some(Ok(chunk)) = frame.params.map(serde_json::from_value::<JobOutput>) {
                    self.deliver(&chunk.job.clone(), |s| s.chunk(chunk.seq, chunk.text));
                }
            }
            (None, Some(notification::JOB_DONE)) => {
                if let Some(Ok(done)) = frame.params.map(serde_json::from_value::<JobDone>) {
                    self.deliver(&done.job.clone(), |s| s.done(done));
                }
            }
            (None, Some(notification::NETWORK_CONNECTION)) => {
                if let Some(Ok(note)) = frame
                    .params
                    .map(serde_json::from_value::<NetworkConnectionNote>)
                {
                    self.emit_to(&note.session, EventKind::NetworkConnection(note.connection));
                }
            }
            _ => {}
        }
    }

    fn deliver(&self, job: &str, offer: impl FnOnce(&mut JobStream) -> Vec<Delivery>) {
        let mut jobs = self.jobs.locked();
        let Some(entry) = jobs.get_mut(job) else {
            return;
        };
        for delivery in offer(&mut entry.stream) {
            let event = match delivery {
                Delivery::Chunk(text) => JobEvent::Output(text),
                Delivery::Done(done) => JobEvent::Done(done),
            };
            let _ = entry.events.send(event);
        }
    }

    /// The link dropped: attach again to the same executor within the reconnect time, read
    /// back what every job produced meanwhile, or give the executor up.
    fn recover(self: Arc<Self>, why: String) -> BoxFuture<'static, ()> {
        // Boxed: attaching again starts a connection whose reader may call this again.
        Box::pin(self.attach_again(why))
    }

    async fn attach_again(self: Arc<Self>, why: String) {
        let _connecting = self.connecting.lock().await;
        let reason = if why.is_empty() {
            "the link to the executor dropped".to_owned()
        } else {
            format!("the link to the executor dropped: {why}")
        };
        let executor = self.info.locked().executor.clone();
        let info = self.set_state(EnvironmentState::Lost, executor, Some(reason.clone()));
        self.emit(EventKind::EnvironmentLost { environment: info });
        let Some((id, token)) = self.attach.locked().clone() else {
            self.give_up(reason);
            return;
        };
        let deadline = tokio::time::Instant::now() + self.launch.reconnect;
        let mut wait = Duration::from_millis(100);
        let mut last = reason;
        let attached = loop {
            if self.closed.load(Ordering::SeqCst) || self.abandoning.load(Ordering::SeqCst) {
                return;
            }
            match self.reach(Some((&id, token.clone()))).await {
                Ok(attached) if attached.1.executor_id == id => break Some(attached),
                Ok(other) => {
                    // Kept for the next call, which starts there (its hooks first).
                    *self.fresh.locked() = Some(other);
                    if self.abandoning.load(Ordering::SeqCst) {
                        // Given up already (its runner is gone): nothing more to say.
                        return;
                    }
                    last = "another executor took its name".to_owned();
                    break None;
                }
                Err(err) => {
                    last = err;
                    if last.contains("is gone") || tokio::time::Instant::now() >= deadline {
                        break None;
                    }
                }
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(5));
        };
        let Some((conn, hello)) = attached else {
            if !self.abandoning.load(Ordering::SeqCst) {
                self.give_up(format!("the executor is gone: {last}"));
            }
            return;
        };
        *self.conn.locked() = Some(Arc::clone(&conn));
        let reopen: Vec<SessionOpenParams> = self.opened.locked().values().cloned().collect();
        for params in reopen {
            if let Err(err) = request(&conn, &self.next_id, method::SESSION_OPEN, &params).await {
                tracing::warn!(spec = %self.spec, "cannot open a session again: {err}");
            }
        }
        let replayed = self.read_back(&conn).await;
        let info = self.set_state(
            EnvironmentState::Connected,
            Some(executor_info(&hello)),
            None,
        );
        self.emit(EventKind::EnvironmentResumed {
            environment: info,
            replayed_chunks: replayed,
        });
    }

    /// Reads back every waiting job's output after what it delivered; returns how many
    /// chunks came back.
    async fn read_back(self: &Arc<Self>, conn: &Arc<Conn>) -> u64 {
        let waiting: Vec<(String, u64)> = self
            .jobs
            .locked()
            .iter()
            .map(|(id, e)| (id.clone(), e.stream.delivered()))
            .collect();
        let mut replayed = 0;
        for (job, after_seq) in waiting {
            let params = JobReadParams {
                job: job.clone(),
                after_seq,
            };
            match request(conn, &self.next_id, method::JOB_READ, &params).await {
                Ok(value) => {
                    let Ok(read) = serde_json::from_value::<JobReadResult>(value) else {
                        continue;
                    };
                    replayed += read.chunks.len() as u64;
                    let first_kept = read.chunks.first().map(|c| c.seq);
                    self.deliver(&job, |stream| {
                        let mut out = Vec::new();
                        if read.dropped > 0
                            && let Some(first) = first_kept
                        {
                            out.extend(stream.lost_before(first));
                        }
                        for chunk in read.chunks {
                            out.extend(stream.chunk(chunk.seq, chunk.text));
                        }
                        if let Some(done) = read.done {
                            out.extend(stream.done(done));
                        }
                        out
                    });
                }
                Err(err) if err.code == code::UNKNOWN_JOB => {
                    self.fail_job(&job, "the call never reached the executor".to_owned());
                }
                Err(err) => tracing::warn!(%job, "cannot read a job back: {err}"),
            }
        }
        replayed
    }

    fn fail_job(&self, job: &str, reason: String) {
        if let Some(entry) = self.jobs.locked().remove(job) {
            let _ = entry.events.send(JobEvent::Gone(reason));
        }
    }

    /// The executor is gone for good: its jobs fail, and the next call starts a new one.
    fn give_up(&self, reason: String) {
        *self.conn.locked() = None;
        *self.attach.locked() = None;
        let jobs: Vec<JobEntry> = self.jobs.locked().drain().map(|(_, e)| e).collect();
        for job in jobs {
            let _ = job.events.send(JobEvent::Gone(reason.clone()));
        }
        let info = self.set_state(EnvironmentState::Gone, None, Some(reason));
        self.emit(EventKind::EnvironmentLost { environment: info });
    }

    fn set_state(
        &self,
        state: EnvironmentState,
        executor: Option<ExecutorInfo>,
        reason: Option<String>,
    ) -> EnvironmentInfo {
        let mut info = self.info.locked();
        info.state = state;
        info.executor = executor;
        info.reason = reason;
        info.clone()
    }
}

fn executor_info(hello: &InitializeResult) -> ExecutorInfo {
    ExecutorInfo {
        id: hello.executor_id.clone(),
        hostname: hello.machine.hostname.clone(),
        os: hello.machine.os.clone(),
        arch: hello.machine.arch.clone(),
        version: hello.version.clone(),
        pid: hello.pid,
    }
}

/// Counts one call under way while it lives.
struct InFlight<'a>(&'a AtomicU64);

impl<'a> InFlight<'a> {
    fn new(count: &'a AtomicU64) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One request on `conn`, answered or failed within [`REQUEST_TIMEOUT`].
async fn request<T: serde::Serialize>(
    conn: &Conn,
    next_id: &AtomicU64,
    method: &str,
    params: &T,
) -> Result<Value, RpcError> {
    let params = serde_json::to_value(params)
        .map_err(|e| RpcError::new(code::INVALID_PARAMS, e.to_string()))?;
    let id = next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = oneshot::channel();
    conn.pending.locked().insert(id, tx);
    if conn.lost.is_cancelled()
        || conn
            .outbox
            .send(Frame::request(id, method, params))
            .is_err()
    {
        conn.pending.locked().remove(&id);
        return Err(RpcError::new(code::SESSION_GONE, "the link dropped"));
    }
    match tokio::time::timeout(REQUEST_TIMEOUT, rx).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(_)) => Err(RpcError::new(code::SESSION_GONE, "the link dropped")),
        Err(_) => {
            conn.pending.locked().remove(&id);
            Err(RpcError::new(
                code::SESSION_GONE,
                format!("the executor did not answer `{method}` within {REQUEST_TIMEOUT:?}"),
            ))
        }
    }
}

async fn write_frames(
    stdin: Writer,
    mut outgoing: mpsc::UnboundedReceiver<Frame>,
    lost: CancellationToken,
) {
    let mut stdin = tokio::io::BufWriter::new(stdin);
    loop {
        let frame = tokio::select! {
            frame = outgoing.recv() => frame,
            () = lost.cancelled() => None,
        };
        let Some(frame) = frame else {
            break;
        };
        let Ok(mut line) = serde_json::to_vec(&frame) else {
            continue;
        };
        line.push(b'\n');
        if stdin.write_all(&line).await.is_err() {
            break;
        }
        if outgoing.is_empty() && stdin.flush().await.is_err() {
            break;
        }
    }
    lost.cancel();
}

/// Keeps the relay's last stderr lines (ssh's complaints), each cut to [`STDERR_LINE_CHARS`]:
/// whatever the other end prints, amberd holds a few hundred bytes of it.
async fn keep_stderr(stderr: tokio::process::ChildStderr, tail: Arc<Mutex<Vec<String>>>) {
    use tokio::io::AsyncReadExt;
    let mut stderr = stderr;
    let mut buf = [0u8; 4096];
    let mut current = String::new();
    let keep = |line: &mut String| {
        let text: String = line.trim().chars().take(STDERR_LINE_CHARS).collect();
        line.clear();
        if text.is_empty() {
            return;
        }
        let mut tail = tail.locked();
        if tail.len() == STDERR_LINES {
            tail.remove(0);
        }
        tail.push(text);
    };
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        for piece in String::from_utf8_lossy(&buf[..n]).split_inclusive('\n') {
            if current.len() < STDERR_LINE_CHARS * 4 {
                current.push_str(piece.trim_end_matches('\n'));
            }
            if piece.ends_with('\n') {
                keep(&mut current);
            }
        }
    }
    keep(&mut current);
}
